# guest-lib.sh - sourced by guest-bench.sh, guest-fair.sh and guest-profile.sh (inside the
# guest): the addresses of the two-host layout, sverbs-proxy's benchmark configuration and
# nginx's.
# shellcheck shell=bash
IN=10.77.0.1 EG=10.77.0.2 SVC=10.77.0.2:19000

# imet_of TARGET: where a target's ingress serves /metrics (its own listener, port + 1000 on
# 127.0.0.1; a -B base build still serves it on the client port).
imet_of() {
    local u
    u=$(url_of "$1")
    case $1 in
        *-base) echo "$u" ;;
        *) echo "http://127.0.0.1:$((${u##*:} + 1000))" ;;
    esac
}

# proxy_conf TRANSPORT INGRESS-PORT EGRESS-PORT [PIPELINE]: the TOML of one ingress/egress
# pair in front of the service at $SVC (no PIPELINE: the build's defaults, as for -B; "base":
# the file a previous build understands).
proxy_conf() {  # transport ingress-port egress-port [pipeline] [base]
    local imet=""  # a base build (-B) has no [ingress] metrics_listen
    [ "${5:-}" = base ] || imet="metrics_listen = \"127.0.0.1:$(($2 + 1000))\""
    cat << EOF
log_level = "warn"
[channel]
transport = "$1"
[ingress]
listen = "$IN:$2"
workers = 1
max_connections = 20000
admission_limit = 20000
$imet
[[ingress.egress]]
name = "eg"
address = "$EG:$3"
source = "$IN"
[egress]
listen = "$EG:$3"
workers = 1
metrics_listen = "127.0.0.1:$(($3 + 1000))"
[[upstream]]
name = "compute"
class = "latency"
service = "$SVC"
pool = 256
${4:+pipeline = $4}
${4:+max_inflight_batches = 8}
[[route]]
prefix = "/"
upstream = "compute"
EOF
}

# nginx_conf DIR MASTER WORKERS KEEPALIVE: write DIR/nginx.conf, nginx as a reverse proxy on
# $IN:18081 in front of the service at $SVC (HTTP/1.1 upstream keepalive of KEEPALIVE
# connections; MASTER on|off).
nginx_conf() {
    mkdir -p "$1"
    cat > "$1/nginx.conf" << EOF
daemon off;
master_process $2;
worker_processes $3;
worker_rlimit_nofile 200000;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 20000; multi_accept on; }
http {
    access_log off;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    upstream backend {
        server $SVC;
        keepalive $4;
        keepalive_requests 1000000;
    }
    server {
        listen $IN:18081 backlog=8192 reuseport;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering on;
        }
    }
}
EOF
}
