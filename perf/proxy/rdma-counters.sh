#!/bin/bash
# rdma-counters.sh - copies, verbs calls and system calls per request on sverbs-proxy's RDMA
# path, A against B in one Soft-RoCE guest (issue 17, part 2):
#   A  [channel] rdma_signal_every = 1, rdma_inline_bytes = 0  (the old data path: every WR
#      signaled, every frame copied into a registered send slot)
#   B  the defaults (selective signaling, inline sends)
#
#   perf/proxy/rdma-counters.sh [-r ROUNDS] [-t SECONDS] [-c CONNS] [-n NAME]
#
# Each round runs A and B (order alternated) with a fresh ingress + egress (1 worker each)
# in front of one sverbs-compute, `wrk -cCONNS -dSECONDS` POST /echo of 64 bytes, and reads
# the channel counters of both roles from /metrics before and after (sverbs_proxy_channel_*:
# send_posts, signaled, inline, copies, recv_posts, cq_events = completion-channel wake-ups),
# divided by the requests the ingress answered.  The last round also runs `strace -c -f` on
# both proxy processes (system calls per request; strace slows the run, so batches differ).
# Writes perf/proxy/results/NAME.jsonl and NAME.md.  Per-request counts depend on how many
# requests share a frame (batching), so compare A and B within a round.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
rounds=5 secs=3 conns=16 name=rdma-counters
while [ $# -gt 0 ]; do
    case $1 in
        -r) rounds=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -c) conns=$2; shift 2 ;;
        -n) name=$2; shift 2 ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "rdma-counters.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [ -z "${RXE_VM_HOST:-}" ]; then  # host: boot a guest and run this script there
    export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((rounds * 2 * (secs + 60) + 600))}
    out=$HERE/results
    mkdir -p "$out"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    rc=0
    "$REPO/tests/vm/run-in-vm.sh" ". '$BUILD/prefix/env.sh'; bash '$0' -r $rounds -t $secs -c $conns" \
        > "$tmp/out" || rc=$?
    grep -v '^{' "$tmp/out" >&2
    grep '^{' "$tmp/out" > "$out/$name.jsonl" || { echo "no results (guest status $rc)" >&2; exit 1; }
    /usr/bin/python3 - "$out/$name.jsonl" "rdma-counters.sh -r $rounds -t $secs -c $conns; $(date -u +%FT%TZ); git $(git -C "$REPO" rev-parse --short HEAD); host load $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/$name.md" << 'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
keys = ["send_posts", "signaled", "inline", "copies", "copied_bytes", "recv_posts", "cq_events", "syscalls"]
print(f"# RDMA data path per request, A (signal every WR, no inline) vs B (defaults)\n\n{sys.argv[2]}\n")
print("| per request | role | A median (min-max) | B median (min-max) | B/A paired median (min-max) |")
print("|---|---|---|---|---|")
for role in ["ingress", "egress"]:
    for k in keys:
        sel = [r for r in runs if bool(r["strace"]) == (k == "syscalls") and r["requests"] > 0]
        a = {r["round"]: r[role].get(k, 0) / r["requests"] for r in sel if r["variant"] == "A"}
        b = {r["round"]: r[role].get(k, 0) / r["requests"] for r in sel if r["variant"] == "B"}
        if not a or not b:
            continue
        f = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
        rat = [b[x] / a[x] for x in a if x in b and a[x] > 0]
        rs = f"{statistics.median(rat):.2f} ({min(rat):.2f}-{max(rat):.2f})" if rat else "-"
        print(f"| {k} | {role} | {f(list(a.values()))} | {f(list(b.values()))} | {rs} |")
print("\nrequests/s (noisy host, for orientation only): " + ", ".join(
    f"{r['variant']}{r['round']} {r['requests'] / r['secs']:.0f}" for r in runs))
PY
    echo "rdma-counters.sh: wrote $out/$name.jsonl and $out/$name.md" >&2
    exit $rc
fi

# ------------------------------------------------------------------ in the guest
. "$HERE/guest-lib.sh"
PROXY=$BUILD/proxy/sverbs-proxy COMPUTE=$BUILD/proxy/sverbs-compute
D=$(mktemp -d /tmp/rdma-counters.XXXXXX)
ulimit -n 65536
"$COMPUTE" -l "$SVC" -w 1 > "$D/compute.log" 2>&1 &
CPID=$!
printf 'wrk.method = "POST"\nwrk.body = string.rep("x", 64)\n' > "$D/post.lua"
log() { echo "# $*" >&2; }
up() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -d x "http://$IN:18080/echo")" = 200 ]; }
wait_up() {
    local end=$((SECONDS + 180))
    until up; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}
# counters URL: "name value" of the channel counters and the requests, summed over workers
counters() {
    curl -s --max-time 10 "$1" | awk '
        /^sverbs_proxy_channel_(send_posts|signaled|inline|copies|copied_bytes|recv_posts|cq_events)_total/ {
            n = $1; sub(/^sverbs_proxy_channel_/, "", n); sub(/_total.*/, "", n); s[n] += $NF }
        /^sverbs_proxy_requests_total/ { s["requests"] += $NF }
        END { for (k in s) print k, s[k] }'
}
delta_json() {  # before-file after-file [syscalls]
    awk -v sc="${3:-}" 'NR == FNR { b[$1] = $2; next } { d[$1] = $2 - b[$1] }
        END { o = ""; for (k in d) o = o sprintf("%s\"%s\": %d", o == "" ? "" : ", ", k, d[k]);
              if (sc != "") o = o ", \"syscalls\": " sc; print "{" o "}" }' "$1" "$2"
}
run_one() {  # round variant strace?
    local r=$1 v=$2 st=${3:-} every=16 inl=256
    [ "$v" = A ] && every=1 inl=0
    proxy_conf rdma 18080 17000 > "$D/p.toml"
    sed -i "s/^transport = \"rdma\"/transport = \"rdma\"\nrdma_signal_every = $every\nrdma_inline_bytes = $inl/" "$D/p.toml"
    "$PROXY" -c "$D/p.toml" --role egress > "$D/eg.log" 2>&1 &
    local epid=$!
    "$PROXY" -c "$D/p.toml" --role ingress > "$D/in.log" 2>&1 &
    local ipid=$!
    if ! wait_up; then
        log "round $r $v: the proxy never answered"
        tail -n 5 "$D/in.log" "$D/eg.log" "$D/compute.log" | sed 's/^/#   /' >&2
        kill -9 $ipid $epid
        wait $ipid $epid 2> /dev/null
        return
    fi
    counters http://127.0.0.1:19080/metrics > "$D/ib"
    counters http://127.0.0.1:18000/metrics > "$D/eb"
    local spid=""
    if [ -n "$st" ]; then
        strace -c -f -o "$D/strace.in" -p $ipid 2> /dev/null &
        local s1=$!
        strace -c -f -o "$D/strace.eg" -p $epid 2> /dev/null &
        spid="$s1 $!"
        sleep 1
    fi
    wrk -t1 -c"$conns" -d"${secs}s" -s "$D/post.lua" "http://$IN:18080/echo" > "$D/wrk.out" 2>&1
    # shellcheck disable=SC2086
    [ -n "$spid" ] && { kill -INT $spid; wait $spid 2> /dev/null; }
    counters http://127.0.0.1:19080/metrics > "$D/ia"
    counters http://127.0.0.1:18000/metrics > "$D/ea"
    local sci="" sce=""
    if [ -n "$st" ]; then
        sci=$(awk '$NF == "total" {print $(NF-2)}' "$D/strace.in")
        sce=$(awk '$NF == "total" {print $(NF-2)}' "$D/strace.eg")
    fi
    local ij ej req
    ij=$(delta_json "$D/ib" "$D/ia" "$sci")
    ej=$(delta_json "$D/eb" "$D/ea" "$sce")
    req=$(awk '$1 == "requests" {print $2}' "$D/ia")
    req=$((req - $(awk '$1 == "requests" {print $2}' "$D/ib")))
    grep -q -e 'Non-2xx' -e 'Socket errors' "$D/wrk.out" && log "round $r $v: wrk: $(tr '\n' ' ' < "$D/wrk.out")"
    echo "{\"round\": $r, \"variant\": \"$v\", \"secs\": $secs, \"strace\": ${st:-0}, \"requests\": $req, \"ingress\": $ij, \"egress\": $ej}"
    kill -9 $ipid $epid
    wait $ipid $epid 2> /dev/null
}
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for v in $order; do run_one "$r" "$v"; done
done
for v in A B; do run_one 0 "$v" 1; done
kill -9 $CPID
