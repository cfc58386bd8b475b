#!/bin/bash
# hol-matrix.sh - runs INSIDE the guest (perf/run-hol.sh, perf/demo.sh):
# hol_bench with SVERBS=off and SVERBS=on, alternating which goes first on
# each repetition, for each background size (and unloaded, "none").
#
#   hol-matrix.sh REPS "SIZES" [hol_bench args...]
#       SIZES: e.g. "none 64K 1M 4M" ("none" = --baseline)
#
# HOL_VARIANTS (optional): settings of the sverbs side to compare in the
# same boot, e.g. "ws2 ws1:SVERBS_WINDOW_SIGNALS=1 t100:SVERBS_HOL_TARGET_US=100"
# (NAME[:VAR=VALUE[,VAR=VALUE...]]); each variant runs its own off/on pair
# per size and repetition, labelled variant=NAME.
#
# Prints hol_bench's JSON lines on stdout (a failed run prints a line with
# "error" instead), its human lines on stderr.  Exit 1 if any run failed.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REPS SIZES [hol_bench args]" >&2; exit 2; }
reps=$1 sizes=$2
shift 2
bin=${PERF_BIN:?}/hol_bench
variants=${HOL_VARIANTS:-:}
fail=0
for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then modes="off on"; else modes="on off"; fi
	for s in $sizes; do
		for v in $variants; do
			vname=${v%%:*} venv=()
			[[ $v == *:* ]] && IFS=, read -ra venv <<<"${v#*:}"
			label="rep=$r${vname:+ variant=$vname}"
			for m in $modes; do
				if [ "$s" = none ]; then what=(--baseline); else what=(-L "$s"); fi
				if [ "$m" = on ]; then
					env SVERBS=on "${venv[@]}" "$bin" "${what[@]}" --label "$label" "$@"
				else
					SVERBS=off "$bin" "${what[@]}" --label "$label" "$@"
				fi
				rc=$?
				if [ $rc != 0 ]; then
					fail=1
					printf '{"bench":"hol","sverbs":"%s","large_size":"%s","label":"%s","error":"hol_bench exit %s"}\n' \
						"$m" "$s" "$label" "$rc"
				fi
			done
		done
	done
done
exit $fail
