#!/bin/bash
# run-issue18.sh - every measurement of issue 18's goals from one command,
# then one verdict table: perf/results/<name>.{md,json,png}, each goal met
# or not, computed from the figures of this run (perf/issue18.py).
#
#   perf/run-issue18.sh [-n NAME] [-r REPS] [-g "GOALS"]
#     -n NAME   results name (default: issue18); the runs are NAME-hol,
#               NAME-rate, NAME-insns and NAME-demo in perf/results/
#     -r REPS   repetitions of the guest benchmarks (default 5, the issue's
#               minimum)
#     -g GOALS  which runs (default "1 23 4 5"): 1 the head-of-line
#               benchmark (run-hol.sh, 64 KiB / 1 MiB / 4 MiB and unloaded);
#               23 message rate, closed loops and perftest (run-rate.sh:
#               t1 t1b pl16 t4b t4pl16 lat latb perftest perftestb); 4
#               instructions per WR (run-insns.sh, mlx5 on the fake objects
#               and rxe's lat and t1 in the guest); 5 ./demo's run, timed.
#               A goal whose run is left out is reported "not measured".
#
# Each run boots its own guest; all of them took 19 minutes on a
# 2-core host (TCG).  The verdicts are the issue's thresholds applied to
# the medians (docs/results.md, "Issue 18").
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name=issue18 reps=5 goals='1 23 4 5'
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-g) goals=$2; shift 2 ;;
	-h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
[[ $reps =~ ^[0-9]+$ ]] && [ "$reps" -ge 1 ] || perf_die "-r wants a positive number, not '$reps'"
for g in $goals; do
	case $g in
	1 | 23 | 4 | 5) ;;
	*) perf_die "-g: unknown goal run '$g' (1, 23, 4 or 5)" ;;
	esac
done
out=$PERF_DIR/results
mkdir -p "$out"
rc=0
want() { [[ " $goals " == *" $1 "* ]]; }
step() {
	perf_log "$*"
	"$@" || { perf_log "failed (status $?): $*"; rc=1; }
}

want 1 && step "$PERF_DIR/run-hol.sh" -n "$name-hol" -r "$reps" -t 5 -s '64K 1M 4M'
# run-rate.sh's own guest timeout counts one perftest config, not two
want 23 && SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((reps * 480 + 300))} \
	step "$PERF_DIR/run-rate.sh" -n "$name-rate" -r "$reps" -t 3 \
	-c 't1 t1b pl16 t4b t4pl16 lat latb perftest perftestb'
want 4 && step "$PERF_DIR/run-insns.sh" -n "$name-insns" -c 'lat t1'
if want 5; then
	perf_log "demo: ./demo.sh (the build done: its setup check and the guest run), timed"
	mkdir -p "$BUILD/perf-demo"
	t0=$(date +%s.%N)
	"$REPO/demo.sh" >"$BUILD/perf-demo/stdout.txt" 2>"$BUILD/perf-demo/demo-stderr.txt" || rc=1
	t1=$(date +%s.%N)
	cp "$BUILD/perf-demo/demo.json" "$out/$name-demo.json" || rc=1
	cp "$BUILD/perf-demo/stdout.txt" "$out/$name-demo.txt" || rc=1
	$PY - "$out/$name-demo.json" "$t0" "$t1" <<-'PYEOF' || rc=1
	import json, sys
	f, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
	d = json.load(open(f))
	d["wall_s"] = round(t1 - t0, 1)
	json.dump(d, open(f, "w"), indent=1)
	PYEOF
fi
$PY "$PERF_DIR/issue18.py" "$name" --dir "$out" || rc=1
perf_log "wrote $out/$name.md"
exit $rc
