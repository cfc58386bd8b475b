#!/bin/bash
# insns.sh - runs INSIDE the guest (perf/run-insns.sh): instructions per WR of
# rate_bench on rxe, counted by valgrind's callgrind (user space only: rxe's
# kernel side is not counted, so the figure does not move with the host's
# load), stock (SVERBS=off) vs the layer's paths.
#
#   insns.sh N CASE...     CASE: t1 pl16 lat mib ptbw (see below)
#
# rate_bench runs once per (case, mode) under callgrind with -n 2N, counting
# only its posting thread's loop (--toggle-collect='*rate_thread*', lat:
# '*lat_loop*': post, poll and the loop's own work, not setup); Ir / 2N is
# the per-WR count.
# ptbw runs perftest twice, with N and 2N iterations (its binary has no
# symbols to toggle on); (Ir(2N) - Ir(N)) / N is the per-WR count, setup
# and teardown cancelled.  Modes: off (stock), pt (the layer in pass-through), queue
# (SVERBS_PASSTHROUGH=off), budget (SVERBS_BATCH_BUDGET_US=50); for mib
# (1 MiB WRITEs, each signaled, N/64 of them): off and sliced (SVERBS_PRIO(7):
# 4 KiB slices).  ptbw: perftest's ib_write_bw -s 64 (one WR per post; on
# rxe it posts with ibv_post_send) as the client under callgrind, N and 2N
# iterations, its server (same mode) on rxe0.  Prints one JSON line per
# (case, mode) (lat: with rate_bench's polls per WR); the 2N run's
# inclusive costs of the entry points go to $INSNS_OUT/<case>-<mode>.fn.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 N CASE..." >&2; exit 2; }
n=$1
shift
bin=${PERF_BIN:?}/rate_bench
out=${INSNS_OUT:-/tmp/insns}
mkdir -p "$out"
tmp=$(mktemp -d)
fail=0

# case_args CASE: args (rate_bench options), modes, and the WR count k.
case_args() {
	k=$n
	modes="off pt queue budget"
	case $1 in
	t1) args=(-T 1) ;;
	pl16) args=(-T 1 -l 16); modes="off pt queue" ;;
	# 2 ms after each post before its poll, so that each WR is one post
	# and one poll on every side (the busy-wait's empty polls vary)
	lat) args=(--lat --settle-us 2000); k=$((n / 4)) ;;
	mib) args=(-T 1 -s 1M -c 1 --tx-depth 2); modes="off sliced"; k=$((n / 64)) ;;
	ptbw) args=(); modes="off pt" ;;
	*) return 1 ;;
	esac
}

mode_env() {
	case $1 in
	off) menv=(SVERBS=off) ;;
	pt) menv=(SVERBS=on) ;;
	queue) menv=(SVERBS=on SVERBS_PASSTHROUGH=off) ;;
	budget) menv=(SVERBS=on SVERBS_BATCH_BUDGET_US=50) ;;
	sliced) menv=(SVERBS=on) margs=(--prio 7) ;;
	esac
}

port=18600

# one_run OUT K: the case's client under callgrind with K WRs
one_run() {
	local srv rc=0
	if [ "$c" != ptbw ]; then
		env "${menv[@]}" valgrind --tool=callgrind -q --callgrind-out-file="$1" \
			"${toggle[@]}" "$bin" "${args[@]}" "${margs[@]}" -n "$2"
		return
	fi
	port=$((port + 1))
	env "${menv[@]}" timeout 660 ib_write_bw -d rxe0 -x 1 -F -p $port -s 64 -n "$2" >/dev/null 2>&1 &
	srv=$!
	vm-wait-listen $port 30 &&
		env "${menv[@]}" timeout 600 valgrind --tool=callgrind -q --callgrind-out-file="$1" \
			ib_write_bw -d rxe1 -x 1 -F -p $port -s 64 -n "$2" 10.77.0.1 || rc=1
	wait $srv || rc=1
	return $rc
}

ir_of() { sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$1"; }

for c in "$@"; do
	case_args "$c" || { echo "insns: unknown case $c" >&2; exit 2; }
	for m in $modes; do
		margs=()
		mode_env "$m"
		ok=1 toggle=() runs="1 2"
		case $c in
		ptbw) ;;
		# only the lat loop: not the setup, nor the sort of the samples
		lat) toggle=(--toggle-collect='*lat_loop*') runs=2 ;;
		*) toggle=(--toggle-collect='*rate_thread*') runs=2 ;;
		esac
		for i in $runs; do
			one_run "$tmp/cg.$i" $((k * i)) >"$tmp/json.$i" 2>"$tmp/err.$i" || ok=0
		done
		if [ $ok = 1 ]; then
			ir2=$(ir_of "$tmp/cg.2")
			# a toggle that matched no function counts nothing: an error
			# (rate_bench's rate_thread was once inlined away)
			if [ "${ir2:-0}" = 0 ]; then
				echo "insns: $c/$m counted 0 instructions (${toggle[*]}: no such function in $bin?)" >&2
				printf '{"bench":"insns","path":"rxe","case":"%s","mode":"%s","error":"0 instructions counted"}\n' "$c" "$m"
				fail=1
				continue
			fi
			if [ "$runs" = 2 ]; then
				# one toggled run of 2k WRs: only the loop was counted
				ir1=0 per=$((ir2 / (2 * k)))
			else
				ir1=$(ir_of "$tmp/cg.1") per=$(((ir2 - ir1) / k))
			fi
			{ callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.2" 2>/dev/null || true; } |
				grep -E "post_send|poll_cq|sverbs_|sv_|wr_" >"$out/$c-$m.fn" || true
			# rate_bench --lat says how many polls a WR took
			polls=$(sed -n 's/.*"polls_per_wr":\([0-9.]*\).*/\1/p' "$tmp/json.2")
			printf '{"bench":"insns","path":"rxe","case":"%s","mode":"%s","wrs":%d,"ir_n":%s,"ir_2n":%s,"per_wr":%s%s}\n' \
				"$c" "$m" "$k" "$ir1" "$ir2" "$per" "${polls:+,\"polls_per_wr\":$polls}"
		else
			fail=1
			echo "insns: $c $m failed:" >&2
			tail -5 "$tmp"/err.* >&2
			printf '{"bench":"insns","path":"rxe","case":"%s","mode":"%s","error":"rate_bench under callgrind failed"}\n' "$c" "$m"
		fi
	done
done
rm -rf "$tmp"
exit $fail
