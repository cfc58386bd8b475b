#!/usr/bin/python3
"""threads.py NAME RUNS.jsonl [--meta META.json] [--outdir DIR]: the table of
perf/run-threads.sh as DIR/NAME.{json,md}: hol_bench --stream-thread, stock
vs the layer, where the stream's CPU goes by thread (median over the
repetitions, in vCPUs: CPU seconds per second of the measured window) and
which thread rings rxe's doorbells (the strace runs)."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import MODES, fmt_paired, med, paired, size_key  # noqa: E402


def vcpus(run, *keys):
    c = run.get("cpu", {})
    iv = c.get("interval_s")
    if not iv or any(k not in c for k in keys):
        return None
    return sum(c[k] for k in keys) / iv


GUEST = ("user_s", "system_s", "irq_s", "softirq_s", "steal_s")
PROC = ("proc_user_s", "proc_system_s")


def rows(runs):
    out = []
    hol = [r for r in runs if r.get("bench") == "hol" and "error" not in r
           and r.get("stream_thread")]
    writes = [r for r in runs if r.get("bench") == "hol-writes" and "error" not in r]
    for size in sorted({r["large_size"] for r in hol}, key=size_key):
        by = {m: [r for r in hol if r["large_size"] == size and r["sverbs"] == m]
              for m, _ in MODES}
        row = {"size": size, "modes": {}}
        for m, name in MODES:
            rs = by[m]
            w = [r for r in writes if r["large_size"] == size and r["sverbs"] == m]
            row["modes"][name] = {
                "runs": len(rs),
                "mb_per_s": med([r["large"]["mb_per_s"] for r in rs]),
                "guest_vcpus": med([vcpus(r, *GUEST) for r in rs]),
                "process_vcpus": med([vcpus(r, *PROC) for r in rs]),
                "poll_thread_vcpus": med([vcpus(r, "poll_thread_s") for r in rs]),
                "stream_thread_vcpus": med([vcpus(r, "stream_thread_s") for r in rs]),
                "writes_poll_thread": w[0]["poll_thread_writes"] if w else None,
                "writes_stream_thread": w[0]["other_thread_writes"] if w else None,
            }
        row["stream_ratio"] = paired(by["off"], by["on"], lambda r: r["large"]["mb_per_s"])
        out.append(row)
    return out


def f2(x):
    return "-" if x is None else "%.2f" % x


def markdown(name, meta, rs, errors):
    lines = [f"# {name}: the stream's threads (hol_bench --stream-thread)", "",
             f"Guest: QEMU {meta.get('vm_accel', '?')}, {meta.get('vm_smp', '?')} vCPUs; "
             f"host load average {meta.get('host_loadavg', '?')} at start; git "
             f"{meta.get('git', '?')}; `{meta.get('args', '')}`.", "",
             "Background RDMA WRITEs re-posted by a second thread (the stream thread), "
             "64 B priority WRITEs every 1 ms posted by the thread that polls the CQ (the "
             "poll thread). vCPUs = CPU seconds per second of the measured window, "
             "median over the repetitions: the whole guest (/proc/stat), the process "
             "(getrusage), each thread (its CPU clock). write() calls: one run of each "
             "under strace (whole run, stdout/stderr left out); on rxe each is a doorbell "
             "and runs the requester in the calling thread.", "",
             "| background | mode | stream MB/s | guest busy | process | poll thread "
             "| stream thread | write()s: poll thread | write()s: stream thread |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rs:
        for _, mode in MODES:
            d = r["modes"][mode]
            mb = f2(d["mb_per_s"])
            if mode == "sverbs":
                mb += " (" + fmt_paired(r["stream_ratio"]) + ")"
            wp, ws = d["writes_poll_thread"], d["writes_stream_thread"]
            lines.append(f"| {r['size']} | {mode} | {mb} | {f2(d['guest_vcpus'])} | "
                         f"{f2(d['process_vcpus'])} | {f2(d['poll_thread_vcpus'])} | "
                         f"{f2(d['stream_thread_vcpus'])} | {'-' if wp is None else wp} | "
                         f"{'-' if ws is None else ws} |")
    if errors:
        lines += ["", f"**{errors} run(s) failed** (see the JSON)."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("runs")
    ap.add_argument("--meta")
    ap.add_argument("--outdir", default=".")
    a = ap.parse_args()
    runs = [json.loads(l) for l in open(a.runs) if l.startswith("{")]
    meta = json.load(open(a.meta)) if a.meta else {}
    errors = sum(1 for r in runs if "error" in r)
    rs = rows(runs)
    json.dump({"meta": meta, "rows": rs, "runs": runs},
              open(f"{a.outdir}/{a.name}.json", "w"), indent=1)
    open(f"{a.outdir}/{a.name}.md", "w").write(markdown(a.name, meta, rs, errors))
    if not rs:
        print("threads: no hol_bench --stream-thread runs", file=sys.stderr)
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
