#!/usr/bin/env python3
"""Counts the executed locked instructions (lock-prefixed, xchg with memory, mfence) in a
callgrind out file made with --dump-instr=yes --compress-pos=no --compress-strings=no.

usage: locked.py BINARY OUTFILE [N]
Prints the total (divided by N if given) and the count per instruction and function.
Only BINARY's own code is counted (uvfs and its Rust dependencies are linked into it)."""
import sys, subprocess, re, collections, signal
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
binary, out = sys.argv[1], sys.argv[2]
n = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
# addresses of locked instructions in the binary (and libc is ignored: uvfs + deps are static)
dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', binary], capture_output=True, text=True).stdout
locked = {}
func = None
for line in dis.splitlines():
    m = re.match(r'^([0-9a-f]+) <(.*)>:$', line)
    if m:
        func = m.group(2); continue
    m = re.match(r'^\s+([0-9a-f]+):\s+(.*)$', line)
    if not m: continue
    ins = m.group(2)
    if ins.startswith('lock ') or ins.startswith('mfence') or (ins.startswith('xchg') and '(' in ins):
        locked[int(m.group(1), 16)] = (func, ins.split()[0] + ' ' + (ins.split()[1] if len(ins.split())>1 else ''))
counts = collections.Counter()
skip = False
obj_is_main = True
for line in open(out):
    if line.startswith('ob='):
        import os; obj_is_main = line.strip()[3:] == os.path.abspath(binary)
        continue
    if line.startswith('calls='):
        skip = True; continue
    if not line or not (line[0].isdigit() or line.startswith('0x')):
        continue
    parts = line.split()
    if skip:
        skip = False; continue
    if not obj_is_main: continue
    try:
        addr = int(parts[0], 16)
    except ValueError:
        continue
    if addr in locked and len(parts) >= 3:
        counts[locked[addr]] += int(parts[2])
tot = sum(counts.values())
print(f"total locked/fence executed: {tot} ({tot/n:.2f} per op)")
for (f, i), c in counts.most_common(40):
    print(f"{c/n:8.2f}  {i:20s} {f[:150]}")
