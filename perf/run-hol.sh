#!/bin/bash
# run-hol.sh - the head-of-line benchmark, stock (SVERBS=off) vs sverbs
# (SVERBS=on), same binary, alternated within ONE guest boot; writes
# perf/results/<name>.json, <name>.md and PNGs.
#
#   perf/run-hol.sh [-n NAME] [-r REPS] [-t SECONDS] [-s "SIZES"] [--no-baseline]
#                   [-V "VARIANTS"] [-- hol_bench args...]
#     -n NAME      results name (default: hol)
#     -r REPS      repetitions of the whole matrix (default: 3)
#     -t SECONDS   measured seconds per run (default: 5)
#     -s SIZES     background WRITE sizes (default: "64K 1M 4M"; 16M is optional)
#     --no-baseline  skip the unloaded runs (no "p99 / unloaded p99" column then)
#     -V VARIANTS  settings of the sverbs side compared in the same boot, each
#                  with its own stock pair: NAME[:VAR=VALUE[,VAR=VALUE]] ...,
#                  e.g. "ws2 ws1:SVERBS_WINDOW_SIGNALS=1" (the first is the
#                  reference of the "variant / first variant" table)
#   after --: passed to every hol_bench run (e.g. --small-op send, -D 4, -i 500)
#
# Environment: PERF_BIN (where hol_bench is), SVERBS_VM_* (tests/vm/run-in-vm.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name=hol reps=3 secs=5 sizes="64K 1M 4M" baseline=1 variants=
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	-s) sizes=$2; shift 2 ;;
	--no-baseline) baseline=0; shift ;;
	-V) variants=$2; shift 2 ;;
	--) shift; break ;;
	-h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
extra=("$@")
perf_need_bins
[ $baseline = 1 ] && sizes="none $sizes"

out=$PERF_DIR/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nsz=$(($(wc -w <<<"$sizes") * $(wc -w <<<"${variants:-x}")))
# each run: warm-up + measured time + setup/drain (a 16M WRITE takes ~1 s)
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((reps * nsz * 2 * (${secs%.*} + 6) + 120))}
perf_meta "$tmp/meta.json" "run-hol.sh -r $reps -t $secs -s '$sizes'${variants:+ -V '$variants'} -- ${extra[*]:-}"

perf_log "$reps x {$sizes} x {off,on}, ${secs}s each, in one guest (timeout ${SVERBS_VM_TIMEOUT}s)"
rc=0
vm_run "HOL_VARIANTS='$variants' '$PERF_DIR/guest/hol-matrix.sh' $reps '$sizes' -t $secs ${extra[*]:-}" >"$tmp/runs.jsonl" || rc=$?
[ -s "$tmp/runs.jsonl" ] || perf_die "no results (guest exit status $rc)"
$PY "$PERF_DIR/summarize.py" "$name" "$tmp/runs.jsonl" --meta "$tmp/meta.json" --outdir "$out" || rc=1
$PY "$PERF_DIR/plot.py" "$out/$name.json" || perf_log "plotting failed"
perf_log "wrote $out/$name.json, $out/$name.md"
exit $rc
