#!/usr/bin/env bash
# pjdfstest on a fresh kernel tmpfs (the reference) and on a fresh `uvfs mount --allow-other`
# (the subject); fails if a test that passes on tmpfs does not pass on the subject, and lists
# them with pjdfstest's message. Configuration and the expected tmpfs result: .ci/pjdfstest.toml.
#
# Needs root, /dev/fuse, fusermount3 and the pjdfstest binary (crates.io `pjdfstest` 0.2.2,
# `cargo install --locked pjdfstest@0.2.2`; .ci/run installs it). Creates the system user
# `tests` if missing (pjdfstest switches to it and to nobody).
#
# Environment:
#   UVFS_BIN            the uvfs binary (default: target/debug/uvfs, built if missing)
#   PJDFSTEST           the pjdfstest binary (default: pjdfstest in PATH, else ~/.cargo/bin)
#   PJDFSTEST_SUBJECT   a command that serves a FUSE mount on $MNT in the foreground until
#                       SIGTERM, run by bash with MNT and SRC (a fresh empty directory)
#                       exported. Default: "$UVFS_BIN" mount "$MNT" --allow-other. For checking
#                       this script: '/path/passthrough_ll -f -o source=$SRC,allow_other $MNT'.
#   PJDFSTEST_REFERENCE a command serving the reference mount instead of a kernel tmpfs, as
#                       PJDFSTEST_SUBJECT (its own MNT and SRC; PJDFSTEST_SRC_TMPFS applies),
#                       e.g. a kernel FUSE mount of the server the subject mounts through
#                       uvfs's FUSE client: '$PLL -f -o source=$SRC,allow_other $MNT'
#   PJDFSTEST_LOGS      where the logs go (default: target/pjdfstest): tmpfs.log (the
#                       reference's), subject.log, server.log (and reference-server.log)
#   PJDFSTEST_TIMEOUT   seconds each pjdfstest run may take (default 600)
#   PJDFSTEST_SRC_TMPFS 1: mount a fresh tmpfs (mode=1777) on $SRC before the subject starts
#                       (for a subject serving $SRC, e.g. uvfs mount --bind "$SRC":/)
#   PJDFSTEST_RUN       1: the subject is pjdfstest itself run under `$UVFS_BIN run`, in a
#                       directory of its uvfs tmpfs (no mount; PJDFSTEST_SUBJECT unused)
#   PJDFSTEST_KNOWN     test names that may fail on the subject, each with its reason
#                       ("name=reason;name=reason"); listed, not counted
#   PJDFSTEST_EXACT     1: a test passing on the subject only fails the run too (the
#                       subject must give the reference's pass/fail set exactly), except
#   PJDFSTEST_FLAKY     test names (space-separated) whose result is timing-dependent
#                       (on the reference or the subject): a difference in them is
#                       listed, not counted
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

config="$root/.ci/pjdfstest.toml"
logs=${PJDFSTEST_LOGS:-$root/target/pjdfstest}
limit=${PJDFSTEST_TIMEOUT:-600}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)

die() { echo "pjdfstest.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root"
[ -c /dev/fuse ] || die "no /dev/fuse"
command -v fusermount3 >/dev/null || die "no fusermount3 (apt-get install fuse3)"
pjdfstest=${PJDFSTEST:-$(command -v pjdfstest || echo "$HOME/.cargo/bin/pjdfstest")}
[ -x "$pjdfstest" ] || die "no pjdfstest binary (cargo install --locked pjdfstest@0.2.2)"
if ! id tests >/dev/null 2>&1; then
  echo "== creating the system user 'tests' for pjdfstest"
  useradd --system --no-create-home --user-group --shell /usr/sbin/nologin tests
fi

if [ -z "${PJDFSTEST_SUBJECT:-}" ]; then
  UVFS_BIN=${UVFS_BIN:-$root/target/debug/uvfs}
  if [ ! -x "$UVFS_BIN" ]; then
    cargo build -p uvfs-cli
  fi
  export UVFS_BIN
  PJDFSTEST_SUBJECT='"$UVFS_BIN" mount "$MNT" --allow-other'
fi

work=$(mktemp -d /tmp/uvfs-pjdfstest.XXXXXX)
# The users pjdfstest switches to must reach the mount points.
chmod 755 "$work"
mkdir "$work/tmpfs" "$work/mnt" "$work/src" "$work/ref" "$work/refsrc"
export MNT="$work/mnt" SRC="$work/src"
if [ "${PJDFSTEST_SRC_TMPFS:-}" = 1 ]; then
  mount -t tmpfs -o mode=1777 uvfs-pjdfstest-src "$SRC"
  mount -t tmpfs -o mode=1777 uvfs-pjdfstest-refsrc "$work/refsrc"
fi
server=

mounted() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server" 2>/dev/null || true
  fi
  if mounted "$work/mnt"; then fusermount3 -u -z "$work/mnt" || umount -l "$work/mnt" || true; fi
  if mounted "$work/tmpfs"; then umount -l "$work/tmpfs" || true; fi
  if mounted "$work/src"; then umount -l "$work/src" || true; fi
  if mounted "$work/ref"; then fusermount3 -u -z "$work/ref" || umount -l "$work/ref" || true; fi
  if mounted "$work/refsrc"; then umount -l "$work/refsrc" || true; fi
  if ! mounted "$work/mnt" && ! mounted "$work/tmpfs" && ! mounted "$work/src" &&
    ! mounted "$work/ref" && ! mounted "$work/refsrc"; then
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# The command that runs pjdfstest, and its configuration's path as that command sees it.
pj_cmd=("$pjdfstest")
pj_config=$config

# Runs pjdfstest on $1 (with pj_cmd), output to $2; its status is not used (it fails when
# any test fails): the result lines are. Fails if there is no summary line (a crash or a timeout).
run_pjdfstest() {
  local dir=$1 log=$2 start ms status=0
  start=$(date +%s%N)
  NO_COLOR=1 timeout --kill-after=10 "$limit" "${pj_cmd[@]}" -c "$pj_config" -p "$dir" >"$log" 2>&1 ||
    status=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  printf '%s: %d.%03d s, exit %s; %s\n' "$dir" $((ms / 1000)) $((ms % 1000)) "$status" \
    "$(grep -a '^Summary:' "$log" || echo "NO SUMMARY (crash or timeout, see $log)")"
}

# "name status" per test, from a pjdfstest log.
results() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" |
    sed -nE 's/^([^[:space:]]+)[[:space:]]+(ok|FAILED|skipped|PASSED UNEXPECTEDLY|failed as expected)$/\1 \2/p'
}

# Starts the command $1 serving a FUSE mount on $MNT in the background (output to $2; pid
# in $server) and waits until it is mounted.
serve() {
  bash -c "exec $1" </dev/null >"$2" 2>&1 &
  server=$!
  for i in $(seq 1000); do
    mounted "$MNT" && break
    kill -0 "$server" 2>/dev/null || { cat "$2" >&2; die "the server exited before mounting $MNT"; }
    [ "$i" = 1000 ] && { cat "$2" >&2; die "no mount on $MNT after 10 s"; }
    sleep 0.01
  done
  awk -v m="$MNT" '$5 == m' /proc/self/mountinfo
}

# A clean stop of $server: SIGTERM unmounts and exits (with 0 for uvfs when $1 is "uvfs");
# a problem goes to $stop_problem, the server's log $2 is shown with it.
stop_problem=
stop() {
  local status=none
  kill -TERM "$server"
  for _ in $(seq 100); do
    if ! kill -0 "$server" 2>/dev/null; then status=0; wait "$server" || status=$?; break; fi
    sleep 0.05
  done
  if [ "$status" = none ]; then
    stop_problem="the server was still running 5 s after SIGTERM"
  elif mounted "$MNT"; then
    stop_problem="the server exited ($status) but left $MNT mounted"
  elif [ "$status" != 0 ] && [ "$1" = uvfs ]; then
    stop_problem="uvfs mount exited with $status after SIGTERM, want 0"
  fi
  [ -z "$stop_problem" ] || stop_log=$2
  server=
}

if [ -n "${PJDFSTEST_REFERENCE:-}" ]; then
  echo "== pjdfstest on the reference: $PJDFSTEST_REFERENCE"
  MNT="$work/ref" SRC="$work/refsrc" serve "$PJDFSTEST_REFERENCE" "$logs/reference-server.log"
  run_pjdfstest "$work/ref" "$logs/tmpfs.log"
  MNT="$work/ref" stop reference "$logs/reference-server.log"
else
  echo "== pjdfstest on a fresh kernel tmpfs"
  mount -t tmpfs -o mode=1777 uvfs-pjdfstest-ref "$work/tmpfs"
  run_pjdfstest "$work/tmpfs" "$logs/tmpfs.log"
  umount "$work/tmpfs"
fi

if [ "${PJDFSTEST_RUN:-}" = 1 ]; then
  echo "== pjdfstest under: $UVFS_BIN run (in /tmp/pj of its tmpfs)"
  # pjdfstest and this configuration reach the program through read-only binds.
  pj_cmd=("$UVFS_BIN" run --bind "$(dirname "$pjdfstest")":/uvfs-pjdfstest-bin:ro
    --bind "$(dirname "$config")":/uvfs-pjdfstest-ci:ro -- sh -c
    "mkdir -m 1777 /tmp/pj && exec /uvfs-pjdfstest-bin/$(basename "$pjdfstest") \"\$@\"" sh)
  pj_config=/uvfs-pjdfstest-ci/$(basename "$config")
  run_pjdfstest /tmp/pj "$logs/subject.log"
else
  echo "== pjdfstest on: $PJDFSTEST_SUBJECT"
  serve "$PJDFSTEST_SUBJECT" "$logs/server.log"
  run_pjdfstest "$MNT" "$logs/subject.log"
  stop "${UVFS_BIN:+uvfs}" "$logs/server.log"
fi

results "$logs/tmpfs.log" | sort >"$work/tmpfs.res"
results "$logs/subject.log" | sort >"$work/subject.res"
# "PASSED UNEXPECTEDLY" counts as a failure, as pjdfstest counts it.
count() { awk -v s="$2" '$2 == s || (s == "FAILED" && $2 == "PASSED") { n++ } END { print n + 0 }' "$1"; }
for side in tmpfs subject; do
  f="$work/$side.res"
  label=$side
  if [ "$side" = tmpfs ] && [ -n "${PJDFSTEST_REFERENCE:-}" ]; then label=reference; fi
  printf '%-10s %3d passed, %3d failed, %3d skipped, of %d\n' "$label:" "$(count "$f" ok)" \
    "$(count "$f" FAILED)" "$(count "$f" skipped)" "$(wc -l <"$f")"
done

# Tests that pass on the reference (tmpfs) and do not pass (or did not run) on the subject.
awk '$2 == "ok" { print $1 }' "$work/tmpfs.res" >"$work/tmpfs.ok"
awk '$2 == "ok" { print $1 }' "$work/subject.res" >"$work/subject.ok"
comm -23 "$work/tmpfs.ok" "$work/subject.ok" >"$work/regressions.all"
# Known differences (PJDFSTEST_KNOWN): listed with their reason, not counted.
: >"$work/regressions"
while read -r name; do
  reason=$(tr ';' '\n' <<<"${PJDFSTEST_KNOWN:-}" |
    awk -F= -v n="$name" '$1 == n { sub(/^[^=]*=/, ""); print; exit }')
  if [ -n "$reason" ]; then
    echo "known: $name: $reason"
  elif tr ' ' '\n' <<<"${PJDFSTEST_FLAKY:-}" | grep -qxF "$name"; then
    echo "timing-dependent (PJDFSTEST_FLAKY), not counted: $name"
  else
    echo "$name" >>"$work/regressions"
  fi
done <"$work/regressions.all"
comm -13 "$work/tmpfs.ok" "$work/subject.ok" >"$work/extra"
if [ -s "$work/extra" ]; then
  echo "passing on the subject only: $(tr '\n' ' ' <"$work/extra")"
fi
fail=0
if [ -s "$work/regressions" ]; then
  fail=1
  echo "FAIL: $(wc -l <"$work/regressions") tests pass on tmpfs but not on the subject:"
  while read -r name; do
    st=$(awk -v n="$name" '$1 == n { $1 = ""; print substr($0, 2) }' "$work/subject.res")
    echo "  $name: ${st:-did not run}"
    # pjdfstest's message: the lines after the result line, up to a backtrace or the next test.
    sed 's/\x1b\[[0-9;]*m//g' "$logs/subject.log" |
      awk -v n="$name" '
        $1 == n && NF == 2 { on = 1; next }
        /^Backtrace:/ || /^[^[:space:]]+[[:space:]]+(ok|FAILED|skipped|PASSED UNEXPECTEDLY|failed as expected)$/ { on = 0 }
        on { sub(/^\t/, ""); print "      " $0 }' | head -6
  done <"$work/regressions"
fi
if [ "${PJDFSTEST_EXACT:-0}" = 1 ]; then
  tr ' ' '\n' <<<"${PJDFSTEST_FLAKY:-}" | sed '/^$/d' | sort >"$work/flaky"
  comm -23 "$work/extra" "$work/flaky" >"$work/extra.counted"
  if [ -s "$work/extra" ] && [ ! -s "$work/extra.counted" ]; then
    echo "passing on the subject only, known to be timing-dependent on the reference (not counted): $(tr '\n' ' ' <"$work/extra")"
  fi
  if [ -s "$work/extra.counted" ]; then
    fail=1
    echo "FAIL: PJDFSTEST_EXACT: $(wc -l <"$work/extra.counted") tests pass on the subject only: $(tr '\n' ' ' <"$work/extra.counted")"
  fi
fi
for side in tmpfs subject; do
  if ! grep -aq '^Summary:' "$logs/$side.log"; then
    fail=1
    echo "FAIL: the $side run has no summary (crashed or timed out): see $logs/$side.log"
  fi
done
if [ -n "$stop_problem" ]; then
  fail=1
  echo "FAIL: $stop_problem"
  tail -20 "$stop_log"
fi
if [ "$fail" = 0 ]; then
  ref_name=tmpfs
  if [ -n "${PJDFSTEST_REFERENCE:-}" ]; then ref_name="the reference"; fi
  echo "pjdfstest: every test that passes on $ref_name passes on the subject"
  if [ "${PJDFSTEST_EXACT:-0}" = 1 ]; then
    echo "pjdfstest: and none other: the same pass/fail set"
  fi
fi
exit "$fail"
