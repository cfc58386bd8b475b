#!/usr/bin/python3
"""Run rdma-core's own test suite and record every test's outcome.

usage: run-rdma-core.py [--shard K/N] [--test-timeout S] RESULTS.tsv RDMA_CORE_SRC/tests [run_tests.py args...]
   e.g. run-rdma-core.py --shard 1/2 off.tsv /src/tests --dev rxe0 --gid 1 -v

--shard K/N runs only the K-th of N parts of the suite (tests in the order
unittest loads them, dealt out round-robin by class, so a class's setUpClass
runs in one shard); the N parts together are the whole suite.
--test-timeout S (default 120): a test that runs longer than S seconds is
stopped with a TimeoutError (recorded as its error, with every thread's
stack on stderr) and the run goes on: one hung test is one test's outcome,
not a run killed by the outer timeout with nothing recorded.

This does exactly what rdma-core's tests/run_tests.py does (load the `tests`
package with its args_parser, then unittest.main over it), with one addition:
a result class that also writes one line per test to RESULTS.tsv:

    <test id> TAB <outcome> TAB <first line of the reason>

outcome: ok | skip | fail | error | xfail | xpass.  Errors outside a test
(setUpClass, a module that does not import) get ids like
"setUpClass (tests.test_x.Foo)".  The console output is unittest's, as with
run_tests.py -v.  Exit status: 0 when the run completed (whatever the
outcomes: compare-rdma-core.py judges them), 2 on a usage error.
"""
import faulthandler
import os
import signal
import sys
import unittest
from importlib.machinery import SourceFileLoader


def first_line(text):
    text = (text or "").strip()
    lines = text.splitlines()
    # for a traceback the last line (the exception) says most
    line = lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines else "")
    return line.replace("\t", " ")[:300]


class TestTimeout(Exception):
    pass


class RecordingResult(unittest.TextTestResult):
    outcomes = []      # (id, outcome, reason), in run order
    test_timeout = 120

    def startTest(self, test):
        super().startTest(test)
        signal.alarm(self.test_timeout)

    def stopTest(self, test):
        signal.alarm(0)
        super().stopTest(test)

    def _rec(self, test, outcome, reason=""):
        self.outcomes.append((test.id(), outcome, first_line(reason)))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._rec(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._rec(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._rec(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._rec(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._rec(test, "xfail", self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._rec(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:   # a failed subtest fails its test
            failed = issubclass(err[0], test.failureException)
            self._rec(test, "fail" if failed else "error",
                      f"{subtest.id()}: " + self._exc_info_to_string(err, test))


def on_alarm(signum, frame):
    print(f"run-rdma-core: a test ran {RecordingResult.test_timeout} s (--test-timeout): "
          "stopping it; every thread's stack:", file=sys.stderr)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    raise TestTimeout(f"hang guard: the test ran {RecordingResult.test_timeout} s")


def shard_of(suite, k, n):
    """The k-th (1-based) of n parts: classes dealt out round-robin."""
    def flat(s):
        for t in s:
            yield from (flat(t) if isinstance(t, unittest.TestSuite) else [t])
    classes = []
    for t in flat(suite):
        key = type(t).__module__ + "." + type(t).__qualname__
        if not classes or classes[-1][0] != key:
            classes.append((key, []))
        classes[-1][1].append(t)
    part = unittest.TestSuite()
    for i, (_, tests) in enumerate(classes):
        if i % n == k - 1:
            part.addTests(tests)
    return part


def main():
    argv = sys.argv[1:]
    shard = None
    while argv and argv[0] in ("--shard", "--test-timeout") and len(argv) > 1:
        if argv[0] == "--shard":
            k, n = (int(x) for x in argv[1].split("/"))
            if not 1 <= k <= n:
                print(f"bad --shard {argv[1]}", file=sys.stderr)
                return 2
            shard = (k, n)
        else:
            RecordingResult.test_timeout = int(argv[1])
        argv = argv[2:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    results, tests_dir = argv[0], os.path.abspath(argv[1])
    signal.signal(signal.SIGALRM, on_alarm)
    # as if "python3 tests_dir/run_tests.py ARGS": its dir first on sys.path
    sys.argv = [os.path.join(tests_dir, "run_tests.py")] + argv[2:]
    sys.path.insert(0, tests_dir)

    from args_parser import parser
    tests = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
    parser.parse_args()
    # a class, not an instance: unittest.main then passes -v etc. to it
    class Runner(unittest.TextTestRunner):
        resultclass = RecordingResult

    if shard:
        # load as unittest.main would, keep this shard's part, run that
        class ShardProgram(unittest.TestProgram):
            def createTests(self, *a, **kw):
                super().createTests(*a, **kw)
                self.test = shard_of(self.test, *shard)
        prog = ShardProgram(module=tests, testRunner=Runner, exit=False)
    else:
        prog = unittest.main(module=tests, testRunner=Runner, exit=False)

    # the last outcome of a test wins (a failed subtest, then the test's own)
    seen = {}
    for tid, outcome, reason in RecordingResult.outcomes:
        if tid in seen and seen[tid][0] in ("fail", "error") and outcome == "ok":
            continue
        seen[tid] = (outcome, reason)
    with open(results + ".tmp", "w") as f:
        for tid, (outcome, reason) in seen.items():
            f.write(f"{tid}\t{outcome}\t{reason}\n")
    os.replace(results + ".tmp", results)
    r = prog.result
    print(f"run-rdma-core: {r.testsRun} run, {len(r.failures)} failures, "
          f"{len(r.errors)} errors, {len(r.skipped)} skipped -> {results}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
