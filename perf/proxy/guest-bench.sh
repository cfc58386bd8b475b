#!/bin/bash
# guest-bench.sh - runs INSIDE the Soft-RoCE guest (started by run-proxy-bench.sh).
#
#   guest-bench.sh PROXY COMPUTE ROUNDS SECONDS "TARGETS" "WORKLOADS" "CONNS" [PIPELINE [BASE]]
#
# One sverbs-compute (10.77.0.2:19000, 1 worker) behind every target, all started once:
#   direct  the backend itself (ceiling)                          10.77.0.2:19000
#   nginx   nginx 1.22, 1 worker, upstream keepalive pool          10.77.0.1:18081
#   haproxy haproxy, 1 thread, http-reuse always                   10.77.0.1:18082
#   tcp     sverbs-proxy ingress (1 worker) -> TCP channel -> egress (1 worker)   :18083
#   rdma    the same over the RDMA channel (ingress on rxe0, egress on rxe1)      :18084
#   tcp-base, rdma-base  the same with the BASE binary (a previous build)  :18085 / :18086
# sverbs-proxy's egress pipelines up to PIPELINE requests per service connection (default 64)
# and its ingress keeps up to 8 batches in flight before waiting to fill one
# (max_inflight_batches; the base build runs with its defaults: no pipelining, 2).
# For every round, workload and connection count the targets run back to back (so a
# change of the host's load hits all of them alike), each `wrk -t2 -cN -dSs --latency`
# after a 1 s warm-up.  One JSON line per run on stdout; progress on stderr.
set -u
PROXY=$1 COMPUTE=$2 ROUNDS=$3 SECS=$4
read -r -a TARGETS <<< "$5"
read -r -a WORKLOADS <<< "$6"
read -r -a CONNS <<< "$7"
PIPELINE=${8:-64} BASE=${9:-}
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$(dirname "$0")/guest-lib.sh"
D=$(mktemp -d /tmp/proxy-bench.XXXXXX)
log() { echo "guest-bench: $*" >&2; }
ulimit -n 200000 || log "cannot raise ulimit -n"
ulimit -c 0
sysctl -qw net.ipv4.ip_local_port_range="10000 65000" net.core.somaxconn=8192 \
    net.ipv4.tcp_max_syn_backlog=8192 2> /dev/null || true
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; wait 2>/dev/null' EXIT

# ---------------------------------------------------------------- backend + proxies
"$COMPUTE" -l $SVC -w 1 > "$D/compute.log" 2>&1 &
PIDS+=($!)

nginx_conf "$D/nginx" off 1 256
nginx -p "$D/nginx" -c "$D/nginx/nginx.conf" > "$D/nginx/stdout.log" 2>&1 &
PIDS+=($!)

cat > "$D/haproxy.cfg" << EOF
global
    nbthread 1
    maxconn 20000
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    maxconn 20000
frontend fe
    bind $IN:18082
    default_backend be
backend be
    server compute $SVC maxconn 1024
EOF
haproxy -f "$D/haproxy.cfg" -db > "$D/haproxy.log" 2>&1 &
PIDS+=($!)

proxy_conf tcp 18083 17003 "$PIPELINE" > "$D/tcp.toml"
proxy_conf rdma 18084 17004 "$PIPELINE" > "$D/rdma.toml"
proxy_conf tcp 18085 17005 "" base > "$D/tcp-base.toml"
proxy_conf rdma 18086 17006 "" base > "$D/rdma-base.toml"
for t in tcp rdma ${BASE:+tcp-base rdma-base}; do
    bin=$PROXY
    case $t in *-base) bin=$BASE ;; esac
    "$bin" -c "$D/$t.toml" --role egress > "$D/$t-egress.log" 2>&1 &
    PIDS+=($!)
    "$bin" -c "$D/$t.toml" --role ingress > "$D/$t-ingress.log" 2>&1 &
    PIDS+=($!)
done

url_of() {
    case $1 in
        direct) echo "http://$SVC" ;;
        nginx) echo "http://$IN:18081" ;;
        haproxy) echo "http://$IN:18082" ;;
        tcp) echo "http://$IN:18083" ;;
        rdma) echo "http://$IN:18084" ;;
        tcp-base) echo "http://$IN:18085" ;;
        rdma-base) echo "http://$IN:18086" ;;
    esac
}
for t in "${TARGETS[@]}"; do
    u=$(url_of "$t")
    ok=0
    for _ in $(seq 1 150); do
        [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$u/healthz")" = 200 ] && {
            ok=1
            break
        }
        sleep 0.2
    done
    [ $ok = 1 ] || {
        log "$t ($u) never answered 200"
        tail -n 20 "$D"/*.log "$D"/nginx/*.log >&2
        exit 1
    }
done
log "all targets answer: ${TARGETS[*]}"

# ---------------------------------------------------------------- workloads
# wrk scripts: POST with a fixed body.
printf 'wrk.method = "POST"\nwrk.body = string.rep("x", 64)\nwrk.headers["Content-Type"] = "application/octet-stream"\n' > "$D/echo64.lua"
printf 'wrk.method = "POST"\n' > "$D/post.lua"
path_of() {
    case $1 in
        echo64) echo "/echo" ;;
        matmul16) echo "/matmul?n=16" ;;
        matmul64) echo "/matmul?n=64" ;;
    esac
}
lua_of() { case $1 in echo64) echo "$D/echo64.lua" ;; *) echo "$D/post.lua" ;; esac; }

# wrk's text -> one JSON object
to_json() {  # target workload conns round file
    /usr/bin/python3 - "$@" << 'PY'
import json, re, sys
t, w, c, r, f = sys.argv[1:6]
s = open(f).read()
def ms(v, unit):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]
lat = {}
for p, v, u in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", s, re.M):
    lat[p] = ms(v, u)
rps = re.search(r"Requests/sec:\s+([\d.]+)", s)
reqs = re.search(r"(\d+) requests in", s)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", s)
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", s)
print(json.dumps({
    "target": t, "workload": w, "conns": int(c), "round": int(r),
    "rps": float(rps.group(1)) if rps else None,
    "requests": int(reqs.group(1)) if reqs else 0,
    "p50_ms": lat.get("50"), "p99_ms": lat.get("99"),
    "non2xx": int(non2xx.group(1)) if non2xx else 0,
    "socket_errors": dict(zip(["connect", "read", "write", "timeout"],
                              map(int, sock.groups()))) if sock else None,
    "ok": bool(rps),
}))
PY
}

for r in $(seq 1 "$ROUNDS"); do
    for w in "${WORKLOADS[@]}"; do
        for c in "${CONNS[@]}"; do
            for t in "${TARGETS[@]}"; do
                u="$(url_of "$t")$(path_of "$w")"
                timeout 30 wrk -t2 -c"$c" -d1s --timeout 10s -s "$(lua_of "$w")" "$u" > /dev/null 2>&1
                f="$D/wrk-$t-$w-$c-$r.txt"
                timeout $((SECS + 40)) wrk -t2 -c"$c" -d"${SECS}s" --timeout 10s --latency \
                    -s "$(lua_of "$w")" "$u" > "$f" 2>&1
                to_json "$t" "$w" "$c" "$r" "$f"
                log "round $r $w c=$c $t: $(awk '/Requests\/sec/ {print $2}' "$f") req/s"
            done
        done
    done
done
# what the proxies logged (nginx/haproxy errors, channel events), for the record
for f in "$D"/nginx/error.log "$D"/haproxy.log "$D"/*-ingress.log "$D"/*-egress.log; do
    [ -s "$f" ] && { echo "# ---- ${f##*/} (last lines)"; tail -n 8 "$f" | sed 's/^/#   /'; } >&2
done
# proxies still healthy at the end, and what their metrics say about batching
for t in tcp rdma ${BASE:+tcp-base rdma-base}; do
    curl -s -m 5 "$(imet_of $t)/metrics" | grep -E '^sverbs_proxy_(batch_size_(sum|count)|channel_credit_stalls_total|channel_large_frames_total)' |
        sed "s/^/# $t: /" >&2
done
for t in tcp rdma ${BASE:+tcp-base rdma-base}; do
    port=$(awk -F'[:"]' '/^metrics_listen/ {print $(NF-1)}' "$D/$t.toml")
    curl -s -m 5 "http://127.0.0.1:$port/metrics" | grep -E '^sverbs_proxy_service_(requests|writes)_total' |
        sed "s/^/# $t egress: /" >&2
done
