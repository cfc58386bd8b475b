#!/bin/bash
# compare-rdma-core-selftest.sh - checks of compare-rdma-core.py on canned
# result files (no guest): identical runs pass; an outcome that differs
# between SVERBS=off and on fails; an unlisted stock failure fails; a listed
# one passes; a run that ran nothing fails.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMP=$HERE/compare-rdma-core.py
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
PASS=0 FAIL=0
expect() {  # expect STATUS DESCRIPTION OFF ON EXPECTED
  local want=$1 d=$2 rc
  /usr/bin/python3 "$CMP" "$3" "$4" "$5" > "$T/out" 2>&1 && rc=0 || rc=$?
  if [ "$rc" = "$want" ]; then PASS=$((PASS + 1)); echo "ok - $d"
  else FAIL=$((FAIL + 1)); echo "not ok - $d (status $rc, want $want)"; sed 's/^/#   /' "$T/out"; fi
}
tab=$'\t'
printf '%s\n' "tests.test_a.A.test_one${tab}ok${tab}" "tests.test_a.A.test_two${tab}skip${tab}no device cap" \
  "tests.test_b.B.test_bad${tab}error${tab}local QP operation error" > "$T/base.tsv"
sed "s/test_one${tab}ok/test_one${tab}fail/" "$T/base.tsv" > "$T/differs.tsv"
: > "$T/empty.tsv"
echo "test_b.B.test_bad  error  known" > "$T/exp.txt"
echo "# nothing expected" > "$T/none.txt"
echo "test_b.B.test_bad  fail  wrong outcome" > "$T/wrong.txt"

expect 0 "identical runs, stock error listed" "$T/base.tsv" "$T/base.tsv" "$T/exp.txt"
grep -q 'SVERBS=off: ran 3, passed 1, skipped 1, failed 1' "$T/out" &&
  { PASS=$((PASS + 1)); echo "ok - counts printed"; } || { FAIL=$((FAIL + 1)); echo "not ok - counts printed"; }
expect 1 "outcome differs between off and on" "$T/base.tsv" "$T/differs.tsv" "$T/exp.txt"
expect 1 "stock error not listed" "$T/base.tsv" "$T/base.tsv" "$T/none.txt"
expect 1 "stock error listed with another outcome" "$T/base.tsv" "$T/base.tsv" "$T/wrong.txt"
expect 1 "a run that ran nothing" "$T/base.tsv" "$T/empty.tsv" "$T/exp.txt"
echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ]
