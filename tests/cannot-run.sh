# shellcheck shell=bash
# cannot-run.sh - what a test script does when it cannot run (sourced, bash).
#
#   . tests/cannot-run.sh
#   cannot_run "no kernel: run tests/vm/fetch-kernel.sh"
#
# A test that cannot run FAILS (exit 1) and says why: no guest, no kernel, no
# rxe device, no prefix, a tool that scripts/setup.sh installs.  It skips
# (exit 77, meson's SKIP) only when
#   - the user asked for it: SVERBS_ALLOW_SKIP=1 (./test.sh --allow-skip, for
#     a machine without QEMU), or
#   - the test is on tests/skip-list.txt (a short list, each with its reason),
#     named by SVERBS_TEST_NAME (set by the meson.build that defines it).
# Either way the reason is printed on a line "SKIP: ..." or "FAIL: ...";
# ./test.sh puts every skip's reason in its summary line.

SVERBS_SKIP_LIST=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/skip-list.txt

# skip_listed NAME: NAME is on the skip list (prints its reason)
skip_listed() {
  [ -n "${1:-}" ] && [ -r "$SVERBS_SKIP_LIST" ] || return 1
  awk -v n="$1" '$1 == n { $1 = ""; sub(/^ +/, ""); print; found = 1 } END { exit !found }' \
    "$SVERBS_SKIP_LIST"
}

cannot_run() {
  local listed
  if [ "${SVERBS_ALLOW_SKIP:-0}" = 1 ]; then
    echo "SKIP: $* (SVERBS_ALLOW_SKIP=1)"
    exit 77
  fi
  if listed=$(skip_listed "${SVERBS_TEST_NAME:-}"); then
    echo "SKIP: $* (tests/skip-list.txt: $listed)"
    exit 77
  fi
  echo "FAIL: cannot run: $*"
  echo "FAIL: (a test that cannot run fails; ./test.sh --allow-skip or SVERBS_ALLOW_SKIP=1 skips it instead)"
  exit 1
}
