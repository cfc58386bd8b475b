#!/bin/bash
# run-profile.sh - where the CPU goes: `perf record -g` of rate_bench in the
# Soft-RoCE guest, SVERBS=off and on, for the configs of run-rate.sh; text
# reports (by shared object, by symbol, callers of the context switch) in
# OUT (default build/perf-profile).  Profiling slows the runs: read the
# shares, not the rates.
#
#   perf/run-profile.sh [-o OUT] [-t SECONDS] [-c "CONFIGS"]
#     CONFIGS: any of t1 pl16 t1b lat latb (default: "t1 pl16 t1b lat")
#
# Environment: PERF_BIN, PERF_BUDGET_US (the budget of the "b" configs, 50),
# SVERBS_VM_* (tests/vm/run-in-vm.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

out=$BUILD/perf-profile secs=3 cfgs="t1 pl16 t1b lat"
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	-c) cfgs=$2; shift 2 ;;
	-h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
perf_need_bins
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
# the guest writes its reports there: share it read-write
export SVERBS_VM_RW=${SVERBS_VM_RW:-$BUILD}:$out
perf_log "{$cfgs} x {off,on}, ${secs}s each, reports in $out"
vm_run "export PERF_BUDGET_US=${PERF_BUDGET_US:-50}; '$PERF_DIR/guest/profile.sh' '$out' $secs $cfgs"
perf_log "wrote $out/*.{json,stats,dso,sym,callers}"
