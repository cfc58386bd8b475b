#!/bin/bash
# run-proxy-bench.sh - sverbs-proxy (TCP and RDMA channel) vs nginx and haproxy as reverse
# proxies in front of one sverbs-compute, and the backend directly (the ceiling), with wrk,
# all in ONE Soft-RoCE guest boot.  Writes perf/proxy/results/<name>.json and <name>.md
# (ratios to nginx and to direct; medians over rounds) and keeps wrk's raw output lines.
#
#   perf/proxy/run-proxy-bench.sh [-n NAME] [-r ROUNDS] [-t SECONDS] [-T "TARGETS"]
#                                 [-w "WORKLOADS"] [-c "CONNS"] [-B DIR] [-p DEPTH]
#     -n NAME       results name (default: proxy)
#     -r ROUNDS     repetitions of the whole matrix (default: 2; medians are reported)
#     -t SECONDS    measured seconds per wrk run, after a 1 s warm-up (default: 3)
#     -T TARGETS    any of: direct nginx haproxy tcp rdma (default: all)
#     -w WORKLOADS  any of: echo64 matmul16 matmul64 (default: all)
#     -c CONNS      connection counts (default: "64 256 1024")
#     -B DIR        also run a previous sverbs-proxy build (DIR/sverbs-proxy) side by side:
#                   targets tcp-base and rdma-base (added to -T; its config has no `pipeline`)
#     -p DEPTH      egress `pipeline` for sverbs-proxy (default 64; 1 = no pipelining)
#
# Everything in the guest shares its 2 vCPUs (TCG): wrk (-t2), the proxy, the backend and
# the rxe kernel threads.  Read the numbers as ratios measured side by side, not as absolute
# figures.  Environment: SVERBS_BUILD (default <repo>/build), SVERBS_VM_* (run-in-vm.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
PREFIX=$BUILD/prefix
PY=/usr/bin/python3
RUNNER=${PERF_VM_RUNNER:-$REPO/tests/vm/run-in-vm.sh}

name=proxy rounds=2 secs=3 base="" pipeline=64
targets="direct nginx haproxy tcp rdma"
workloads="echo64 matmul16 matmul64"
conns="64 256 1024"
while [ $# -gt 0 ]; do
    case $1 in
        -n) name=$2; shift 2 ;;
        -r) rounds=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -T) targets=$2; shift 2 ;;
        -w) workloads=$2; shift 2 ;;
        -c) conns=$2; shift 2 ;;
        -B) base=$(cd "$2" && pwd -P); shift 2 ;;
        -p) pipeline=$2; shift 2 ;;
        -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-proxy-bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for b in sverbs-proxy sverbs-compute; do
    [ -x "$BUILD/proxy/$b" ] || { echo "no $BUILD/proxy/$b: ninja -C $BUILD proxy/$b" >&2; exit 1; }
done
for p in nginx haproxy wrk curl; do
    command -v $p > /dev/null || { echo "$p is not installed (apt-get install $p)" >&2; exit 1; }
done
if [ -n "$base" ]; then
    [ -x "$base/sverbs-proxy" ] || { echo "no $base/sverbs-proxy" >&2; exit 1; }
    targets="$targets tcp-base rdma-base"
fi
[ -r "$PREFIX/env.sh" ] || { echo "no $PREFIX/env.sh: build rdma-core first" >&2; exit 1; }

out=$HERE/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=$(($(wc -w <<< "$targets") * $(wc -w <<< "$workloads") * $(wc -w <<< "$conns") * rounds))
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((n * (secs + 8) + 180))}
export SVERBS_VM_MEM=${SVERBS_VM_MEM:-2G}
echo "run-proxy-bench.sh: $n wrk runs of ${secs}s in one guest (timeout ${SVERBS_VM_TIMEOUT}s)" >&2
cat > "$tmp/meta.json" << EOF
{"command": "run-proxy-bench.sh -r $rounds -t $secs -T '$targets' -w '$workloads' -c '$conns' -p $pipeline${base:+ -B $base}",
 "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "git": "$(git -C "$REPO" rev-parse --short HEAD 2> /dev/null || echo unknown)",
 "host_cpus": $(nproc), "host_load": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "guest": "QEMU TCG, ${SVERBS_VM_SMP:-2} vCPUs, ${SVERBS_VM_MEM}",
 "nginx": "$(nginx -v 2>&1 | sed 's/.*\///')", "haproxy": "$(haproxy -v 2> /dev/null | head -1 | awk '{print $3}')",
 "wrk": "wrk -t2 -cN -d${secs}s --latency --timeout 10s (1 s warm-up before each run)"}
EOF
rc=0
"$RUNNER" ". '$PREFIX/env.sh'; bash '$HERE/guest-bench.sh' '$BUILD/proxy/sverbs-proxy' '$BUILD/proxy/sverbs-compute' $rounds $secs '$targets' '$workloads' '$conns' '$pipeline' '${base:+$base/sverbs-proxy}'" \
    > "$tmp/runs.jsonl" || rc=$?
[ -s "$tmp/runs.jsonl" ] || { echo "run-proxy-bench.sh: no results (guest exit status $rc)" >&2; exit 1; }
$PY "$HERE/summarize.py" "$tmp/runs.jsonl" --meta "$tmp/meta.json" --json "$out/$name.json" --md "$out/$name.md"
echo "run-proxy-bench.sh: wrote $out/$name.json and $out/$name.md (guest status $rc)" >&2
exit $rc
