#!/bin/bash
# selftest.sh - checks of the guest harness run-in-vm.sh itself (not of rxe).
#
#   tests/vm/selftest.sh [quick|full]      (meson: suite "vm", test vm-selftest)
#
# quick (default, 4 guest boots, ~70-110 s on 2 busy cores):
#   - a missing kernel is reported as status 125 without booting;
#   - one guest: the command's exit status comes back; stdout and stderr stay
#     separate; output is STREAMED (the guest prints a token and then waits
#     for the host to answer it through the shared build dir: without
#     streaming it could never get the answer); the host's environment and
#     working directory are carried over; "/" is read-only for the host (a
#     write lands in the guest's overlay only) while the build dir is shared
#     read-write; rxe0/rxe1 exist with GID 1 = ::ffff:10.77.0.x;
#   - SVERBS_VM_TIMEOUT kills a hanging command: status 124;
#   - a guest setup failure (bad SVERBS_VM_NET) gives 125 and the console
#     log is kept where the harness says.
#   - the boot watchdog: a guest that does not come up (SVERBS_VM_TEST_STALL)
#     is started again once and runs the command; two misses give 125.
# full: also two hosts (SVERBS_VM_HOSTS=2): the statuses of A and B, tagged
#   output, the rendezvous helpers (1 more boot of 2 guests); and B stalled
#   once: both restarted, then the same statuses (2 more boots).
# Exit: 0 all passed, 1 some failed or no guest can be started (77 instead
# only when skips are allowed: tests/cannot-run.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RUNNER=$HERE/run-in-vm.sh
MODE=${1:-quick}

# shellcheck source=../cannot-run.sh
. "$HERE/../cannot-run.sh"
if ! why=$("$RUNNER" --check 2>&1); then
  cannot_run "cannot start a guest: $why"
fi

# a scratch dir inside the build dir, which the guest shares read-write
SCRATCH=$(mktemp -d "$REPO/build/vm-selftest.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
export SVERBS_VM_RW=$REPO/build
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT_EACH:-60}  # each boot; meson guards the whole

PASS=0 FAIL=0
ok()  { PASS=$((PASS + 1)); echo "ok - $*"; }
bad() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }
check() {  # check DESCRIPTION COMMAND...: pass when COMMAND succeeds
  local d=$1; shift
  if "$@"; then ok "$d"; else bad "$d"; fi
}
has_line() { grep -qxF -- "$2" "$1"; }
not() { ! "$@"; }
run() {  # run NAME [VAR=VAL...] -- ARGS...: run the harness, keep out/err/status
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  set +e
  env "${envs[@]}" "$RUNNER" "$@" >"$SCRATCH/$name.out" 2>"$SCRATCH/$name.err"
  echo $? > "$SCRATCH/$name.rc"
  set -e
}
rc() { cat "$SCRATCH/$1.rc"; }
show() {  # on failure, show what the harness printed
  echo "--- $1 stdout"; sed 's/^/  | /' "$SCRATCH/$1.out"
  echo "--- $1 stderr"; sed 's/^/  | /' "$SCRATCH/$1.err"
}

# ---------------------------------------------------------------- no kernel
run nokernel SVERBS_VM_KERNEL=/nonexistent/vmlinuz -- true
check "missing kernel: status 125" [ "$(rc nokernel)" = 125 ]
check "missing kernel: a reason on stderr" grep -q 'no kernel' "$SCRATCH/nokernel.err"

# ---------------------------------------------------------------- one guest
# The guest prints "ping <token>" and waits (30 s max) for the host to write
# the token into the shared scratch dir; the host does that as soon as the
# line arrives on the harness's stdout, while the guest is still running.
TOKEN=$RANDOM$RANDOM
mkdir -p "$SCRATCH/wd"
cat > "$SCRATCH/guest.sh" <<'EOF'
set -u
echo "to-stdout"
echo "to-stderr" >&2
echo "env=$SELFTEST_VAR"
echo "pwd=$PWD"
echo "host=$RXE_VM_HOST"
echo "ping $SELFTEST_TOKEN"
for _ in $(seq 600); do [ -s "$SELFTEST_DIR/pong" ] && break; sleep 0.05; done
echo "pong=$(cat "$SELFTEST_DIR/pong" 2>/dev/null)"
# "/" is the host's, read-only under a tmpfs overlay: writes stay in the guest
echo guest > /etc/sverbs-selftest-$SELFTEST_TOKEN && echo "overlay-write=ok"
echo "from-guest" > "$SELFTEST_DIR/written-by-guest"
echo "devs=$(ls /sys/class/infiniband | tr '\n' ' ')"
echo "gid1=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)"
exit 42
EOF
set +e
(
  cd "$SCRATCH/wd"
  SELFTEST_VAR="a b'c" SELFTEST_TOKEN=$TOKEN SELFTEST_DIR=$SCRATCH \
    "$RUNNER" "bash $SCRATCH/guest.sh" 2>"$SCRATCH/one.err" |
    while IFS= read -r line; do
      echo "$line" >> "$SCRATCH/one.out"
      [ "$line" != "ping $TOKEN" ] || echo "$TOKEN" > "$SCRATCH/pong"
    done
  exit "${PIPESTATUS[0]}"
)
echo $? > "$SCRATCH/one.rc"
set -e
touch "$SCRATCH/one.out"
n=$FAIL
check "exit status 42 propagated" [ "$(rc one)" = 42 ]
check "stdout streamed (host answered the guest's ping while it ran)" has_line "$SCRATCH/one.out" "pong=$TOKEN"
check "stdout has stdout only" has_line "$SCRATCH/one.out" "to-stdout"
check "stderr has stderr" has_line "$SCRATCH/one.err" "to-stderr"
check "stderr not on stdout" not grep -q to-stderr "$SCRATCH/one.out"
check "environment carried over" has_line "$SCRATCH/one.out" "env=a b'c"
check "working directory carried over" has_line "$SCRATCH/one.out" "pwd=$SCRATCH/wd"
check "RXE_VM_HOST=single" has_line "$SCRATCH/one.out" "host=single"
check "write to / works in the guest" has_line "$SCRATCH/one.out" "overlay-write=ok"
check "... and does not reach the host" [ ! -e "/etc/sverbs-selftest-$TOKEN" ]
check "build dir is shared read-write" has_line "$SCRATCH/written-by-guest" "from-guest"
check "rxe0 and rxe1 exist" has_line "$SCRATCH/one.out" "devs=rxe0 rxe1 "
check "rxe0 GID 1 is ::ffff:10.77.0.1" has_line "$SCRATCH/one.out" \
  "gid1=0000:0000:0000:0000:0000:ffff:0a4d:0001"
[ $n = $FAIL ] || show one

# ---------------------------------------------------------------- timeout
# The limit counts from the harness's start, boot included (whether the
# command started before it depends on the host's load: not checked).
run timeout SVERBS_VM_TIMEOUT=30 -- 'echo started; sleep 1000; echo never'
n=$FAIL
check "timeout: status 124" [ "$(rc timeout)" = 124 ]
check "timeout: said so on stderr" grep -q 'timeout after 30s' "$SCRATCH/timeout.err"
check "timeout: the command was stopped" not grep -q never "$SCRATCH/timeout.out"
[ $n = $FAIL ] || show timeout

# ---------------------------------------------------------------- boot watchdog
# A guest that never comes up (SVERBS_VM_TEST_STALL: its CPUs stopped, as
# QEMU stuck in its firmware was once seen here) is started again once; the
# second boot runs the command.  The limit is generous: the second boot is a
# real one, on a host that may be loaded.
run stall1 SVERBS_VM_TEST_STALL=1 SVERBS_VM_BOOT_TIMEOUT=30 SVERBS_VM_TIMEOUT=120 -- 'echo booted'
n=$FAIL
check "boot watchdog: the restarted guest ran the command (status 0)" [ "$(rc stall1)" = 0 ]
check "boot watchdog: its output" has_line "$SCRATCH/stall1.out" booted
check "boot watchdog: the stall was reported" grep -q 'host single: not up after 30s' "$SCRATCH/stall1.err"
check "boot watchdog: the restart was reported" grep -q 'restarting every guest' "$SCRATCH/stall1.err"
[ $n = $FAIL ] || show stall1
# two misses: status 125 at once, not the run's whole timeout
run stall2 SVERBS_VM_TEST_STALL=2 SVERBS_VM_BOOT_TIMEOUT=3 SVERBS_VM_TIMEOUT=120 -- 'echo must-not-run'
n=$FAIL
check "boot watchdog: two misses give status 125" [ "$(rc stall2)" = 125 ]
check "boot watchdog: ... and say so" grep -q 'did not come up twice' "$SCRATCH/stall2.err"
check "boot watchdog: ... command not run" not grep -q must-not-run "$SCRATCH/stall2.out"
[ $n = $FAIL ] || show stall2

# ---------------------------------------------------------------- setup failure
run badnet SVERBS_VM_NET=bogus -- 'echo must-not-run'
n=$FAIL
check "guest setup failure: status 125" [ "$(rc badnet)" = 125 ]
check "guest setup failure: command not run" not grep -q must-not-run "$SCRATCH/badnet.out"
log=$(sed -n 's/.*console log kept in \(.*\)$/\1/p' "$SCRATCH/badnet.err" | head -n1)
check "guest setup failure: console log kept ($log)" grep -q 'unknown SVERBS_VM_NET=bogus' "${log:-/nonexistent}"
[ $n = $FAIL ] || show badnet

# ---------------------------------------------------------------- two hosts
if [ "$MODE" = full ]; then
  A='echo "A $RXE_VM_DEV $RXE_VM_IP $(ls /sys/class/infiniband)"; vm-sync-wait from-b 60 && exit 3'
  B='echo "B $RXE_VM_DEV $RXE_VM_IP $(ls /sys/class/infiniband)"; vm-sync-post from-b; exit 0'
  run two SVERBS_VM_HOSTS=2 -- "$A" "$B"
  n=$FAIL
  check "two hosts: status is A's (3)" [ "$(rc two)" = 3 ]
  check "two hosts: both statuses reported" grep -qx 'run-in-vm: status A=3 B=0' "$SCRATCH/two.err"
  check "two hosts: A has rxe0 10.77.0.1 only" has_line "$SCRATCH/two.out" "[A] A rxe0 10.77.0.1 rxe0"
  check "two hosts: B has rxe1 10.77.0.2 only" has_line "$SCRATCH/two.out" "[B] B rxe1 10.77.0.2 rxe1"
  [ $n = $FAIL ] || show two
  # B's first boot never comes up: both are started again (A's command,
  # already waiting for B, runs again), and the pair then runs as usual
  run twostall SVERBS_VM_HOSTS=2 SVERBS_VM_TEST_STALL=1 SVERBS_VM_BOOT_TIMEOUT=40 SVERBS_VM_TIMEOUT=150 -- "$A" "$B"
  n=$FAIL
  check "two hosts, B stalled once: statuses after the restart" grep -qx 'run-in-vm: status A=3 B=0' "$SCRATCH/twostall.err"
  check "two hosts, B stalled once: B was the one reported" grep -q 'host B: not up after 40s' "$SCRATCH/twostall.err"
  check "two hosts, B stalled once: A was not" not grep -q 'host A: not up' "$SCRATCH/twostall.err"
  [ $n = $FAIL ] || show twostall
fi

echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ]
