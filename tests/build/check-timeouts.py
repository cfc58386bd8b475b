#!/usr/bin/python3
"""The meson timeouts of every test, and their sum.

usage: check-timeouts.py BUILD/meson-info/intro-tests.json [LIMIT_S]

Tests only in suites of tests/default-excluded-suites.txt (left out of the
default run) are listed but not counted.

CI (.ci/run) has 90 minutes on 2 cores for setup, build and ./test.sh.  A
hung test is killed at its meson timeout, a hang guard of about twice the
longest the test took in CI.  Their sum is more than CI's time: the run's
deadline (TEST_SH_DEADLINE, set by .ci/run, kept by ./test.sh) stops a
run of several hangs in time and names what did not run.  (Until 2026-12-01
the sum had to stay under LIMIT_S; guards of 1.1-1.5x a CI run's durations
then failed slower CI hosts twice.)  Prints one line per test (timeout,
suites, name), slowest first, and the sum; exit 1 when a test of the
default run has no timeout (0: meson never kills it) or one timeout alone
reaches LIMIT_S (default 5400 s = CI's 90 minutes).
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
    print(f"  {total:6d}  sum (CI has {limit} s = {limit // 60} minutes; "
          f"the run's deadline keeps them)")
    problems = [f"{name}: no timeout" for timeout, name, _, c in rows if c and timeout <= 0]
    problems += [f"{name}: a timeout of {timeout} s >= {limit} s, CI's time"
                 for timeout, name, _, c in rows if c and timeout >= limit]
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
