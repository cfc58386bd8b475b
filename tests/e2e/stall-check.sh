#!/bin/bash
# stall-check.sh BINARY PREFIX [RUNS [SEED]] - is the RC stall seen in the
# stock (SVERBS=off) integrity run rxe's own, without any code of ours?  In
# one guest, RUNS times each (default 5, alternating):
#   debian  Debian 12's rdma-core 44 (libibverbs1 + ibverbs-providers from
#           /usr/lib: none of our code is loaded; checked with LD_DEBUG)
#   off     our build with SVERBS=off (the patched provider, layer off)
# `BINARY integrity` with one seed (default 1615044938, the seed of the
# stall recorded in tests/e2e/README.md), printing per run: status, seconds,
# and the deltas of rxe's retransmission counters.  Not a meson test: a
# diagnosis, run by hand (tests/e2e/README.md, test bed notes).
#   SVERBS_VM_TIMEOUT=1800 tests/e2e/stall-check.sh "$PWD/build/tests/e2e/sverbs_e2e" "$PWD/build/prefix" 5
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BINARY PREFIX [RUNS [SEED]]" >&2; exit 2; }
if [ -z "${RXE_VM_HOST:-}" ]; then
	exec "${SVERBS_VM_RUNNER:-$here/../vm/run-in-vm.sh}" "$(printf '%q ' bash "$0" "$@")"
fi
bin=$1 prefix=$2 runs=${3:-5} seed=${4:-1615044938}
# as run-e2e.sh: a long backlog keeps the veth pair lossless
sysctl -qw net.core.netdev_max_backlog=100000
counters="completer_retry_err rcvd_seq_err retry_exceeded_err duplicate_request out_of_seq_request"
snap() {
	local c d
	for c in $counters; do
		for d in /sys/class/infiniband/rxe*/ports/1/hw_counters; do cat "$d/$c"; done | paste -sd+ | bc
	done | paste -sd' '
}
one() {  # one LABEL CMD...
	local label=$1 t0 rc before after ld
	shift
	before=$(snap)
	ld=$(mktemp /tmp/ld.XXXXXX)
	t0=$(date +%s.%N)
	LD_DEBUG=libs LD_DEBUG_OUTPUT=$ld E2E_SEED=$seed timeout -s KILL 180 "$@" integrity > /tmp/run.out 2>&1
	rc=$?
	after=$(snap)
	libs=$(grep -h 'calling init: .*\(libibverbs.so.1\|librxe\)' "$ld".* 2>/dev/null |
		sed 's/.*calling init: //' | sort -u | paste -sd' ')
	rm -f "$ld" "$ld".*
	echo "$label: status $rc, $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s," \
		"counters (+$counters): $(awk -v a="$after" -v b="$before" 'BEGIN { n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? " " : ""), x[i] - y[i] }')"
	echo "  libs: $libs"
	[ $rc = 0 ] || grep -E 'not ok|ERROR|no completion' /tmp/run.out | head -5 | sed 's/^/  /'
}
for i in $(seq 1 "$runs"); do
	( unset LD_LIBRARY_PATH PYTHONPATH SVERBS SVERBS_PREFIX
	  export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu
	  one "run $i debian (rdma-core 44, no sverbs code)" "$bin" )
	( # shellcheck disable=SC1091
	  . "$prefix/env.sh"
	  export SVERBS=off
	  one "run $i ours SVERBS=off" "$bin" )
done
