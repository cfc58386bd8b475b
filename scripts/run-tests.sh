#!/bin/bash
# run-tests.sh BUILD SKIPLIST [ARGS...] - test.sh's run of the tests:
# `meson test -C BUILD ARGS` one test at a time, bounded by TEST_SH_DEADLINE,
# then the summary (scripts/test-summary.py).  Its own script so that
# tests/build/test-run-tests.sh can run it on a toy meson project.
#
# TEST_SH_DEADLINE (seconds since the epoch; .ci/run sets it to CI's 90
# minutes less 5) bounds the whole run: at the deadline the running test is
# stopped (meson's SIGTERM: INTERRUPT), the tests after it do not run, and
# the run fails naming them.  Each test's own timeout is a hang guard; the
# deadline keeps a run with hangs inside CI's time, with a report.  The
# variable is unset before the tests run (and is not SVERBS_*: the layer
# reads every SVERBS_* variable as its configuration and warns of unknown
# ones, which the tests' layer-state checks rightly count as a failure).
# SVERBS_ALLOW_SKIP=1: a skip not on SKIPLIST passes (test.sh --allow-skip).
#
# Exit: meson's status when it failed (124: the deadline), else the
# summary's.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: run-tests.sh BUILD SKIPLIST [meson test args]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd -P)
build=$1 skiplist=$2
shift 2
logs=$build/meson-logs
mkdir -p "$logs"
rm -f "$logs/testlog.json" "$logs/test-list.txt"
meson test -C "$build" --list --no-rebuild "$@" >"$logs/test-list.txt" 2>/dev/null
deadline=()
if [ -n "${TEST_SH_DEADLINE:-}" ]; then
	[[ $TEST_SH_DEADLINE =~ ^[0-9]+$ ]] ||
		{ echo "test.sh: TEST_SH_DEADLINE is '$TEST_SH_DEADLINE', not seconds since the epoch" >&2; exit 2; }
	left=$((TEST_SH_DEADLINE - $(date +%s)))
	[ $left -gt 0 ] || { echo "test.sh: TEST_SH_DEADLINE already passed" >&2; exit 1; }
	echo "test.sh: the run stops at its deadline, in $left s (TEST_SH_DEADLINE)"
	deadline=(timeout -s TERM -k 60 "$left")
fi
unset TEST_SH_DEADLINE  # not the tests' business
"${deadline[@]}" meson test -C "$build" --print-errorlogs --num-processes 1 "$@"
rc=$?
hit=0
[ ${#deadline[@]} = 0 ] || [ $rc != 124 ] || hit=1
/usr/bin/python3 "$here/test-summary.py" "$logs/testlog.json" "$skiplist" \
	"${SVERBS_ALLOW_SKIP:-0}" "$logs/test-list.txt" "$hit"
prc=$?
[ $rc = 0 ] || exit $rc
exit $prc
