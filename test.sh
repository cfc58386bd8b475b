#!/bin/bash
# test.sh - set up (packages, guest kernel, build) and run the whole test
# suite: unit tests (CUnit), the build checks, the Soft-RoCE guest suites
# (our integration tests, perftest, rdma-core's own tests), the proxy.
#
#   ./test.sh                  everything
#   ./test.sh --suite unit     any extra arguments go to `meson test`
#
# The last line is a plain summary: "tests: N passed, N failed, N skipped".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")" && pwd -P)
"$ROOT/scripts/setup.sh" || exit 1
cd "$ROOT"
meson test -C build --print-errorlogs --num-processes 1 "$@"
rc=$?
/usr/bin/python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
count = {"OK": 0, "FAIL": 0, "SKIP": 0, "EXPECTEDFAIL": 0, "TIMEOUT": 0, "ERROR": 0, "UNEXPECTEDPASS": 0}
try:
    with open(sys.argv[1]) as f:
        for line in f:
            r = json.loads(line).get("result", "ERROR")
            count[r] = count.get(r, 0) + 1
except FileNotFoundError:
    pass
passed = count["OK"] + count["EXPECTEDFAIL"]
failed = count["FAIL"] + count["TIMEOUT"] + count["ERROR"] + count["UNEXPECTEDPASS"]
print(f"tests: {passed} passed, {failed} failed, {count['SKIP']} skipped")
PY
exit $rc
