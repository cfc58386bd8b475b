#!/bin/bash
# guest-profile.sh - runs INSIDE the Soft-RoCE guest: where does the CPU go while wrk drives
# one target?  perf record -a -g during a wrk run, text reports into OUT.
#
#   guest-profile.sh PROXY COMPUTE OUT "TARGETS" CONNS SECONDS [WORKLOAD]
#   (run it with tests/vm/run-in-vm.sh; OUT must be a read-write dir, e.g. under build/)
#   TARGETS: any of direct tcp rdma;  WORKLOAD: echo64 (default) or matmul16
set -u
PROXY=$1 COMPUTE=$2 OUT=$3 CONNS=$5 SECS=$6 WL=${7:-echo64}
read -r -a TARGETS <<< "$4"
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$(dirname "$0")/guest-lib.sh"
D=$(mktemp -d /tmp/proxy-prof.XXXXXX)
ulimit -n 200000
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; wait 2>/dev/null' EXIT
"$COMPUTE" -l $SVC -w 1 > "$D/compute.log" 2>&1 &
PIDS+=($!)
proxy_conf tcp 18083 17003 "${PIPELINE:-64}" > "$D/tcp.toml"
proxy_conf rdma 18084 17004 "${PIPELINE:-64}" > "$D/rdma.toml"
for t in tcp rdma; do
    "$PROXY" -c "$D/$t.toml" --role egress > "$D/$t-egress.log" 2>&1 &
    PIDS+=($!)
    "$PROXY" -c "$D/$t.toml" --role ingress > "$D/$t-ingress.log" 2>&1 &
    PIDS+=($!)
done
url_of() { case $1 in direct) echo "http://$SVC" ;; tcp) echo "http://$IN:18083" ;; rdma) echo "http://$IN:18084" ;; esac; }
for t in "${TARGETS[@]}"; do
    for _ in $(seq 1 150); do
        [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$(url_of $t)/healthz")" = 200 ] && break
        sleep 0.2
    done
done
if [ "$WL" = echo64 ]; then
    printf 'wrk.method = "POST"\nwrk.body = string.rep("x", 64)\n' > "$D/s.lua"
    path=/echo
else
    printf 'wrk.method = "POST"\n' > "$D/s.lua"
    path="/matmul?n=16"
fi
for t in "${TARGETS[@]}"; do
    u="$(url_of $t)$path"
    wrk -t2 -c"$CONNS" -d1s -s "$D/s.lua" "$u" > /dev/null 2>&1
    # perf starts slowly under TCG: it runs wrk itself, so the samples cover the run.
    perf record -a -g -o "$D/$t.data" -- wrk -t2 -c"$CONNS" -d"${SECS}s" --latency \
        -s "$D/s.lua" "$u" > "$OUT/$t-wrk.txt" 2> "$OUT/$t-perf.log"
    perf report -i "$D/$t.data" --no-children --sort comm --stdio 2> /dev/null | grep -v '^$' | head -30 > "$OUT/$t-comm.txt"
    perf report -i "$D/$t.data" --no-children --sort comm,dso,sym --stdio -g none 2> /dev/null | grep -v '^$' | head -120 > "$OUT/$t-sym.txt"
    perf report -i "$D/$t.data" --children --sort comm,sym --stdio -g none 2> /dev/null | grep -v '^$' | head -150 > "$OUT/$t-children.txt"
    perf report -i "$D/$t.data" --no-children --sort comm,dso --stdio -g none 2> /dev/null | grep -v '^$' | head -60 > "$OUT/$t-dso.txt"
    [ $t != direct ] && curl -s "$(imet_of $t)/metrics" | grep -E '^sverbs_proxy_(batch_size_(sum|count)|channel_frames)' > "$OUT/$t-metrics.txt"
    echo "profiled $t: $(grep Requests/sec "$OUT/$t-wrk.txt")" >&2
done
