# guest-lib.sh - sourced by guest-bench.sh and guest-profile.sh (inside the guest): the
# addresses of the two-host layout and sverbs-proxy's benchmark configuration.
# shellcheck shell=bash
IN=10.77.0.1 EG=10.77.0.2 SVC=10.77.0.2:19000

# proxy_conf TRANSPORT INGRESS-PORT EGRESS-PORT [PIPELINE]: the TOML of one ingress/egress
# pair in front of the service at $SVC (no PIPELINE: the build's defaults, as for -B).
proxy_conf() {  # transport ingress-port egress-port [pipeline]
    cat << EOF
log_level = "warn"
[channel]
transport = "$1"
[ingress]
listen = "$IN:$2"
workers = 1
max_connections = 20000
admission_limit = 20000
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
