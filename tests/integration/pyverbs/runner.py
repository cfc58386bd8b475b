#!/usr/bin/python3
"""Run the sverbs pyverbs tests: every test_*.py in this folder.

usage: runner.py [-k PATTERN] [TEST_DIR...]
    (Debian's /usr/bin/python3, PYTHONPATH with our pyverbs: see run.sh)

Prints unittest's verbose per-test lines, then one closing line
"N passed, N failed, N skipped".  Exit status: 0 all passed (or skipped),
1 a failure or error, 77 when no test ran at all or every test skipped.
"""
import argparse
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", dest="patterns", action="append",
                    help="only tests whose name contains PATTERN")
    ap.add_argument("dirs", nargs="*", default=[HERE])
    args = ap.parse_args()

    sys.path.insert(0, HERE)          # sverbs_testlib
    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = [f"*{p}*" for p in args.patterns]
    suite = unittest.TestSuite()
    for d in args.dirs:
        suite.addTests(loader.discover(d, pattern="test_*.py", top_level_dir=d))

    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
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
