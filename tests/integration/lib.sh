# shellcheck shell=bash
# lib.sh - shared helpers of the shell integration tests (sourced, bash).
#
# A test script is one file that runs twice: on the host it re-executes itself
# inside a Soft-RoCE guest (itest_enter_vm), and in the guest it does the work:
#
#   . "$(dirname "$0")/lib.sh"
#   itest_enter_vm "$0" "$@"          # host: exec run-in-vm.sh; guest: returns
#   itest_use_prefix "$1"             # source <prefix>/env.sh (or "system")
#   itest_pair NAME PORT -- SERVER CMD -- CLIENT CMD
#   check "description" COMMAND...    # ok / not ok line, counted
#   itest_done                        # "N passed, N failed, N skipped"; status
#
# Statuses: 0 all passed; 1 some check failed, or the test cannot run (no
# guest can be started, no prefix, a tool setup.sh installs is missing: see
# tests/cannot-run.sh); 77 skipped only when skips are allowed
# (SVERBS_ALLOW_SKIP=1, or the test is on tests/skip-list.txt); always with
# the reason printed.
# The host side needs SVERBS_VM_RUNNER (default ../vm/run-in-vm.sh).
# Output of every run is kept in $ITEST_OUT (in the guest's tmpfs) and shown
# for a failed check.

ITEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SVERBS_VM_RUNNER:=$ITEST_DIR/../vm/run-in-vm.sh}"
ITEST_PASS=0 ITEST_FAIL=0 ITEST_SKIP=0
# shellcheck source=../cannot-run.sh
. "$ITEST_DIR/../cannot-run.sh"

skip_all() { cannot_run "$@"; }

# itest_enter_vm SCRIPT ARGS...: on the host, run SCRIPT ARGS inside a guest
# and exit with its status (77 with a reason when no guest can start); in the
# guest (RXE_VM_HOST is set) just return.
itest_enter_vm() {
  [ -z "${RXE_VM_HOST:-}" ] || return 0
  local why cmd
  why=$("$SVERBS_VM_RUNNER" --check 2>&1) || skip_all "cannot start a guest: $why"
  cmd=$(printf '%q ' bash "$@")
  exec "$SVERBS_VM_RUNNER" "$cmd"
}

# itest_use_prefix PREFIX: use our rdma-core build (source PREFIX/env.sh), or
# the system's with PREFIX=system (only for developing these tests).
# Sets ITEST_LIBDIR: where libibverbs.so.1 must come from (an ERE).
itest_use_prefix() {
  ITEST_PREFIX=${1:?prefix}
  if [ "$ITEST_PREFIX" = system ]; then
    ITEST_LIBDIR='(/usr)?/lib/x86_64-linux-gnu'
  else
    [ -r "$ITEST_PREFIX/env.sh" ] || skip_all "no $ITEST_PREFIX/env.sh: rdma-core prefix not built"
    # shellcheck disable=SC1091
    . "$ITEST_PREFIX/env.sh"
    ITEST_LIBDIR=$ITEST_PREFIX/lib
    [ -e "$ITEST_LIBDIR/libibverbs.so.1" ] || skip_all "no libibverbs.so.1 in $ITEST_LIBDIR"
    ls "$ITEST_LIBDIR"/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
      skip_all "no rxe provider in $ITEST_LIBDIR/libibverbs"
  fi
  ITEST_OUT=$(mktemp -d /tmp/itest.XXXXXX)
  echo "# rdma-core: $ITEST_PREFIX (libs from $ITEST_LIBDIR); guest $RXE_VM_HOST; SVERBS=${SVERBS-<unset>}"
}

itest_need() {  # itest_need TOOL...: skip the whole script if one is missing
  local t
  for t in "$@"; do command -v "$t" >/dev/null || skip_all "$t not installed"; done
}

pass() { ITEST_PASS=$((ITEST_PASS + 1)); echo "ok - $*"; }
fail() { ITEST_FAIL=$((ITEST_FAIL + 1)); echo "not ok - $*"; }
# skip DESCRIPTION: a check that cannot run; a failure unless skips are
# allowed (SVERBS_ALLOW_SKIP=1)
skip() {
  if [ "${SVERBS_ALLOW_SKIP:-0}" = 1 ]; then
    ITEST_SKIP=$((ITEST_SKIP + 1)); echo "ok - # SKIP $*"
  else
    fail "$* (cannot run; SVERBS_ALLOW_SKIP=1 would skip it)"
  fi
}
check() {  # check DESCRIPTION COMMAND...: pass iff COMMAND succeeds
  local d=$1; shift
  if "$@"; then pass "$d"; else fail "$d"; fi
}
not() { ! "$@"; }

itest_done() {
  echo "$ITEST_PASS passed, $ITEST_FAIL failed, $ITEST_SKIP skipped"
  [ "$ITEST_FAIL" = 0 ] || return 1
  [ "$ITEST_PASS" != 0 ] || { echo "FAIL: nothing ran"; return 1; }
  return 0
}

show() {  # show FILE...: print files indented (after a failed check)
  local f
  for f in "$@"; do echo "# --- $f"; sed 's/^/#   /' "$f" 2>/dev/null | tail -n 40; done
}

# itest_pair NAME PORT [--cm] -- SERVER... -- CLIENT...
# Run SERVER in the background, wait until it listens on PORT (TCP, or an
# RDMA CM id with --cm), run CLIENT, wait for SERVER.  Both run with
# LD_DEBUG=libs (logs: $ITEST_OUT/NAME.{srv,cli}.ld.<pid>) and a 120 s
# timeout.  Results: $ITEST_OUT/NAME.{srv,cli}.{out,rc}.
# ITEST_SRV_GRACE=S: when the client fails, the server gets S more seconds,
# then is killed (a line in NAME.srv.out says so) instead of running into its
# 120 s timeout: a server left waiting for a client that is gone (an rdma_cm
# server waits for a connect request forever) only costs time, and the case
# has failed already with its client.  Unset: the server's own timeout.
itest_pair() {
  local port=$2 cm="" srv=() cli=() o=$ITEST_OUT/$1 spid killed=""
  shift 2
  [ "$1" != --cm ] || { cm=--cm; shift; }
  [ "$1" = -- ] || { echo "itest_pair: usage" >&2; return 2; }
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  LD_DEBUG=libs LD_DEBUG_OUTPUT=$o.srv.ld timeout 120 "${srv[@]}" >"$o.srv.out" 2>&1 &
  spid=$!
  if ! vm-wait-listen $cm "$port" 60 2>>"$o.srv.out"; then
    kill "$spid" 2>/dev/null || true
  else
    # (statuses are results here, not errors: keep set -e out of it)
    LD_DEBUG=libs LD_DEBUG_OUTPUT=$o.cli.ld timeout 120 "${cli[@]}" >"$o.cli.out" 2>&1 &&
      echo 0 > "$o.cli.rc" || echo $? > "$o.cli.rc"
  fi
  [ -e "$o.cli.rc" ] || echo 125 > "$o.cli.rc"
  if [ -n "${ITEST_SRV_GRACE:-}" ] && [ "$(cat "$o.cli.rc")" != 0 ]; then
    local end=$((SECONDS + ITEST_SRV_GRACE))
    while kill -0 "$spid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
    kill -0 "$spid" 2>/dev/null && kill "$spid" 2>/dev/null && killed=1
  fi
  wait "$spid" && echo 0 > "$o.srv.rc" || echo $? > "$o.srv.rc"
  [ -z "$killed" ] ||
    echo "itest_pair: the client failed; server killed ${ITEST_SRV_GRACE}s later (status $(cat "$o.srv.rc"))" >> "$o.srv.out"
}
rc_of() { cat "$ITEST_OUT/$1.rc" 2>/dev/null || echo missing; }

# libs_from_prefix NAME.srv|NAME.cli: the LD_DEBUG log of that process shows
# libibverbs.so.1 and the rxe provider loaded from ITEST_LIBDIR (our build).
libs_from_prefix() {
  local logs=("$ITEST_OUT/$1".ld.*)
  [ -e "${logs[0]}" ] || { echo "# no LD_DEBUG log for $1"; return 1; }
  grep -h 'calling init: ' "${logs[@]}" > "$ITEST_OUT/$1.inits" || true
  grep -Eq "calling init: $ITEST_LIBDIR/libibverbs\.so\.1\$" "$ITEST_OUT/$1.inits" &&
    grep -Eq "calling init: $ITEST_LIBDIR/libibverbs/librxe-rdmav[0-9]+\.so\$" "$ITEST_OUT/$1.inits" ||
    { echo "# $1 did not load libibverbs + librxe from $ITEST_LIBDIR:"; show "$ITEST_OUT/$1.inits"; return 1; }
}

# use_mode MODE: the environment of a test mode, exported (every other
# SVERBS_* setting unset first, so a mode is exactly what it says).
#   off    SVERBS=off: stock rdma-core
#   on     SVERBS=on: the defaults (an unmarked program's QPs stay in
#          pass-through: the provider's own post and poll)
#   defer  SVERBS=on SVERBS_BATCH_BUDGET_US=50, the rest default: what a
#          user who sets a budget gets.  QPs stay in pass-through, watched;
#          a poster that runs ahead of its completions defers its doorbells
#          (the provider's WQEs, rung at the batch target, a poll or arm of
#          the CQ, or the budget's timer: sched/watch.c)
#   queue  SVERBS=on SVERBS_PASSTHROUGH=off SVERBS_SLICE_ALWAYS=on
#          SVERBS_SLICE_BYTES=4k: every QP leaves pass-through from its first
#          WR, every WR goes through the layer's software queue, scheduled and
#          cut into 4 KiB slices (a 64 KiB WRITE is 16 WQEs), completions
#          translated
#   budget queue + SVERBS_BATCH_BUDGET_US=50: WRs of the default level (4)
#          may also be held up to 50 us for a bigger doorbell batch
# layer_state then answers "off" for off, "on" for the others.  Every
# suite runs all five by default: `queue` without a budget is the only mode
# whose lone WRs take the layer's direct path (sched/pump.c,
# sv_post_direct()), which `budget` never takes.
ITEST_MODES="off on defer queue budget"
use_mode() {
  local v
  for v in $(env | sed -n 's/^\(SVERBS_[A-Z_]*\)=.*/\1/p'); do
    [ "$v" = SVERBS_PREFIX ] || unset "$v"
  done
  case $1 in
    off) export SVERBS=off ;;
    on) export SVERBS=on ;;
    defer) export SVERBS=on SVERBS_BATCH_BUDGET_US=50 ;;
    queue) export SVERBS=on SVERBS_PASSTHROUGH=off SVERBS_SLICE_ALWAYS=on SVERBS_SLICE_BYTES=4k ;;
    budget) export SVERBS=on SVERBS_PASSTHROUGH=off SVERBS_SLICE_ALWAYS=on SVERBS_SLICE_BYTES=4k \
              SVERBS_BATCH_BUDGET_US=50 ;;
    *) echo "unknown mode $1 ($ITEST_MODES)" >&2; return 2 ;;
  esac
}
mode_env() { env | grep '^SVERBS' | grep -v '^SVERBS_PREFIX=' | sort | paste -sd' '; }
mode_state() { [ "$1" = off ] && echo off || echo on; }

# layer_state: "on" / "off" - whether the sverbs layer is active in a process
# with the current environment, seen from outside the layer: with the layer
# on, every CQ it manages gets cq_headroom extra CQEs, so a CQ asked for 63
# entries reports more (rxe rounds 63 up to 63 exactly).  "n/a" with the
# system rdma-core (no pyverbs there).
layer_state() {
  if [ "$ITEST_PREFIX" = system ]; then echo n/a; return; fi
  /usr/bin/python3 "$ITEST_DIR/layer-state.py" "${1:-$RXE_VM_DEV}"
}

# pyverbs_from_prefix: /usr/bin/python3 with the current PYTHONPATH imports
# pyverbs from ITEST_PREFIX, and opening a device maps libibverbs and librxe
# from there (read back from /proc/self/maps).
pyverbs_from_prefix() {
  /usr/bin/python3 - "$ITEST_PREFIX" "${RXE_VM_DEV:-rxe0}" <<'PY'
import os, sys
prefix, dev = sys.argv[1], sys.argv[2]
import pyverbs
from pyverbs.device import Context
ctx = Context(name=dev)
maps = {l.split()[-1] for l in open("/proc/self/maps") if "/" in l}
libs = sorted(p for p in maps if os.path.basename(p).startswith(("libibverbs.so", "librxe-")))
ok = (pyverbs.__file__.startswith(prefix + "/") and len(libs) == 2
      and all(p.startswith(prefix + "/lib/") for p in libs))
print(f"# pyverbs {pyverbs.__file__}; {' '.join(libs)}")
ctx.close()
sys.exit(0 if ok else 1)
PY
}

# ---- per-case outcomes, compared with stock
# outcome MODE CASE ok|fail: record a case's outcome in a mode (a case is
# ok when every check of it passed).  outcomes_compare: one check per case
# and mode other than off, "the same outcome as stock (off)", and a table
# line per mode: cases, ok, failed, differing from stock.  A stock failure
# is a failure of the case's own checks already; here it only compares.
outcome() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$ITEST_OUT/outcomes.tsv"; }
# case_outcome MODE CASE FAILS_BEFORE: ok iff no check failed since
case_outcome() { if [ "$3" = "$ITEST_FAIL" ]; then outcome "$1" "$2" ok; else outcome "$1" "$2" fail; fi; }
outcomes_compare() {
  local mode case o s
  [ -s "$ITEST_OUT/outcomes.tsv" ] || return 0
  for mode in $(cut -f1 "$ITEST_OUT/outcomes.tsv" | awk '!seen[$0]++'); do
    [ "$mode" != off ] || continue
    # (a file, not a process substitution: the guest has no /dev/fd)
    awk -F'\t' -v m="$mode" '$1 == m { print $2 "\t" $3 }' "$ITEST_OUT/outcomes.tsv" > "$ITEST_OUT/outcomes.$mode"
    while IFS=$'\t' read -r case o; do
      s=$(awk -F'\t' -v c="$case" '$1 == "off" && $2 == c { print $3 }' "$ITEST_OUT/outcomes.tsv" | tail -n1)
      check "[$mode] $case: same outcome as stock (off: ${s:-absent}, $mode: $o)" [ "$o" = "${s:-absent}" ]
    done < "$ITEST_OUT/outcomes.$mode"
  done
  awk -F'\t' '
    { o[$1, $2] = $3; if (!($1 in seenm)) { seenm[$1] = 1; modes[++nm] = $1 }
      if (!($2 in seenc)) { seenc[$2] = 1; cases[++nc] = $2 } }
    END {
      for (i = 1; i <= nm; i++) {
        m = modes[i]; n = ok = bad = diff = 0
        for (j = 1; j <= nc; j++) {
          c = cases[j]; if (!((m, c) in o)) continue
          n++; if (o[m, c] == "ok") ok++; else bad++
          if (m != "off" && o[m, c] != o["off", c]) diff++
        }
        printf "# outcomes %-7s cases %d, ok %d, failed %d, skipped 0, differing from stock %s\n", m, n, ok, bad, (m == "off" ? "-" : diff)
      }
    }' "$ITEST_OUT/outcomes.tsv"
}
