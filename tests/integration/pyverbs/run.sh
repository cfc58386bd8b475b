#!/bin/bash
# run.sh PREFIX [MODE...] - the sverbs pyverbs tests (runner.py: every
# test_*.py here) inside a Soft-RoCE guest, with Debian's /usr/bin/python3
# and the pyverbs of PREFIX (PREFIX/env.sh), once per MODE (off, on, defer,
# queue, budget: use_mode in ../lib.sh; default all five, off first), then every
# test's outcome in each mode compared with stock's (compare-rdma-core.py:
# identical per-test outcomes, no stock failure).  Extra runner options:
# PV_ARGS (e.g. PV_ARGS='-k large').
# Exit: 0 all passed, 1 a failure or nothing ran or no guest (77 only with
# SVERBS_ALLOW_SKIP=1: tests/cannot-run.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../lib.sh"
itest_enter_vm "$0" "$@"

itest_use_prefix "${1:?usage: run.sh PREFIX [off|on|defer|queue|budget]...}"
shift
MODES=("$@"); [ ${#MODES[@]} -gt 0 ] || read -ra MODES <<< "$ITEST_MODES"
[ "${MODES[0]}" = off ] || { echo "run.sh: the first mode must be off (stock: the reference)" >&2; exit 2; }
for mode in "${MODES[@]}"; do use_mode "$mode" || exit 2; done
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || skip_all "no pyverbs for /usr/bin/python3 in PYTHONPATH=${PYTHONPATH:-}"

for mode in "${MODES[@]}"; do
  use_mode "$mode"
  echo "# ---- $mode: $(mode_env)"
  # shellcheck disable=SC2086  # PV_ARGS is a list of options
  /usr/bin/python3 "$HERE/runner.py" --results "$ITEST_OUT/pv-$mode.tsv" ${PV_ARGS:-} 2>&1 && rc=0 || rc=$?
  case $rc in
    0)  pass "pyverbs tests, $mode" ;;
    77) fail "pyverbs tests, $mode: nothing ran (every test skipped)" ;;
    *)  fail "pyverbs tests, $mode (status $rc)" ;;
  esac
done
for mode in "${MODES[@]:1}"; do
  check "pyverbs tests: per-test outcomes off == $mode, no stock failure" \
    /usr/bin/python3 "$HERE/../compare-rdma-core.py" --label "pyverbs tests" --mode "$mode" \
      "$ITEST_OUT/pv-off.tsv" "$ITEST_OUT/pv-$mode.tsv" /dev/null
done
itest_done
