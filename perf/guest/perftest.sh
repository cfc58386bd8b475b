#!/bin/bash
# perftest.sh - runs INSIDE the guest (perf/demo.sh): perftest's ib_write_bw
# and ib_write_lat between rxe0 (server, 10.77.0.1) and rxe1 (client), RoCE v2
# GID (-x 1), -F, with SVERBS=off and SVERBS=on (both processes).
#
#   perftest.sh TESTS...   TEST: bw (64 B, one WR per post), bw-pl16 (64 B,
#                          --post_list 16), lat (64 B ib_write_lat)
#   knobs: PERFTEST_BW_ITERS (default 20000), PERFTEST_LAT_ITERS (default 2000),
#   PERFTEST_MODES (default "off on": the order of the runs; alternate it
#   across repetitions so that neither side always goes first),
#   PERFTEST_LABEL (copied into each line's "label", e.g. "rep=3"),
#   PERFTEST_SUFFIX (appended to each test's name, e.g. " budget 50us" when
#   the caller exported SVERBS_BATCH_BUDGET_US for the SVERBS=on side)
#
# Prints one JSON line per (test, mode) on stdout: {"bench":"perftest",...},
# perftest's own output on stderr.  Exit 1 if any run failed.
set -uo pipefail
bw_n=${PERFTEST_BW_ITERS:-20000}
lat_n=${PERFTEST_LAT_ITERS:-2000}
for m in ${PERFTEST_MODES:-off on}; do
	case $m in off | on) ;; *) echo "perftest: PERFTEST_MODES: unknown mode $m" >&2; exit 2 ;; esac
done
port=18515
fail=0
tmp=$(mktemp -d)
for t in "$@"; do
	case $t in
	bw) tool=ib_write_bw args=(-s 64 -n "$bw_n") name="ib_write_bw 64B" ;;
	bw-pl16)
		# perftest takes only a multiple of the post list size
		tool=ib_write_bw args=(-s 64 -n $(((bw_n + 15) / 16 * 16)) --post_list 16)
		name="ib_write_bw 64B post_list 16"
		;;
	lat) tool=ib_write_lat args=(-s 64 -n "$lat_n") name="ib_write_lat 64B" ;;
	*) echo "perftest: unknown test $t" >&2; exit 2 ;;
	esac
	name+=${PERFTEST_SUFFIX:-}
	for m in ${PERFTEST_MODES:-off on}; do
		export SVERBS=$m
		reason=
		# perftest times by the CPU's cycle counter, whose rate it samples
		# at start; under TCG the sample can fail ("Correlation coefficient
		# r^2 ... < 0.9"), and then every rate and latency reads 0: that
		# run measured nothing, so it runs once more (and fails if the
		# second reads 0 too)
		for try in 1 2; do
			port=$((port + 1))
			"$tool" -d rxe0 -x 1 -F -p $port "${args[@]}" >"$tmp/server" 2>&1 &
			srv=$!
			ok=0
			if vm-wait-listen $port 30 &&
				timeout 120 "$tool" -d rxe1 -x 1 -F -p $port "${args[@]}" 10.77.0.1 >"$tmp/client" 2>&1; then
				ok=1
			fi
			wait $srv || ok=0
			cat "$tmp/client" >&2
			# the result row starts with the message size (64)
			row=$(awk '$1 == "64" && NF >= 5 { print; exit }' "$tmp/client")
			# done unless every figure after the size and count is 0
			if [ "$ok" != 1 ] || [ -z "$row" ] ||
				! awk '{ for (i = 3; i <= NF; i++) if ($i + 0 != 0) exit 1 }' <<<"$row"; then
				break
			fi
			echo "perftest: $name ($m) read 0: perftest's CPU clock sample failed; try $try of 2" >&2
			if [ $try = 2 ]; then
				ok=0 row=
				reason="$tool read 0 twice (perftest's CPU clock sample failed)"
			fi
		done
		if [ "$ok" = 1 ] && [ -n "$row" ]; then
			case $tool in
			ib_write_bw)
				# #bytes #iterations BW_peak BW_average[MB/s] MsgRate[Mpps]
				# shellcheck disable=SC2086 # split the row into fields
				set -- $row
				printf '{"bench":"perftest","test":"%s","sverbs":"%s","label":"%s","bw_mbps":%s,"mpps":%s}\n' \
					"$name" "$m" "${PERFTEST_LABEL:-}" "$4" "$5"
				;;
			ib_write_lat)
				# #bytes #iter t_min t_max t_typical t_avg t_stdev p99 p99.9
				# shellcheck disable=SC2086 # split the row into fields
				set -- $row
				printf '{"bench":"perftest","test":"%s","sverbs":"%s","label":"%s","lat_typical_us":%s,"lat_p99_us":%s}\n' \
					"$name" "$m" "${PERFTEST_LABEL:-}" "$5" "$8"
				;;
			esac
		else
			fail=1
			cat "$tmp/server" >&2
			printf '{"bench":"perftest","test":"%s","sverbs":"%s","error":"%s"}\n' "$name" "$m" "${reason:-$tool failed}"
		fi
	done
done
rm -rf "$tmp"
exit $fail
