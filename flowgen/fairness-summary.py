#!/usr/bin/python3
# fairness-summary.py - the table of a run-fairness.sh matrix (run-fairness.sh
# calls it): one row per flow count x layer x allocation from the clients'
# and servers' JSON in OUT/<flows>/, the host's load during each run from
# OUT/host-load.txt.  Prints the table; with --json / --md also writes a
# compact summary (no per-flow lists: per-flow throughput as quantiles) for
# perf/results/.
#
#   flowgen/fairness-summary.py OUT FLOWS... [--json F] [--md F] [--title T]
import argparse
import json
import os
import statistics
import sys
from datetime import datetime, timezone

ap = argparse.ArgumentParser(description="summary of a run-fairness.sh matrix")
ap.add_argument("out", help="run-fairness.sh's results directory")
ap.add_argument("flows", nargs="+", help="the flow counts, in order")
ap.add_argument("--json", help="write the summary as JSON here")
ap.add_argument("--md", help="write the table as Markdown here")
ap.add_argument("--title", default="fairness", help="the Markdown heading")
a = ap.parse_args()

CELLS = [("on", "off"), ("off", "off"), ("on", "on"), ("off", "on")]  # (layer, allocation)


def host_load(path):
    """[(seconds of the day UTC, load1)] from host-load.txt."""
    samples = []
    try:
        for line in open(path):
            f = line.split()
            if len(f) >= 3 and f[1] == "load":
                h, m, s = (int(x) for x in f[0].split(":"))
                samples.append((h * 3600 + m * 60 + s, float(f[2])))
    except OSError:
        pass
    return samples


def day_seconds(t):
    d = datetime.fromtimestamp(t, timezone.utc)
    return d.hour * 3600 + d.minute * 60 + d.second


def load_during(samples, start, end):
    """load1 samples taken between start and end (host times): min, max."""
    v = [l for t, l in samples if day_seconds(start) <= t <= day_seconds(end)]
    return (min(v), max(v)) if v else None


def quantiles(v, qs=(0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1)):
    s = sorted(v)
    return {f"p{round(q * 100)}": s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))] for q in qs}


def cell(d, layer, alloc, samples):
    name = f"layer-{layer}-alloc-{alloc}"
    f = os.path.join(d, name + ".json")
    if not os.path.exists(f):
        return {"run": name, "layer": layer, "alloc": alloc, "result": None}
    j = json.load(open(f))
    g = [x["gbps"] for x in j["per_flow"]]
    ops = [x["ops"] for x in j["per_flow"]]
    t = j["total"]
    target = j["alloc"]["link_mbps"] / 1e3 if j["alloc"]["active"] else None
    srv_f = os.path.join(d, name + "-server.json")
    srv = json.load(open(srv_f)) if os.path.exists(srv_f) else None
    # the run's host times: the server's log is written at its start, the
    # client's JSON at the end
    start = os.path.getmtime(os.path.join(d, name + "-server.log")) if os.path.exists(
        os.path.join(d, name + "-server.log")) else os.path.getmtime(f) - j["seconds"]
    hw = j.get("hw_counters", {})
    tl = [p["jain"] for p in j.get("timeline", [])]
    return {
        "run": name, "layer": layer, "alloc": alloc, "result": "aborted" if j["aborted"] else "ok",
        "abort_reason": j.get("abort_reason", ""),
        "flows": j["flows"], "users": j["users"], "threads": j["threads"],
        "seconds": j["post_seconds"], "connect_seconds": j["connect_seconds"],
        "host_start_utc": datetime.fromtimestamp(start, timezone.utc).strftime("%H:%M:%S"),
        "host_end_utc": datetime.fromtimestamp(os.path.getmtime(f), timezone.utc).strftime("%H:%M:%S"),
        "host_wall_seconds": round(os.path.getmtime(f) - start, 1),
        "host_load1": load_during(samples, start, os.path.getmtime(f)),
        "gbps": t["gbps"], "offered_gbps": t.get("offered_gbps", 0), "target_gbps": target,
        "offered_over_target": t.get("offered_gbps", 0) / target if target else None,
        "achieved_over_target": t["gbps"] / target if target else None,
        "jain": j["jain"], "jain_users": j["jain_users"],
        "min_over_max_flow": min(g) / max(g) if g and max(g) else 0,
        "ops_per_flow": [min(ops), max(ops)],
        "flow_gbps_quantiles": quantiles(g),
        "jain_per_second_median": statistics.median(tl) if tl else None,
        "errors": t["errors"], "pace_resets": t["pace_resets"],
        "lat_p50_us": t["lat"]["p50_us"], "lat_p99_us": t["lat"]["p99_us"],
        "hw_counters": {k: hw[k] for k in ("completer_retry_err", "rcvd_seq_err", "out_of_seq_request",
                                           "duplicate_request", "retry_exceeded_err", "send_err")
                        if k in hw},
        "memory_client": j.get("memory"),
        "memory_server": srv.get("memory") if srv else None,
    }


def fmt_lat(us):
    return f"{us / 1e6:.1f} s" if us >= 1e6 else f"{us / 1e3:.0f} ms"


samples = host_load(os.path.join(a.out, "host-load.txt"))
rows = []
for n in a.flows:
    for layer, alloc in CELLS:
        c = cell(os.path.join(a.out, n), layer, alloc, samples)
        c.setdefault("flows", int(n))
        rows.append(c)

head = ("| flows | layer | allocation | run s | Gbit/s | offered | target | offered / target "
        "| achieved / target | Jain | min / max flow | ops per flow | pace resets | errors | retransmits "
        "| p50 / p99 latency | host load |")
lines = [head, "|" + "---|" * (head.count("|") - 1)]
for c in rows:
    if c["result"] is None:
        lines.append(f"| {c['flows']:,} | {c['layer']} | {c['alloc']} | no result |" + " |" * 13)
        continue
    def opt(k, form="{:.3f}"):
        return form.format(c[k]) if c[k] is not None else "—"

    ld = c["host_load1"]
    lines.append(
        f"| {c['flows']:,} | {c['layer']} | {c['alloc']} | {c['seconds']:.0f} | {c['gbps']:.4f} "
        f"| {c['offered_gbps']:.4f} | {opt('target_gbps', '{:.4f}')} | {opt('offered_over_target')} "
        f"| {opt('achieved_over_target')} | {c['jain']:.3f} | {c['min_over_max_flow']:.3f} "
        f"| {c['ops_per_flow'][0]}–{c['ops_per_flow'][1]} | {c['pace_resets']:,} | {c['errors']} "
        f"| {c['hw_counters'].get('completer_retry_err', '?')} "
        f"| {fmt_lat(c['lat_p50_us'])} / {fmt_lat(c['lat_p99_us'])} "
        f"| {f'{ld[0]:.1f}–{ld[1]:.1f}' if ld else '?'} |"
        + (f" ABORTED: {c['abort_reason']}" if c["result"] == "aborted" else ""))
mem = [c for c in rows if c["result"] and c["memory_client"]]
if mem:
    big = max(c["flows"] for c in mem)
    lines.append("")
    for c in (c for c in mem if c["flows"] == big):
        m, sm = c["memory_client"], c["memory_server"] or {}
        lines.append(f"memory per flow at {big:,} flows, {c['run']}: client RSS "
                     f"{m['rss_per_flow_bytes'] / 1024:.1f} KiB, server RSS "
                     f"{sm.get('rss_per_flow_bytes', 0) / 1024:.1f} KiB, system-wide "
                     f"{m['sys_per_flow_bytes'] / 1024:.1f} KiB  ")
table = "\n".join(lines)
print(table)
if a.json:
    with open(a.json, "w") as f:
        json.dump({"name": a.title, "cells": rows}, f, indent=1)
        f.write("\n")
if a.md:
    with open(a.md, "w") as f:
        f.write(f"# {a.title}\n\n{table}\n")
sys.exit(0 if all(c["result"] == "ok" for c in rows) else 1)
