#!/bin/bash
# run-insns.sh - instructions per WR (valgrind's callgrind), stock vs the
# layer's paths: load-independent, so one run is the figure.  Writes
# perf/results/<name>.{json,md}.
#
#   perf/run-insns.sh [-n NAME] [-N WRS] [-c CASES] [--no-vm] [--no-mlx5]
#     -n NAME   results name (default: insns)
#     -c CASES  the rxe cases (default "t1 ptbw mib"; also lat, pl16: see
#               perf/guest/insns.sh; each (case, mode) costs two valgrind
#               start-ups in the TCG guest, ~1.5 min)
#     -N WRS    WRs of the shorter run of each pair (default 2000)
#     --no-vm   skip the rxe part (the guest)
#     --no-mlx5 skip the mlx5 part (the host)
#
# mlx5 (on the host, no hardware): build/rdma-core/build/bin/test_mlx5_adapter
# --count MODE PATTERN N against the fake mlx5 objects, under callgrind with
# --toggle-collect='insn_*': only the post and poll calls are counted, not
# the fake HCA.  MODE stock / pt / queue / budget; PATTERN lat / burst16 /
# list16 / mib / mib1 (see the test's count_run()); the doorbells and CQEs
# per WR too.  mib1-<slice>-w<window>s<signals>: the slicing levers
# (window_slices, window_signals) on a serial wire.
# rxe (in the guest): perf/guest/insns.sh, rate_bench and perftest's
# ib_write_bw as the client, under callgrind, whole-process counts of a run
# with N and one with 2N WRs, differenced (user space only).
# Per-function inclusive (.fn) and exclusive (.self) counts of the runs:
# build/perf-insns/.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name=insns n=2000 vm=1 mlx5=1 cases='t1 ptbw mib'
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-N) n=$2; shift 2 ;;
	-c) cases=$2; shift 2 ;;
	--no-vm) vm=0; shift ;;
	--no-mlx5) mlx5=0; shift ;;
	-h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
command -v valgrind >/dev/null || perf_die "valgrind is not installed (scripts/setup.sh installs it)"
out=$PERF_DIR/results
fn=$BUILD/perf-insns
mkdir -p "$out" "$fn"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
perf_meta "$tmp/meta.json" "run-insns.sh -N $n"

if [ $mlx5 = 1 ]; then
	t=$BUILD/rdma-core/build/bin/test_mlx5_adapter
	[ -x "$t" ] || perf_die "no $t (meson compile -C $BUILD)"
	perf_log "mlx5 (fake objects, host): callgrind of insn_post/insn_poll"
	# count_one CASE PATTERN MODE K [SLICE WINDOW SIGNALS]
	count_one() {
		local c=$1 p=$2 m=$3 k=$4 ok=1 i
		shift 4
		for i in 1 2; do
			valgrind --tool=callgrind -q --toggle-collect='insn_*' \
				--callgrind-out-file="$tmp/m.$i" "$t" --count "$m" "$p" $((k * i)) "$@" \
				>"$tmp/out" 2>"$tmp/err" || ok=0
		done
		if [ $ok = 1 ]; then
			callgrind_annotate --inclusive=yes "$tmp/m.2" >"$fn/mlx5-$c-$m.fn" 2>/dev/null || true
			callgrind_annotate --auto=no --threshold=100 --inclusive=no "$tmp/m.2" >"$fn/mlx5-$c-$m.self" 2>/dev/null || true
			$PY - "$tmp/m.1" "$tmp/m.2" "$c" "$p" "$m" "$k" "$tmp/out" >>"$tmp/runs.jsonl" <<-'PYEOF'
			import json, sys
			def ir(f):
			    for l in open(f):
			        if l.startswith("totals:"):
			            return int(l.split()[1])
			a, b, c, p, m, k, out = sys.argv[1:8]
			a, b, k = ir(a), ir(b), int(k)
			wrs = k * (16 if p in ("burst16", "list16") else 1)
			# "count MODE PATTERN WRS WRs DOORBELLS doorbells CQES cqes" (2N)
			w = open(out).readline().split()
			db = int(w[5]) / int(w[3]) if len(w) > 6 and w[6] == "doorbells" else None
			cq = int(w[7]) / int(w[3]) if len(w) > 8 and w[8] == "cqes" else None
			print(json.dumps({"bench": "insns", "path": "mlx5", "case": c, "mode": m,
			                  "wrs": wrs, "ir_n": a, "ir_2n": b, "per_wr": (b - a) // wrs,
			                  "doorbells_per_wr": db, "cqes_per_wr": cq}))
			PYEOF
		else
			rc=1
			cat "$tmp/err" >&2
			printf '{"bench":"insns","path":"mlx5","case":"%s","mode":"%s","error":"count run failed"}\n' "$c" "$m" >>"$tmp/runs.jsonl"
		fi
	}
	for p in lat burst16 list16 mib; do
		modes="stock pt queue budget"
		k=$n
		[ $p = mib ] && modes="stock queue" k=$((n / 16))
		[ $p = list16 ] && modes="stock pt"
		for m in $modes; do
			count_one "$p" "$p" "$m" "$k"
		done
	done
	# the slicing levers: a 1 MiB WRITE on a serial wire (mib1: one WQE
	# executed between two polls, completions one by one as on rxe), per
	# slice size, window (slices) and signals per window
	for sl in 4 16 64; do
		for ws in 2/2 2/1 4/2; do
			count_one "mib1-${sl}k-w${ws%/*}s${ws#*/}" mib1 queue $((n / 16)) \
				$((sl * 1024)) "${ws%/*}" "${ws#*/}"
		done
	done
fi

if [ $vm = 1 ]; then
	perf_need_bins
	export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-3000}
	perf_log "rxe (guest): callgrind of rate_bench and ib_write_bw (timeout ${SVERBS_VM_TIMEOUT}s)"
	vm_run "export INSNS_OUT='$fn'; '$PERF_DIR/guest/insns.sh' $n $cases" >>"$tmp/runs.jsonl" || rc=1
fi
[ -s "$tmp/runs.jsonl" ] || perf_die "no results"
$PY "$PERF_DIR/insns.py" "$name" "$tmp/runs.jsonl" --meta "$tmp/meta.json" --outdir "$out" --fndir "$fn" || rc=1
perf_log "wrote $out/$name.json, $out/$name.md"
exit $rc
