#!/bin/bash
# ptmem-check.sh BINARY PREFIX [NQP] [NLEAVE] - issue 16.10 on rxe: a QP in
# pass-through costs what a stock QP costs.  In one guest, runs
# `BINARY NQP NLEAVE` (ptmem_e2e.c: NQP RC QPs on one CQ, NLEAVE of them then
# leave pass-through) with SVERBS=off, SVERBS=on (pass-through) and
# SVERBS=on SVERBS_PASSTHROUGH=off (every QP in the layer's queue, as far
# as the CQ can grow: its figures are reported, and it must finish), and
# `BINARY STRACE_NQP 0` of the three under strace -f -c (1,000 QPs by
# default: strace costs minutes per 10,000 QPs in the emulated guest, and
# a system call per QP shows as well in 1,000).
# Fails when, with the layer on, a pass-through QP costs more than 1 KiB
# beyond the stock one, of heap (mallinfo2) or of resident memory (the
# sum of /proc/self/smaps; /proc/self/status's RssAnon and RssFile are
# printed but lag on the 6.1 kernel, see ptmem_e2e.c), or the run makes
# more system calls than stock plus SYSCALL_SLACK (the layer's one-time
# start: its configuration; a system call per QP would be STRACE_NQP more),
# or any run fails or does not finish.  ptmem_e2e prints what grew per
# mapping too ("ptmem smaps" lines).  Memory and calls are counted, not
# timed.  Defaults: NQP 10000, NLEAVE 8.
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
snqp=${STRACE_NQP:-1000}
[ "$snqp" -le "$nqp" ] || snqp=$nqp
[ -r "$prefix/env.sh" ] || cannot_run "no $prefix/env.sh: rdma-core prefix not built"
# shellcheck disable=SC1091
. "$prefix/env.sh"
for v in $(env | sed -n 's/^\(SVERBS_[A-Z_]*\)=.*/\1/p'); do
	[ "$v" = SVERBS_PREFIX ] || unset "$v"
done
command -v strace >/dev/null || cannot_run "no strace in the guest"

declare -A rss anon file heap leave calls secs
fail=0
# field LINE-PREFIX KEY TEXT: KEY's value on the line that starts so
field() { sed -n "/^ptmem $1 /s/.* $2=\([0-9.-]*\).*/\1/p" <<<"$3"; }
menv() {
	case $1 in
	off) echo SVERBS=off ;;
	on) echo SVERBS=on ;;
	queue) echo SVERBS=on SVERBS_PASSTHROUGH=off ;;
	esac
}
# Generous limits (the guest is emulated, the host may be loaded 5x): a
# run that does not finish fails, queue (every QP with the layer's queue)
# included.  Idle, a mode takes 20-60 s.
RUN_LIMIT=${PTMEM_RUN_LIMIT:-400}
for mode in off on queue; do
	t0=$(date +%s)
	# shellcheck disable=SC2046
	out=$(env $(menv $mode) timeout -s KILL "$RUN_LIMIT" "$bin" "$nqp" "$nleave")
	rc=$?
	secs[$mode]=$(($(date +%s) - t0))
	[ $rc = 0 ] || { echo "FAIL: $mode: ptmem_e2e exited $rc (137: killed, limit ${RUN_LIMIT} s)"; echo "$out"; exit 1; }
	echo "[$mode] ${secs[$mode]} s"
	sed "s/^/[$mode] /" <<<"$out"
	heap[$mode]=$(field create heap_per_qp "$out")
	rss[$mode]=$(field "smaps create total" rss_per_qp "$out")
	anon[$mode]=$(field "smaps create total" anon_per_qp "$out")
	file[$mode]=$(field "smaps create total" file_per_qp "$out")
	leave[$mode]=$(field "smaps leave total" rss_per_qp "$out")
	[ -n "${heap[$mode]}" ] && [ -n "${rss[$mode]}" ] ||
		{ echo "FAIL: $mode: no heap / smaps figures in ptmem_e2e's output"; exit 1; }
done
for mode in off on queue; do
	st=/tmp/ptmem-strace.$mode
	# shellcheck disable=SC2046
	env $(menv $mode) timeout -s KILL "$RUN_LIMIT" strace -f -c -o "$st" "$bin" "$snqp" 0 >/dev/null ||
		{ echo "FAIL: $mode: ptmem_e2e under strace exited $? (limit ${RUN_LIMIT} s)"; exit 1; }
	calls[$mode]=$(awk '$NF == "total" { print $4 }' "$st")
	echo "[$mode] strace -f -c, $snqp QPs created and destroyed: ${calls[$mode]} system calls; the busiest:"
	sed -n '3,8p' "$st" | sed "s/^/[$mode]   /"
done
delta() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", a - b }'; }
per() { awk -v a="$1" -v n="$snqp" 'BEGIN { printf "%.2f", a / n }'; }
echo "# per QP ($nqp QPs on one CQ; resident memory from /proc/self/smaps;" \
	"system calls of $snqp QPs created and destroyed)"
echo "# mode  | heap B | RSS B    | anon B  | file B   | system calls"
for m in off on queue; do
	printf "# %-5s | %6s | %8s | %7s | %8s | %s\n" "$m" "${heap[$m]}" "${rss[$m]}" \
		"${anon[$m]}" "${file[$m]}" "$(per "${calls[$m]}")"
done
for m in on queue; do
	echo "# $m vs off: heap $(delta "${heap[$m]}" "${heap[off]}") B," \
		"RSS $(delta "${rss[$m]}" "${rss[off]}") B" \
		"(anon $(delta "${anon[$m]}" "${anon[off]}")," \
		"file $(delta "${file[$m]}" "${file[off]}")), system calls" \
		"$(delta "${calls[$m]}" "${calls[off]}") in all"
done
echo "# leaving pass-through, RSS per QP ($nleave QPs): off ${leave[off]:-?} B," \
	"on ${leave[on]:-?} B, queue ${leave[queue]:-?} B"
for d in "heap $(delta "${heap[on]}" "${heap[off]}")" \
	"RSS $(delta "${rss[on]}" "${rss[off]}")"; do
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
