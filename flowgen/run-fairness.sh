#!/bin/bash
# run-fairness.sh - per-flow throughput and Jain's index with bandwidth
# allocation off and on, with the sverbs layer on and off (SVERBS=on|off, the
# same build), at one or more flow counts, in one Soft-RoCE guest boot.  The
# allocation shares 90% of the total measured by the allocation-off run just
# before it (same layer setting, same scale), so that pacing binds (the
# guest's rxe is far slower than the port's nominal rate).
#
#   flowgen/run-fairness.sh [FLOWS... [SECONDS [USER_WEIGHTS]]]   (default "64" 10)
#   e.g. flowgen/run-fairness.sh "64 3000 4096" 10     flowgen/run-fairness.sh 64 10 1,1,2,4
# FAIR_LAYERS ("on off") the layer settings to run;
# FAIR_SIZE (16k) and FAIR_DEPTH (4) set every flow's WRITE size and depth
# (at thousands of flows keep size x depth x flows small against the guest's
# rate, or every flow completes only its first depth WRs in the run).
# Output: build/flowgen/results/fairness/<flows>/*.json and status.txt (one
# line per run: name and exit status), a table on stdout and fairness.png
# (the per-flow throughput CDF at each scale).  A run that fails is recorded and
# the matrix goes on; the script exits 1 if any run failed.
# On this shared 2-CPU host the figures are not meaningful; run it on an idle
# machine (or a real cluster: the same client/server commands) for numbers.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
build=${SVERBS_BUILD:-$repo/build}
scales=${1:-64} secs=${2:-10} weights=${3:-}
size=${FAIR_SIZE:-16k} depth=${FAIR_DEPTH:-4} layers=${FAIR_LAYERS:-on off}
out=$build/flowgen/results/fairness
mkdir -p "$out"
big=0
specs=""
for n in $scales; do
	users=$((n >= 64 ? 8 : 1))
	[ -z "$weights" ] || users=$(tr ',' '\n' <<<"$weights" | wc -l)
	services=$((n / users))
	[ $((users * services)) = "$n" ] || { echo "$n flows do not split into $users users" >&2; exit 1; }
	[ "$n" -gt 512 ] && big=1
	specs+="$n:$users:$services "
	rm -rf "${out:?}/$n"
	mkdir -p "$out/$n"
done
[ "$big" = 1 ] && export SVERBS_VM_MEM=${SVERBS_VM_MEM:-3G}
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-3600}
"$repo/tests/vm/run-in-vm.sh" "
. '$build/prefix/env.sh'
fg='$build/flowgen/sverbs-flowgen'
status() { echo \"\${1##*/} \$2\" >> \${1%/*}/status.txt; }
run() {  # DIR NAME SVERBS USERS SERVICES ARGS...: one client/server pair; its status recorded
	local dir=\$1 name=\$2 sv=\$3 u=\$4 s=\$5 rc; shift 5
	SVERBS=\$sv \"\$fg\" --mode server -s 10.77.0.2 -q > \$dir/\$name-server.log 2>&1 &
	local srv=\$!
	# up to 300 s: with thousands of cm_ids about, each look (rdma resource)
	# takes seconds in the loaded guest
	if ! vm-wait-listen --cm 7471 300; then
		kill \$srv; wait \$srv; status \$dir/\$name 'no listener'; return 1
	fi
	SVERBS=\$sv \"\$fg\" -s 10.77.0.2 -b 10.77.0.1 -u \$u -S \$s --size $size -D $depth -T $secs -t 2 \
		${weights:+--user-weights $weights} --label \$name --json \$dir/\$name.json -q \"\$@\" \
		> \$dir/\$name.log 2>&1
	rc=\$?
	# the server ends when its flows have gone (60 s at most: then, or at once
	# when the client failed, it is killed); 1 s steps: a fork costs in the
	# loaded TCG guest
	if [ \$rc = 0 ]; then
		for _ in \$(seq 60); do kill -0 \$srv 2>/dev/null || break; sleep 1; done
	fi
	kill \$srv 2>/dev/null
	wait \$srv
	status \$dir/\$name \$rc
	return \$rc
}
for spec in $specs; do
	IFS=: read -r n u s <<<\"\$spec\"
	dir='$out/'\$n
	for sv in $layers; do
		echo \"== \$n flows, layer \$sv\" >&2
		run \$dir layer-\$sv-alloc-off \$sv \$u \$s --alloc off
		link=\$(python3 -c \"import json; print(0.9 * json.load(open('\$dir/layer-\$sv-alloc-off.json'))['total']['gbps'])\" 2>/dev/null)
		if [ -z \"\$link\" ] || [ \"\$link\" = 0.0 ]; then
			status \$dir/layer-\$sv-alloc-on 'not run: no allocation-off total'
			continue
		fi
		run \$dir layer-\$sv-alloc-on \$sv \$u \$s --alloc on --link-gbps \$link
	done
done
true
"
vm=$?
[ "$vm" = 0 ] || echo "run-fairness: the guest ended with status $vm" >&2
/usr/bin/python3 - "$out" $scales <<'PYEOF'
import json, sys, os
out, scales = sys.argv[1], sys.argv[2:]
print(f"{'run':24} {'flows':>6} {'Gbit/s':>9} {'offered':>9} {'target':>9} {'Jain':>7} {'Jain users':>10} "
      f"{'min/max flow':>12} {'errors':>6} {'resets':>6}")
for n in scales:
    for name in ("layer-on-alloc-off", "layer-on-alloc-on", "layer-off-alloc-off", "layer-off-alloc-on"):
        f = os.path.join(out, n, name + ".json")
        if not os.path.exists(f):
            print(f"{name:24} {n:>6}  (no result)")
            continue
        j = json.load(open(f))
        g = [x["gbps"] for x in j["per_flow"]]
        ratio = min(g) / max(g) if g and max(g) else 0
        target = j["alloc"]["link_mbps"] / 1e3 if j["alloc"]["active"] else 0
        t = j["total"]
        print(f"{name:24} {j['flows']:>6} {t['gbps']:>9.4f} {t.get('offered_gbps', 0):>9.4f} {target:>9.4f} "
              f"{j['jain']:>7.3f} {j['jain_users']:>10.3f} {ratio:>12.3f} {t['errors']:>6} {t['pace_resets']:>6}"
              + ("  ABORTED: " + j.get("abort_reason", "") if j["aborted"] else ""))
PYEOF
failed=0
for n in $scales; do
	if [ -f "$out/$n/status.txt" ]; then
		echo "$n flows, runs (exit status):"
		sed 's/^/  /' "$out/$n/status.txt"
		grep -qv ' 0$' "$out/$n/status.txt" && failed=1
	else
		echo "run-fairness: no run at $n flows recorded a status" >&2
		failed=1
	fi
done
if ls "$out"/*/layer-*.json >/dev/null 2>&1; then
	/usr/bin/python3 "$here/plot-run.py" --cdf-by-flows -o "$out/fairness.png" "$out"/*/layer-*.json ||
		failed=1
fi
[ "$vm" = 0 ] && [ "$failed" = 0 ]
