#!/bin/bash
# Integration test of sverbs-proxy over the TCP transport, on 127.0.0.1 only.
# usage: run.sh <sverbs-proxy> <sverbs-compute>     (env WRK=/path/to/wrk optional)
# Checks every status the proxy promises (200/400/404/413/431/502/503/504), SIGHUP
# reload, kill-and-restart of the egress and of the compute service, a short bounded
# wrk run without errors, and a graceful SIGTERM drain.
set -u
PROXY=${1:?sverbs-proxy}
COMPUTE=${2:?sverbs-compute}
WRK=${WRK:-$(command -v wrk || true)}
. "$(dirname "${BASH_SOURCE[0]}")/wait.sh"
DIR=$(mktemp -d /tmp/sverbs-proxy-int.XXXXXX)
FAILS=0
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$FAILS" -ne 0 ]; then
        for f in "$DIR"/*.log; do echo "---- $f"; tail -20 "$f"; done
    fi
    rm -rf "$DIR"
    [ "${BASE:-0}" -eq 0 ] || rm -rf "${PORT_CLAIMS:?}/$BASE"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

port_free() { ! (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
# Five ports from a base below the kernel's ephemeral range (32768 up:
# curl's and the proxies' outgoing connections take source ports there),
# claimed with an atomic mkdir so that the proxy-int tests meson runs in
# parallel never pick the same base (a claim whose owner is gone is stale).
PORT_CLAIMS=/tmp/sverbs-proxy-ports
claim_base() {
    local d=$PORT_CLAIMS/$1 owner
    mkdir -p "$PORT_CLAIMS"
    if ! mkdir "$d" 2>/dev/null; then
        owner=$(cat "$d/pid" 2>/dev/null || true)
        [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null || return 1
        rm -rf "$d"
        mkdir "$d" 2>/dev/null || return 1
    fi
    echo $$ > "$d/pid"
}
pick_base() {
    for _ in $(seq 1 200); do
        local b=$((20000 + (RANDOM % 1200) * 10))
        port_free $b && port_free $((b + 1)) && port_free $((b + 2)) &&
            port_free $((b + 3)) && port_free $((b + 4)) || continue
        claim_base $b || continue
        echo $b
        return
    done
    echo 0
}
BASE=$(pick_base)
[ "$BASE" -ne 0 ] || { echo "no free ports"; exit 1; }
P_IN=$BASE
P_EG=$((BASE + 1))
P_MET=$((BASE + 2))
P_SVC=$((BASE + 3))
P_IMET=$((BASE + 4))

write_config() {  # $1 = admission_limit
    cat > "$DIR/proxy.toml" <<TOML
log_level = "info"

[channel]
transport = "tcp"
credits = 16
reconnect_min_ms = 20
reconnect_max_ms = 200
heartbeat_ms = 1000 # 200 ms: "peer silent for 3 heartbeats" on a loaded host (seen at load 30)

[ingress]
listen = "127.0.0.1:$P_IN"
workers = 1
max_header_bytes = 4096
max_body_bytes = 65536
admission_limit = $1
request_timeout_ms = 10000
access_log = "$DIR/access.log"
metrics_listen = "127.0.0.1:$P_IMET"

[[ingress.egress]]
name = "local"
address = "127.0.0.1:$P_EG"
connections = 2

[egress]
listen = "127.0.0.1:$P_EG"
workers = 1
metrics_listen = "127.0.0.1:$P_MET"

[[upstream]]
name = "compute"
class = "latency"
slo_p99_ms = 2000   # correctness test on a shared host: no SLO shedding wanted here
controller = "aimd" # the pipelining check below needs the batches of the AIMD rule
service = "127.0.0.1:$P_SVC"
pool = 2
pipeline = 8
# held requests (503, 504 and pipelining below) wait at the stopped service:
# 5 s leaves a loaded host time to start 20 curls before the first times out
service_timeout_ms = 5000
service_connect_timeout_ms = 500

[[route]]
prefix = "/matmul"
upstream = "compute"

[[route]]
prefix = "/echo"
upstream = "compute"

[[route]]
prefix = "/healthz"
upstream = "compute"
TOML
}

start_compute() { "$COMPUTE" -l 127.0.0.1:$P_SVC -w 1 >> "$DIR/compute.log" 2>&1 & COMPUTE_PID=$!; PIDS+=($!); }
start_egress() { "$PROXY" -c "$DIR/proxy.toml" --role egress >> "$DIR/egress.log" 2>&1 & EGRESS_PID=$!; PIDS+=($!); }
start_ingress() { "$PROXY" -c "$DIR/proxy.toml" --role ingress >> "$DIR/ingress.log" 2>&1 & INGRESS_PID=$!; PIDS+=($!); }

URL=http://127.0.0.1:$P_IN
code() { curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$@"; }

healthz_200() { [ "$(code --max-time 2 "$URL/healthz")" = 200 ]; }
# wait_200 WHAT: a request through the proxy answers 200 within 30 s
wait_200() { wait_until 60 "$1: 200 from /healthz" healthz_200; }
# Raw request over bash /dev/tcp; prints the status line's code.
raw_status() {
    exec 5<>/dev/tcp/127.0.0.1/$P_IN || { echo 000; return; }
    printf '%b' "$1" >&5
    local line
    IFS= read -r -t 5 line <&5
    exec 5<&-
    echo "$line" | awk '{print $2}'
}
metric() {  # $1 = metric line prefix, prints value (0 if absent)
    curl -s --max-time 5 "http://127.0.0.1:$P_IMET/metrics" | awk -v m="$1" 'index($0, m) == 1 {print $NF; found=1} END {if (!found) print 0}'
}
inflight_is() { [ "$(metric 'sverbs_proxy_inflight_requests{role="ingress"}')" = "$1" ]; }

write_config 1
"$PROXY" -c "$DIR/proxy.toml" --check > /dev/null || fail "--check rejects the test config"
start_compute
start_egress
start_ingress
wait_200 "start" || { fail "proxy never answered 200"; exit 1; }
pass "started (ingress :$P_IN, egress :$P_EG, compute :$P_SVC)"

# --- 200
[ "$(curl -s --max-time 5 -d 'hello sverbs' "$URL/echo")" = "hello sverbs" ] && pass "200 echo body" || fail "echo body"
# the checksum the service must answer for n=16 without a body, computed here independently:
# A[i] = i % 7 + 1, B[i] = (i % 5 + 1) / 2 (row-major, proxy/compute/main.cpp), sum of A x B
MATMUL16=$(python3 -c 'n=16; a=[i%7+1 for i in range(n*n)]; b=[(i%5+1)/2 for i in range(n*n)]; print("%g" % sum(a[i*n+k]*b[k*n+j] for i in range(n) for j in range(n) for k in range(n)))')
out=$(curl -s --max-time 10 -X POST "$URL/matmul?n=16")
[ "$out" = "{\"n\":16,\"checksum\":$MATMUL16}" ] && pass "200 matmul: $out" || fail "matmul answered '$out', want checksum $MATMUL16"
# binary payload: 2 x 2x2 float64 matrices (identity x M = M)
printf '\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x08\x40\x00\x00\x00\x00\x00\x00\x10\x40\x00\x00\x00\x00\x00\x00\x14\x40' > "$DIR/m.bin"
out=$(curl -s --max-time 10 --data-binary @"$DIR/m.bin" "$URL/matmul?n=2")
[ "$out" = '{"n":2,"checksum":14}' ] && pass "200 matmul with payload" || fail "matmul payload answered '$out'"
[ "$(code "$URL/matmul?n=0")" = 400 ] && pass "400 from the service passes through" || fail "service 400"
# HEAD keeps the service's Content-Length; an HTTP/1.0 keep-alive is confirmed
hdrs=$(curl -s -I --max-time 5 "$URL/healthz" | tr -d '\r')
echo "$hdrs" | grep -qi '^Content-Length: 3$' && pass "HEAD: Content-Length of the GET (3)" || fail "HEAD headers: $hdrs"
hdrs=$(curl -s -0 -H 'Connection: keep-alive' -D - -o /dev/null --max-time 5 "$URL/healthz" | tr -d '\r')
echo "$hdrs" | grep -qi '^Connection: keep-alive$' && pass "HTTP/1.0 keep-alive confirmed" || fail "HTTP/1.0 keep-alive: $hdrs"

# --- 404, 400, 431, 413
[ "$(code "$URL/no/such/route")" = 404 ] && pass "404 unknown route" || fail "404"
[ "$(raw_status 'BLAH / HTTP/1.1\r\nHost: x\r\n\r\n')" = 400 ] && pass "400 malformed request" || fail "400"
[ "$(raw_status 'GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n')" = 400 ] && pass "400 conflicting Content-Length" || fail "400 (CL)"
big=$(head -c 5000 /dev/zero | tr '\0' a)
[ "$(code -H "X-Big: $big" "$URL/echo")" = 431 ] && pass "431 header over limit" || fail "431"
head -c 100000 /dev/zero > "$DIR/big.bin"
[ "$(code --data-binary @"$DIR/big.bin" "$URL/echo")" = 413 ] && pass "413 body over limit" || fail "413"
head -c 60000 /dev/urandom > "$DIR/ok.bin"
curl -s --max-time 10 --data-binary @"$DIR/ok.bin" -o "$DIR/ok.out" "$URL/echo"
cmp -s "$DIR/ok.bin" "$DIR/ok.out" && pass "200 60 KB body round trip" || fail "60 KB echo differs"

# --- 503 (admission limit 1): hold one request in flight by stopping the service.
kill -STOP $COMPUTE_PID
curl -s -o "$DIR/held.out" --max-time 20 -w '%{http_code}' -d held "$URL/echo" > "$DIR/held.code" &
HELD=$!
wait_until 20 "the held request in flight" inflight_is 1 || fail "request not held at the stopped service"
hdrs=$(curl -s -D - -o /dev/null --max-time 5 -d x "$URL/echo")
echo "$hdrs" | head -1 | grep -q ' 503 ' && echo "$hdrs" | grep -qi '^Retry-After: 1' && pass "503 with Retry-After over the admission limit" || fail "503: $(echo "$hdrs" | head -1)"
kill -CONT $COMPUTE_PID
wait $HELD
# The held request either completed (200) or hit the 5 s service timeout (504) first.
held=$(cat "$DIR/held.code")
{ [ "$held" = 200 ] || [ "$held" = 504 ]; } && pass "held request answered ($held)" || fail "held request got $held"

# --- SIGHUP reload: lift the admission limit
write_config 1000
kill -HUP $INGRESS_PID
wait_until 20 "reload logged" grep -q "configuration reloaded" "$DIR/ingress.log" && pass "SIGHUP reload" || fail "no reload logged"
kill -STOP $COMPUTE_PID
curl -s -o /dev/null --max-time 20 -d a "$URL/echo" &
A=$!
wait_until 20 "request a in flight" inflight_is 1 || fail "request a not held at the stopped service"
c=$(code --max-time 20 -d b "$URL/echo")
# Second request accepted (no 503) and, with the service stopped, ends in 504 from the egress.
[ "$c" = 504 ] && pass "504 service timeout, admission limit lifted by reload" || fail "after reload got $c"
kill -CONT $COMPUTE_PID
wait $A
wait_200 "SIGCONT" || fail "no recovery after SIGCONT"

# --- pipelining to the service (pool = 2, pipeline = 8): 20 requests held while the service
# is stopped, then released; every client gets its own body back, and the egress wrote
# fewer times than it sent requests.
w0=$(curl -s --max-time 5 "http://127.0.0.1:$P_MET/metrics" | awk '/^sverbs_proxy_service_writes_total/ {print $NF}')
r0=$(curl -s --max-time 5 "http://127.0.0.1:$P_MET/metrics" | awk '/^sverbs_proxy_service_requests_total/ {print $NF}')
kill -STOP $COMPUTE_PID
PIPE=()
for i in $(seq 1 20); do
    curl -s --max-time 20 -d "pipelined-$i-$RANDOM$RANDOM" -o "$DIR/pipe-$i.out" -w '%{http_code}' "$URL/echo" > "$DIR/pipe-$i.code" &
    PIPE+=($!)
done
wait_until 30 "20 pipelined requests in flight" inflight_is 20 || fail "20 requests not held at the stopped service"
kill -CONT $COMPUTE_PID
wait "${PIPE[@]}"
bad=0
for i in $(seq 1 20); do
    [ "$(cat "$DIR/pipe-$i.code")" = 200 ] && grep -q "^pipelined-$i-[0-9]*$" "$DIR/pipe-$i.out" || bad=$((bad + 1))
done
w1=$(curl -s --max-time 5 "http://127.0.0.1:$P_MET/metrics" | awk '/^sverbs_proxy_service_writes_total/ {print $NF}')
r1=$(curl -s --max-time 5 "http://127.0.0.1:$P_MET/metrics" | awk '/^sverbs_proxy_service_requests_total/ {print $NF}')
[ "$bad" = 0 ] && pass "20 pipelined requests, each answered with its own body" || fail "$bad of 20 pipelined requests wrong"
[ $((r1 - r0)) -ge 20 ] && [ $((w1 - w0)) -lt $((r1 - r0)) ] && pass "pipelined: $((r1 - r0)) requests in $((w1 - w0)) writes" || fail "no pipelining: $((r1 - r0)) requests, $((w1 - w0)) writes"

# --- 502: compute service down, then back
kill -9 $COMPUTE_PID; wait $COMPUTE_PID 2>/dev/null
c=$(code "$URL/echo")
[ "$c" = 502 ] && pass "502 service down" || fail "service down gave $c"
start_compute
wait_200 "compute restart" && pass "recovered after compute restart" || fail "no recovery after compute restart"

# --- 502: egress (channel) lost, then back
kill -9 $EGRESS_PID; wait $EGRESS_PID 2>/dev/null
c=$(code "$URL/echo")
[ "$c" = 502 ] && pass "502 channel lost" || fail "egress down gave $c"
start_egress
wait_200 "egress restart" && pass "recovered after egress restart" || fail "no recovery after egress restart"

# --- metrics
m=$(curl -s --max-time 5 "http://127.0.0.1:$P_IMET/metrics")
for name in sverbs_proxy_requests_total sverbs_proxy_batch_size_bucket sverbs_proxy_queue_delay_seconds_bucket \
            sverbs_proxy_channel_bytes_sent_total sverbs_proxy_channel_credits_available sverbs_proxy_batch_size_target; do
    echo "$m" | grep -q "^$name" || fail "metric $name missing"
done
echo "$m" | grep -q 'sverbs_proxy_responses_total{role="ingress",code="502"}' && pass "metrics exported" || fail "502 not counted"
curl -s --max-time 5 "http://127.0.0.1:$P_MET/metrics" | grep -q '^sverbs_proxy_service_requests_total{role="egress"}' && pass "egress metrics" || fail "egress metrics"
[ -s "$DIR/access.log" ] && grep -q '"POST /echo" 200' "$DIR/access.log" && pass "access log" || fail "access log"

# --- wrk smoke run (bounded: 2 s, 16 connections), no errors
if [ -n "$WRK" ]; then
    "$WRK" -t1 -c16 -d2s "$URL/echo" > "$DIR/wrk.out" 2>&1
    reqs=$(awk '/requests in/ {print $1}' "$DIR/wrk.out")
    if grep -q -e 'Non-2xx' -e 'Socket errors' "$DIR/wrk.out" || [ -z "$reqs" ] || [ "$reqs" -le 0 ]; then
        fail "wrk: $(cat "$DIR/wrk.out")"
    else
        pass "wrk smoke: $reqs requests, no errors"
    fi
else
    echo "skip: wrk not installed"
fi

# --- graceful drain
kill -TERM $INGRESS_PID
if ! wait_until 30 "ingress exit" gone $INGRESS_PID; then fail "ingress did not exit on SIGTERM"; else
    wait $INGRESS_PID; rc=$?
    [ $rc -eq 0 ] && pass "SIGTERM drained, exit 0" || fail "ingress exit code $rc"
fi
kill -TERM $EGRESS_PID
wait_until 30 "egress exit" gone $EGRESS_PID && pass "egress drained" || fail "egress did not exit on SIGTERM"

echo "failures: $FAILS"
[ "$FAILS" -eq 0 ]
