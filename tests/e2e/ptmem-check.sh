#!/bin/bash
# ptmem-check.sh BINARY PREFIX [NQP] [NLEAVE] - issue 16.10 on rxe: a QP in
# pass-through costs what a stock QP costs.  In one guest, runs
# `BINARY NQP NLEAVE` (ptmem_e2e.c: NQP RC QPs on one CQ, NLEAVE of them then
# leave pass-through) with SVERBS=off, SVERBS=on (pass-through) and
# SVERBS=on SVERBS_PASSTHROUGH=off (every QP in the layer's queue, for the
# record), and `BINARY NQP 0` of off and on under strace -f -c.
# Fails when, with the layer on, a QP costs more than 1 KiB of private
# memory (the heap, mallinfo2, and RssAnon) beyond the stock one, or the run
# makes more system calls than stock plus SYSCALL_SLACK (the layer's
# one-time start: its configuration; a system call per QP would be NQP
# more).  The total RSS and its file-backed part (the provider's queue
# mappings) are reported too.  Memory and calls are counted, not timed.
# Defaults: NQP 10000, NLEAVE 8.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../cannot-run.sh
. "$here/../cannot-run.sh"

if [ -z "${RXE_VM_HOST:-}" ]; then
	runner=${SVERBS_VM_RUNNER:-$here/../vm/run-in-vm.sh}
	why=$("$runner" --check 2>&1) || cannot_run "cannot start a guest: $why"
	[ -x "$1" ] || cannot_run "no binary $1"
	exec "$runner" "$(printf '%q ' bash "$here/ptmem-check.sh" "$@")"
fi

bin=$1 prefix=$2 nqp=${3:-10000} nleave=${4:-8}
SYSCALL_SLACK=${SYSCALL_SLACK:-64}
[ -r "$prefix/env.sh" ] || cannot_run "no $prefix/env.sh: rdma-core prefix not built"
# shellcheck disable=SC1091
. "$prefix/env.sh"
for v in $(env | sed -n 's/^\(SVERBS_[A-Z_]*\)=.*/\1/p'); do
	[ "$v" = SVERBS_PREFIX ] || unset "$v"
done
command -v strace >/dev/null || cannot_run "no strace in the guest"

declare -A rss anon file heap leave calls
fail=0
field() { sed -n "s/^ptmem $1 .* $2=\([0-9.-]*\).*/\1/p" <<<"$3"; }
for mode in off on queue; do
	case $mode in
	off) envs=(SVERBS=off) ;;
	on) envs=(SVERBS=on) ;;
	queue) envs=(SVERBS=on SVERBS_PASSTHROUGH=off) ;;
	esac
	out=$(env "${envs[@]}" timeout -s KILL 300 "$bin" "$nqp" "$nleave")
	rc=$?
	# queue (every QP with the layer's queue, 10,000 of them) is for the
	# record: it may run out of guest memory or time (exit 137)
	if [ $rc != 0 ] && [ $mode = queue ]; then
		echo "# [queue] did not finish (exit $rc): not counted"
		echo "$out"
		continue
	fi
	[ $rc = 0 ] || { echo "FAIL: $mode: ptmem_e2e exited $rc"; echo "$out"; exit 1; }
	sed "s/^/[$mode] /" <<<"$out"
	rss[$mode]=$(field create per_qp "$out")
	anon[$mode]=$(field create anon_per_qp "$out")
	file[$mode]=$(field create file_per_qp "$out")
	heap[$mode]=$(field create heap_per_qp "$out")
	leave[$mode]=$(field leave per_qp "$out")
done
for mode in off on; do
	case $mode in
	off) envs=(SVERBS=off) ;;
	on) envs=(SVERBS=on) ;;
	esac
	st=/tmp/ptmem-strace.$mode
	env "${envs[@]}" timeout -s KILL 600 strace -f -c -o "$st" "$bin" "$nqp" 0 >/dev/null ||
		{ echo "FAIL: $mode: ptmem_e2e under strace exited $?"; exit 1; }
	calls[$mode]=$(awk '$NF == "total" { print $4 }' "$st")
	echo "[$mode] strace -f -c, $nqp QPs created and destroyed: ${calls[$mode]} system calls; the busiest:"
	sed -n '3,8p' "$st" | sed "s/^/[$mode]   /"
done
delta() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", a - b }'; }
for m in on queue; do
	[ -n "${heap[$m]:-}" ] || continue
	echo "# per QP, $m vs off: heap $(delta "${heap[$m]}" "${heap[off]}") B," \
		"RssAnon $(delta "${anon[$m]}" "${anon[off]}") B," \
		"RssFile $(delta "${file[$m]}" "${file[off]}") B," \
		"RSS $(delta "${rss[$m]}" "${rss[off]}") B" \
		"(off: heap ${heap[off]}, RssAnon ${anon[off]}, RssFile ${file[off]}, RSS ${rss[off]})"
done
echo "# leaving pass-through, RSS per QP ($nleave QPs): off ${leave[off]} B," \
	"on ${leave[on]} B, queue ${leave[queue]:-?} B"
echo "# system calls, $nqp QPs: off ${calls[off]}, on ${calls[on]}"
for d in "heap $(delta "${heap[on]}" "${heap[off]}")" \
	"RssAnon $(delta "${anon[on]}" "${anon[off]}")"; do
	if awk -v d="${d#* }" 'BEGIN { exit !(d > 1024) }'; then
		echo "FAIL: a pass-through QP costs ${d#* } B of ${d%% *} more than a stock one (> 1024)"
		fail=1
	fi
done
if [ -z "${calls[on]}" ] || [ -z "${calls[off]}" ] ||
	[ "${calls[on]}" -gt $((calls[off] + SYSCALL_SLACK)) ]; then
	echo "FAIL: the layer in pass-through made ${calls[on]:-?} system calls, stock ${calls[off]:-?} (slack $SYSCALL_SLACK)"
	fail=1
fi
[ $fail = 0 ] && echo "# ptmem: pass-through costs what stock costs"
exit $fail
