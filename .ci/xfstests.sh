#!/usr/bin/env bash
# xfstests on `uvfs mount`: a CI subset of generic tests that pass on uvfs (docs/xfstests.md),
# each on fresh uvfs tmpfs mounts made by tools/mount.fuse.uvfs (FSTYP=fuse,
# FUSE_SUBTYP=.uvfs). Fails if any of them fails; prints 'N passed, N failed'.
#
# Not part of .ci/run: CI reaches no source of xfstests (no Debian, PyPI, npm or crates.io
# package has it). Give it a tree:
#   XFSTESTS_SRC   an xfstests source tree (v2026.01.27 tested, git 69cd20bd); copied to
#                  $XFSTESTS_WORK, .ci/xfstests-uvfs.patch applied, built there (about 3 min
#                  on 2 cores, once: kept between runs)
# Optional:
#   XFSTESTS_WORK  where the built copy, mount points and results go (default target/xfstests)
#   XFSTESTS_TESTS the tests to run (default: the CI list below)
#   XFSTESTS_FSTYP uvfs (default) or tmpfs (the kernel's, for comparison: same list)
#   UVFS_BIN       the uvfs binary (default: target/release/uvfs, built if missing)
#
# Needs root and /dev/fuse. Installs the xfstests build and run dependencies with apt-get
# where missing, tools/mount.fuse.uvfs as /sbin/mount.fuse.uvfs (mount(8) looks for helpers
# there only), and creates the users fsgqa, fsgqa2 and 123456-fsgqa that xfstests expects.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

die() { echo "xfstests.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root"
[ -c /dev/fuse ] || modprobe fuse 2>/dev/null || true
[ -c /dev/fuse ] || die "no /dev/fuse"
[ -n "${XFSTESTS_SRC:-}" ] || die "set XFSTESTS_SRC to an xfstests source tree (see the top of this script)"
[ -x "$XFSTESTS_SRC/check" ] || die "$XFSTESTS_SRC: not an xfstests tree (no ./check)"

# The CI list: 108 quick generic tests that pass on uvfs mount (and on tmpfs), 114 s of tests
# here (2 vCPUs), chosen to reach every part of the server: read/write/truncate, fsx and fsstress,
# fallocate and SEEK_DATA/SEEK_HOLE, mmap, rename (incl. RENAME_EXCHANGE/NOREPLACE),
# links, xattrs, O_DIRECT over FUSE, readdir, ENOSPC, timestamps, permissions.
default_tests=(
  generic/002 generic/004 generic/005 generic/006 generic/011 generic/013 generic/014 generic/024
  generic/029 generic/030 generic/035 generic/070 generic/071 generic/075 generic/087
  generic/088 generic/091 generic/097 generic/098 generic/112 generic/123 generic/126
  generic/128 generic/131 generic/135 generic/141 generic/169 generic/184 generic/210
  generic/212 generic/214 generic/228 generic/245 generic/246 generic/257 generic/258
  generic/263 generic/294 generic/306 generic/308 generic/309 generic/314 generic/315
  generic/317 generic/337 generic/355 generic/360 generic/362 generic/377 generic/378
  generic/393 generic/401 generic/403 generic/412 generic/420 generic/422 generic/423
  generic/428 generic/430 generic/431 generic/432 generic/433 generic/434 generic/436
  generic/437 generic/439 generic/443 generic/445 generic/448 generic/452 generic/465
  generic/486 generic/488 generic/490 generic/504 generic/523 generic/525 generic/528 generic/532
  generic/533 generic/539 generic/567 generic/568 generic/591 generic/597 generic/598
  generic/609 generic/611 generic/618 generic/632 generic/634 generic/637 generic/638
  generic/639 generic/647 generic/678 generic/680 generic/683 generic/684 generic/688
  generic/706 generic/708
  generic/729 generic/736 generic/749 generic/755 generic/760 generic/763
)
if [ -n "${XFSTESTS_TESTS:-}" ]; then
  read -r -a tests <<<"$XFSTESTS_TESTS"
else
  tests=("${default_tests[@]}")
fi
fstyp=${XFSTESTS_FSTYP:-uvfs}
work=${XFSTESTS_WORK:-$root/target/xfstests}
mkdir -p "$work"
work=$(cd "$work" && pwd)

echo "== packages for building and running xfstests"
pkgs=(xfslibs-dev uuid-dev libtool-bin e2fsprogs automake gcc make libacl1-dev libaio-dev
  libattr1-dev libgdbm-dev liburing-dev libcap-dev xfsprogs acl attr bc psmisc gawk fio
  pkg-config autoconf fuse3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

echo "== xfstests build in $work/src"
src_id=$(cat "$XFSTESTS_SRC/VERSION" 2>/dev/null | tr '\n' ' ')$(sha256sum "$root/.ci/xfstests-uvfs.patch" | cut -c1-16)
if [ "$(cat "$work/src/.uvfs-built" 2>/dev/null)" != "$src_id" ]; then
  rm -rf "$work/src"
  cp -a "$XFSTESTS_SRC" "$work/src"
  patch -d "$work/src" -p1 <"$root/.ci/xfstests-uvfs.patch"
  start=$SECONDS
  make -C "$work/src" -j"$(nproc)" >"$work/build.log" 2>&1 || {
    tail -30 "$work/build.log"
    die "xfstests build failed ($work/build.log)"
  }
  echo "$src_id" >"$work/src/.uvfs-built"
  echo "(built in $((SECONDS - start)) s)"
fi

for u in fsgqa fsgqa2 123456-fsgqa; do
  id "$u" >/dev/null 2>&1 || useradd -m "$u"
done

mounted() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }
mkdir -p "$work/test" "$work/scratch"
for m in "$work/test" "$work/scratch"; do
  if mounted "$m"; then umount "$m" 2>/dev/null || umount -l "$m"; fi
done
cleanup() {
  for m in "$work/test" "$work/scratch"; do
    if mounted "$m"; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
  done
}
trap cleanup EXIT

case $fstyp in
uvfs)
  UVFS_BIN=${UVFS_BIN:-$root/target/release/uvfs}
  if [ ! -x "$UVFS_BIN" ]; then
    cargo build --release -p uvfs-cli
  fi
  UVFS_BIN=$(cd "$(dirname "$UVFS_BIN")" && pwd)/$(basename "$UVFS_BIN")
  export UVFS_BIN
  install -m 755 "$root/tools/mount.fuse.uvfs" /sbin/mount.fuse.uvfs
  UVFS_TEST_DIR=$work/test UVFS_SCRATCH_MNT=$work/scratch
  export UVFS_TEST_DIR UVFS_SCRATCH_MNT
  cp "$root/.ci/xfstests-uvfs.config" "$work/src/local.config"
  ;;
tmpfs)
  TMPFS_TEST_DIR=$work/test TMPFS_SCRATCH_MNT=$work/scratch
  export TMPFS_TEST_DIR TMPFS_SCRATCH_MNT
  cp "$root/.ci/xfstests-tmpfs.config" "$work/src/local.config"
  ;;
*) die "XFSTESTS_FSTYP: uvfs or tmpfs" ;;
esac
[ "${#tests[@]}" -gt 0 ] || die "no tests to run"

echo "== xfstests on $fstyp: ${#tests[@]} tests"
start=$SECONDS
rm -rf "$work/src/results"
status=0
(cd "$work/src" && ./check "${tests[@]}") || status=$?
log=$work/src/results/check.log
# check.log's last run: "Ran: ...", "Not run: ...", "Failures: ...".
last() { { grep "^$1:" "$log" || true; } | tail -1 | sed "s/^$1://"; }
ran=$(last Ran | wc -w)
failures=$(last Failures)
failed=$(echo "$failures" | wc -w)
notrun=$(last 'Not run' | wc -w)
if [ -n "$failures" ]; then
  for t in $failures; do
    echo "--- $t: $work/src/results/$t.out.bad"
    diff -u "$work/src/tests/$t.out" "$work/src/results/$t.out.bad" 2>/dev/null | head -20 || true
  done
fi
echo "($((SECONDS - start)) s; not run: $notrun)"
# check's "Ran:" lists the tests that did not run too.
echo "xfstests: $((ran - failed - notrun)) passed, $failed failed, $notrun skipped"
# A test of the list that did not run is a failure too: the list holds tests that run here.
[ "$notrun" = 0 ] || die "$notrun of the listed tests did not run"
[ "$failed" = 0 ] && [ "$status" = 0 ]
