#!/bin/bash
# slo-step.sh - the SLO controller under a load step, on 127.0.0.1 (issue 17, part 2).
#
#   perf/proxy/slo-step.sh [-s "RATE:SECONDS,..."] [-p PATH] [-o NAME] [--slo MS]
#
# Starts sverbs-compute (1 worker), an egress and an ingress (TCP channel, controller =
# "slo"), offers the step load with sverbs-openloop (default 200/s for 4 s, 1500/s for 4 s,
# 200/s for 4 s on /matmul?n=8) and samples the ingress's /metrics every 100 ms: the
# controller's batch size target, the model S(b) = alpha + beta b and arrival rate, the
# window p99 and the requests shed (503).  Writes perf/proxy/results/NAME.csv,
# NAME-latency.csv and NAME.png (matplotlib).  On a shared or loaded CPU the figures are
# noise; the plot shows what the controller does, not what the proxy can do.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
PY=/usr/bin/python3
steps="200:4,1500:4,200:4" path="/matmul?n=8" name=slo-step slo=20
while [ $# -gt 0 ]; do
    case $1 in
        -s) steps=$2; shift 2 ;;
        -p) path=$2; shift 2 ;;
        -o) name=$2; shift 2 ;;
        --slo) slo=$2; shift 2 ;;
        -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "slo-step.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
D=$(mktemp -d /tmp/slo-step.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
    wait 2> /dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT
port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
P_IN=$(port) P_EG=$(port) P_SVC=$(port) P_MET=$(port)
{
    echo 'log_level = "warn"'
    echo '[channel]'
    echo 'transport = "tcp"'
    echo '[ingress]'
    echo "listen = \"127.0.0.1:$P_IN\""
    echo 'workers = 1'
    echo "metrics_listen = \"127.0.0.1:$P_MET\""
    echo 'admission_limit = 100000'
    echo '[[ingress.egress]]'
    echo 'name = "eg"'
    echo "address = \"127.0.0.1:$P_EG\""
    echo '[egress]'
    echo "listen = \"127.0.0.1:$P_EG\""
    echo 'workers = 1'
    echo '[[upstream]]'
    echo 'name = "compute"'
    echo 'controller = "slo"'
    echo "slo_p99_ms = $slo"
    echo 'max_batch = 64'
    echo "service = \"127.0.0.1:$P_SVC\""
    echo 'pipeline = 64'
    echo '[[route]]'
    echo 'prefix = "/"'
    echo 'upstream = "compute"'
} > "$D/p.toml"
"$BUILD/proxy/sverbs-compute" -l "127.0.0.1:$P_SVC" -w 1 > "$D/c.log" 2>&1 &
PIDS+=($!)
"$BUILD/proxy/sverbs-proxy" -c "$D/p.toml" --role egress > "$D/e.log" 2>&1 &
PIDS+=($!)
"$BUILD/proxy/sverbs-proxy" -c "$D/p.toml" --role ingress > "$D/i.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P_IN/healthz")" = 200 ] && break
    sleep 0.1
done
mkdir -p "$HERE/results"
csv=$HERE/results/$name.csv
lat=$HERE/results/$name-latency.csv
png=$HERE/results/$name.png
echo "t_s,target,alpha_ms,beta_ms,rate,window_p99_ms,shed" > "$csv"
sample() {
    local t0 now
    t0=$(date +%s.%N)
    while true; do
        now=$(date +%s.%N)
        curl -s -m 1 "http://127.0.0.1:$P_MET/metrics" | awk -v t="$(echo "$now - $t0" | bc)" '
            /^sverbs_proxy_batch_size_target\{upstream="compute"/ {tg = $NF}
            /^sverbs_proxy_slo_model\{.*param="alpha"/ {a = $NF * 1000}
            /^sverbs_proxy_slo_model\{.*param="beta"/ {b = $NF * 1000}
            /^sverbs_proxy_slo_model\{.*param="rate"/ {r = $NF}
            /^sverbs_proxy_batch_window_p99_seconds\{upstream="compute"/ {p = $NF * 1000}
            /^sverbs_proxy_slo_shed_total\{upstream="compute"/ {s = $NF}
            END {printf "%.2f,%s,%s,%s,%s,%s,%s\n", t, tg + 0, a + 0, b + 0, r + 0, p + 0, s + 0}'
        sleep 0.1
    done
}
sample >> "$csv" &
SAMPLER=$!
PIDS+=($SAMPLER)
"$BUILD/proxy/sverbs-openloop" "http://127.0.0.1:$P_IN$path" --method POST --steps "$steps" \
    --connections 64 --series "$lat" --json "$D/ol.json" || true
kill "$SAMPLER" 2> /dev/null || true
cat "$D/ol.json"
echo
$PY "$HERE/slo_plot.py" "$csv" "$lat" "$png" "$steps" "$slo"
