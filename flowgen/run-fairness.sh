#!/bin/bash
# run-fairness.sh - per-flow throughput and Jain's index with bandwidth
# allocation off and on, with the sverbs layer on and off (SVERBS=on|off, the
# same build), at one or more flow counts, in one Soft-RoCE guest boot.  The
# allocation shares 90% of the total measured by the allocation-off run of
# the same layer setting and scale, so that pacing binds (the guest's rxe is
# far slower than the port's nominal rate).
#
#   flowgen/run-fairness.sh [FLOWS... [SECONDS [USER_WEIGHTS]]]   (default "64" 10)
#   e.g. flowgen/run-fairness.sh "64 3000 4096" 10     flowgen/run-fairness.sh 64 10 1,1,2,4
#   A FLOWS entry N:S runs that scale for S seconds instead of SECONDS:
#   flowgen/run-fairness.sh "64:60 3000:240 4096:180"
# Per scale the order alternates the layer: allocation off with each layer
# setting, then allocation on with each (on/off, off/off, on/on, off/on for
# the default FAIR_LAYERS).
# FAIR_LAYERS ("on off") the layer settings to run; FAIR_FLOWGEN the
# sverbs-flowgen binary (default the build's; a copy keeps a long matrix
# apart from rebuilds meanwhile);
# FAIR_SIZE (16k) and FAIR_DEPTH (4) set every flow's WRITE size and depth
# (at thousands of flows keep size x depth x flows small against the guest's
# rate, or every flow completes only its first depth WRs in the run).
# Output: build/flowgen/results/fairness/<flows>/*.json (client; server's in
# *-server.json) and status.txt (one line per run: name and exit status),
# host-load.txt (the host's load average every 30 s), a table on stdout
# (flowgen/fairness-summary.py; with --json/--md it writes perf/results'
# summaries) and fairness.png
# (the per-flow throughput CDF at each scale).  A run that fails is recorded and
# the matrix goes on; the script exits 1 if any run failed.
# On this shared 2-CPU host the figures are not meaningful; run it on an idle
# machine (or a real cluster: the same client/server commands) for numbers.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
build=${SVERBS_BUILD:-$repo/build}
scales=${1:-64} secs=${2:-10} weights=${3:-}
fg=${FAIR_FLOWGEN:-$build/flowgen/sverbs-flowgen}
size=${FAIR_SIZE:-16k} depth=${FAIR_DEPTH:-4} layers=${FAIR_LAYERS:-on off}
out=$build/flowgen/results/fairness
mkdir -p "$out"
big=0
specs=""
for scale in $scales; do
	n=${scale%%:*} t=$secs
	[ "$n" = "$scale" ] || t=${scale#*:}
	[[ "$n" =~ ^[0-9]+$ && "$t" =~ ^[0-9]+$ ]] || { echo "bad FLOWS entry '$scale' (N or N:SECONDS)" >&2; exit 1; }
	users=$((n >= 64 ? 8 : 1))
	[ -z "$weights" ] || users=$(tr ',' '\n' <<<"$weights" | wc -l)
	services=$((n / users))
	[ $((users * services)) = "$n" ] || { echo "$n flows do not split into $users users" >&2; exit 1; }
	[ "$n" -gt 512 ] && big=1
	specs+="$n:$users:$services:$t "
	rm -rf "${out:?}/$n"
	mkdir -p "$out/$n"
done
[ "$big" = 1 ] && export SVERBS_VM_MEM=${SVERBS_VM_MEM:-3G}
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-3600}
# the host's load (this is what swings the guest's rate): every 30 s,
# with the run then in progress (the last line of each scale's status.txt)
(
	while sleep 30; do
		echo "$(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" \
			"after: $(for scale in $scales; do tail -n1 "$out/${scale%%:*}/status.txt" 2>/dev/null; done | tail -n1)"
	done
) > "$out/host-load.txt" &
loadmon=$!
trap 'kill $loadmon 2>/dev/null' EXIT
"$repo/tests/vm/run-in-vm.sh" "
. '$build/prefix/env.sh'
fg='$fg'
status() { echo \"\${1##*/} \$2\" >> \${1%/*}/status.txt; }
run() {  # DIR NAME SVERBS USERS SERVICES ARGS...: one client/server pair; its status recorded
	local dir=\$1 name=\$2 sv=\$3 u=\$4 s=\$5 rc; shift 5
	SVERBS=\$sv \"\$fg\" --mode server -s 10.77.0.2 -q --json \$dir/\$name-server.json \
		> \$dir/\$name-server.log 2>&1 &
	local srv=\$!
	# up to 300 s: with thousands of cm_ids about, each look (rdma resource)
	# takes seconds in the loaded guest
	if ! vm-wait-listen --cm 7471 300; then
		kill \$srv; wait \$srv; status \$dir/\$name 'no listener'; return 1
	fi
	SVERBS=\$sv \"\$fg\" -s 10.77.0.2 -b 10.77.0.1 -u \$u -S \$s --size $size -D $depth -T \$secs -t 2 \
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
	IFS=: read -r n u s secs <<<\"\$spec\"
	dir='$out/'\$n
	for sv in $layers; do
		echo \"== \$n flows, \$secs s, layer \$sv, allocation off\" >&2
		run \$dir layer-\$sv-alloc-off \$sv \$u \$s --alloc off
	done
	for sv in $layers; do
		link=\$(python3 -c \"import json; print(0.9 * json.load(open('\$dir/layer-\$sv-alloc-off.json'))['total']['gbps'])\" 2>/dev/null)
		if [ -z \"\$link\" ] || [ \"\$link\" = 0.0 ]; then
			status \$dir/layer-\$sv-alloc-on 'not run: no allocation-off total'
			continue
		fi
		echo \"== \$n flows, \$secs s, layer \$sv, allocation on\" >&2
		run \$dir layer-\$sv-alloc-on \$sv \$u \$s --alloc on --link-gbps \$link
	done
done
true
"
vm=$?
[ "$vm" = 0 ] || echo "run-fairness: the guest ended with status $vm" >&2
# shellcheck disable=SC2046 # one flow count per word
"$here/fairness-summary.py" "$out" $(for scale in $scales; do echo "${scale%%:*}"; done)
failed=0
for scale in $scales; do
	n=${scale%%:*}
	if [ -f "$out/$n/status.txt" ]; then
		echo "$n flows, runs (exit status):"
		sed 's/^/  /' "$out/$n/status.txt"
		grep -qv ' 0$' "$out/$n/status.txt" && failed=1
	else
		echo "run-fairness: no run at $n flows recorded a status" >&2
		failed=1
	fi
done
clients=$(ls "$out"/*/layer-{on,off}-alloc-{on,off}.json 2>/dev/null) # (not the *-server.json)
if [ -n "$clients" ]; then
	# shellcheck disable=SC2086 # one file per word
	/usr/bin/python3 "$here/plot-run.py" --cdf-by-flows -o "$out/fairness.png" $clients || failed=1
fi
[ "$vm" = 0 ] && [ "$failed" = 0 ]
