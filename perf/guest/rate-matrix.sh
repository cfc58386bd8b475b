#!/bin/bash
# rate-matrix.sh - runs INSIDE the guest (perf/run-rate.sh): rate_bench with
# SVERBS=off and SVERBS=on, alternating which goes first on each repetition,
# for each configuration.
#
#   rate-matrix.sh REPS DURATION CONFIGS...
#       CONFIG: "t1" (1 thread, one WR per post), "t4" (4 threads), "pl16"
#               (1 thread, --post-list 16), "lat" (latency at low load)
#
# Prints rate_bench's JSON lines on stdout (failed runs: a line with "error"),
# human lines on stderr.  Exit 1 if any run failed.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 REPS DURATION CONFIG..." >&2; exit 2; }
reps=$1 dur=$2
shift 2
bin=${PERF_BIN:?}/rate_bench
fail=0
for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then modes="off on"; else modes="on off"; fi
	for c in "$@"; do
		case $c in
		t1) args=(-T 1) ;;
		t4) args=(-T 4) ;;
		pl16) args=(-T 1 -l 16) ;;
		lat) args=(--lat) ;;
		*) echo "rate-matrix: unknown config $c" >&2; exit 2 ;;
		esac
		for m in $modes; do
			SVERBS=$m "$bin" "${args[@]}" -t "$dur" --label "cfg=$c rep=$r"
			rc=$?
			if [ $rc != 0 ]; then
				fail=1
				printf '{"bench":"rate","sverbs":"%s","label":"cfg=%s rep=%s","error":"rate_bench exit %s"}\n' \
					"$m" "$c" "$r" "$rc"
			fi
		done
	done
done
exit $fail
