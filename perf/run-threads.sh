#!/bin/bash
# run-threads.sh - goal 1's stream with --stream-thread: on which thread the
# stream's work runs, stock vs the layer.  One guest boot:
#  - guest/hol-matrix.sh: hol_bench --stream-thread, SVERBS=off / on
#    alternated, REPS repetitions per size; each run reports the guest's busy
#    CPU and each thread's own CPU (poll thread, stream thread) over the
#    measured window;
#  - guest/hol-writes.sh: the same under strace, counting each thread's
#    write() calls (rxe's doorbells, which run the requester in the caller).
# Writes perf/results/<name>.{json,md}.
#
#   perf/run-threads.sh [-n NAME] [-r REPS] [-t SECONDS] [-s SIZES] [-w SECONDS]
#     -n NAME     results name (default threads)
#     -r REPS     repetitions (default 5)
#     -t SECONDS  measured seconds per run (default 3)
#     -s SIZES    background WRITE sizes (default "1M 4M")
#     -w SECONDS  seconds of each strace run (default 2)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name=threads reps=5 secs=3 sizes="1M 4M" wsecs=2
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	-s) sizes=$2; shift 2 ;;
	-w) wsecs=$2; shift 2 ;;
	-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || perf_die "-r wants a positive count, not '$reps'"
perf_need_bins
command -v strace >/dev/null || perf_die "strace is not installed (scripts/setup.sh installs it)"
out=$PERF_DIR/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perf_meta "$tmp/meta.json" "run-threads.sh -r $reps -t $secs -s '$sizes' -w $wsecs"
perf_log "one guest: $reps x hol_bench --stream-thread per size ($sizes), then the strace runs"
rc=0
vm_run "'$PERF_DIR/guest/hol-matrix.sh' $reps '$sizes' -t $secs --stream-thread; a=\$?
'$PERF_DIR/guest/hol-writes.sh' $wsecs '$sizes'; b=\$?; exit \$((a | b))" >"$tmp/runs.jsonl" || rc=1
$PY "$PERF_DIR/threads.py" "$name" "$tmp/runs.jsonl" --meta "$tmp/meta.json" --outdir "$out" || rc=1
perf_log "wrote $out/$name.json, $out/$name.md"
exit $rc
