#!/usr/bin/env python3
"""Summarize fair-bench.sh runs: medians and spread (min-max) over rounds, ratios to nginx and
to direct, CPU-seconds per 1,000 requests, open-loop p50/p99/p99.9.  Markdown on stdout."""
import argparse
import json
import statistics as st
from collections import defaultdict


def med(v):
    v = [x for x in v if x is not None]
    return st.median(v) if v else None


def spread(v):
    v = [x for x in v if x is not None]
    return f"{min(v):,.0f}-{max(v):,.0f}" if v else "-"


def f(x, fmt="{:,.0f}"):
    return fmt.format(x) if x is not None else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("--meta", default="")
    a = ap.parse_args()
    runs = [json.loads(l) for l in open(a.runs) if l.startswith("{")]
    print(f"# fair benchmark\n\n{a.meta}\n")
    closed = defaultdict(list)
    for r in runs:
        if r.get("kind") == "closed":
            closed[(r["workload"], r["conns"], r["target"])].append(r)
    print("## Closed loop (wrk), medians over rounds\n")
    print("| workload | conns | target | rounds | req/s (median) | spread | / nginx | / direct | "
          "p99 ms | CPU-s per 1k req | errors |")
    print("|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for (w, c, t) in sorted(closed):
        rs = closed[(w, c, t)]
        rps = med([r["rps"] for r in rs])
        ng = med([r["rps"] for r in closed.get((w, c, "nginx"), [])])
        di = med([r["rps"] for r in closed.get((w, c, "direct"), [])])
        err = sum(r["non2xx"] + sum((r["socket_errors"] or {}).values()) for r in rs)
        print(f"| {w} | {c} | {t} | {len(rs)} | {f(rps)} | {spread([r['rps'] for r in rs])} | "
              f"{f(rps / ng if rps and ng else None, '{:.2f}x')} | "
              f"{f(rps / di if rps and di else None, '{:.2f}x')} | "
              f"{f(med([r['p99_ms'] for r in rs]), '{:.1f}')} | "
              f"{f(med([r['cpu_s_per_1k'] for r in rs]), '{:.3f}')} | {err} |")
    opn = defaultdict(list)
    for r in runs:
        if r.get("kind") == "open":
            opn[(r["workload"], r["conns"], r["load"], r["target"])].append(r)
    if opn:
        print("\n## Open loop (constant offered rate, latency from the scheduled time)\n")
        print("| workload | conns | load (x nginx max) | offered/s | target | p50 ms | p99 ms | "
              "p99.9 ms | p99 / nginx | errors |")
        print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
        for (w, c, l, t) in sorted(opn):
            rs = opn[(w, c, l, t)]
            p99 = med([r["p99_ms"] for r in rs])
            ng = med([r["p99_ms"] for r in opn.get((w, c, l, "nginx"), [])])
            print(f"| {w} | {c} | {l} | {f(med([r['offered'] / r['seconds'] for r in rs]))} | {t} | "
                  f"{f(med([r['p50_ms'] for r in rs]), '{:.2f}')} | {f(p99, '{:.2f}')} | "
                  f"{f(med([r['p999_ms'] for r in rs]), '{:.2f}')} | "
                  f"{f(p99 / ng if p99 and ng else None, '{:.2f}x')} | "
                  f"{sum(r['errors'] for r in rs)} |")


if __name__ == "__main__":
    main()
