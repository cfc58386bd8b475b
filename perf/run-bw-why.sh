#!/bin/bash
# run-bw-why.sh - where a batch budget's cost to ib_write_bw goes (issue 18,
# goal 2): ib_write_bw 64 B, one WR per post, the layer on, without and with
# SVERBS_BATCH_BUDGET_US (and with SVERBS_BATCH_LINGER=on), in rotated order in
# ONE guest boot; per WR: the client's
# user and system CPU, the layer's WQEs per doorbell, system calls by name.
# Writes perf/results/<name>.json and <name>.md.
#
#   perf/run-bw-why.sh [-n NAME] [-r REPS] [-i ITERS] [-m "MODES"]
#     -n NAME   results name (default: bw-why)
#     -r REPS   repetitions, the order of the modes rotated (default: 5)
#     -i ITERS  WRs per run (default: 100000)
#     -m MODES  the client's modes, the first the reference (default "none
#               budget nolinger"): none (no budget), budget (a budget, the
#               rest as configured), linger / nolinger (the budget with
#               SVERBS_BATCH_LINGER=on / off)
#
# Environment: PERF_BUDGET_US (default 50), SVERBS_VM_* (tests/vm/run-in-vm.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name=bw-why reps=5 iters=100000 modes="none budget nolinger"
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-i) iters=$2; shift 2 ;;
	-m) modes=$2; shift 2 ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || perf_die "-r wants a positive number"
[[ $iters =~ ^[1-9][0-9]*$ ]] && [ "$iters" -ge 1000 ] || perf_die "-i wants at least 1000 WRs"
budget=${PERF_BUDGET_US:-50}
[[ $budget =~ ^[1-9][0-9]*$ ]] || perf_die "PERF_BUDGET_US must be a positive number of microseconds"
perf_need_bins
out=$PERF_DIR/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm=$(wc -w <<<"$modes")
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((reps * nm * (iters / 5000 + 20) + 2 * nm * (iters / 500 + 60) + 120))}
perf_meta "$tmp/meta.json" "run-bw-why.sh -r $reps -i $iters -m '$modes' (budget ${budget} us)"
perf_log "$reps x {$modes; ${budget}us} x ib_write_bw -n $iters, then strace, in one guest (timeout ${SVERBS_VM_TIMEOUT}s)"
rc=0
vm_run "'$PERF_DIR/guest/bw-why.sh' $reps $iters $budget $modes" >"$tmp/runs.jsonl" || rc=$?
[ -s "$tmp/runs.jsonl" ] || perf_die "no results (guest exit status $rc)"
# shellcheck disable=SC2086  # the modes: one argument each
$PY "$PERF_DIR/bw_why.py" "$tmp/runs.jsonl" "$tmp/meta.json" "$out/$name" "$budget" $modes || rc=1
perf_log "wrote $out/$name.json, $out/$name.md"
exit $rc
