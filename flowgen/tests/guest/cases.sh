#!/bin/bash
# cases.sh (guest side) - the checks of sverbs-flowgen in the one-guest
# Soft-RoCE setup: rxe0 on veth0 (10.77.0.1, the client) <-> rxe1 on veth1
# (10.77.0.2, the server).  Run by run-guest.sh:
#
#   cases.sh CASE FLOWGEN OUTDIR     CASE: perftest | many | capture | errors | bmr |
#                                          bmr-model | probe
#
# bmr and bmr-model run build/flowgen/sverbs-bmr (next to FLOWGEN) under
# Open MPI's mpirun in this one guest (ranks on rxe0 and rxe1 alternately).
#
# Every case writes its JSON/CSV/pcap into OUTDIR and exits non-zero, saying
# why, when a check fails.
set -uo pipefail
case_=$1 fg=$2 out=$3
PY=/usr/bin/python3
SRV_IP=10.77.0.2 CLI_IP=10.77.0.1 PORT=7471
fail() { echo "FAIL: $*"; exit 1; }
say() { echo "== $*"; }
# wait_for SECONDS CMD...: until CMD succeeds (every 0.1 s); 1 at the deadline
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}

# start_server ARGS: sverbs-flowgen server on rxe1 in the background ($srv)
start_server() {
	"$fg" --mode server -s $SRV_IP -p $PORT --json "$out/server.json" -q "$@" \
		>"$out/server.log" 2>&1 &
	srv=$!
	vm-wait-listen --cm $PORT || { cat "$out/server.log"; fail "the server did not listen"; }
}
stop_server() {
	local i
	for i in $(seq 1 100); do kill -0 "$srv" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$srv" 2>/dev/null; then
		kill "$srv"
		wait "$srv"
		cat "$out/server.log"
		fail "the server did not end when its clients left"
	fi
	wait "$srv" || { cat "$out/server.log"; fail "the server failed"; }
}
client() { "$fg" -s $SRV_IP -b $CLI_IP -p $PORT "$@"; }
bmr=$(dirname "$fg")/sverbs-bmr
# mpirun NP ARGS...: sverbs-bmr on NP ranks, oversubscribed (2 vCPUs).  MPI
# itself (bootstrap, QP exchange, gathering) over shared memory; the blocks
# over verbs, unless ARGS say --comm mpi (then UCX's rc_verbs on rxe0, as in
# tests/integration/ucx.sh).
mpi_bmr() {
	local np=$1
	shift
	local pml=(--mca pml ob1 --mca btl self,vader)
	case " $* " in *" --comm mpi "*)
		pml=(--mca pml ucx --mca btl self -x UCX_TLS=rc_verbs,ud_verbs,self
			-x UCX_NET_DEVICES=rxe0:1 -x UCX_IB_GID_INDEX=0) ;;
	esac
	local v
	for v in LD_LIBRARY_PATH SVERBS; do [ -n "${!v:-}" ] && pml+=(-x "$v"); done
	timeout "${BMR_TIMEOUT:-600}" mpirun --allow-run-as-root --oversubscribe -np "$np" \
		"${pml[@]}" "$bmr" --device rxe0,rxe1 "$@"
}

case $case_ in
probe)
	ibv_devinfo -v -d rxe0 | grep -E "max_qp:|max_mr_size|max_mr:|max_qp_wr|max_cqe:|active_mtu"
	uname -r; ulimit -a | grep -E "open files|locked"; free -m
	;;

perftest)
	# 2 flows vs ib_write_bw -q 2, same size and depth, one after the other,
	# twice each; the best of each must agree within 10%.
	for round in 1 2; do
		ib_write_bw -d rxe1 -x 1 -F -q 2 -s 65536 -t 32 -D 3 --report_gbits \
			>"$out/ib_write_bw-srv-$round.log" 2>&1 &
		p=$!
		vm-wait-listen 18515 || fail "ib_write_bw server"
		ib_write_bw -d rxe0 -x 1 -F -q 2 -s 65536 -t 32 -D 3 --report_gbits $SRV_IP \
			>"$out/ib_write_bw-$round.log" 2>&1 || { cat "$out/ib_write_bw-$round.log"; fail "ib_write_bw"; }
		wait $p
		start_server
		client -u 1 -S 2 --op write --size 64k -D 32 -T 3 --json "$out/flowgen-$round.json" \
			--csv "$out/flowgen-$round.csv" || fail "sverbs-flowgen"
		stop_server
	done
	$PY - "$out" <<-'PYEOF' || exit 1
	import json, re, sys
	out = sys.argv[1]
	pt, fg = [], []
	for r in (1, 2):
	    rows = [l.split() for l in open(f"{out}/ib_write_bw-{r}.log") if re.match(r"\s*65536\s", l)]
	    pt.append(float(rows[-1][3]))          # BW average [Gb/sec]
	    j = json.load(open(f"{out}/flowgen-{r}.json"))
	    assert j["flows"] == 2 and j["total"]["errors"] == 0, j["total"]
	    assert all(f["ops"] > 0 for f in j["per_flow"]), "a flow did nothing"
	    fg.append(j["total"]["gbps"])
	a, b = max(pt), max(fg)
	diff = abs(b - a) / a
	print(f"ib_write_bw -q 2: {pt} Gbit/s; sverbs-flowgen 1x2: {fg} Gbit/s; best {a:.4f} vs {b:.4f}: {diff * 100:.1f}% apart")
	sys.exit(0 if diff <= 0.10 else 1)
	PYEOF
	;;

many)
	# FLOWGEN_FLOWS flows (default 4096 = 64 users x 64 services), 4 KiB WRITEs
	n=${FLOWGEN_FLOWS:-4096}
	users=64
	services=$((n / users))
	start_server
	client -u $users -S $services --size 4k -D 1 -T ${FLOWGEN_SECONDS:-5} -t 2 \
		--json "$out/many.json" --csv "$out/many.csv" --progress || fail "sverbs-flowgen"
	stop_server
	$PY - "$out/many.json" "$out/server.json" "$n" <<-'PYEOF' || exit 1
	import json, sys
	j, s, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
	assert j["flows"] == n, j["flows"]
	assert j["total"]["errors"] == 0, j["total"]
	idle = [f["id"] for f in j["per_flow"] if f["ops"] == 0]
	assert not idle, f"{len(idle)} flows completed nothing"
	assert len({f["qpn"] for f in j["per_flow"]}) == n, "QPNs not distinct"
	assert s["flows"] == n, f"the server saw {s['flows']} flows"
	m = j["memory"]
	assert m["rss_per_flow_bytes"] > 0, m
	print(f"{n} flows: {j['total']['ops']} ops, {j['total']['gbps']:.4f} Gbit/s, Jain {j['jain']:.3f}, "
	      f"connect {j['connect_seconds']:.1f} s; memory/flow client RSS {m['rss_per_flow_bytes']/1024:.1f} KiB, "
	      f"system {m['sys_per_flow_bytes']/1024:.1f} KiB; server RSS {s['memory']['rss_per_flow_bytes']/1024:.1f} KiB")
	PYEOF
	;;

capture)
	# 8 flows of 4 KiB SENDs: every data packet carries 1024 bytes
	tcpdump -i veth0 -n -s 128 -w "$out/veth0.pcap" udp port 4791 >"$out/tcpdump.log" 2>&1 &
	td=$!
	sleep 1
	start_server
	client -u 2 -S 4 --op send --size 4k -D 4 -n 50 -T 30 --json "$out/capture.json" \
		|| fail "sverbs-flowgen"
	stop_server
	sleep 0.5
	kill -INT $td
	wait $td
	cat "$out/tcpdump.log"
	$PY - "$out/capture.json" "$out/veth0.pcap" <<-'PYEOF' || exit 1
	import json, struct, sys, collections
	j = json.load(open(sys.argv[1]))
	want = {f["udp_sport"] for f in j["per_flow"]}
	data = open(sys.argv[2], "rb").read()
	magic = struct.unpack("<I", data[:4])[0]
	assert magic == 0xa1b2c3d4, hex(magic)
	off, pkts = 24, []
	while off + 16 <= len(data):
	    ts, tu, incl, orig = struct.unpack("<IIII", data[off:off + 16])
	    p = data[off + 16:off + 16 + incl]
	    off += 16 + incl
	    if len(p) < 42 or p[12:14] != b"\x08\x00":
	        continue
	    ihl = (p[14] & 15) * 4
	    src = ".".join(str(b) for b in p[26:30])
	    sport, dport = struct.unpack(">HH", p[14 + ihl:14 + ihl + 4])
	    bth = 14 + ihl + 8
	    opcode, dqp = p[bth], int.from_bytes(p[bth + 5:bth + 8], "big")
	    pkts.append((src, sport, dport, orig, opcode, dqp))
	# rdma_cm's own MADs go to QP1 (the GSI QP) with a port of their own
	mads = [p for p in pkts if p[5] == 1]
	pkts = [p for p in pkts if p[5] != 1]
	print(f"{len(mads)} CM MAD packets (dest QP 1), source ports {sorted({p[1] for p in mads})}, sizes {sorted({p[3] for p in mads})}")
	req = [p for p in pkts if p[0] == "10.77.0.1"]
	rsp = [p for p in pkts if p[0] == "10.77.0.2"]
	assert req, "no RoCE packet from 10.77.0.1 on veth0"
	got = {p[1] for p in req}
	sizes = collections.Counter(p[3] for p in req)
	print(f"{len(pkts)} RoCE v2 packets on veth0: {len(req)} from the client, {len(rsp)} from the server")
	print(f"client source ports: {sorted(got)}")
	print(f"reported udp_sport:  {sorted(want)}")
	print(f"server source ports: {sorted({p[1] for p in rsp})}")
	print(f"destination ports:   {sorted({p[2] for p in pkts})}")
	print(f"client frame sizes:  {dict(sizes)}")
	ok = True
	if got != want:
	    print("FAIL: the captured source ports are not the reported ones"); ok = False
	if len(got) != j["flows"]:
	    print(f"FAIL: {len(got)} source ports for {j['flows']} flows"); ok = False
	if {p[1] for p in rsp} != want:
	    print("FAIL: the server's packets do not use the flows' ports"); ok = False
	if {p[2] for p in pkts} != {4791}:
	    print("FAIL: a destination port other than 4791"); ok = False
	# SEND first/middle/last (opcodes 0, 1, 2) and only (4) carry no RETH:
	# a full packet is 14 + 20 + 8 + 12 (BTH) + 1024 + 4 (ICRC) = 1082 bytes
	full = [p for p in req if p[4] in (0, 1) ]
	if not full or any(p[3] != 1082 for p in full):
	    print(f"FAIL: SEND first/middle packets not all 1082 bytes: {collections.Counter(p[3] for p in full)}"); ok = False
	else:
	    print(f"{len(full)} SEND first/middle packets, all 1082 bytes")
	sys.exit(0 if ok else 1)
	PYEOF
	;;

errors)
	# A peer that dies mid-run: the client ends with status 2, partial results
	# saved; and bad input fails before anything starts, with a clear message.
	# The bad-input checks run side by side while the client's traffic starts
	# (they touch neither its QPs nor its port): the loaded TCG guest takes
	# seconds per process start.  Conditions are waited for against deadlines
	# generous for a host 5x slower than idle, never for a fixed time; the
	# client's own duration (-T 600) is far beyond them, so a client that ends
	# on its own (status 0) or not at all fails the check.
	start_server
	client -u 2 -S 2 --size 16k -D 4 -T 600 --json "$out/partial.json" --csv "$out/partial.csv" \
		--progress >"$out/client.log" 2>&1 &
	cl=$!
	expect() {  # expect NAME PATTERN CMD...: exit 1 and PATTERN on stderr (in $out/NAME.*)
		local name=$1 pat=$2 rc t=$SECONDS
		shift 2
		"$@" >/dev/null 2>"$out/$name.err"
		rc=$?
		echo "$* -> $rc ($((SECONDS - t)) s): $(cat "$out/$name.err")" >"$out/$name.log"
		[ $rc = 1 ] && grep -q -- "$pat" "$out/$name.err" ||
			{ echo "FAIL: expected exit 1 and '$pat'" >>"$out/$name.log"; return 1; }
	}
	maxqp_check() {
		local maxqp
		maxqp=$(ibv_devinfo -v -d rxe0 | awk '/max_qp:/ {print $2}')
		expect bad-maxqp "max_qp $maxqp" client -d rxe0 -u $((maxqp / 64 + 1)) -S 64
	}
	checks=()
	expect bad-device "unknown RDMA device 'mlx5_9'" client -d mlx5_9 -u 1 & checks+=($!)
	maxqp_check & checks+=($!)
	expect bad-size "above 4 GiB" client -d rxe0 --size 5g & checks+=($!)
	expect bad-route "routes through device rxe0, not rxe1" client -d rxe1 & checks+=($!)
	expect bad-grid "8 processes do not make a square grid" "$fg" --mode bmr --procs 8 & checks+=($!)
	# the guest has no DNS server: one try of 1 s, not glibc's 2 x 5 s
	RES_OPTIONS="timeout:1 attempts:1" \
		expect bad-host "cannot resolve" "$fg" -s no-such-host.invalid & checks+=($!)
	bad=0
	for p in "${checks[@]}"; do wait "$p" || bad=1; done
	cat "$out"/bad-*.log
	[ $bad = 0 ] || { kill "$cl" "$srv"; fail "bad input: see above"; }
	say "bad input checked after ${SECONDS} s"
	# until the traffic runs: the first progress line (1 s of traffic)
	wait_for 60 grep -q 'Gbit/s' "$out/client.log" || { cat "$out/client.log"; fail "no traffic after 60 s"; }
	say "traffic after ${SECONDS} s; killing the server"
	kill -9 "$srv"
	t0=$SECONDS
	# the client notices (rdma_cm DISCONNECTED), drains for at most
	# --drain-timeout (5 s) and writes its results
	wait_for 60 eval '! kill -0 $cl 2>/dev/null' ||
		{ cat "$out/client.log"; kill "$cl"; fail "the client still runs 60 s after its server died"; }
	wait $cl
	rc=$?
	cat "$out/client.log"
	say "the client ended $((SECONDS - t0)) s after the server died, status $rc"
	[ $rc = 2 ] || fail "client status $rc after the server died, not 2"
	# jq, not python: python's start costs seconds in the loaded TCG guest
	jq -e '.aborted and (.abort_reason | length > 0)' "$out/partial.json" >/dev/null ||
		fail "the partial JSON is not marked aborted with a reason"
	jq -e '.total.ops > 0' "$out/partial.json" >/dev/null || fail "no partial results"
	[ "$(wc -l <"$out/partial.csv")" = 5 ] || fail "the partial CSV has not a header and 4 rows"
	jq -r '"partial results: \(.total.ops) ops, reason: \(.abort_reason)"' "$out/partial.json"
	;;
bmr)
	# mpirun -np 4: BMR on a 2 x 2 grid, the blocks over verbs, C checked
	# against one dgemm (sverbs-bmr exits 3 when the error is above the
	# tolerance); then the same over MPI collectives (UCX on rxe0); then a
	# grid that is not square fails before starting.
	[ -x "$bmr" ] || fail "no $bmr (meson found no MPI for C++?)"
	mpi_bmr 4 --matrix 256 --block 64 --json "$out/bmr-verbs.json" || fail "sverbs-bmr -np 4 (verbs)"
	mpi_bmr 4 --matrix 256 --block 64 --comm mpi --json "$out/bmr-mpi.json" \
		|| fail "sverbs-bmr -np 4 (MPI over UCX)"
	msg=$(mpi_bmr 2 --matrix 256 2>&1)
	rc=$?
	echo "-np 2 -> $rc: $msg"
	[ $rc != 0 ] && grep -q "2 processes do not make a square grid" <<<"$msg" \
		|| fail "a 2-rank grid did not fail with its message"
	$PY - "$out/bmr-verbs.json" "$out/bmr-mpi.json" <<-'PYEOF' || exit 1
	import json, sys
	for f, comm in zip(sys.argv[1:], ("verbs", "mpi")):
	    j = json.load(open(f))
	    assert j["ranks"] == 4 and j["grid"] == 2 and j["comm"] == comm, j
	    assert j["verified"] and j["max_abs_error"] <= j["tolerance"], j
	    if comm == "verbs":
	        assert sorted(set(j["devices"])) == ["rxe0", "rxe1"], j["devices"]
	        assert j["t_comm_per_element"] > 0, j
	    print(f"{comm}: {j['seconds']:.3f} s, max abs error {j['max_abs_error']:.3e} "
	          f"(tolerance {j['tolerance']:.3e}), T_comm {j['t_comm_per_element']:.3e} s/element, "
	          f"T_flops {j['t_flops_per_flop']:.3e} s/flop, devices {j['devices']}")
	PYEOF
	;;

bmr-model)
	# the model check (docs/flowgen.md): BMR for N in BMR_NS and M in BMR_MS,
	# BMR_REPS times each (alternated), then flowgen/plot-model.py fits T_sched
	# and plots the overhead against N (1 + log2 N) / (4M)
	[ -x "$bmr" ] || fail "no $bmr"
	for rep in $(seq 1 "${BMR_REPS:-3}"); do
		for m in ${BMR_MS:-240 480}; do
			for n in ${BMR_NS:-1 4 9 16}; do
				mpi_bmr "$n" --matrix "$m" -q --no-verify --json "$out/bmr-n$n-m$m-r$rep.json" \
					|| fail "sverbs-bmr -np $n --matrix $m"
				echo "N $n M $m rep $rep: seconds, max wait: $($PY -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['seconds'], j['wait_seconds_max'])" "$out/bmr-n$n-m$m-r$rep.json")"
			done
		done
	done
	$PY "$(dirname "$0")/../../plot-model.py" --out "$out" "$out"/bmr-*.json || fail "plot-model.py"
	;;
*) fail "unknown case $case_" ;;
esac
