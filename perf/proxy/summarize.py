#!/usr/bin/python3
"""Summarize run-proxy-bench.sh results (python3 stdlib only).

usage: summarize.py RUNS.jsonl [--meta META.json] --json OUT.json --md OUT.md

RUNS.jsonl: one JSON object per wrk run (guest-bench.sh): target, workload, conns, round,
rps, p50_ms, p99_ms, non2xx, socket_errors, ok.  Lines that are not JSON are ignored.
Per (workload, conns, target) the median over rounds is reported, with the ratios to nginx
(the baseline) and to direct (the backend without a proxy), and the issue's goals are
checked for the sverbs-proxy targets:
  throughput >= 3.4 x nginx and p99 <= 23 % of nginx's at every connection count,
  throughput >= 90 % of direct at 64 connections.
"""
import argparse
import json
import statistics
import sys

TARGETS = ["direct", "nginx", "haproxy", "tcp-base", "rdma-base", "tcp", "rdma"]
LABEL = {
    "direct": "direct (backend)",
    "nginx": "nginx 1.22",
    "haproxy": "haproxy",
    "tcp": "sverbs-proxy TCP",
    "rdma": "sverbs-proxy RDMA",
    "tcp-base": "sverbs-proxy TCP (before, -B)",
    "rdma-base": "sverbs-proxy RDMA (before, -B)",
}
WORKLOADS = {"echo64": "/echo 64 B", "matmul16": "/matmul n=16", "matmul64": "/matmul n=64"}
GOAL_RPS, GOAL_P99, GOAL_DIRECT = 3.4, 0.23, 0.90


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, nd=0, suffix=""):
    if x is None:
        return "–"
    return f"{x:,.{nd}f}{suffix}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("--meta")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()

    runs = []
    for line in open(a.runs):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    if not runs:
        sys.exit("summarize.py: no runs")
    meta = json.load(open(a.meta)) if a.meta else {}

    # A run in which no request completed (wrk prints 0 requests: every answer took longer
    # than the run, or the target failed) has no rate or latency: it is counted, not averaged.
    def valid(r):
        return r.get("ok") and r.get("requests", 0) > 0 and r.get("rps")

    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["conns"], r["target"]), []).append(r)
    summary = []
    for (w, c, t), rs in groups.items():
        errors = sum(
            (r.get("non2xx") or 0) + sum((r.get("socket_errors") or {}).values()) for r in rs
        )
        ok = [r for r in rs if valid(r)]
        summary.append({
            "workload": w, "conns": c, "target": t, "rounds": len(rs),
            "empty_runs": len(rs) - len(ok),
            "rps": med([r["rps"] for r in ok]),
            "rps_all": [r["rps"] for r in rs],
            "p50_ms": med([r["p50_ms"] for r in ok]),
            "p99_ms": med([r["p99_ms"] for r in ok]),
            "errors": errors,
        })
    by = {(s["workload"], s["conns"], s["target"]): s for s in summary}
    for s in summary:
        n = by.get((s["workload"], s["conns"], "nginx"))
        d = by.get((s["workload"], s["conns"], "direct"))
        s["rps_vs_nginx"] = ratio(s["rps"], n and n["rps"])
        s["p50_vs_nginx"] = ratio(s["p50_ms"], n and n["p50_ms"])
        s["p99_vs_nginx"] = ratio(s["p99_ms"], n and n["p99_ms"])
        s["rps_vs_direct"] = ratio(s["rps"], d and d["rps"])

    workloads = [w for w in WORKLOADS if any(k[0] == w for k in by)]
    conns = sorted({k[1] for k in by})
    targets = [t for t in TARGETS if any(k[2] == t for k in by)]

    goals = []
    for t in ("tcp", "rdma"):
        if t not in targets:
            continue
        for w in workloads:
            for c in conns:
                s = by.get((w, c, t))
                if not s:
                    continue
                g = {"target": t, "workload": w, "conns": c,
                     "rps_vs_nginx": s["rps_vs_nginx"], "p99_vs_nginx": s["p99_vs_nginx"],
                     "rps_goal_met": s["rps_vs_nginx"] is not None and s["rps_vs_nginx"] >= GOAL_RPS,
                     "p99_goal_met": s["p99_vs_nginx"] is not None and s["p99_vs_nginx"] <= GOAL_P99}
                if c == 64:
                    g["rps_vs_direct"] = s["rps_vs_direct"]
                    g["direct_goal_met"] = (s["rps_vs_direct"] is not None
                                            and s["rps_vs_direct"] >= GOAL_DIRECT)
                goals.append(g)

    json.dump({"meta": meta, "goals": {"rps_vs_nginx_min": GOAL_RPS, "p99_vs_nginx_max": GOAL_P99,
                                        "rps_vs_direct_min_at_64": GOAL_DIRECT},
               "summary": sorted(summary, key=lambda s: (s["workload"], s["conns"],
                                                         TARGETS.index(s["target"]))),
               "goal_checks": goals, "runs": runs},
              open(a.json, "w"), indent=1)

    L = []
    L.append("# sverbs-proxy vs nginx / haproxy (wrk, Soft-RoCE guest)\n")
    if meta:
        L.append(f"`{meta.get('command', '')}` — {meta.get('date', '')}, git {meta.get('git', '')}; "
                 f"{meta.get('guest', '')}; host {meta.get('host_cpus', '?')} CPUs, load "
                 f"{meta.get('host_load', '?')}; nginx {meta.get('nginx', '?')}, haproxy "
                 f"{meta.get('haproxy', '?')}; {meta.get('wrk', '')}.\n")
    L.append("Medians over rounds. Ratios: `rps/nginx`, `p99/nginx` (lower is better), "
             "`rps/direct` (direct = the backend without a proxy). Everything — wrk (2 threads), "
             "the proxy, the backend, rxe — shares the guest's 2 vCPUs. `empty`: runs in which "
             "no request completed (all answers slower than the run); they are left out of the "
             "medians.\n")
    for w in workloads:
        L.append(f"\n## {WORKLOADS[w]}\n")
        L.append("| conns | target | req/s | p50 ms | p99 ms | rps/nginx | p99/nginx | rps/direct | errors | empty |")
        L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in conns:
            for t in targets:
                s = by.get((w, c, t))
                if not s:
                    continue
                L.append(f"| {c} | {LABEL[t]} | {fmt(s['rps'])} | {fmt(s['p50_ms'], 2)} | "
                         f"{fmt(s['p99_ms'], 2)} | {fmt(s['rps_vs_nginx'], 2, '×')} | "
                         f"{fmt(s['p99_vs_nginx'], 2, '×')} | {fmt(s['rps_vs_direct'], 2, '×')} | "
                         f"{s['errors']} | {s['empty_runs']}/{s['rounds']} |")
    if goals:
        L.append("\n## Goals (issue): ≥ 3.4× nginx req/s, p99 ≤ 0.23× nginx, ≥ 0.90× direct at 64\n")
        L.append("| target | workload | conns | rps/nginx | p99/nginx | rps/direct (64) | met |")
        L.append("|---|---|---:|---:|---:|---:|---|")
        for g in goals:
            met = g["rps_goal_met"] and g["p99_goal_met"] and g.get("direct_goal_met", True)
            L.append(f"| {LABEL[g['target']]} | {WORKLOADS[g['workload']]} | {g['conns']} | "
                     f"{fmt(g['rps_vs_nginx'], 2, '×')} | {fmt(g['p99_vs_nginx'], 2, '×')} | "
                     f"{fmt(g.get('rps_vs_direct'), 2, '×')} | {'yes' if met else 'no'} |")
    open(a.md, "w").write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
