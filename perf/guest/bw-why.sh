#!/bin/bash
# bw-why.sh - runs INSIDE the guest (perf/run-bw-why.sh): where a batch
# budget's cost to ib_write_bw goes.  ib_write_bw 64 B, one WR per post,
# client on rxe1 with the layer on, in MODES: none (no budget), budget
# (SVERBS_BATCH_BUDGET_US, the rest as configured), linger / nolinger (the
# budget with SVERBS_BATCH_LINGER=on / off);
# the server on rxe0 stock (it only waits).  For each run: the message rate,
# the client's user and system CPU (GNU time), and the layer's own counters
# (SVERBS_STATS=1: WQEs per doorbell, held WRs, held p99); then each mode once
# under strace -c -f (system calls per WR: runs of ITERS/10 and ITERS/100 WRs,
# at least 10000 and 1000, the second subtracted).
#
#   bw-why.sh REPS ITERS BUDGET_US MODES...
#
# Prints one JSON line per run on stdout; perftest's output on stderr.
# Exit 1 if any run failed.
set -uo pipefail
[ $# -ge 4 ] || { echo "usage: $0 REPS ITERS BUDGET_US MODES..." >&2; exit 2; }
reps=$1 iters=$2 budget=$3
shift 3
modes=("$@")
for m in "${modes[@]}"; do
	case $m in none | budget | linger | nolinger) ;; *) echo "bw-why: unknown mode $m" >&2; exit 2 ;; esac
done
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=18700
fail=0

# pair MODE ITERS [WRAPPER...]: one server/client pair; the client's output in
# $tmp/client, its SVERBS_STATS lines and GNU time's line in $tmp/err
pair() {
	local mode=$1 n=$2 env=(SVERBS=on SVERBS_STATS=1)
	shift 2
	[ "$mode" != none ] && env+=(SVERBS_BATCH_BUDGET_US="$budget")
	[ "$mode" = linger ] && env+=(SVERBS_BATCH_LINGER=on)
	[ "$mode" = nolinger ] && env+=(SVERBS_BATCH_LINGER=off)
	port=$((port + 1))
	SVERBS=off ib_write_bw -d rxe0 -x 1 -F -p $port -s 64 -n "$n" >"$tmp/server" 2>&1 &
	local srv=$! ok=1
	if vm-wait-listen $port 30; then
		env "${env[@]}" timeout 300 "$@" ib_write_bw -d rxe1 -x 1 -F -p $port -s 64 -n "$n" \
			10.77.0.1 >"$tmp/client" 2>"$tmp/err" || ok=0
	else
		ok=0
	fi
	wait $srv || ok=0
	cat "$tmp/client" "$tmp/err" >&2
	[ $ok = 1 ]
}

# the per-run JSON line: rate, CPU, the layer's counters
timed() {
	local mode=$1 rep=$2
	if ! pair "$mode" "$iters" /usr/bin/time -f 'cputime %U %S %e'; then
		printf '{"bench":"bw-why","kind":"run","mode":"%s","rep":%s,"error":"ib_write_bw failed"}\n' "$mode" "$rep"
		fail=1
		return
	fi
	/usr/bin/python3 - "$mode" "$rep" "$iters" "$tmp/client" "$tmp/err" <<-'PYEOF' || fail=1
	import json, re, sys
	mode, rep, iters, client, err = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
	row = next((l.split() for l in open(client) if l.split()[:1] == ["64"] and len(l.split()) >= 5), None)
	e = open(err).read()
	t = re.search(r"cputime ([0-9.]+) ([0-9.]+) ([0-9.]+)", e)
	out = {"bench": "bw-why", "kind": "run", "mode": mode, "rep": rep, "iters": iters}
	if not row or not t or float(row[4]) == 0:
	    out["error"] = "no result row, no CPU times, or perftest's clock read 0"
	else:
	    out.update(mpps=float(row[4]), user_s=float(t.group(1)), sys_s=float(t.group(2)),
	               wall_s=float(t.group(3)))
	s = re.search(r"sverbs: QP \d+: (\d+) WRs, (\d+) WQEs, (\d+) doorbells \(([0-9.]+) WQEs/doorbell\), "
	              r"(\d+) held, held p99 ([0-9.]+) us(.*)", e)
	if s:
	    out.update(layer_wrs=int(s.group(1)), wqes=int(s.group(2)), doorbells=int(s.group(3)),
	               held=int(s.group(5)), held_p99_us=float(s.group(6)),
	               passthrough="pass-through" in s.group(7))
	    # a deferring QP: who rang its deferred WQEs (doorbells/WQEs each)
	    rung = re.findall(r"(target|refused|poll|timer|state) (\d+)/(\d+)", s.group(7))
	    if rung:
	        out["rung"] = {w: [int(d), int(q)] for w, d, q in rung}
	print(json.dumps(out), flush=True)
	sys.exit(1 if "error" in out else 0)
	PYEOF
}

# alternated repetitions: neither mode always first
for rep in $(seq 1 "$reps"); do
	# rotated: each repetition starts one mode later
	for i in "${!modes[@]}"; do
		timed "${modes[$(((i + rep - 1) % ${#modes[@]}))]}" "$rep"
	done
done

# system calls per WR: a run of ITERS/10 and one of ITERS/100 (at least 1000),
# the difference (strace makes every system call slow: the runs are short)
for m in "${modes[@]}"; do
	big=$((iters / 10 > 10000 ? iters / 10 : 10000)) small=$((big / 10))
	if pair "$m" "$small" strace -c -f -o "$tmp/st.small" &&
		pair "$m" "$big" strace -c -f -o "$tmp/st.big"; then
		/usr/bin/python3 - "$here" "$m" "$((big - small))" "$tmp/st.small" "$tmp/st.big" <<-'PYEOF' || fail=1
		import json, sys
		sys.path.insert(0, sys.argv[1])
		from strace2json import calls  # the strace -c table's parser of syscalls.sh
		mode, wrs, a, b = sys.argv[2], int(sys.argv[3]), calls(sys.argv[4]), calls(sys.argv[5])
		d = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
		d = {k: round(v / wrs, 4) for k, v in sorted(d.items()) if v > 0}
		print(json.dumps({"bench": "bw-why", "kind": "syscalls", "mode": mode, "wrs": wrs,
		                  "per_wr": d, "total_per_wr": round(sum(d.values()), 4)}), flush=True)
		PYEOF
	else
		printf '{"bench":"bw-why","kind":"syscalls","mode":"%s","error":"ib_write_bw under strace failed"}\n' "$m"
		fail=1
	fi
done
exit $fail
