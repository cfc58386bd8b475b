#!/bin/bash
# test.sh - set up (packages, guest kernel, build) and run the whole test
# suite: unit tests (CUnit), the build checks, the Soft-RoCE guest suites
# (our integration tests, perftest, rdma-core's own tests), the proxy.
#
#   ./test.sh                  everything
#   ./test.sh --suite unit     any extra arguments go to `meson test`
#   ./test.sh --allow-skip     a test that cannot run (e.g. no QEMU on this
#                              machine) skips instead of failing the run
#
# No green by skipping: a test that cannot run (no guest, no kernel, no rxe
# device, no prefix, a tool setup.sh installs) fails, and a skip (meson's
# SKIP, exit 77) fails the run unless the test is on tests/skip-list.txt or
# --allow-skip was given.  Before the run it prints every test's meson
# timeout and their sum (tests/build/check-timeouts.py).
#
# TEST_SH_DEADLINE (seconds since the epoch; .ci/run sets it to CI's 90
# minutes less 5) bounds the whole run (scripts/run-tests.sh, which runs
# the tests and their summary): at the deadline the running test is
# stopped, the tests after it do not run, and the run fails naming them.
#
# It ends with every failed and every skipped test (and why), a line each,
# then a plain summary: "tests: N passed, N failed, N skipped".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")" && pwd -P)
args=()
for a in "$@"; do
	case $a in
	--allow-skip) export SVERBS_ALLOW_SKIP=1 ;;
	*) args+=("$a") ;;
	esac
done
"$ROOT/scripts/setup.sh" || { echo "test.sh: scripts/setup.sh failed" >&2; exit 1; }
cd "$ROOT" || exit 1
# The install suite packages rdma-core built for /opt/sverbs (compiled-in
# config paths: a second rdma-core build).  It is built here, with the rest
# of the build, not inside the test's timeout.
meson compile -C build rdma-core-install >/dev/null ||
	{ echo "test.sh: building rdma-core for the install prefix failed" >&2; exit 1; }
# Likewise the ASan+UBSan and TSan builds of tests sanitize-short and
# sanitize-tsan (sched/tests/meson.build).
for s in asan tsan; do
	scripts/sanitize.sh --short --out build/sched/tests/sanitize --build-only $s >/dev/null ||
		{ echo "test.sh: the $s build (scripts/sanitize.sh) failed" >&2; exit 1; }
done
/usr/bin/python3 tests/build/check-timeouts.py build/meson-info/intro-tests.json ||
	echo "test.sh: a test without a timeout, or with one of CI's whole time (see above)"
exec scripts/run-tests.sh build tests/skip-list.txt "${args[@]}"
