#!/bin/bash
# run-fairness.sh - per-flow throughput and Jain's index with bandwidth
# allocation off and on, with the sverbs layer on and off, at N flows, in one
# Soft-RoCE guest boot.  The allocation shares 90% of the link rate measured
# by the first (allocation off) run of each layer setting, so that pacing binds
# (the guest's rxe is far slower than the port's nominal rate).
#
#   flowgen/run-fairness.sh [FLOWS [SECONDS [USER_WEIGHTS]]]   (default 64 10)
#   e.g. flowgen/run-fairness.sh 4096 30       flowgen/run-fairness.sh 64 10 1,1,2,4
# Output: build/flowgen/results/fairness/*.json and a table on stdout.
# On this shared 2-CPU host the figures are not meaningful; run it on an idle
# machine (or a real cluster: the same client/server commands) for numbers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
build=${SVERBS_BUILD:-$repo/build}
n=${1:-64} secs=${2:-10} weights=${3:-}
out=$build/flowgen/results/fairness
mkdir -p "$out"
users=$(( n >= 64 ? 8 : 1 ))
[ -z "$weights" ] || users=$(tr ',' '\n' <<<"$weights" | wc -l)
services=$(( n / users ))
[ $((users * services)) = "$n" ] || { echo "$n flows do not split into $users users" >&2; exit 1; }
[ "$n" -gt 512 ] && export SVERBS_VM_MEM=${SVERBS_VM_MEM:-3G}
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-1800}
"$repo/tests/vm/run-in-vm.sh" "
set -e
. '$build/prefix/env.sh'
fg='$build/flowgen/sverbs-flowgen'
run() {  # NAME SVERBS ARGS...
	local name=\$1 sv=\$2; shift 2
	SVERBS=\$sv \"\$fg\" --mode server -s 10.77.0.2 -q > '$out/'\$name-server.log 2>&1 &
	vm-wait-listen --cm 7471
	SVERBS=\$sv \"\$fg\" -s 10.77.0.2 -b 10.77.0.1 -u $users -S $services --size 16k -D 4 -T $secs -t 2 \
		${weights:+--user-weights $weights} --label \$name --json '$out/'\$name.json -q \"\$@\"
	wait
}
for sv in on off; do
	run layer-\$sv-alloc-off \$sv --alloc off
	link=\$(python3 -c \"import json; print(0.9 * json.load(open('$out/layer-\$sv-alloc-off.json'))['total']['gbps'])\")
	run layer-\$sv-alloc-on \$sv --alloc on --link-gbps \$link
done
"
/usr/bin/python3 - "$out" <<'PYEOF'
import json, sys, glob, os
print(f"{'run':24} {'flows':>6} {'Gbit/s':>9} {'Jain':>7} {'Jain users':>10} {'min/max flow':>12} {'errors':>6}")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "layer-*.json"))):
    j = json.load(open(f))
    g = [x["gbps"] for x in j["per_flow"]]
    ratio = min(g) / max(g) if max(g) else 0
    print(f"{j['label']:24} {j['flows']:>6} {j['total']['gbps']:>9.4f} {j['jain']:>7.3f} {j['jain_users']:>10.3f} {ratio:>12.3f} {j['total']['errors']:>6}")
PYEOF
