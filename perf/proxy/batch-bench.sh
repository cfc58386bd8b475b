#!/bin/bash
# batch-bench.sh - what the service's batch endpoint pays (issue 17, part 2), on 127.0.0.1.
#
#   perf/proxy/batch-bench.sh [-r ROUNDS] [-t SECONDS] [-c CONNS] [-p PATH] [-o NAME]
#
# Two identical stacks (sverbs-compute with 1 worker, egress and ingress with 1 worker each,
# TCP channel, pipeline 1), A without and B with `batch_path = "/batch"`; the same closed-loop
# wrk load (default 64 connections, POST /matmul?n=8) on A and B alternately, ROUNDS times
# (default 5).  Per round: requests/s through the stack, and the service's CPU-seconds per
# 1,000 requests (/proc/<pid>/stat of that stack's own sverbs-compute).  Prints the medians,
# each paired ratio B/A (min..max) and writes perf/proxy/results/NAME.md (default batch).
# On a shared host the absolute figures are noise; the paired ratios are what counts.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
rounds=5 secs=5 conns=64 path="/matmul?n=8" name=batch
while [ $# -gt 0 ]; do
    case $1 in
        -r) rounds=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -c) conns=$2; shift 2 ;;
        -p) path=$2; shift 2 ;;
        -o) name=$2; shift 2 ;;
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "batch-bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v wrk > /dev/null || { echo "batch-bench.sh: wrk is not installed" >&2; exit 1; }
D=$(mktemp -d /tmp/batch-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
    wait 2> /dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A SVC_PID IN_PORT
for v in A B; do
    p_in=$(port) p_eg=$(port) p_svc=$(port)
    batch=""
    [ $v = B ] && batch='batch_path = "/batch"'
    cat > "$D/$v.toml" << CFG
log_level = "warn"
[channel]
transport = "tcp"
[ingress]
listen = "127.0.0.1:$p_in"
workers = 1
max_connections = 20000
admission_limit = 20000
[[ingress.egress]]
name = "eg"
address = "127.0.0.1:$p_eg"
[egress]
listen = "127.0.0.1:$p_eg"
workers = 1
[[upstream]]
name = "compute"
controller = "aimd"
slo_p99_ms = 2000
service = "127.0.0.1:$p_svc"
pool = $conns
pipeline = 1
$batch
[[route]]
prefix = "/"
upstream = "compute"
CFG
    "$BUILD/proxy/sverbs-compute" -l "127.0.0.1:$p_svc" -w 1 --log-level warn &
    SVC_PID[$v]=$!
    PIDS+=($!)
    "$BUILD/proxy/sverbs-proxy" -c "$D/$v.toml" --role egress > "$D/$v-egress.log" 2>&1 &
    PIDS+=($!)
    "$BUILD/proxy/sverbs-proxy" -c "$D/$v.toml" --role ingress > "$D/$v-ingress.log" 2>&1 &
    PIDS+=($!)
    IN_PORT[$v]=$p_in
done
for v in A B; do
    ok=0
    for _ in $(seq 1 300); do
        [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:${IN_PORT[$v]}/healthz")" = 200 ] && { ok=1; break; }
        sleep 0.1
    done
    [ $ok = 1 ] || { echo "batch-bench.sh: stack $v never answered 200" >&2; tail -n 5 "$D"/$v-*.log >&2; exit 1; }
done
printf 'wrk.method = "POST"\n' > "$D/post.lua"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
: > "$D/runs"
for r in $(seq 1 "$rounds"); do
    order="A B"
    [ $((r % 2)) = 0 ] && order="B A"
    for v in $order; do
        u="http://127.0.0.1:${IN_PORT[$v]}$path"
        wrk -t1 -c"$conns" -d1s -s "$D/post.lua" "$u" > /dev/null 2>&1 || true  # warm-up
        t0=$(ticks "${SVC_PID[$v]}")
        out=$(wrk -t1 -c"$conns" -d"${secs}s" --timeout 10s -s "$D/post.lua" "$u")
        t1=$(ticks "${SVC_PID[$v]}")
        reqs=$(awk '/requests in/ {print $1}' <<< "$out")
        non2xx=$(awk '/Non-2xx/ {print $NF}' <<< "$out")
        echo "$r $v $reqs ${non2xx:-0} $((t1 - t0))" >> "$D/runs"
        echo "round $r $v: $reqs requests in ${secs}s, non-2xx ${non2xx:-0}, service $((t1 - t0)) ticks" >&2
    done
done
mkdir -p "$HERE/results"
python3 - "$D/runs" "$secs" "$HZ" "$conns" "$path" "$rounds" > "$HERE/results/$name.md" << 'PY'
import statistics, sys
f, secs, hz, conns, path, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
runs = {}
for ln in open(f):
    r, v, reqs, bad, ticks = ln.split()
    n = max(1, int(reqs))
    runs.setdefault(int(r), {})[v] = (int(reqs) / secs, int(bad), int(ticks) / hz / n * 1000)
# A round counts when both sides served requests and the service used measurable CPU (ticks).
rows = [runs[r] for r in sorted(runs) if len(runs[r]) == 2 and all(runs[r][v][2] > 0 for v in "AB")]
if not rows:
    sys.exit("batch-bench.sh: no round with requests and service CPU on both sides")
def med(xs): return statistics.median(xs)
rate = {v: [x[v][0] for x in rows] for v in "AB"}
cpu = {v: [x[v][2] for x in rows] for v in "AB"}
rr = [x["B"][0] / x["A"][0] for x in rows]
cr = [x["B"][2] / x["A"][2] for x in rows]
print(f"# Batch endpoint at the service: {path}, {conns} connections, {len(rows)} alternated rounds of {secs:g} s\n")
print("A: per-request forwarding (no batch_path); B: batch_path = \"/batch\" (one stacked dgemm per group).")
print("Closed-loop wrk through ingress -> egress -> sverbs-compute, 1 worker each, 127.0.0.1; shared host.\n")
print("| | A no batch | B batch | B/A paired median (min..max) |")
print("|---|---|---|---|")
print(f"| requests/s | {med(rate['A']):.0f} | {med(rate['B']):.0f} | {med(rr):.2f}x ({min(rr):.2f}..{max(rr):.2f}) |")
print(f"| service CPU-s per 1,000 requests | {med(cpu['A']):.3f} | {med(cpu['B']):.3f} | {med(cr):.2f}x ({min(cr):.2f}..{max(cr):.2f}) |")
print(f"| non-2xx answers (sum) | {sum(x['A'][1] for x in rows)} | {sum(x['B'][1] for x in rows)} | |")
print("\nPer round (requests/s A, B; service CPU-ms per 1,000 requests A, B):\n")
for i, x in enumerate(rows, 1):
    print(f"- round {i}: {x['A'][0]:.0f}, {x['B'][0]:.0f}; {x['A'][2]*1000:.1f}, {x['B'][2]*1000:.1f}")
PY
cat "$HERE/results/$name.md"
