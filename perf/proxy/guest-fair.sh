#!/bin/bash
# guest-fair.sh - runs INSIDE the Soft-RoCE guest (started by fair-bench.sh): the comparison
# with nginx and haproxy on equal terms (issue 17, part 3).
#
#   guest-fair.sh PROXY COMPUTE ROUNDS SECONDS WORKERS "TARGETS" "WORKLOADS" "CONNS" "LOADS"
#
# Equal CPU: every proxy runs WORKERS workers (nginx worker_processes, haproxy nbthread,
# sverbs-proxy ingress and egress workers) and all of them are pinned to the same CPU
# (PROXY_CPUS, default the last vCPU); wrk, the open-loop generator and the backend are
# pinned to the others (LOAD_CPUS).  nginx's upstream keepalive is the largest connection
# count, so it never closes backend connections under the load it is given.
# Targets: direct (the backend, the ceiling), nginx, haproxy, and sverbs-proxy over TCP with
# backend pipelining 1 (tcp-p1, the default) and 64 (tcp-p64) as the ablation, and over RDMA
# (rdma-p1).
# Closed loop: for every round, workload and connection count, the targets run back to back,
# in an order rotated every round (alternated), each `wrk -t1 -cN -dSs --latency` after a 1 s
# warm-up; CPU-seconds of the target's processes per 1,000 requests from /proc/<pid>/stat.
# Open loop: then, at LOADS (fractions of nginx's median maximum for that point, default
# 0.25 0.5 0.75 0.9) every target gets the same constant offered rate from sverbs-openloop
# (latency from the scheduled send time: coordinated omission corrected), p50/p99/p99.9.
# One JSON line per run on stdout (kind "closed" or "open"); progress on stderr.
set -u
PROXY=$1 COMPUTE=$2 ROUNDS=$3 SECS=$4 WORKERS=$5
OPENLOOP=$(dirname "$PROXY")/sverbs-openloop  # proxy/tools/openloop.cpp, built beside the proxy
read -r -a TARGETS <<< "$6"
read -r -a WORKLOADS <<< "$7"
read -r -a CONNS <<< "$8"
read -r -a LOADS <<< "${9:-0.25 0.5 0.75 0.9}"
HERE=$(dirname "$0")
NCPU=$(nproc)
PROXY_CPUS=${PROXY_CPUS:-$((NCPU - 1))}
LOAD_CPUS=${LOAD_CPUS:-0$([ "$NCPU" -gt 2 ] && echo "-$((NCPU - 2))")}
# shellcheck source-path=SCRIPTDIR source=guest-lib.sh
. "$HERE/guest-lib.sh"
D=$(mktemp -d /tmp/proxy-fair.XXXXXX)
log() { echo "guest-fair: $*" >&2; }
ulimit -n 200000 || log "cannot raise ulimit -n"
ulimit -c 0
sysctl -qw net.ipv4.ip_local_port_range="10000 65000" net.core.somaxconn=8192 \
    net.ipv4.tcp_max_syn_backlog=8192 2> /dev/null || true
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 $p 2>/dev/null; done; wait 2>/dev/null' EXIT
MAXC=0
for c in "${CONNS[@]}"; do [ "$c" -gt $MAXC ] && MAXC=$c; done
# Background processes are started with taskset itself, never through these functions: `f &`
# forks a subshell, so $! would be the subshell's pid, whose own CPU time stays 0 (that made
# the CPU-seconds of every target but nginx, whose pids come from its pid file, read 0).
# taskset execs the program: $! of `taskset ... &` is the program's pid.
on_proxy_cpu() { taskset -c "$PROXY_CPUS" "$@"; }
on_load_cpu() { taskset -c "$LOAD_CPUS" "$@"; }
declare -A TPIDS  # target -> its processes (CPU accounting)

taskset -c "$LOAD_CPUS" "$COMPUTE" -l $SVC -w 1 > "$D/compute.log" 2>&1 &
PIDS+=($!)
TPIDS[direct]=$!

nginx_conf "$D/nginx" on "$WORKERS" "$MAXC"
taskset -c "$PROXY_CPUS" nginx -p "$D/nginx" -c "$D/nginx/nginx.conf" > "$D/nginx/stdout.log" 2>&1 &
PIDS+=($!)

cat > "$D/haproxy.cfg" << EOF
global
    nbthread $WORKERS
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
    server compute $SVC maxconn $MAXC
EOF
taskset -c "$PROXY_CPUS" haproxy -f "$D/haproxy.cfg" -db > "$D/haproxy.log" 2>&1 &
PIDS+=($!)
TPIDS[haproxy]=$!

sv_conf() {  # transport ingress-port egress-port pipeline
    cat << EOF
log_level = "warn"
[channel]
transport = "$1"
[ingress]
listen = "$IN:$2"
workers = $WORKERS
max_connections = 20000
admission_limit = 20000
metrics_listen = "127.0.0.1:$(($2 + 1000))"
[[ingress.egress]]
name = "eg"
address = "$EG:$3"
source = "$IN"
[egress]
listen = "$EG:$3"
workers = $WORKERS
[[upstream]]
name = "compute"
class = "latency"
service = "$SVC"
pool = $MAXC
pipeline = $4
[[route]]
prefix = "/"
upstream = "compute"
EOF
}
port_of() {
    case $1 in
        direct) echo 19000 ;; nginx) echo 18081 ;; haproxy) echo 18082 ;;
        tcp-p1) echo 18083 ;; tcp-p64) echo 18084 ;; rdma-p1) echo 18085 ;;
    esac
}
url_of() { case $1 in direct) echo "http://$SVC" ;; *) echo "http://$IN:$(port_of "$1")" ;; esac; }
for t in "${TARGETS[@]}"; do
    case $t in
        tcp-p* | rdma-p*)
            tr=${t%%-*} pl=${t#*-p} p=$(port_of "$t")
            sv_conf "$tr" "$p" $((p - 1000)) "$pl" > "$D/$t.toml"
            taskset -c "$PROXY_CPUS" "$PROXY" -c "$D/$t.toml" --role egress > "$D/$t-egress.log" 2>&1 &
            PIDS+=($!)
            e=$!
            taskset -c "$PROXY_CPUS" "$PROXY" -c "$D/$t.toml" --role ingress > "$D/$t-ingress.log" 2>&1 &
            PIDS+=($!)
            TPIDS[$t]="$e $!"
            ;;
    esac
done
sleep 0.5
TPIDS[nginx]=$(cat "$D/nginx/nginx.pid" 2> /dev/null; pgrep -P "$(cat "$D/nginx/nginx.pid" 2> /dev/null || echo 1)" | tr '\n' ' ')
for t in "${TARGETS[@]}"; do
    ok=0
    for _ in $(seq 1 150); do
        [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$(url_of "$t")/healthz")" = 200 ] && { ok=1; break; }
        sleep 0.2
    done
    [ $ok = 1 ] || { log "$t never answered 200"; tail -n 20 "$D"/*.log >&2; exit 1; }
done
log "all targets answer: ${TARGETS[*]} (proxies on CPU $PROXY_CPUS, load on $LOAD_CPUS, $WORKERS worker(s) each)"

printf 'wrk.method = "POST"\nwrk.body = string.rep("x", 64)\n' > "$D/echo64.lua"
printf 'wrk.method = "POST"\n' > "$D/post.lua"
path_of() { case $1 in echo64) echo "/echo" ;; matmul16) echo "/matmul?n=16" ;; matmul8) echo "/matmul?n=8" ;; esac; }
lua_of() { case $1 in echo64) echo "$D/echo64.lua" ;; *) echo "$D/post.lua" ;; esac; }
body_of() { case $1 in echo64) printf 'x%.0s' $(seq 1 64) ;; *) echo "" ;; esac; }
cpu_ticks() {  # summed utime+stime of the given pids (and their threads)
    local s=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] && s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo $s
}
HZ=$(getconf CLK_TCK)

to_json() {  # kind target workload conns round file cpu_ticks
    /usr/bin/python3 - "$@" "$HZ" << 'PY'
import json, re, sys
kind, t, w, c, r, f, ticks, hz = sys.argv[1:9]
s = open(f).read()
def ms(v, u):
    return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[u]
lat = {p: ms(v, u) for p, v, u in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", s, re.M)}
rps = re.search(r"Requests/sec:\s+([\d.]+)", s)
reqs = re.search(r"(\d+) requests in", s)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", s)
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", s)
n = int(reqs.group(1)) if reqs else 0
cpu = int(ticks) / int(hz)
print(json.dumps({"kind": kind, "target": t, "workload": w, "conns": int(c), "round": int(r),
    "rps": float(rps.group(1)) if rps else None, "requests": n,
    "p50_ms": lat.get("50"), "p99_ms": lat.get("99"),
    "cpu_s": cpu, "cpu_s_per_1k": cpu / n * 1000 if n else None,
    "non2xx": int(non2xx.group(1)) if non2xx else 0,
    "socket_errors": dict(zip(["connect", "read", "write", "timeout"], map(int, sock.groups()))) if sock else None,
    "ok": bool(rps)}))
PY
}

declare -A NGINX_MAX  # "workload conns" -> nginx rps of every round
nt=${#TARGETS[@]}
for r in $(seq 1 "$ROUNDS"); do
    for w in "${WORKLOADS[@]}"; do
        for c in "${CONNS[@]}"; do
            for k in $(seq 0 $((nt - 1))); do
                t=${TARGETS[$(((k + r - 1) % nt))]}  # rotated: every target leads once
                u="$(url_of "$t")$(path_of "$w")"
                on_load_cpu timeout 30 wrk -t1 -c"$c" -d1s --timeout 10s -s "$(lua_of "$w")" "$u" > /dev/null 2>&1
                f="$D/wrk-$t-$w-$c-$r.txt"
                # shellcheck disable=SC2086
                c0=$(cpu_ticks ${TPIDS[$t]})
                on_load_cpu timeout $((SECS + 40)) wrk -t1 -c"$c" -d"${SECS}s" --timeout 10s --latency \
                    -s "$(lua_of "$w")" "$u" > "$f" 2>&1
                # shellcheck disable=SC2086
                c1=$(cpu_ticks ${TPIDS[$t]})
                line=$(to_json closed "$t" "$w" "$c" "$r" "$f" $((c1 - c0)))
                echo "$line"
                [ "$t" = nginx ] && NGINX_MAX["$w $c"]+="$(awk '/Requests\/sec/ {print $2}' "$f") "
                log "closed round $r $w c=$c $t: $(awk '/Requests\/sec/ {print $2}' "$f") req/s"
            done
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for w in "${WORKLOADS[@]}"; do
    for c in "${CONNS[@]}"; do
        max=$(echo "${NGINX_MAX["$w $c"]:-}" | median)
        [ -n "$max" ] || { log "no nginx maximum for $w c=$c: open loop skipped"; continue; }
        for load in "${LOADS[@]}"; do
            rate=$(awk -v m="$max" -v l="$load" 'BEGIN {printf "%.0f", m * l}')
            for r in $(seq 1 "$ROUNDS"); do
                for k in $(seq 0 $((nt - 1))); do
                    t=${TARGETS[$(((k + r - 1) % nt))]}
                    u="$(url_of "$t")$(path_of "$w")"
                    # exit status 1 = some requests failed: counted in the JSON ("errors")
                    out=$(on_load_cpu "$OPENLOOP" "$u" --rate "$rate" \
                        --duration "$SECS" --connections "$c" --method POST --body "$(body_of "$w")" || true)
                    echo "$out" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); d.update(kind='open', target='$t', workload='$w', conns=$c, round=$r, load=$load, nginx_max=$max); print(json.dumps(d))"
                    log "open $w c=$c load=$load (${rate}/s) round $r $t: $(echo "$out" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print("p99 %.1f ms, %d errors" % (d["p99_ms"], d["errors"]))')"
                done
            done
        done
    done
done
for f in "$D"/nginx/error.log "$D"/haproxy.log "$D"/*-ingress.log "$D"/*-egress.log; do
    [ -s "$f" ] && { echo "# ---- ${f##*/} (last lines)"; tail -n 5 "$f" | sed 's/^/#   /'; } >&2
done
exit 0
