#!/bin/bash
# run.sh PREFIX [MODE...] - the sverbs pyverbs tests (runner.py: every
# test_*.py here) inside a Soft-RoCE guest, with Debian's /usr/bin/python3
# and the pyverbs of PREFIX (PREFIX/env.sh), once per MODE (SVERBS=off / on;
# default both).  Extra runner options: PV_ARGS (e.g. PV_ARGS='-k large').
# Exit: 0 all passed, 1 a failure, 77 skipped (no guest / nothing ran).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/../lib.sh"
itest_enter_vm "$0" "$@"

itest_use_prefix "${1:?usage: run.sh PREFIX [off|on]...}"
shift
MODES=("$@"); [ ${#MODES[@]} -gt 0 ] || MODES=(off on)
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || skip_all "no pyverbs for /usr/bin/python3 in PYTHONPATH=${PYTHONPATH:-}"

for mode in "${MODES[@]}"; do
  echo "# ---- SVERBS=$mode"
  # shellcheck disable=SC2086  # PV_ARGS is a list of options
  SVERBS=$mode /usr/bin/python3 "$HERE/runner.py" ${PV_ARGS:-} 2>&1 && rc=0 || rc=$?
  case $rc in
    0)  pass "pyverbs tests, SVERBS=$mode" ;;
    77) skip "pyverbs tests, SVERBS=$mode: nothing ran" ;;
    *)  fail "pyverbs tests, SVERBS=$mode (status $rc)" ;;
  esac
done
itest_done
