#!/bin/bash
# fair-bench.sh - sverbs-proxy against nginx and haproxy on equal terms (issue 17, part 3),
# one command: boots ONE Soft-RoCE guest and runs guest-fair.sh there.
#
#   perf/proxy/fair-bench.sh [-n NAME] [-r ROUNDS] [-t SECONDS] [-W WORKERS] [-T TARGETS]
#                            [-w WORKLOADS] [-c CONNS] [-L LOADS]
#
# Defaults: 5 rounds (alternated order) of 5 s, 1 worker per proxy pinned to the same vCPU,
# targets "direct nginx haproxy tcp-p1 tcp-p64 rdma-p1", workloads "echo64 matmul8",
# connections "64 256", open-loop loads "0.25 0.5 0.75 0.9" of nginx's median maximum.
# Writes perf/proxy/results/NAME.jsonl (every run) and NAME.md (medians, spread, ratios to
# nginx and to direct, CPU-seconds per 1,000 requests, open-loop p50/p99/p99.9).
# Figures are only meaningful on a quiet host (see docs/proxy.md, "Benchmark").
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
PREFIX=$BUILD/prefix
RUNNER=${PERF_VM_RUNNER:-$REPO/tests/vm/run-in-vm.sh}
name=fair rounds=5 secs=5 workers=1
targets="direct nginx haproxy tcp-p1 tcp-p64 rdma-p1"
workloads="echo64 matmul8"
conns="64 256"
loads="0.25 0.5 0.75 0.9"
while [ $# -gt 0 ]; do
    case $1 in
        -n) name=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -W) workers=$2; shift 2 ;;
        -T) targets=$2; shift 2 ;;
        -w) workloads=$2; shift 2 ;;
        -c) conns=$2; shift 2 ;;
        -L) loads=$2; shift 2 ;;
        -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "fair-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for b in sverbs-proxy sverbs-compute sverbs-openloop; do
    [ -x "$BUILD/proxy/$b" ] || { echo "no $BUILD/proxy/$b" >&2; exit 1; }
done
for p in nginx haproxy wrk curl taskset; do
    command -v $p > /dev/null || { echo "$p is not installed" >&2; exit 1; }
done
[ "$rounds" -ge 5 ] || echo "fair-bench.sh: warning: $rounds rounds (< 5): spread not meaningful" >&2
out=$HERE/results
mkdir -p "$out"
nt=$(wc -w <<< "$targets") nw=$(wc -w <<< "$workloads") nc=$(wc -w <<< "$conns") nl=$(wc -w <<< "$loads")
n=$((nt * nw * nc * rounds * (1 + nl)))
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((n * (secs + 6) + 300))}
export SVERBS_VM_MEM=${SVERBS_VM_MEM:-2G}
echo "fair-bench.sh: $n runs of ${secs}s in one guest (timeout ${SVERBS_VM_TIMEOUT}s)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
"$RUNNER" ". '$PREFIX/env.sh'; bash '$HERE/guest-fair.sh' '$BUILD/proxy/sverbs-proxy' '$BUILD/proxy/sverbs-compute' $rounds $secs $workers '$targets' '$workloads' '$conns' '$loads'" \
    > "$tmp/runs.jsonl" || rc=$?
grep '^{' "$tmp/runs.jsonl" > "$out/$name.jsonl" || { echo "fair-bench.sh: no results (guest status $rc)" >&2; exit 1; }
/usr/bin/python3 "$HERE/fair_summarize.py" "$out/$name.jsonl" \
    --meta "fair-bench.sh -r $rounds -t $secs -W $workers -T '$targets' -w '$workloads' -c '$conns' -L '$loads'; $(date -u +%FT%TZ); git $(git -C "$REPO" rev-parse --short HEAD); host load $(cut -d' ' -f1-3 /proc/loadavg)" \
    > "$out/$name.md"
echo "fair-bench.sh: wrote $out/$name.jsonl and $out/$name.md (guest status $rc)" >&2
