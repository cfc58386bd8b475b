#!/bin/bash
# rate-matrix.sh - runs INSIDE the guest (perf/run-rate.sh): rate_bench with
# SVERBS=off and SVERBS=on, alternating which goes first on each repetition,
# for each configuration.
#
#   rate-matrix.sh REPS DURATION CONFIGS...
#       CONFIG: "t1" (1 thread, one WR per post), "t4" (4 threads, a QP
#               each), "pl16" (1 thread, --post-list 16), "t4pl16" (4 threads,
#               --post-list 16), "lat" (latency at low load); a trailing "b"
#               (t1b, t4b, latb) runs the sverbs side with budgeted batching,
#               SVERBS_BATCH_BUDGET_US=$PERF_BUDGET_US (default 50); a
#               trailing "q" (t1q, pl16q, latq) with SVERBS_PASSTHROUGH=off;
#               "perftest": perftest.sh lat bw bw-pl16 (two processes, both
#               with SVERBS=off / on), in the repetition's order;
#               "perftestb": perftest.sh lat bw with the SVERBS=on side
#               budgeted (the tests' names end in " budget")
#
# Prints rate_bench's JSON lines on stdout (failed runs: a line with "error"),
# human lines on stderr.  Exit 1 if any run failed.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 REPS DURATION CONFIG..." >&2; exit 2; }
reps=$1 dur=$2
shift 2
# shellcheck source-path=SCRIPTDIR source=configs.sh
. "$(dirname "$0")/configs.sh"
fail=0
for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then modes="off on"; else modes="on off"; fi
	for c in "$@"; do
		label="cfg=$c rep=$r"
		if [ "$c" = perftest ]; then
			PERFTEST_MODES="$modes" PERFTEST_LABEL="$label" \
				"$(dirname "$0")/perftest.sh" lat bw bw-pl16 || fail=1
			continue
		fi
		if [ "$c" = perftestb ]; then
			SVERBS_BATCH_BUDGET_US=${PERF_BUDGET_US:-50} PERFTEST_SUFFIX=" budget" \
				PERFTEST_MODES="$modes" PERFTEST_LABEL="$label" \
				"$(dirname "$0")/perftest.sh" lat bw || fail=1
			continue
		fi
		rate_config "$c" || { echo "rate-matrix: unknown config $c" >&2; exit 2; }
		case ${benv[0]:-} in
		SVERBS_BATCH_BUDGET_US=*)
			label+=" budget_us=${benv[0]#*=}"
			[ "${benv[1]:-}" != SVERBS_BATCH_LINGER=off ] || label+=" linger=off"
			[ "${benv[1]:-}" != SVERBS_BATCH_DEFER=off ] || label+=" defer=off"
			;;
		SVERBS_PASSTHROUGH=off) label+=" path=queue" ;;
		esac
		for m in $modes; do
			if [ "$m" = on ]; then e=("${benv[@]}"); else e=(); fi
			env "${e[@]}" SVERBS="$m" "$bin" "${args[@]}" -t "$dur" --label "$label"
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
