#!/bin/bash
# smoke.sh (guest side) - each benchmark for about a second with SVERBS=on
# (and one stock hol_bench run, for the tables that pair the two);
# prints their JSON lines on stdout.  Exit 1 if any of them failed.
set -uo pipefail
b=${PERF_BIN:?}
export SVERBS=on
fail=0
# each step's name and time on stderr: a run that hangs or is killed shows
# where it was
step=0
run() {
	local t0=$SECONDS
	step=$((step + 1))
	echo "smoke: step $step: ${*##*/}" >&2
	"$@" || { echo "smoke: FAILED ($?): $*" >&2; fail=1; }
	echo "smoke: step $step done in $((SECONDS - t0)) s" >&2
}
run "$b/hol_bench" -L 64K -t 1 --warmup 0.2 --label smoke-write
run "$b/hol_bench" -L 64K -t 0.5 --warmup 0.2 --small-op send --label smoke-send
run "$b/hol_bench" --baseline -t 0.5 --warmup 0.2 --label smoke-baseline
run "$b/hol_bench" -L 64K -t 0.5 --warmup 0.2 --stream-thread --label smoke-thread
# a stock pair for summarize.py's stock-vs-sverbs tables (CPU per MiB)
run env SVERBS=off "$b/hol_bench" -L 64K -t 0.5 --warmup 0.2 --label smoke-write-off
run "$b/rate_bench" -T 1 -t 1 --warmup 0.2 --label smoke-t1
run "$b/rate_bench" -T 2 -l 4 -t 0.5 --warmup 0.2 --label smoke-t2-pl4
run "$b/rate_bench" --lat -t 0.5 --warmup 0.2 --label smoke-lat
run "$b/rate_bench" --lat -n 20 --settle-us 2000 --label smoke-settle
# the demo's perftest runner, post_list 16 with an iteration count that is
# not a multiple of 16 (the demo's 5000: perftest refused every such run)
PERFTEST_MODES=on PERFTEST_BW_ITERS=1000 PERFTEST_LABEL=smoke-pl16 \
	run "$(dirname "$0")/perftest.sh" bw-pl16
# the error path: a wrong rkey must abort (exit 1) naming the WC status
echo "smoke: step $((step + 1)): hol_bench --inject-error" >&2
err=$("$b/hol_bench" -L 64K -t 0.5 --warmup 0 --inject-error 2>&1 >/dev/null)
rc=$?
echo "$err" >&2
if [ $rc = 1 ] && grep -q 'completion failed: status remote access error' <<<"$err"; then
	echo '{"label":"smoke-error","ok":true}'
else
	echo '{"label":"smoke-error","ok":false}'
fi
exit $fail
