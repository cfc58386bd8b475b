#!/usr/bin/python3
"""The meson timeouts of every test, and their sum against CI's limit.

usage: check-timeouts.py BUILD/meson-info/intro-tests.json [LIMIT_S]

Tests only in suites of tests/default-excluded-suites.txt (left out of the
default run) are listed but not counted.

CI (.ci/run) has 90 minutes on 2 cores for setup, build and ./test.sh.  A
hung test is killed at its meson timeout, so the timeouts of all tests must
add up to less than that, or one hang after another could run CI out of time
without any test reporting it.  Prints one line per test (timeout, suites,
name), slowest first, and the sum; exit 1 when the sum reaches LIMIT_S
(default 5400 s) or a test has no timeout (0: meson never kills it).
"""
import json
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    limit = int(sys.argv[2]) if len(sys.argv) == 3 else 5400
    with open(sys.argv[1]) as f:
        tests = json.load(f)
    here = __file__.rsplit("/", 1)[0]
    with open(here + "/../default-excluded-suites.txt") as f:
        excluded = {l.strip() for l in f if l.strip()}

    def counted(t):
        return not any(s.split(":")[-1] in excluded for s in t.get("suite", []))

    rows = sorted(((t.get("timeout") or 0, t["name"], "+".join(t.get("suite", [])),
                    counted(t)) for t in tests), key=lambda r: (-r[0], r[1]))
    total = sum(r[0] for r in rows if r[3])
    print(f"meson timeouts of {len(rows)} tests (s):")
    for timeout, name, suites, c in rows:
        print(f"  {timeout:6d}  {name:32s} {suites}" + ("" if c else "  (not in the default run)"))
    print(f"  {total:6d}  sum (limit {limit} s = CI's {limit // 60} minutes)")
    problems = [f"{name}: no timeout" for timeout, name, _, c in rows if c and timeout <= 0]
    if total >= limit:
        problems.append(f"the timeouts add up to {total} s >= {limit} s")
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
