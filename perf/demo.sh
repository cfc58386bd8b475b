#!/bin/bash
# demo.sh - the project's main job (the top-level demo.sh calls it after the
# build): boot the Soft-RoCE guest ONCE and show stock rdma-core (SVERBS=off)
# and sverbs (SVERBS=on) side by side, same binaries, same run:
#   (a) hol_bench: 64 B high-priority WRITEs every 1 ms on the same QP as a
#       stream of 1 MiB / 4 MiB WRITEs kept 2 deep (p50/p99, large MB/s), and
#       unloaded;
#   (b) perftest ib_write_bw (64 B, one WR per post and --post_list 16) and
#       ib_write_lat (64 B), -x 1 -F, small iteration counts.
# Every measurement is repeated REPS times, stock and sverbs alternated (which
# goes first flips each repetition); the table shows medians, and each ratio
# is the median of the per-repetition ratios with their min..max.
# About 4 minutes.  Everything is also kept in $BUILD/perf-demo/demo.{json,md}.
#
#   perf/demo.sh [-t SECONDS] [-r REPS]   (hol_bench seconds per run, default 1;
#                                          repetitions, default 5)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

secs=1 reps=5
while [ $# -gt 0 ]; do
	case $1 in
	-t) secs=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done

# A build dir configured before perf/meson.build existed has no perf targets.
if [ ! -x "$PERF_BIN/hol_bench" ] || [ ! -x "$PERF_BIN/rate_bench" ]; then
	if [ "$PERF_BIN" = "$BUILD/perf" ] && [ -f "$BUILD/build.ninja" ]; then
		perf_log "building the benchmarks"
		grep -q 'perf/hol_bench' "$BUILD/build.ninja" || meson setup --reconfigure "$BUILD" >/dev/null
		meson compile -C "$BUILD" hol_bench rate_bench >/dev/null
	fi
fi
perf_need_bins

out=$BUILD/perf-demo
mkdir -p "$out"
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((reps * (6 * (secs + 6) + 90) + 300))}
perf_meta "$out/meta.json" "demo.sh -t $secs -r $reps"
echo "sverbs demo: one Soft-RoCE guest (QEMU TCG, ${SVERBS_VM_SMP:-2} vCPUs, rxe1 -> rxe0);"
echo "stock = SVERBS=off, sverbs = SVERBS=on, same binaries; absolute numbers are slow"
echo "and noisy under emulation: read the ratios.  Progress on stderr..."
rc=0
vm_run "'$PERF_DIR/guest/hol-matrix.sh' $reps 'none 1M 4M' -t $secs; r1=\$?; r2=0;
        for ((r = 1; r <= $reps; r++)); do
                if ((r % 2)); then modes='off on'; else modes='on off'; fi
                PERFTEST_MODES=\$modes PERFTEST_LABEL=rep=\$r PERFTEST_BW_ITERS=5000 PERFTEST_LAT_ITERS=1000 \\
                        '$PERF_DIR/guest/perftest.sh' bw bw-pl16 lat || r2=1;
        done;
        exit \$((r1 | r2))" >"$out/runs.jsonl" 2>"$out/stderr.log" || rc=$?
[ -s "$out/runs.jsonl" ] || {
	tail -n 20 "$out/stderr.log" >&2
	perf_die "no results (guest exit status $rc)"
}
echo
$PY "$PERF_DIR/summarize.py" demo "$out/runs.jsonl" --meta "$out/meta.json" --outdir "$out" --demo || rc=1
echo
echo "HOL = perf/hol_bench: 64 B WRITE at SVERBS_PRIO(0) every 1 ms, latency post -> CQE,"
echo "on the same QP as large WRITEs at SVERBS_PRIO(7) kept 2 deep.  Details: $out/demo.md,"
echo "guest output: $out/stderr.log.  Longer runs with repetitions: perf/run-hol.sh, perf/run-rate.sh."
[ $rc = 0 ] || echo "demo: some runs failed (status $rc): see $out/stderr.log" >&2
exit $rc
