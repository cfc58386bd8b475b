#!/bin/bash
# syscalls.sh - runs INSIDE the guest (perf/run-rate.sh --syscalls): count the
# system calls per posted WR with `strace -c -f`, SVERBS=off vs SVERBS=on.
#
#   syscalls.sh ITERS CONFIGS...      CONFIG: t1 | t4 | pl16 | t1b | t4b | mib
#                                     | mib-<K>k-s<S> (see configs.sh; mib*
#                                     run ITERS/50 1 MiB WRITEs)
#
# For each config and mode, rate_bench runs twice under strace: with -n ITERS
# (WRs per thread) and with -n 0 (setup and teardown only); the difference,
# divided by the WRs that completed, is the per-WR count.  strace slows every
# syscall a lot under TCG, so the rates of these runs mean nothing.
# Prints one JSON line per (config, mode) on stdout.  Exit 1 if any run failed.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 ITERS CONFIG..." >&2; exit 2; }
iters=$1
shift
# shellcheck source-path=SCRIPTDIR source=configs.sh
. "$(dirname "$0")/configs.sh"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
fail=0
for c in "$@"; do
	case $c in
	t1 | t4 | pl16 | t4pl16 | t1b | t4b | mib | mib-*k-s*) rate_config "$c" ;;
	*) echo "syscalls: unknown config $c" >&2; exit 2 ;;
	esac
	n=$iters
	[[ $c != mib* ]] || n=$((iters / 50 > 0 ? iters / 50 : 1))
	for m in off on; do
		if [ "$m" = on ]; then e=("${benv[@]}") a=("${args[@]}" "${bargs[@]}"); else e=() a=("${args[@]}"); fi
		if env "${e[@]}" SVERBS=$m strace -c -f -o "$tmp/setup" "$bin" "${a[@]}" -n 0 >/dev/null &&
			env "${e[@]}" SVERBS=$m strace -c -f -o "$tmp/run" "$bin" "${a[@]}" -n "$n" \
				--label "cfg=$c" >"$tmp/json"; then
			/usr/bin/python3 "$here/strace2json.py" "$c" "$tmp/setup" "$tmp/run" "$tmp/json" || fail=1
		else
			fail=1
			printf '{"bench":"syscalls","sverbs":"%s","cfg":"%s","error":"rate_bench under strace failed"}\n' "$m" "$c"
		fi
	done
done
rm -rf "$tmp"
exit $fail
