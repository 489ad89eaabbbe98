#!/usr/bin/env python3
"""Fail when an `Ordering::` use has no comment in the 3 lines above it (STYLE.md section 5,
after checkpatch.pl's "memory barrier without comment")."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "crates")
bad = []
for path in sorted(root.rglob("*.rs")):
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        if not re.search(r"\bOrdering::(Relaxed|Acquire|Release|AcqRel|SeqCst)\b", code):
            continue
        if re.match(r"\s*use\b", code):
            continue
        window = lines[max(0, i - 3):i + 1]
        if not any("//" in w for w in window):
            bad.append(f"{path}:{i + 1}: {line.strip()}")
for b in bad:
    print(b)
if bad:
    print(f"{len(bad)} atomic ordering(s) without a comment in the 3 lines above", file=sys.stderr)
    sys.exit(1)
print("all orderings commented")
