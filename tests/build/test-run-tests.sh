#!/bin/bash
# test-run-tests.sh - scripts/run-tests.sh (test.sh's run of the tests and
# its summary) on a toy meson project: a run that passes; the run's deadline
# (TEST_SH_DEADLINE) stopping a test, the test after it named as not run,
# nothing left running; skips that fail the run unless listed; a deadline
# that is no number, or one already passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
# pass / fail / show / itest_done / cannot_run: the shell tests' own
# helpers (nothing of the guest runs here)
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$here/../integration/lib.sh"
run=$here/../../scripts/run-tests.sh
tmp=$(mktemp -d)
trap 'pkill -f "sleep 3601" 2>/dev/null; rm -rf "$tmp"' EXIT
trap "exit 143" TERM INT
expect() { # NAME STATUS WANTED-STATUS OUTPUT-FILE PATTERN...
	local name=$1 st=$2 want=$3 out=$4
	shift 4
	[ "$st" = "$want" ] || { fail "$name: exit status $st, expected $want"; show "$out"; return; }
	for p in "$@"; do
		grep -qF -- "$p" "$out" || { fail "$name: no line '$p' in its output"; show "$out"; return; }
	done
	pass "$name"
}

mkdir -p "$tmp/toy"
cat >"$tmp/toy/meson.build" <<'MESON'
project('toy')
sh = find_program('sh')
test('quick', sh, args : ['-c', 'exit 0'], suite : ['ok', 'deadline', 'skip'], timeout : 30)
test('slow', sh, args : ['-c', 'sleep 3601'], suite : 'deadline', timeout : 3700)
test('after', sh, args : ['-c', 'exit 0'], suite : ['ok', 'deadline'], timeout : 30)
test('skipper', sh, args : ['-c', 'echo "SKIP: no such device"; exit 77'], suite : 'skip',
     timeout : 30)
MESON
meson setup "$tmp/b" "$tmp/toy" >"$tmp/setup.txt" 2>&1 ||
	{ show "$tmp/setup.txt"; cannot_run "meson setup of the toy project failed"; }
: >"$tmp/none.txt"
printf '# comment\nskipper the toy has no device\n' >"$tmp/listed.txt"
# The toy's own tests must not see ours.
unset MESON_TESTTHREADS SVERBS_ALLOW_SKIP TEST_SH_DEADLINE

"$run" "$tmp/b" "$tmp/none.txt" --suite ok >"$tmp/o1" 2>&1
expect "a run that passes" $? 0 "$tmp/o1" "tests: 2 passed, 0 failed, 0 skipped"

TEST_SH_DEADLINE=$(($(date +%s) + 5)) "$run" "$tmp/b" "$tmp/none.txt" --suite deadline \
	>"$tmp/o2" 2>&1
expect "the deadline" $? 124 "$tmp/o2" \
	"the run stops at its deadline" \
	"the run's deadline (TEST_SH_DEADLINE) hit; 1 tests did not run" \
	"FAILED: slow (interrupt)" \
	"FAILED: after (did not run: the run's deadline (TEST_SH_DEADLINE) came first)" \
	"tests: 1 passed, 2 failed, 0 skipped"
check "the deadline left nothing running" not pgrep -f "sleep 3601"

"$run" "$tmp/b" "$tmp/none.txt" --suite skip >"$tmp/o3" 2>&1
expect "a skip not listed fails" $? 1 "$tmp/o3" \
	"FAILED: skipper (no such device): skipped, which is not allowed" \
	"tests: 1 passed, 1 failed, 0 skipped"
"$run" "$tmp/b" "$tmp/listed.txt" --suite skip >"$tmp/o4" 2>&1
expect "a listed skip passes" $? 0 "$tmp/o4" \
	"SKIPPED: skipper (no such device; listed: the toy has no device)" \
	"tests: 1 passed, 0 failed, 1 skipped"
SVERBS_ALLOW_SKIP=1 "$run" "$tmp/b" "$tmp/none.txt" --suite skip >"$tmp/o5" 2>&1
expect "--allow-skip" $? 0 "$tmp/o5" "SKIPPED: skipper (no such device; --allow-skip)"

TEST_SH_DEADLINE=soon "$run" "$tmp/b" "$tmp/none.txt" --suite ok >"$tmp/o6" 2>&1
expect "a deadline that is no number" $? 2 "$tmp/o6" "not seconds since the epoch"
TEST_SH_DEADLINE=$(($(date +%s) - 1)) "$run" "$tmp/b" "$tmp/none.txt" --suite ok >"$tmp/o7" 2>&1
expect "a deadline already passed" $? 1 "$tmp/o7" "TEST_SH_DEADLINE already passed"

itest_done
