# shellcheck shell=bash
# configs.sh - sourced by the guest scripts that run rate_bench
# (rate-matrix.sh, syscalls.sh, profile.sh): the benchmark's path ($bin) and
# what a config name means.
#
#   rate_config CONFIG   sets args (rate_bench options) and benv (the
#                        environment of the SVERBS=on side); returns 1 for
#                        an unknown name.
#   t1 / t4: 1 / 4 threads (a QP+CQ each), one WR per ibv_post_send;
#   pl16 / t4pl16: 1 / 4 threads, 16 WRs per call; lat: post one, wait for
#   its completion; a trailing "b" (t1b, t4b, latb): the sverbs side with a
#   batching budget of PERF_BUDGET_US (default 50) microseconds; a trailing
#   "q" (t1q, pl16q, latq): the sverbs side with SVERBS_PASSTHROUGH=off (the
#   layer's queue instead of pass-through); "bn" (t1bn, t4bn): the budget
#   with SVERBS_BATCH_LINGER=off; "bd" (t1bd, t4bd): the budget with
#   SVERBS_BATCH_DEFER=off (batches through the layer's queue).  mib: 1 MiB WRITEs, each signaled, 2
#   outstanding; the sverbs side marks them SVERBS_PRIO(7) (bargs), so the
#   layer slices them (what one slice costs: perf/guest/syscalls.sh).
#   mib-<K>k-s<S> (e.g. mib-4k-s1): mib with the sverbs side's slices fixed
#   at K KiB and window_signals = S, and --tx-depth 4 (see below).
# shellcheck disable=SC2034  # bin, args, benv and bargs are for the caller
bin=${PERF_BIN:?}/rate_bench

# shellcheck disable=SC2034
rate_config() {
	benv=() bargs=()
	case $1 in
	t1 | t1b | t1bn | t1bd | t1q) args=(-T 1) ;;
	t4 | t4b | t4bn | t4bd | t4q) args=(-T 4) ;;
	pl16 | pl16q) args=(-T 1 -l 16) ;;
	t4pl16) args=(-T 4 -l 16) ;;
	lat | latb | latq) args=(--lat) ;;
	mib) args=(-T 1 -s 1M -c 1 --tx-depth 2) bargs=(--prio 7) ;;
	mib-*k-s*)
		# mib with the sverbs side's slice size and window_signals fixed,
		# and a send queue of 4: with mib's 2 the layer keeps 1 WQE in
		# flight (max_send_wr - 1), so the depth, not the window, decides
		args=(-T 1 -s 1M -c 1 --tx-depth 4) bargs=(--prio 7)
		local v=${1#mib-}
		benv=("SVERBS_SLICE_BYTES=$((${v%%k-*} * 1024))" "SVERBS_WINDOW_SIGNALS=${v##*-s}")
		return 0
		;;
	*) return 1 ;;
	esac
	if [[ $1 == *b ]]; then benv=("SVERBS_BATCH_BUDGET_US=${PERF_BUDGET_US:-50}"); fi
	if [[ $1 == *q ]]; then benv=(SVERBS_PASSTHROUGH=off); fi
	if [[ $1 == *bn ]]; then benv=("SVERBS_BATCH_BUDGET_US=${PERF_BUDGET_US:-50}" SVERBS_BATCH_LINGER=off); fi
	if [[ $1 == *bd ]]; then benv=("SVERBS_BATCH_BUDGET_US=${PERF_BUDGET_US:-50}" SVERBS_BATCH_DEFER=off); fi
	return 0
}
