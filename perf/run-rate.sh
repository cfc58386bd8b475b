#!/bin/bash
# run-rate.sh - message rate and low-load latency, stock (SVERBS=off) vs
# sverbs (SVERBS=on), same binary, alternated within ONE guest boot; writes
# perf/results/<name>.json, <name>.md and PNGs.
#
#   perf/run-rate.sh [-n NAME] [-r REPS] [-t SECONDS] [-c "CONFIGS"] [--syscalls [ITERS]]
#     -n NAME      results name (default: rate; with --syscalls only: syscalls)
#     -r REPS      repetitions (default: 3)
#     -t SECONDS   measured seconds per run (default: 3)
#     -c CONFIGS   any of t1 t4 pl16 t4pl16 lat t1b t4b latb perftest perftestb
#                  (default: all but perftest)
#                  t1: 1 thread, one WR per ibv_post_send; t4: 4 threads, each
#                  its own QP+CQ; pl16 / t4pl16: 1 / 4 threads, 16 WRs per call;
#                  lat: post one, wait for its completion, repeat; a trailing b:
#                  the sverbs side with a batching budget (PERF_BUDGET_US, 50);
#                  perftest: ib_write_lat and ib_write_bw (64 B, one WR per post
#                  and --post_list 16), client and server both off / on; perftestb:
#                  ib_write_lat and ib_write_bw with the sverbs side budgeted
#     --syscalls [ITERS]  instead: count syscalls per WR with strace -c -f for
#                  the -c configs (default t1 t4 pl16 t1b t4b; also mib,
#                  mib-<K>k-s<S>: see perf/guest/configs.sh) (ITERS WRs per
#                  thread, default 1000; strace makes each syscall slow in
#                  the guest, keep it small)
#
# Environment: PERF_BIN (where rate_bench is), PERF_BUDGET_US (the budget of the
# "b" configs, default 50), SVERBS_VM_* (tests/vm/run-in-vm.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name='' reps=3 secs=3 cfgs='' sys=0 iters=1000
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	-c) cfgs=$2; shift 2 ;;
	--syscalls)
		sys=1
		shift
		if [[ ${1:-} =~ ^[0-9]+$ ]]; then iters=$1; shift; fi
		;;
	-h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
[[ ${PERF_BUDGET_US:-50} =~ ^[0-9]+$ ]] || perf_die "PERF_BUDGET_US must be a number of microseconds"
perf_need_bins
out=$PERF_DIR/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
if [ $sys = 1 ]; then
	name=${name:-syscalls}
	cfgs=${cfgs:-t1 t4 pl16 t1b t4b}
	export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((iters * 40 / 100 + 300))}
	perf_meta "$tmp/meta.json" "run-rate.sh --syscalls $iters -c '$cfgs'"
	perf_log "strace -c -f: {$cfgs} x {off,on}, $iters WRs per thread (timeout ${SVERBS_VM_TIMEOUT}s)"
	vm_run "export PERF_BUDGET_US=${PERF_BUDGET_US:-50}; '$PERF_DIR/guest/syscalls.sh' $iters $cfgs" >"$tmp/runs.jsonl" || rc=$?
else
	name=${name:-rate}
	cfgs=${cfgs:-t1 t4 pl16 t4pl16 t1b t4b lat latb}
	nc=$(wc -w <<<"$cfgs")
	pt=0
	[[ " $cfgs " == *" perftest"* ]] && pt=1
	export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((reps * nc * 2 * (${secs%.*} + 4) + reps * pt * 120 + 120))}
	perf_meta "$tmp/meta.json" "run-rate.sh -r $reps -t $secs -c '$cfgs'"
	perf_log "$reps x {$cfgs} x {off,on}, ${secs}s each, in one guest (timeout ${SVERBS_VM_TIMEOUT}s)"
	vm_run "export PERF_BUDGET_US=${PERF_BUDGET_US:-50}; '$PERF_DIR/guest/rate-matrix.sh' $reps $secs $cfgs" >"$tmp/runs.jsonl" || rc=$?
fi
[ -s "$tmp/runs.jsonl" ] || perf_die "no results (guest exit status $rc)"
$PY "$PERF_DIR/summarize.py" "$name" "$tmp/runs.jsonl" --meta "$tmp/meta.json" --outdir "$out" || rc=1
$PY "$PERF_DIR/plot.py" "$out/$name.json" || perf_log "plotting failed"
perf_log "wrote $out/$name.json, $out/$name.md"
exit $rc
