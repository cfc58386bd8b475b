#!/bin/bash
# profile.sh - runs INSIDE the guest (perf/run-profile.sh): `perf record -g`
# of rate_bench for each CONFIG, SVERBS=off and on; text reports into OUT.
#
#   profile.sh OUT SECONDS CONFIG...    CONFIG: see configs.sh
#
# Per (config, mode): OUT/<config>-<mode>.json (rate_bench's line),
# .stats (SVERBS_STATS=1 counters), .dso (samples by shared object, the
# benchmark's process only), .sym (by symbol), .callers (call graphs of the
# kernel's context-switch and wake-up symbols: the timer's cost).  perf.data
# stays in the guest's /tmp (writing it to the 9p share distorts the run).
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OUT SECONDS CONFIG..." >&2; exit 2; }
out=$1 secs=$2
shift 2
# shellcheck source-path=SCRIPTDIR source=configs.sh
. "$(dirname "$0")/configs.sh"
command -v perf >/dev/null || { echo "profile: no perf in the guest (linux-perf)" >&2; exit 77; }
mkdir -p "$out"
fail=0
for c in "$@"; do
	rate_config "$c" || { echo "profile: unknown config $c" >&2; exit 2; }
	for m in off on; do
		n=$out/$c-$m d=/tmp/prof-$c-$m.data
		e=()
		[ $m = on ] && e=("${benv[@]}")
		if ! env "${e[@]}" SVERBS=$m SVERBS_STATS=1 perf record -q -g -F 2000 -o "$d" -- \
			"$bin" "${args[@]}" -t "$secs" --label "profile $c" >"$n.json" 2>"$n.stats"; then
			echo "profile: $c $m failed" >&2
			fail=1
			continue
		fi
		# the first report of a boot leaves out the kernel's samples: a
		# throw-away one first
		[ -n "${warm:-}" ] || { perf report -i "$d" --stdio >/dev/null 2>&1; warm=1; }
		perf report -i "$d" --no-children --comm rate_bench --sort dso --stdio -g none 2>/dev/null |
			grep -v '^$' | head -30 >"$n.dso"
		perf report -i "$d" --no-children --comm rate_bench --sort dso,sym --stdio -g none 2>/dev/null |
			grep -v '^$' | head -70 >"$n.sym"
		perf report -i "$d" --no-children --comm rate_bench --sort sym --stdio -G \
			--symbols=finish_task_switch.isra.0,try_to_wake_up 2>/dev/null |
			grep -v '^$' | head -90 >"$n.callers"
		rm -f "$d"
		echo "profile: $c $m: $(grep -o '"kpps":[0-9.]*\|"p50_us":[0-9.]*' "$n.json" | head -1)" >&2
	done
done
exit $fail
