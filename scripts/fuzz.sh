#!/bin/bash
# fuzz.sh - build the libFuzzer targets with Debian's clang and run them.
#
#   scripts/fuzz.sh [--out DIR] [--short | --runs N | --time S]
#                   [--build-only | --no-build] [TARGET...]
#
#   TARGET     config (common/config.c's parser) and/or wr (WR sequences
#              against the fake adapter, the reference model as oracle);
#              default both
#   --short    CI: each target from its seed corpus alone, a fixed number of
#              executions with a fixed seed (-seed=1): the same run every time,
#              so CI's verdict does not depend on luck (the default)
#   --runs N   each target for N executions
#   --time S   each target for S seconds
#   --out DIR  build and working corpora there (default build-fuzz/)
#   --build-only  only build DIR/fuzz_<target> (meson builds them so, before
#              `meson test`: the compile is not in fuzz-short's time)
#   --no-build    run DIR/fuzz_<target> as built (fails if it is missing)
#   SVERBS_PREFIX  rdma-core prefix for <infiniband/verbs.h> (build/prefix)
#   FUZZ_SANITIZE  sanitizers besides fuzzer (default address,undefined;
#              ASan costs the wr target 4x: long runs may use undefined)
#
# Seeds: fuzz/corpus/<target>/ (in the repository).  New inputs go to
# DIR/corpus/<target>/, never into the repository; a crash leaves its input
# in DIR/ (crash-*), replay it with DIR/fuzz_<target> FILE.
# Needs clang and libclang-rt-14-dev (scripts/setup.sh installs them).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
OUT=$ROOT/build-fuzz
SHORT=1
MODE=()
TARGETS=()
BUILD=1
RUN=1
while [ $# -gt 0 ]; do
	case "$1" in
	--out) OUT=$2; shift 2 ;;
	--short) SHORT=1; shift ;;
	--runs) SHORT=0; MODE=(-runs="$2"); shift 2 ;;
	--time) SHORT=0; MODE=(-max_total_time="$2"); shift 2 ;;
	--build-only) RUN=0; shift ;;
	--no-build) BUILD=0; shift ;;
	config | wr) TARGETS+=("$1"); shift ;;
	*) echo "fuzz: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(config wr)
PREFIX=${SVERBS_PREFIX:-$ROOT/build/prefix}
CC=${CLANG:-clang}
why=
command -v "$CC" >/dev/null ||
	why="no clang (apt-get install clang libclang-rt-14-dev)"
[ -r "$PREFIX/include/infiniband/verbs.h" ] ||
	why="no $PREFIX/include/infiniband/verbs.h (run scripts/setup.sh, or set SVERBS_PREFIX)"
if [ -n "$why" ]; then
	# --build-only is meson's build step: a failure there would stop every
	# test; it leaves the binaries out, and fuzz-short fails saying why
	echo "fuzz: FAIL: $why" >&2
	[ $RUN = 0 ] && [ $BUILD = 1 ] && exit 0
	exit 1
fi
mkdir -p "$OUT"
SAN=${FUZZ_SANITIZE:-address,undefined}
FLAGS=(-std=gnu11 -g -O1 -fsanitize=fuzzer,$SAN
	-fno-sanitize-recover=all -I"$PREFIX/include" -I"$ROOT/include"
	-I"$ROOT/common" -I"$ROOT/sched" -I"$ROOT/batch" -I"$ROOT/sched/tests")
build() { # target sources...
	local t=$1
	shift
	echo "fuzz: building fuzz_$t"
	"$CC" "${FLAGS[@]}" -o "$OUT/fuzz_$t" "$@" -lpthread
	echo "$SAN" >"$OUT/fuzz_$t.sanitizers"
}
rc=0
for t in "${TARGETS[@]}"; do
	if [ $BUILD = 1 ]; then
		case $t in
		config) build config "$ROOT/fuzz/fuzz_config.c" "$ROOT/common/config.c" ;;
		wr) build wr "$ROOT/fuzz/fuzz_wr.c" "$ROOT/sched/tests/model_run.c" \
			"$ROOT/sched/tests/fake.c" "$ROOT"/sched/*.c "$ROOT"/batch/*.c \
			"$ROOT/common/config.c" ;;
		esac
	elif [ ! -x "$OUT/fuzz_$t" ]; then
		echo "fuzz: FAIL: no $OUT/fuzz_$t (build it with --build-only)" >&2
		exit 1
	fi
	[ $RUN = 1 ] || continue
	mkdir -p "$OUT/corpus/$t"
	if [ $SHORT = 1 ]; then
		# a fresh working corpus: only the repository's seeds count
		rm -rf "$OUT/corpus/$t"
		mkdir -p "$OUT/corpus/$t"
		# small enough for a loaded CI host (5x slower than idle
		# under ASan): 200,000 + 40,000 took 42 s idle and exceeded
		# the 100 s guard at load 18; the long runs are --runs
		case $t in
		config) MODE=(-runs=20000 -seed=1) ;;
		wr) MODE=(-runs=2000 -seed=1) ;;
		esac
	fi
	# a WR input of 1 KiB is ~250 decisions: short runs, many of them
	EXTRA=()
	[ "$t" = wr ] && EXTRA=(-max_len=1024)
	echo "fuzz: running fuzz_$t ${MODE[*]} ($SAN)"
	(cd "$OUT" && ASAN_OPTIONS=detect_leaks=1 ./"fuzz_$t" "${MODE[@]}" "${EXTRA[@]}" \
		-print_final_stats=1 "corpus/$t" "$ROOT/fuzz/corpus/$t") 2>&1 |
		tee "$OUT/fuzz_$t.log" | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|fuzz_wr:|Done)" || true
	if ! grep -q "^Done\|DONE" "$OUT/fuzz_$t.log" || grep -q "==ERROR\|deadly signal\|SUMMARY: " "$OUT/fuzz_$t.log"; then
		echo "fuzz: fuzz_$t FAILED (see $OUT/fuzz_$t.log)"
		rc=1
	fi
done
exit $rc
