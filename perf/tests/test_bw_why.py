#!/usr/bin/python3
"""perf/bw_why.py's report (perf/run-bw-why.sh) on made-up guest lines: the
layer's counters of a QP in pass-through with deferred doorbells (WQEs and
doorbells counted, no WR of the queue), of a queued QP, and a failed run."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "bw_why.py")


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def run_line(mode, rep, mpps, layer=None):
    r = {"bench": "bw-why", "kind": "run", "mode": mode, "rep": rep, "iters": 100000,
         "mpps": mpps, "user_s": 0.5, "sys_s": 5.0, "wall_s": 6.0}
    if layer:
        r.update(layer)
    return r


# the guest's counters: SVERBS_STATS of a deferring QP in pass-through
DEFER = {"layer_wrs": 0, "wqes": 98000, "doorbells": 4000, "held": 0, "held_p99_us": 0.0,
         "passthrough": True,
         "rung": {"target": [3000, 75000], "refused": [0, 0], "poll": [600, 12000],
                  "timer": [400, 11000], "state": [0, 0]}}
QUEUED = {"layer_wrs": 100000, "wqes": 100000, "doorbells": 6250, "held": 99000,
          "held_p99_us": 131.1, "passthrough": False}


def report(lines, modes):
    with tempfile.TemporaryDirectory() as d:
        runs = os.path.join(d, "runs.jsonl")
        with open(runs, "w") as f:
            f.write("ib_write_bw's noise on the same stream\n")
            for l in lines:
                f.write(json.dumps(l) + "\n")
        meta = os.path.join(d, "meta.json")
        with open(meta, "w") as f:
            json.dump({"git": "x", "args": "test"}, f)
        base = os.path.join(d, "t")
        r = subprocess.run([sys.executable, SCRIPT, runs, meta, base, "50", *modes],
                           capture_output=True, text=True)
        md = open(base + ".md").read() if os.path.exists(base + ".md") else ""
        js = json.load(open(base + ".json")) if os.path.exists(base + ".json") else None
        return r, md, js


def main():
    modes = ["none", "budget", "nolinger"]
    lines = []
    for rep in (1, 2, 3):
        lines += [run_line("none", rep, 0.020),
                  run_line("budget", rep, 0.022, DEFER),
                  run_line("nolinger", rep, 0.021, QUEUED)]
    lines.append({"bench": "bw-why", "kind": "syscalls", "mode": "budget", "wrs": 9000,
                  "per_wr": {"write": 0.05, "futex": 0.2}, "total_per_wr": 0.25})
    r, md, js = report(lines, modes)
    check(r.returncode == 0, f"a deferring QP's counters make a report (stderr: {r.stderr.strip()[-300:]})")
    check("| budget | 24.50 | - | - |" in md,
          "pass-through's deferred doorbells: WQEs per doorbell, no held figures")
    check("| nolinger | 16.00 | 0.99 | 131.1 |" in md, "a queued QP's held WRs per WR and p99")
    check("| budget | 75 %, 25.0 | 15 %, 20.0 | 10 %, 27.5 | 0 % | 0 % |" in md,
          "who rang: each cause's share of the doorbells, its WQEs per doorbell")
    check("1.10x (1.10..1.10)" in md, "the rate against the first mode")
    check(js is not None and len(js["runs"]) == len(lines), "every line kept in the JSON")

    bad = lines[:2] + [{"bench": "bw-why", "kind": "run", "mode": "nolinger", "rep": 1,
                        "error": "ib_write_bw failed"}]
    r, md, js = report(bad, modes)
    check(r.returncode == 1, "a failed run: exit status 1")
    check("ib_write_bw failed" in md and js is not None, "the failed run named, the lines kept")


if __name__ == "__main__":
    main()
