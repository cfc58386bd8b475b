#!/usr/bin/python3
"""perf/issue18.py's verdicts on made-up runs: a figure on either side of
its threshold, a missing run, a goal met only when all its criteria are."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "issue18.py")


def paired(m):
    return {"median": m, "min": m, "max": m, "n": 5}


def hol(stream_1m, p99u_4m):
    rows = [{"background": "64K", "stock": {}, "sverbs": {"p99_vs_unloaded": 9.0},
             "p99_ratio_paired": paired(4.0), "sched_p99_ratio_paired": paired(0.5)}]
    for size, stream, p99u in (("1M", stream_1m, 2.0), ("4M", 1.0, p99u_4m)):
        rows.append({"background": size, "stock": {}, "sverbs": {"p99_vs_unloaded": p99u},
                     "mbps_ratio_paired": paired(stream)})
    return {"meta": {"git": "x"}, "summary": {"hol": rows}}


def insns(queue):
    runs = [{"path": "mlx5", "case": c, "mode": m, "per_wr": v}
            for c, m, v in (("lat", "stock", 500), ("lat", "pt", 510), ("lat", "queue", 500 + queue),
                            ("burst16", "stock", 300), ("burst16", "pt", 311))]
    runs += [{"path": "rxe", "case": c, "mode": m, "per_wr": v}
             for c, m, v in (("lat", "off", 400), ("lat", "pt", 405), ("lat", "queue", 400 + queue),
                             ("t1", "off", 300), ("t1", "pt", 300))]
    return {"meta": {"git": "x"}, "runs": runs}


def run(d, parts):
    for part, data in parts.items():
        with open(os.path.join(d, f"t-{part}.json"), "w") as f:
            json.dump(data, f)
    subprocess.run([sys.executable, SCRIPT, "t", "--dir", d], check=True)
    with open(os.path.join(d, "t.json")) as f:
        return json.load(f)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    with tempfile.TemporaryDirectory() as d:
        v = run(d, {"hol": hol(0.96, 4.9), "insns": insns(60)})["verdicts"]
        check(v["1"] == "met", "goal 1 met: stream 0.96x, p99 4.9x, 64 KiB 0.5x")
        check(v["4a"] == "not met", "4a not met: mlx5 bursts +11")
        check(v["4b"] == "met", "4b met at +60")
        check(v["2"] == "not measured" and v["5"] == "not measured",
              "goals without their runs are not measured")
    with tempfile.TemporaryDirectory() as d:
        out = run(d, {"hol": hol(0.94, 5.1), "insns": insns(61)})
        v = out["verdicts"]
        check(v["1"] == "not met", "goal 1 not met: stream 0.94x")
        check(v["4b"] == "not met", "4b not met at +61")
        bad = [c["what"] for c in out["criteria"] if c["goal"] == "1" and c["met"] is False]
        check(len(bad) == 2, "both goal 1 misses named (stream 1M, p99 4M)")
        check(os.path.getsize(os.path.join(d, "t.md")) > 0, "t.md written")
    with tempfile.TemporaryDirectory() as d:
        zero = insns(10)
        for r in zero["runs"]:
            if r["case"] == "t1":
                r["per_wr"] = 0
        v = run(d, {"insns": zero})["verdicts"]
        check(v["4a"] == "not measured", "a count of 0 instructions is no figure")
    with tempfile.TemporaryDirectory() as d:
        # goal 3 judged on the per-repetition pairs when the summary has
        # them: the ratio of the two medians (0.97x) would pass, the pairs
        # (0.90x) do not
        def row(cfg, ratio, pair):
            return {"cfg": cfg, "kind": "rate", "stock": {}, "sverbs": {},
                    "vs_post_list": {"post_list": 16, "ratio": ratio,
                                     "paired": None if pair is None else paired(pair)}}
        bw = [{"test": "ib_write_bw 64B post_list 16", "stock": {"mpps": 0.030}, "sverbs": {}},
              {"test": "ib_write_bw 64B budget", "stock": {}, "sverbs": {"mpps": 0.030},
               "vs_post_list": {"post_list": 16, "ratio": 1.0, "paired": paired(0.85)}}]
        budget = [{"what": "rate_bench lat", "metric": "latency p50", "paired": paired(1.025)}]
        rate = {"meta": {"git": "x"},
                "summary": {"rate": [row("t1b", 0.97, 0.90), row("t4b", 0.80, None)],
                            "perftest": bw, "budget": budget}}
        out = run(d, {"rate": rate})
        got = {c["what"].split(",")[0]: c for c in out["criteria"] if c["goal"] == "3"}
        t1 = got["rate_bench 1 thread"]
        check(t1["met"] is False and abs(t1["value"] - 0.90) < 1e-9,
              "goal 3, 1 thread: the paired median (0.90x), not the ratio of medians")
        t4 = got["rate_bench 4 threads"]
        check(t4["met"] is False and abs(t4["value"] - 0.80) < 1e-9,
              "goal 3, 4 threads: without pairs, the ratio of medians")
        pt = got["ib_write_bw 64 B -l 1 with a 50 µs budget / stock -l 16"]
        check(pt["met"] is False and abs(pt["value"] - 0.85) < 1e-9,
              "goal 3, ib_write_bw: the paired median (0.85x), not the medians' 1.00x")
        md = open(os.path.join(d, "t.md")).read()
        check("| 1.025x | - | <= 1.02x | **no** |" in md,
              "a figure just over its bound is not printed as the bound (1.025x, not 1.02x)")
    with tempfile.TemporaryDirectory() as d:
        # the 95 % interval of each median against its threshold: a figure
        # on the wrong side whose interval spans the threshold is undecided,
        # one wholly on it is decided, on either side of ">=" and "<="
        def sp(m, lo, hi):
            return {"median": m, "min": lo, "max": hi, "n": 15, "ci95": [lo, hi]}
        h = hol(0.94, 4.0)
        h["summary"]["hol"][1]["mbps_ratio_paired"] = sp(0.94, 0.93, 0.96)  # 1M: spans 0.95
        h["summary"]["hol"][2]["mbps_ratio_paired"] = sp(0.90, 0.85, 0.949)  # 4M: below
        budget = [{"what": "rate_bench lat", "metric": "latency p50", "paired": sp(1.03, 1.021, 1.05)},
                  {"what": "rate_bench t1", "metric": "kpps", "paired": sp(1.0, 0.97, 1.1)},
                  {"what": "ib_write_lat 64B", "metric": "lat_typical_us",
                   "paired": sp(1.01, 0.99, 1.03)}]
        out = run(d, {"hol": h, "rate": {"meta": {"git": "x"}, "summary": {"budget": budget}}})
        got = {c["what"]: c for c in out["criteria"]}
        s1 = got["stream behind 1M WRITEs, sverbs / stock (paired median)"]
        s4 = got["stream behind 4M WRITEs, sverbs / stock (paired median)"]
        check(s1["met"] is False and s1["decided"] is False,
              "stream 0.94x, interval 0.93..0.96 over 0.95: not met, undecided")
        check(s4["met"] is False and s4["decided"] is True,
              "stream 0.90x, interval 0.85..0.949: not met, decided")
        p50 = got["rate_bench post one, wait one: p50, budget / none"]
        check(p50["met"] is False and p50["decided"] is True,
              "p50 1.03x, interval 1.021..1.05 over 1.02: not met, decided")
        t1 = got["rate_bench one WR per call: rate, budget / none"]
        check(t1["met"] is True and t1["decided"] is False,
              "rate 1.00x, interval 0.97..1.10 around 0.98: met, undecided")
        lat = got["ib_write_lat 64 B: typical latency, budget / none"]
        check(lat["met"] is True and lat["decided"] is False,
              "latency 1.01x, interval 0.99..1.03 around 1.02: met, undecided")
        md = open(os.path.join(d, "t.md")).read()
        check("| 0.94x | 0.93..0.96 (n=15) | >= 0.95x | **no**, undecided: the interval spans "
              "the threshold |" in md, "the table shows the interval and the undecided verdict")
        check("| 1 | not met | stream behind 1M WRITEs, sverbs / stock (paired median): 0.94x, "
              "0.93..0.96 (n=15) |" in md, "the goal's verdict names its undecided criterion")
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, SCRIPT, "t", "--dir", d], capture_output=True, text=True)
        check(r.returncode != 0 and "none of" in r.stderr, "no runs at all: an error, not a table")


if __name__ == "__main__":
    main()
