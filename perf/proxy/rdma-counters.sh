#!/bin/bash
# rdma-counters.sh - copies, verbs calls and system calls per request on sverbs-proxy's RDMA
# path, A against B in one Soft-RoCE guest (issue 17, part 2):
#   A  [channel] rdma_signal_every = 1, rdma_inline_bytes = 0  (the old data path: every WR
#      signaled, every frame copied into a registered send slot)
#   B  the defaults (selective signaling, inline sends)
#   P  with -b FILE: that sverbs-proxy binary (a previous build) at its defaults: before/after
#      in one boot
#
#   perf/proxy/rdma-counters.sh [-r ROUNDS] [-t SECONDS] [-c CONNS] [-N REQUESTS] [-b FILE]
#                               [-n NAME]
#
# Each round runs A and B (order alternated) with a fresh ingress + egress (1 worker each)
# in front of one sverbs-compute, `wrk -cCONNS -dSECONDS` POST /echo of 64 bytes, and reads
# the channel counters of both roles from /metrics before and after (sverbs_proxy_channel_*:
# send_posts, signaled, inline, copies, recv_posts, cq_events = completion-channel wake-ups),
# and the copies of request/answer bytes by stage (sverbs_proxy_rdma_copies_total,
# _copy_bytes_total: parse, frame, registered, inline, deliver), divided by the requests the
# ingress answered.  A last round per variant runs `strace -c -f` on both proxy processes over
# a fixed number of requests (-N, default 2000: sverbs-openloop at 400/s over 16 connections)
# and gives system calls per request (strace slows the run, so batches differ from wrk's).
# Writes perf/proxy/results/NAME.jsonl and NAME.md.  Per-request counts depend on how many
# requests share a frame (batching), so compare A and B within a round.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
rounds=5 secs=3 conns=16 name=rdma-counters nreq=2000 prev=""
while [ $# -gt 0 ]; do
    case $1 in
        -r) rounds=$2; shift 2 ;;
        -t) secs=$2; shift 2 ;;
        -c) conns=$2; shift 2 ;;
        -N) nreq=$2; shift 2 ;;
        -b) prev=$(realpath "$2"); shift 2 ;;
        -n) name=$2; shift 2 ;;
        -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "rdma-counters.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [ -z "${RXE_VM_HOST:-}" ]; then  # host: boot a guest and run this script there
    export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((rounds * 3 * (secs + 60) + 3 * nreq / 100 + 900))}
    out=$HERE/results
    mkdir -p "$out"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    rc=0
    "$REPO/tests/vm/run-in-vm.sh" ". '$BUILD/prefix/env.sh'; bash '$0' -r $rounds -t $secs -c $conns -N $nreq ${prev:+-b '$prev'}" \
        > "$tmp/out" || rc=$?
    grep -v '^{' "$tmp/out" >&2
    grep '^{' "$tmp/out" > "$out/$name.jsonl" || { echo "no results (guest status $rc)" >&2; exit 1; }
    /usr/bin/python3 - "$out/$name.jsonl" "rdma-counters.sh -r $rounds -t $secs -c $conns; $(date -u +%FT%TZ); git $(git -C "$REPO" rev-parse --short HEAD); host load $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/$name.md" << 'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
stages = ["parse", "frame", "registered", "inline", "deliver"]
keys = ["send_posts", "signaled", "inline", "copies", "copied_bytes", "recv_posts", "cq_events"]
keys += [f"rdma_copies_{s}" for s in stages] + [f"rdma_copy_bytes_{s}" for s in stages]
keys += ["rdma_copies_all", "rdma_copy_bytes_all", "syscalls"]
for r in runs:
    for role in ["ingress", "egress"]:
        d = r[role]
        d["rdma_copies_all"] = sum(d.get(f"rdma_copies_{s}", 0) for s in stages)
        d["rdma_copy_bytes_all"] = sum(d.get(f"rdma_copy_bytes_{s}", 0) for s in stages)
variants = [v for v in ["A", "B", "P"] if any(r["variant"] == v for r in runs)]
names = {"A": "A old path", "B": "B this build", "P": "P previous build"}
print("# RDMA data path per request: A (this build, signal every WR, no inline), B (this build, "
      "defaults), P (-b: a previous build, defaults)\n\n" + sys.argv[2] + "\n")
print("Copies by stage (rdma_copies_*): parse = HTTP input into the parser, frame = into a frame, "
      "registered = frame into registered memory, inline = into the WQE by the provider, deliver "
      "= out of the receive slot. syscalls: strace -c -f over a fixed number of requests.\n")
print("| per request | role | " + " | ".join(f"{names[v]} median (min-max)" for v in variants)
      + " | " + " | ".join(f"{v}/B paired" for v in variants if v != "B") + " |")
print("|---|---|" + "---|" * (2 * len(variants) - 1))
f = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" if v else "-"
for role in ["ingress", "egress"]:
    for k in keys:
        sel = [r for r in runs if bool(r["strace"]) == (k == "syscalls") and r["requests"] > 0]
        per = {v: {r["round"]: r[role].get(k, 0) / r["requests"] for r in sel if r["variant"] == v}
               for v in variants}
        if not any(per.values()):
            continue
        cells = [f(list(per[v].values())) for v in variants]
        for v in variants:
            if v == "B":
                continue
            rat = [per[v][x] / per["B"][x] for x in per[v] if per["B"].get(x)]
            cells.append(f"{statistics.median(rat):.2f} ({min(rat):.2f}-{max(rat):.2f})" if rat else "-")
        print(f"| {k} | {role} | " + " | ".join(cells) + " |")
print("\nrequests/s (noisy host, for orientation only): " + ", ".join(
    f"{r['variant']}{r['round']} {r['requests'] / r['secs']:.0f}" for r in runs if not r["strace"]))
print("\nstrace runs (fixed count): " + ", ".join(
    f"{r['variant']} {r['requests']} requests" for r in runs if r["strace"]))
PY
    echo "rdma-counters.sh: wrote $out/$name.jsonl and $out/$name.md" >&2
    exit $rc
fi

# ------------------------------------------------------------------ in the guest
. "$HERE/guest-lib.sh"
PROXY=$BUILD/proxy/sverbs-proxy COMPUTE=$BUILD/proxy/sverbs-compute OPENLOOP=$BUILD/proxy/sverbs-openloop
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
        /^sverbs_proxy_rdma_cop(ies|y_bytes)_total/ {
            n = $1; sub(/_total.*/, "", n); sub(/^sverbs_proxy_/, "", n)
            st = $1; sub(/.*stage="/, "", st); sub(/".*/, "", st); s[n "_" st] += $NF }
        /^sverbs_proxy_requests_total/ { s["requests"] += $NF }
        END { for (k in s) print k, s[k] }'
}
delta_json() {  # before-file after-file [syscalls]
    awk -v sc="${3:-}" 'NR == FNR { b[$1] = $2; next } { d[$1] = $2 - b[$1] }
        END { o = ""; for (k in d) o = o sprintf("%s\"%s\": %d", o == "" ? "" : ", ", k, d[k]);
              if (sc != "") o = o ", \"syscalls\": " sc; print "{" o "}" }' "$1" "$2"
}
run_one() {  # round variant strace?
    local r=$1 v=$2 st=${3:-} bin=$PROXY
    proxy_conf rdma 18080 17000 > "$D/p.toml"
    # a loaded TCG guest may take seconds to connect or stall a second (stop 22: the first
    # stack never answered within 180 s on a host with 8 guests; defaults 1000 / 1000)
    sed -i 's/^transport = "rdma"/transport = "rdma"\nconnect_timeout_ms = 10000\nheartbeat_ms = 3000/' "$D/p.toml"
    if [ "$v" = A ]; then
        sed -i 's/^transport = "rdma"/transport = "rdma"\nrdma_signal_every = 1\nrdma_inline_bytes = 0/' "$D/p.toml"
    fi
    [ "$v" = P ] && bin=$prev
    "$bin" -c "$D/p.toml" --role egress > "$D/eg.log" 2>&1 &
    local epid=$!
    "$bin" -c "$D/p.toml" --role ingress > "$D/in.log" 2>&1 &
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
    if [ -n "$st" ]; then  # a fixed number of requests: nreq at 400/s
        "$OPENLOOP" --rate 400 --duration "$(awk -v n="$nreq" 'BEGIN { print n / 400 }')" \
            --connections 16 --method POST --body "$(printf 'x%.0s' $(seq 64))" --timeout 60 \
            "http://$IN:18080/echo" > "$D/wrk.out" 2>&1
    else
        wrk -t1 -c"$conns" -d"${secs}s" -s "$D/post.lua" "http://$IN:18080/echo" > "$D/wrk.out" 2>&1
    fi
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
    if [ $((r % 2)) = 1 ]; then order="A B${prev:+ P}"; else order="${prev:+P }B A"; fi
    for v in $order; do run_one "$r" "$v"; done
done
for v in A B ${prev:+P}; do run_one 0 "$v" 1; done
kill -9 $CPID
