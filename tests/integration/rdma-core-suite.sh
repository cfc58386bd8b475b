#!/bin/bash
# rdma-core-suite.sh PREFIX RDMA_CORE_SRC [RESULTS_DIR [K/N]] - rdma-core
# 56.1's own test suite (RDMA_CORE_SRC/tests, as run_tests.py runs it) on rxe0
# in one guest, with Debian's /usr/bin/python3 and PREFIX's pyverbs, once per
# mode (RDMA_CORE_MODES, default "off on defer queue budget", ITEST_MODES:
# see use_mode in lib.sh; defer: a 50 us budget in pass-through, deferred
# doorbells; queue: every QP through the layer's queue from its first WR,
# 4 KiB slices; budget: the queue + a 50 us batch budget).  K/N: only the K-th of N shards
# of the suite (run-rdma-core.py --shard; meson runs the shards as separate
# tests, so each boots its own guest and has its own timeout).
# compare-rdma-core.py then requires identical per-test outcomes of off and
# each other mode, and every stock failure to be listed in
# rdma-core-expected.txt; it prints ran/passed/skipped/failed and how many
# tests differ from stock.  A test that runs longer than RDMA_CORE_TEST_TIMEOUT
# (default 60 s) is stopped and recorded as an error (its stacks in the
# log); a mode's whole run is bounded by RDMA_CORE_RUN_TIMEOUT (default 300 s:
# a mode takes 50-70 s in CI runs, 137-155 s when the host was shared).
# Per-test outcomes and the full logs are kept in RESULTS_DIR (default
# <repo>/build/test-results/rdma-core), under shard-K-of-N/ for a shard:
# <mode>.{tsv,log}.
# Exit: 0 ok, 1 a difference / unexpected failure / cannot run.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
itest_enter_vm "$0" "$@"

itest_use_prefix "${1:?usage: rdma-core-suite.sh PREFIX RDMA_CORE_SRC [RESULTS_DIR [K/N]]}"
SRC=${2:?rdma-core source dir}
RESULTS=${3:-$(cd "$HERE/../.." && pwd)/build/test-results/rdma-core}
SHARD=${4:-}
read -ra MODES <<< "${RDMA_CORE_MODES:-$ITEST_MODES}"
[ "${MODES[0]}" = off ] || { echo "rdma-core-suite.sh: the first mode must be off (stock: the reference)" >&2; exit 2; }
for mode in "${MODES[@]}"; do use_mode "$mode" || exit 2; done
shard_args=()
if [ -n "$SHARD" ]; then
  [[ $SHARD =~ ^[0-9]+/[0-9]+$ ]] || { echo "rdma-core-suite.sh: shard $SHARD is not K/N" >&2; exit 2; }
  shard_args=(--shard "$SHARD")
  RESULTS=$RESULTS/shard-${SHARD%/*}-of-${SHARD#*/}
fi
[ -r "$SRC/tests/run_tests.py" ] || skip_all "no $SRC/tests/run_tests.py"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || skip_all "no pyverbs for /usr/bin/python3 (PYTHONPATH=${PYTHONPATH:-})"
mkdir -p "$RESULTS"
export PYTHONDONTWRITEBYTECODE=1   # the source tree is not ours to write

for mode in "${MODES[@]}"; do
  echo "# ---- rdma-core tests${SHARD:+, shard $SHARD}, mode $mode (log: $RESULTS/$mode.log)"
  rm -f "$RESULTS/$mode.tsv"
  start=$SECONDS
  (use_mode "$mode" && echo "# $(mode_env)" && cd /tmp &&
    timeout -s KILL "${RDMA_CORE_RUN_TIMEOUT:-300}" /usr/bin/python3 "$HERE/run-rdma-core.py" \
      "${shard_args[@]}" --test-timeout "${RDMA_CORE_TEST_TIMEOUT:-60}" \
      "$RESULTS/$mode.tsv" "$SRC/tests" --dev rxe0 --gid 1 -v) > "$RESULTS/$mode.log" 2>&1 && rc=0 || rc=$?
  echo "# mode $mode: $((SECONDS - start)) s, status $rc; $(tail -n 1 "$RESULTS/$mode.log")"
  check "rdma-core suite ran to the end in mode $mode" [ $rc = 0 -a -s "$RESULTS/$mode.tsv" ]
  [ -s "$RESULTS/$mode.tsv" ] || show "$RESULTS/$mode.log"
  if grep -q "hang guard: the test ran" "$RESULTS/$mode.tsv" 2>/dev/null; then
    echo "# mode $mode: stopped by the per-test hang guard:"
    grep "hang guard" "$RESULTS/$mode.tsv" | cut -f1 | sed 's/^/#   /'
  fi
done
check "pyverbs, libibverbs and librxe of the suite come from the prefix" pyverbs_from_prefix
for mode in "${MODES[@]:1}"; do
  if [ -s "$RESULTS/off.tsv" ] && [ -s "$RESULTS/$mode.tsv" ]; then
    check "per-test outcomes off == $mode, stock failures expected" \
      /usr/bin/python3 "$HERE/compare-rdma-core.py" --mode "$mode" "$RESULTS/off.tsv" "$RESULTS/$mode.tsv" \
        "$HERE/rdma-core-expected.txt"
  fi
done
itest_done
