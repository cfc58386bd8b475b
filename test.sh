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
# minutes less 5) bounds the whole run: at the deadline the running test is
# stopped (meson's SIGTERM: INTERRUPT), the tests after it do not run, and
# the run fails naming them.  Each test's own timeout is a hang guard; the
# deadline keeps a run with hangs inside CI's time, with a report.  The
# variable is unset before the tests run (and is not SVERBS_*: the layer
# reads every SVERBS_* variable as its configuration and warns of unknown
# ones, which the tests' layer-state checks rightly count as a failure).
#
# The last line is a plain summary: "tests: N passed, N failed, N skipped",
# followed by every skipped test and why, and every failed one.
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
rm -f build/meson-logs/testlog.json build/meson-logs/test-list.txt
meson test -C build --list --no-rebuild "${args[@]}" >build/meson-logs/test-list.txt 2>/dev/null
deadline=()
if [ -n "${TEST_SH_DEADLINE:-}" ]; then
	left=$((TEST_SH_DEADLINE - $(date +%s)))
	[ $left -gt 0 ] || { echo "test.sh: TEST_SH_DEADLINE already passed" >&2; exit 1; }
	echo "test.sh: the run stops at its deadline, in $left s (TEST_SH_DEADLINE)"
	deadline=(timeout -s TERM -k 60 "$left")
fi
unset TEST_SH_DEADLINE  # not the tests' business
"${deadline[@]}" meson test -C build --print-errorlogs --num-processes 1 "${args[@]}"
rc=$?
hit=0
[ ${#deadline[@]} = 0 ] || [ $rc != 124 ] || hit=1
/usr/bin/python3 - build/meson-logs/testlog.json tests/skip-list.txt "${SVERBS_ALLOW_SKIP:-0}" \
	build/meson-logs/test-list.txt "$hit" <<'PY'
import json, sys
log, skiplist, allow = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
listfile, deadline_hit = sys.argv[4], sys.argv[5] == "1"
listed = {}
with open(skiplist) as f:
    for line in f:
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(" ")
            listed[name] = reason.strip()


def reason_of(r):
    """The last "SKIP: ..." / "FAIL: ..." line the test printed."""
    lines = [l.strip() for l in (r.get("stdout") or "").splitlines()]
    for prefix in ("SKIP:", "FAIL: cannot run:"):
        hits = [l for l in lines if l.startswith(prefix)]
        if hits:
            return hits[-1][len(prefix):].strip()
    return "no reason printed"


passed, failed, skipped, bad_skips = [], [], [], []
try:
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            name, res = r["name"], r.get("result", "ERROR")
            short = name.split(" / ", 1)[-1]
            if res in ("OK", "EXPECTEDFAIL"):
                passed.append(short)
            elif res == "SKIP":
                why = reason_of(r)
                if short in listed:
                    skipped.append(f"{short} ({why}; listed: {listed[short]})")
                elif allow:
                    skipped.append(f"{short} ({why}; --allow-skip)")
                else:
                    bad_skips.append(f"{short} ({why})")
            else:
                what = res.lower()
                if res == "FAIL" and reason_of(r) != "no reason printed":
                    what = "cannot run: " + reason_of(r)
                failed.append(f"{short} ({what})")
except FileNotFoundError:
    print("test.sh: no test log: meson test did not run")
    sys.exit(1)
failed += [f"{s}: skipped, which is not allowed (not on tests/skip-list.txt; "
           f"./test.sh --allow-skip allows it)" for s in bad_skips]
# Every test meson listed for this run has a result, or fails as not run
# (the deadline, or meson stopped).
ran = {s.split(" (", 1)[0] for s in passed + failed + skipped}
with open(listfile) as f:
    not_run = [t for t in (l.split(" / ", 1)[-1].strip() for l in f if " / " in l)
               if t not in ran]
why = ("the run's deadline (TEST_SH_DEADLINE) came first" if deadline_hit
       else "meson test stopped before it")
if deadline_hit:
    print(f"test.sh: the run's deadline (TEST_SH_DEADLINE) hit; "
          f"{len(not_run)} tests did not run")
failed += [f"{t} (did not run: {why})" for t in not_run]
for s in failed:
    print(f"FAILED: {s}")
for s in skipped:
    print(f"SKIPPED: {s}")
line = f"tests: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped"
if skipped:
    line += " (skipped: " + "; ".join(skipped) + ")"
print(line)
if not passed and not failed:
    print("test.sh: no test passed: nothing really ran")
sys.exit(1 if failed or not passed else 0)
PY
prc=$?
[ $rc = 0 ] || exit $rc
exit $prc
