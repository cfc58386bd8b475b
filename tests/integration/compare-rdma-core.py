#!/usr/bin/python3
"""Compare two runs of rdma-core's suite (run-rdma-core.py result files).

usage: compare-rdma-core.py [--label SUITE] [--mode MODE] STOCK.tsv LAYER.tsv EXPECTED.txt
       (STOCK: SVERBS=off, LAYER: the run in MODE (default "on": SVERBS=on;
       queue, budget: see use_mode in lib.sh); EXPECTED: rdma-core-expected.txt,
       or /dev/null: no stock failure expected; SUITE names the suite in the
       output, default "rdma-core suite")

Prints ran / passed / skipped / failed for both runs, then every problem:
  - a test whose outcome differs between the runs (or that ran in one only);
  - a stock failure or error that EXPECTED does not list (with that outcome);
  - a run that ran nothing, or passed nothing.
EXPECTED entries that passed in both runs are reported as stale (a note, not
a failure: a newer kernel may fix them).  Exit 0 when there is no problem.
"""
import sys

BAD = ("fail", "error", "xpass")


def load_results(path):
    res = {}
    with open(path) as f:
        for line in f:
            tid, outcome, reason = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            if tid:
                res[tid] = (outcome, reason)
    return res


def load_expected(path):
    exp = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in BAD:
                sys.exit(f"{path}:{n}: want 'NAME OUTCOME REASON', OUTCOME one of {BAD}")
            exp.append((parts[0], parts[1], parts[2]))
    return exp


def matches(name, tid):
    return tid == name or tid.endswith("." + name)


def counts(res):
    out = [o for o, _ in res.values()]
    return (len(out), out.count("ok") + out.count("xfail"), out.count("skip"),
            sum(out.count(b) for b in BAD))


def main():
    args, suite, mode = sys.argv[1:], "rdma-core suite", "on"
    while args and args[0] in ("--label", "--mode") and len(args) > 1:
        if args[0] == "--label":
            suite = args[1]
        else:
            mode = args[1]
        args = args[2:]
    if len(args) != 3:
        sys.exit(__doc__)
    stock, layer = load_results(args[0]), load_results(args[1])
    expected = load_expected(args[2])
    problems, notes = [], []
    mlabel = "SVERBS=on" if mode == "on" else f"mode {mode}"

    for label, res in (("SVERBS=off", stock), (mlabel, layer)):
        ran, passed, skipped, failed = counts(res)
        print(f"{suite} {label}: ran {ran}, passed {passed}, "
              f"skipped {skipped}, failed {failed}")
        if ran == 0 or passed == 0:
            problems.append(f"{label.strip()}: ran {ran}, passed {passed}: the suite did not really run")

    differing = 0
    for tid in sorted(set(stock) | set(layer)):
        s, l = stock.get(tid, ("absent", "")), layer.get(tid, ("absent", ""))
        if s[0] != l[0]:
            differing += 1
            problems.append(f"{tid}: SVERBS=off {s[0]}, {mlabel} {l[0]}: {l[1] or s[1]}")
        if s[0] in BAD:
            hit = [x for x in expected if matches(x[0], tid)]
            if not hit:
                problems.append(f"{tid}: {s[0]} with stock rdma-core, not in the expectations: {s[1]}")
            elif hit[0][1] != s[0]:
                problems.append(f"{tid}: stock {s[0]}, expected {hit[0][1]} ({hit[0][2]})")
            else:
                notes.append(f"expected {s[0]}: {tid}: {hit[0][2]}")

    for name, outcome, reason in expected:
        tids = [t for t in stock if matches(name, t)]
        if not tids:
            notes.append(f"stale expectation (no such test ran): {name}")
        elif all(stock[t][0] not in BAD and layer.get(t, ("",))[0] not in BAD for t in tids):
            notes.append(f"stale expectation (passes now): {name}")

    print(f"{suite} {mlabel}: {differing} test(s) with an outcome differing from stock")
    for n in notes:
        print(f"note: {n}")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("outcomes identical in both runs; stock failures all expected"
          if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
