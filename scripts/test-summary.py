#!/usr/bin/python3
"""test-summary.py LOG SKIPLIST ALLOW LISTFILE DEADLINE_HIT

The summary of a `meson test` run (scripts/run-tests.sh): every test of
LOG (meson's testlog.json) passed, failed or skipped; a skip fails unless
the test is on SKIPLIST or ALLOW is 1; every test of LISTFILE (`meson test
--list`) without a result fails as not run (DEADLINE_HIT 1: the run's
deadline came first).  The last line: "tests: N passed, N failed, N
skipped".  Exit 0 only when something passed and nothing failed.
"""
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
failed += [f"{s}: skipped, which is not allowed (not on {skiplist}; "
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
