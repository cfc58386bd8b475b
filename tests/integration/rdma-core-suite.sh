#!/bin/bash
# rdma-core-suite.sh PREFIX RDMA_CORE_SRC [RESULTS_DIR] - rdma-core 56.1's own
# test suite (RDMA_CORE_SRC/tests, as run_tests.py runs it) on rxe0 in one
# guest, with Debian's /usr/bin/python3 and PREFIX's pyverbs, three times:
# SVERBS=off (stock), on (the defaults: unmarked QPs in pass-through) and
# queue (SVERBS_PASSTHROUGH=off: every WR through the layer's queue; see
# use_mode in lib.sh).  compare-rdma-core.py then requires identical
# per-test outcomes of off and each other mode, and every stock failure to
# be listed in rdma-core-expected.txt; it prints ran/passed/skipped/failed.
# Per-test outcomes and the full logs are kept in RESULTS_DIR (default
# <repo>/build/test-results/rdma-core): {off,on,queue}.{tsv,log}.
# Exit: 0 ok, 1 a difference / unexpected failure, 77 skipped (no guest).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
itest_enter_vm "$0" "$@"

itest_use_prefix "${1:?usage: rdma-core-suite.sh PREFIX RDMA_CORE_SRC [RESULTS_DIR]}"
SRC=${2:?rdma-core source dir}
RESULTS=${3:-$(cd "$HERE/../.." && pwd)/build/test-results/rdma-core}
[ -r "$SRC/tests/run_tests.py" ] || skip_all "no $SRC/tests/run_tests.py"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || skip_all "no pyverbs for /usr/bin/python3 (PYTHONPATH=${PYTHONPATH:-})"
mkdir -p "$RESULTS"
export PYTHONDONTWRITEBYTECODE=1   # the source tree is not ours to write

for mode in off on queue; do
  echo "# ---- rdma-core tests, mode $mode (log: $RESULTS/$mode.log)"
  rm -f "$RESULTS/$mode.tsv"
  start=$SECONDS
  (use_mode "$mode" && cd /tmp && timeout 1200 /usr/bin/python3 "$HERE/run-rdma-core.py" \
      "$RESULTS/$mode.tsv" "$SRC/tests" --dev rxe0 --gid 1 -v) > "$RESULTS/$mode.log" 2>&1 && rc=0 || rc=$?
  echo "# mode $mode: $((SECONDS - start)) s, status $rc; $(tail -n 1 "$RESULTS/$mode.log")"
  check "rdma-core suite ran to the end in mode $mode" [ $rc = 0 -a -s "$RESULTS/$mode.tsv" ]
  [ -s "$RESULTS/$mode.tsv" ] || show "$RESULTS/$mode.log"
done
check "pyverbs, libibverbs and librxe of the suite come from the prefix" pyverbs_from_prefix
for mode in on queue; do
  if [ -s "$RESULTS/off.tsv" ] && [ -s "$RESULTS/$mode.tsv" ]; then
    check "per-test outcomes off == $mode, stock failures expected" \
      /usr/bin/python3 "$HERE/compare-rdma-core.py" "$RESULTS/off.tsv" "$RESULTS/$mode.tsv" \
        "$HERE/rdma-core-expected.txt"
  fi
done
itest_done
