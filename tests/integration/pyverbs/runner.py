#!/usr/bin/python3
"""Run the sverbs pyverbs tests: every test_*.py in this folder.

usage: runner.py [-k PATTERN] [--results FILE.tsv] [TEST_DIR...]
    (Debian's /usr/bin/python3, PYTHONPATH with our pyverbs: see run.sh)

Prints unittest's verbose per-test lines, then one closing line
"N passed, N failed, N skipped"; with --results, one line per test
"<id> TAB <outcome> TAB <reason>" (outcome ok | skip | fail | error | xfail |
xpass, as run-rdma-core.py writes them, for compare-rdma-core.py).  Exit status: 0 all passed (or skipped),
1 a failure or error, 77 when no test ran at all or every test skipped.
"""
import argparse
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_ids(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from test_ids(t)
        else:
            yield t.id()


def write_results(path, ids, result):
    out = {tid: ("ok", "") for tid in ids}
    for kind, items in (("fail", result.failures), ("error", result.errors),
                        ("skip", result.skipped), ("xfail", result.expectedFailures)):
        for t, why in items:
            lines = (why or "").strip().splitlines()
            out[t.id()] = (kind, (lines[-1] if lines else "").replace("\t", " ")[:300])
    for t in result.unexpectedSuccesses:
        out[t.id()] = ("xpass", "")
    with open(path, "w") as f:
        for tid, (o, why) in out.items():
            f.write(f"{tid}\t{o}\t{why}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", dest="patterns", action="append",
                    help="only tests whose name contains PATTERN")
    ap.add_argument("--results", help="write per-test outcomes (TSV) here")
    ap.add_argument("dirs", nargs="*", default=[HERE])
    args = ap.parse_args()

    sys.path.insert(0, HERE)          # sverbs_testlib
    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = [f"*{p}*" for p in args.patterns]
    suite = unittest.TestSuite()
    for d in args.dirs:
        suite.addTests(loader.discover(d, pattern="test_*.py", top_level_dir=d))

    all_ids = list(test_ids(suite))     # (a suite forgets its tests as they run)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    if args.results:
        write_results(args.results, all_ids, result)
    failed = len(result.failures) + len(result.errors) + \
        len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    if passed == 0:
        print("SKIP: no pyverbs test ran (see the skip reasons above)")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
