# guest-lib.sh - sourced by guest-bench.sh and guest-profile.sh (inside the guest): the
# addresses of the two-host layout and sverbs-proxy's benchmark configuration.
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
