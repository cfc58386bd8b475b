#!/usr/bin/python3
"""summarize.py - turn the JSON lines of hol_bench / rate_bench / syscalls.sh
runs into perf/results/<name>.json (every run + a summary) and a markdown
table perf/results/<name>.md.

    summarize.py NAME RUNS.jsonl [--meta META.json] [--outdir DIR]

"off" runs are stock rdma-core (SVERBS=off), "on" runs the sverbs layer.
Medians over the repetitions; ratios are sverbs / stock, both as the ratio of
the medians and as the median (min..max) of the per-repetition ratios (the
runs of a repetition ran back to back, so those pairs share host noise).
"""
import argparse
import json
import os
import random
import re
import statistics
import sys

MODES = (("off", "stock"), ("on", "sverbs"))


def label_field(run, key):
    m = re.search(r"\b%s=(\S+)" % key, run.get("label", "") or "")
    return m.group(1) if m else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def paired(off_runs, on_runs, get):
    """Per-repetition ratios on/off, for the reps present in both."""
    off = {label_field(r, "rep"): get(r) for r in off_runs}
    on = {label_field(r, "rep"): get(r) for r in on_runs}
    rs = [ratio(on[k], off[k]) for k in sorted(set(off) & set(on), key=str)]
    rs = [r for r in rs if r is not None]
    if not rs:
        return None
    sig = lambda x: float("%.4g" % x)  # a p99 1000x lower must not round to 0.001
    lo, hi = bootstrap_ci(rs)
    return {"median": sig(statistics.median(rs)), "min": sig(min(rs)),
            "max": sig(max(rs)), "n": len(rs), "ci95": [sig(lo), sig(hi)]}


def bootstrap_ci(rs, n=2000):
    """95% percentile-bootstrap interval of the median of rs (fixed seed:
    the same runs give the same interval)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(rs, k=len(rs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def budget_cost(runs):
    """The same program with and without a budget, both with the layer on:
    per-repetition ratios budget / no budget (rate_bench configs X and Xb,
    perftest tests T and "T budget")."""
    ok = [r for r in runs if "error" not in r and r.get("sverbs") == "on"]
    out = []
    cfgs = dict.fromkeys(label_field(r, "cfg") for r in ok if r.get("bench") in ("rate", "lat"))
    for c in cfgs:
        if not c or c + "b" not in cfgs:
            continue
        a = [r for r in ok if label_field(r, "cfg") == c]
        b = [r for r in ok if label_field(r, "cfg") == c + "b"]
        if a and a[0]["bench"] == "lat":
            for k in ("p50_us", "p99_us"):
                out.append({"what": "rate_bench " + c, "metric": "latency " + k[:-3],
                            "paired": paired(a, b, lambda r, k=k: r["lat"][k])})
        else:
            out.append({"what": "rate_bench " + c, "metric": "kpps",
                        "paired": paired(a, b, lambda r: r["kpps"])})
    tests = dict.fromkeys(r["test"] for r in ok if r.get("bench") == "perftest")
    for t in tests:
        if t + " budget" not in tests:
            continue
        a = [r for r in ok if r.get("test") == t]
        b = [r for r in ok if r.get("test") == t + " budget"]
        for k in ("mpps", "lat_typical_us", "lat_p99_us"):
            p = paired(a, b, lambda r, k=k: r.get(k))
            if p:
                out.append({"what": t, "metric": k, "paired": p})
    return out


def rnd(x, n=2):
    return None if x is None else round(x, n)


def size_key(s):
    if s in (None, "none"):
        return -1
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)] if m else 0


def summarize_hol(runs):
    ok = [r for r in runs if r.get("bench") == "hol" and "error" not in r]
    for r in ok:
        r["_variant"] = label_field(r, "variant") or ""
    variants = list(dict.fromkeys(r["_variant"] for r in ok))
    out = []
    for size in sorted({r["large_size"] for r in ok}, key=size_key):
        for v in variants:
            sel = [r for r in ok if r["_variant"] == v]
            rs_size = [r for r in sel if r["large_size"] == size]
            if rs_size:
                out.append(hol_row(sel, rs_size, size, v))
    return out


def sched(run):
    """The small messages' latency from their scheduled (open-loop) time:
    it counts the wait to be posted at all, which the latency from the post
    leaves out when the poster falls behind (coordinated omission)."""
    return run["small"].get("count") and run.get("small_from_schedule")


def on_schedule(run):
    """The share of the measured window's scheduled messages that were
    posted and completed in it (the rest are not in either latency)."""
    due = run["window_s"] * 1e6 / run["interval_us"]
    return min(1.0, run["small"]["count"] / due) if due else None


def hol_row(sel, rs_size, size, variant):
    """One background size (and variant): stock against sverbs."""
    base = {m: med([r["small"]["p99_us"] for r in sel if r["baseline"] and r["sverbs"] == m])
            for m, _ in MODES}
    base_sched = {m: med([sched(r)["p99_us"] for r in sel
                          if r["baseline"] and r["sverbs"] == m and sched(r)])
                  for m, _ in MODES}
    row = {"background": size,
           "depth": next((r["depth"] for r in rs_size), None)}
    if variant:
        row["variant"] = variant
    by = {m: [r for r in rs_size if r["sverbs"] == m] for m, _ in MODES}
    for m, name in MODES:
        rs = by[m]
        row[name] = {
            "n": len(rs),
            "p50_us": rnd(med([r["small"]["p50_us"] for r in rs])),
            "p99_us": rnd(med([r["small"]["p99_us"] for r in rs])),
            "p999_us": rnd(med([r["small"]["p999_us"] for r in rs])),
            "max_us": rnd(med([r["small"]["max_us"] for r in rs])),
            "small_count": sum(r["small"]["count"] for r in rs),
            "skipped": sum(r["small"]["skipped"] for r in rs),
            "mb_per_s": rnd(med([r["large"]["mb_per_s"] for r in rs])),
            "p99_runs_us": [r["small"]["p99_us"] for r in rs],
            "mb_per_s_runs": [r["large"]["mb_per_s"] for r in rs],
        }
        if rs and all(sched(r) for r in rs):
            row[name]["sched"] = {
                "p50_us": rnd(med([sched(r)["p50_us"] for r in rs])),
                "p99_us": rnd(med([sched(r)["p99_us"] for r in rs])),
                "on_schedule": rnd(med([on_schedule(r) for r in rs]), 3),
                "p99_runs_us": [sched(r)["p99_us"] for r in rs],
            }
            if size != "none":
                row[name]["sched"]["p99_vs_unloaded"] = rnd(
                    ratio(row[name]["sched"]["p99_us"], base_sched[m]))
        if size != "none":
            row[name]["p99_vs_unloaded"] = rnd(ratio(row[name]["p99_us"], base[m]))
    row["p99_ratio"] = rnd(ratio(row["sverbs"]["p99_us"], row["stock"]["p99_us"]), 3)
    row["p99_ratio_paired"] = paired(by["off"], by["on"], lambda r: r["small"]["p99_us"])
    row["p50_ratio"] = rnd(ratio(row["sverbs"]["p50_us"], row["stock"]["p50_us"]), 3)
    if "sched" in row["stock"] and "sched" in row["sverbs"]:
        row["sched_p99_ratio_paired"] = paired(by["off"], by["on"],
                                               lambda r: sched(r)["p99_us"])
    if size != "none":
        row["mbps_ratio"] = rnd(ratio(row["sverbs"]["mb_per_s"], row["stock"]["mb_per_s"]), 3)
        row["mbps_ratio_paired"] = paired(by["off"], by["on"],
                                          lambda r: r["large"]["mb_per_s"])
        cpu = {m: cpu_per_mib(by[m]) for m, _ in MODES}
        if all(cpu.values()):
            row["cpu_ms_per_mib"] = {name: cpu[m] for m, name in MODES}
    row["_on_runs"] = by["on"]
    return row


CPU_KINDS = ("user_s", "system_s", "softirq_s", "irq_s", "proc_user_s", "proc_system_s")
BUSY_KINDS = ("user_s", "system_s", "softirq_s", "irq_s", "steal_s")


def busy_s(cpu):
    """A "cpu" record's CPU seconds of every kind but idle (the whole guest)."""
    return sum(cpu[k] for k in BUSY_KINDS)


def cpu_per_mib(rs):
    """Medians over the runs of the CPU time (ms) spent per MiB of the
    stream, by kind (hol_bench's "cpu": the whole guest from /proc/stat,
    and hol_bench's own from getrusage), and the busy cores (CPU seconds
    per second of all but idle).  None when a run has no "cpu"."""
    if not rs or not all(r.get("cpu", {}).get("interval_s") and r["large"]["mb_per_s"]
                         for r in rs):
        return None
    out = {}
    for k in CPU_KINDS:
        out[k[:-2] + "_ms"] = rnd(med([
            r["cpu"][k] / r["cpu"]["interval_s"] / (r["large"]["mb_per_s"] * 1e6 / (1 << 20))
            * 1000 for r in rs]), 2)
    out["busy_cores"] = rnd(med([busy_s(r["cpu"]) / r["cpu"]["interval_s"] for r in rs]), 2)
    return out


def hol_variants(rows):
    """Each variant's sverbs side against the first variant's, paired by
    repetition (the same size): what a setting buys or costs."""
    out = []
    first = {}
    for r in rows:
        first.setdefault(r["background"], r)
    for r in rows:
        f = first[r["background"]]
        if r is f or "variant" not in r:
            continue
        x = {"background": r["background"], "variant": r["variant"], "against": f["variant"],
             "p99": paired(f["_on_runs"], r["_on_runs"], lambda q: q["small"]["p99_us"])}
        if all(sched(q) for q in f["_on_runs"] + r["_on_runs"]):
            x["sched_p99"] = paired(f["_on_runs"], r["_on_runs"], lambda q: sched(q)["p99_us"])
        if r["background"] != "none":
            x["mb_per_s"] = paired(f["_on_runs"], r["_on_runs"], lambda q: q["large"]["mb_per_s"])
        out.append(x)
    return out


def sverbs_side(row, on_runs):
    """What the sverbs side ran with: a batching budget, or the queue path."""
    budgets = {label_field(r, "budget_us") for r in on_runs} - {None}
    if budgets:
        row["sverbs"]["budget_us"] = int(budgets.pop())
    if {label_field(r, "linger") for r in on_runs} == {"off"}:
        row["sverbs"]["linger"] = False
    if {label_field(r, "defer") for r in on_runs} == {"off"}:
        row["sverbs"]["defer"] = False
    if {label_field(r, "path") for r in on_runs} == {"queue"}:
        row["sverbs"]["path"] = "queue"


def side_desc(sv):
    """The sverbs side's settings, for a table row ("" for the defaults)."""
    if sv.get("budget_us") is not None:
        return "; sverbs: budget %s µs%s%s" % (
            sv["budget_us"], ", linger off" if sv.get("linger") is False else "",
            ", through the queue (defer off)" if sv.get("defer") is False else "")
    if sv.get("path") == "queue":
        return "; sverbs: queue path (SVERBS_PASSTHROUGH=off)"
    return ""


RATE_CPU = (("user", "user_s"), ("system", "system_s"), ("softirq", "softirq_s"),
            ("irq", "irq_s"), ("idle", "idle_s"))


def rate_cpu_per_wr(rs):
    """The machine's CPU per WR (µs, every vCPU; rate_bench's "cpu": thread
    0's window, its WRs from the run's total rate), medians per kind, and
    "busy": all but idle (busy_s())."""
    rs = [r for r in rs if r.get("cpu", {}).get("wrs")]
    if not rs:
        return None
    out = {}
    for k, f in RATE_CPU:
        out[k] = rnd(med([r["cpu"][f] * 1e6 / r["cpu"]["wrs"] for r in rs]))
    # the layer's timer thread, part of user + system (runs before it was
    # read have no figure)
    timer = [r["cpu"]["timer_thread_s"] * 1e6 / r["cpu"]["wrs"] for r in rs
             if "timer_thread_s" in r["cpu"]]
    out["timer"] = rnd(med(timer)) if timer else None
    out["busy"] = rnd(med([busy_s(r["cpu"]) * 1e6 / r["cpu"]["wrs"] for r in rs]))
    return out


def summarize_rate(runs):
    ok = [r for r in runs if r.get("bench") in ("rate", "lat") and "error" not in r]
    out = []
    cfgs = []
    for r in ok:
        c = label_field(r, "cfg") or ("lat" if r["bench"] == "lat" else
                                      "t%d_pl%d" % (r["threads"], r["post_list"]))
        r["_cfg"] = c
        if c not in cfgs:
            cfgs.append(c)
    runs_of = {}
    for c in cfgs:
        by = {m: [r for r in ok if r["_cfg"] == c and r["sverbs"] == m] for m, _ in MODES}
        runs_of[c] = by
        row = {"cfg": c}
        if by["off"] and by["off"][0]["bench"] == "lat" or by["on"] and by["on"][0]["bench"] == "lat":
            for m, name in MODES:
                rs = by[m]
                row[name] = {"n": len(rs),
                             "p50_us": rnd(med([r["lat"]["p50_us"] for r in rs])),
                             "p99_us": rnd(med([r["lat"]["p99_us"] for r in rs])),
                             "p999_us": rnd(med([r["lat"]["p999_us"] for r in rs]))}
            row["kind"] = "lat"
            sverbs_side(row, by["on"])
            row["p50_ratio"] = rnd(ratio(row["sverbs"]["p50_us"], row["stock"]["p50_us"]), 3)
            row["p99_ratio"] = rnd(ratio(row["sverbs"]["p99_us"], row["stock"]["p99_us"]), 3)
            row["p99_ratio_paired"] = paired(by["off"], by["on"], lambda r: r["lat"]["p99_us"])
        else:
            for m, name in MODES:
                rs = by[m]
                row[name] = {"n": len(rs), "kpps": rnd(med([r["kpps"] for r in rs])),
                             "kpps_runs": [r["kpps"] for r in rs]}
                if rs:
                    row[name].update(threads=rs[0]["threads"], post_list=rs[0]["post_list"],
                                     signal_every=rs[0]["signal_every"])
                cpu = rate_cpu_per_wr(rs)
                if cpu:
                    row[name]["cpu_us_per_wr"] = cpu
            sverbs_side(row, by["on"])
            row["kind"] = "rate"
            row["kpps_ratio"] = rnd(ratio(row["sverbs"]["kpps"], row["stock"]["kpps"]), 3)
            row["kpps_ratio_paired"] = paired(by["off"], by["on"], lambda r: r["kpps"])
        out.append(row)
    # one WR per call through sverbs against stock --post_list 16 with as
    # many threads: the goal for batching
    for row in out:
        if row["kind"] != "rate" or row["stock"].get("post_list") != 1:
            continue
        pl = next((o for o in out if o["kind"] == "rate" and
                   o["stock"].get("post_list", 1) > 1 and
                   o["stock"].get("threads") == row["stock"].get("threads")), None)
        if pl:
            # "paired": repetition r of the one-WR config's sverbs side
            # against repetition r of --post_list's stock side (the same
            # pass of the repetition loop, minutes apart at most)
            row["vs_post_list"] = {"post_list": pl["stock"]["post_list"],
                                   "ratio": rnd(ratio(row["sverbs"]["kpps"],
                                                      pl["stock"]["kpps"]), 3),
                                   "paired": paired(runs_of[pl["cfg"]]["off"],
                                                    runs_of[row["cfg"]]["on"],
                                                    lambda r: r["kpps"])}
    for r in ok:
        r.pop("_cfg", None)
    return out


def summarize_syscalls(runs):
    ok = [r for r in runs if r.get("bench") == "syscalls" and "error" not in r]
    out = []
    for c in dict.fromkeys(r["cfg"] for r in ok):
        row = {"cfg": c}
        for m, name in MODES:
            rs = [r for r in ok if r["cfg"] == c and r["sverbs"] == m]
            if rs:
                r = rs[-1]
                row[name] = {"syscalls_per_wr": r["syscalls_per_wr"], "per_wr": r["per_wr"],
                             "wrs": r["wrs"], "post_calls": r["post_calls"],
                             "threads": r["threads"], "post_list": r["post_list"]}
        if "stock" in row and "sverbs" in row:
            row["ratio"] = rnd(ratio(row["sverbs"]["syscalls_per_wr"],
                                     row["stock"]["syscalls_per_wr"]), 3)
        out.append(row)
    return out


def summarize_perftest(runs):
    ok = [r for r in runs if r.get("bench") == "perftest" and "error" not in r]
    out = []
    runs_of = {}
    for t in dict.fromkeys(r["test"] for r in ok):
        row = {"test": t}
        by = {m: [r for r in ok if r["test"] == t and r["sverbs"] == m] for m, _ in MODES}
        runs_of[t] = by
        for m, name in MODES:
            row[name] = {k: rnd(med([r.get(k) for r in by[m]]), 6)
                         for k in PERFTEST_KEYS if any(r.get(k) is not None for r in by[m])}
        # runs labelled rep=N (run-rate.sh -c perftest) pair up
        row["paired"] = {k: p for k in row["stock"]
                         if (p := paired(by["off"], by["on"], lambda r, k=k: r.get(k)))}
        out.append(row)
    # ib_write_bw one WR per call (with or without a budget) through sverbs
    # against stock's --post_list 16, as summarize_rate() pairs rate_bench's
    pl = next((o for o in out if o["test"].startswith("ib_write_bw") and "post_list" in o["test"]),
              None)
    for row in out:
        if pl and row["test"].startswith("ib_write_bw") and "post_list" not in row["test"]:
            row["vs_post_list"] = {"post_list": 16,
                                   "ratio": rnd(ratio(row["sverbs"].get("mpps"),
                                                      pl["stock"].get("mpps")), 3),
                                   "paired": paired(runs_of[pl["test"]]["off"],
                                                    runs_of[row["test"]]["on"],
                                                    lambda r: r.get("mpps"))}
    return out


PERFTEST_KEYS = ("mpps", "bw_mbps", "lat_typical_us", "lat_p99_us")


def fmt(x, unit=""):
    if x is None:
        return "-"
    if isinstance(x, float):
        if abs(x) >= 1000:
            s = "%.0f" % x
        elif abs(x) >= 100:
            s = "%.1f" % x
        else:
            s = "%.2f" % x
    else:
        s = str(x)
    return s + unit


def fmt_us(x):
    if x is None:
        return "-"
    if x >= 10000:
        return "%.1f ms" % (x / 1000)
    return "%.0f µs" % x if x >= 100 else "%.1f µs" % x


def fmt_x(r):
    """A ratio: two decimals, or 1/N for one under 0.01 (a p99 thousands of
    times lower must not read as 0.00)."""
    if 0 < r < 0.01:
        return "1/%.0f" % (1 / r)
    return "%.2f" % r


def fmt_ratio(r, paired_r=None):
    if r is None:
        return "-"
    s = fmt_x(r) + "x"
    if paired_r and paired_r["n"] > 1:
        s += " (%s..%s" % (fmt_x(paired_r["min"]), fmt_x(paired_r["max"]))
        if paired_r.get("ci95"):
            s += "; CI %s..%s" % tuple(fmt_x(x) for x in paired_r["ci95"])
        s += ")"
    return s


def fmt_paired(p):
    return fmt_ratio(p["median"], p) if p else "-"


def hol_label(r):
    """A head-of-line row's first cell: background size x depth (variant)."""
    bg = "none (unloaded)" if r["background"] == "none" else "%s x%s" % (
        r["background"], r["depth"])
    return bg + (" (%s)" % r["variant"] if r.get("variant") else "")


def markdown(name, meta, summ, errors):
    L = ["# %s" % name, ""]
    if meta:
        L.append("Guest: QEMU %s, %s vCPUs, Soft-RoCE rxe1 -> rxe0 (veth, RoCE MTU %s); "
                 "host: %s CPUs, load average %s at start; git %s." % (
                     meta.get("vm_accel", "?"), meta.get("vm_smp", "?"), meta.get("mtu", "?"),
                     meta.get("host_cpus", "?"), meta.get("host_loadavg", "?"),
                     meta.get("git", "?")))
        if meta.get("args"):
            L.append("Arguments: `%s`." % meta["args"])
        L.append("")
    L.append("stock = SVERBS=off, sverbs = SVERBS=on, same binary, alternated in one guest "
             "boot. Values are medians over the repetitions; a ratio is sverbs / stock "
             "(in brackets: min..max of the per-repetition ratios).")
    L.append("")
    if summ.get("hol"):
        L += ["## Head-of-line: 64 B high-priority messages behind large WRITEs (same QP)", "",
              "| background | stock p50 | stock p99 | sverbs p50 | sverbs p99 | p99 sverbs/stock |"
              " stock MB/s | sverbs MB/s | MB/s sverbs/stock | p99 / unloaded p99 (stock, sverbs) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for r in summ["hol"]:
            st, sv = r["stock"], r["sverbs"]
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                hol_label(r), fmt_us(st["p50_us"]), fmt_us(st["p99_us"]), fmt_us(sv["p50_us"]),
                fmt_us(sv["p99_us"]), fmt_ratio(r["p99_ratio"], r["p99_ratio_paired"]),
                fmt(st["mb_per_s"]) if r["background"] != "none" else "-",
                fmt(sv["mb_per_s"]) if r["background"] != "none" else "-",
                fmt_ratio(r.get("mbps_ratio"), r.get("mbps_ratio_paired")),
                "-" if r["background"] == "none" else "%s, %s" % (
                    fmt(st.get("p99_vs_unloaded"), "x"), fmt(sv.get("p99_vs_unloaded"), "x"))))
        L.append("")
        L.append("Target: sverbs p99 within 5x of the unloaded p99; large-stream MB/s close to "
                 "stock.")
        L.append("")
        sch = [r for r in summ["hol"] if "sched" in r["stock"] or "sched" in r["sverbs"]]
        if sch:
            L += ["### The same messages' latency from their scheduled time (open loop)", "",
                  "The table above times each message from its post.  A poster that falls "
                  "behind its schedule (on rxe, stock's post of a WRITE that fits its "
                  "unacknowledged-packet limit sends it whole inside the call) posts late, and "
                  "the messages it never posts are in neither table: this one counts the wait "
                  "to be posted.  On schedule: the share of the window's scheduled messages "
                  "that were posted and completed in it.", "",
                  "| background | stock p50 | stock p99 | sverbs p50 | sverbs p99 |"
                  " p99 sverbs/stock | on schedule (stock, sverbs) |"
                  " p99 / unloaded p99 (stock, sverbs) |",
                  "|---|---|---|---|---|---|---|---|"]
            none = {"p50_us": None, "p99_us": None, "on_schedule": None}
            pct = lambda x: "-" if x is None else "%.0f%%" % (100 * x)
            for r in sch:
                st = r["stock"].get("sched", none)
                sv = r["sverbs"].get("sched", none)
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    hol_label(r), fmt_us(st["p50_us"]), fmt_us(st["p99_us"]), fmt_us(sv["p50_us"]),
                    fmt_us(sv["p99_us"]),
                    fmt_ratio(ratio(sv["p99_us"], st["p99_us"]),
                              r.get("sched_p99_ratio_paired")),
                    "%s, %s" % (pct(st["on_schedule"]), pct(sv["on_schedule"])),
                    "-" if r["background"] == "none" else "%s, %s" % (
                        fmt(st.get("p99_vs_unloaded"), "x"),
                        fmt(sv.get("p99_vs_unloaded"), "x"))))
            L.append("")
    cpu = [r for r in summ.get("hol", []) if r.get("cpu_ms_per_mib")]
    if cpu:
        L += ["## CPU per MiB of the stream", "",
              "The whole guest's CPU time (/proc/stat, both vCPUs) over the measured window, "
              "in ms per MiB the stream moved, by kind, and hol_bench's own (getrusage); "
              "busy: CPU seconds per second of all but idle (2 = both vCPUs).  On rxe the "
              "protocol is the kernel's: in the posting system call (system) and in softirq.",
              "",
              "| background | user (stock, sverbs) | system | softirq + irq | hol_bench user |"
              " hol_bench system | busy vCPUs |",
              "|---|---|---|---|---|---|---|"]
        for r in cpu:
            st, sv = r["cpu_ms_per_mib"]["stock"], r["cpu_ms_per_mib"]["sverbs"]
            pair = lambda k: "%s, %s" % (fmt(st[k]), fmt(sv[k]))
            L.append("| %s | %s | %s | %s, %s | %s | %s | %s |" % (
                hol_label(r), pair("user_ms"), pair("system_ms"),
                fmt(rnd(st["softirq_ms"] + st["irq_ms"])),
                fmt(rnd(sv["softirq_ms"] + sv["irq_ms"])),
                pair("proc_user_ms"), pair("proc_system_ms"), pair("busy_cores")))
        L.append("")
    if summ.get("hol_variants"):
        L += ["## The sverbs side's variants against the first, paired by repetition", "",
              "| background | variant / reference | high-priority p99 |"
              " p99 from the schedule | large MB/s |",
              "|---|---|---|---|---|"]
        for x in summ["hol_variants"]:
            L.append("| %s | %s / %s | %s | %s | %s |" % (
                "none (unloaded)" if x["background"] == "none" else x["background"],
                x["variant"], x["against"], fmt_paired(x["p99"]),
                fmt_paired(x["sched_p99"]) if x.get("sched_p99") else "-",
                fmt_paired(x.get("mb_per_s")) if x["background"] != "none" else "-"))
        L.append("")
    rate = [r for r in summ.get("rate", []) if r["kind"] == "rate"]
    lat = [r for r in summ.get("rate", []) if r["kind"] == "lat"]
    if rate:
        L += ["## Message rate: 64 B RDMA WRITE", "",
              "| config | stock kpps | sverbs kpps | sverbs/stock |"
              " sverbs / stock with --post_list 16 |", "|---|---|---|---|---|"]
        for r in rate:
            st = r["stock"]
            desc = "%s thread%s, %s WR%s per post, 1 signaled per %s" % (
                st.get("threads", "?"), "" if st.get("threads") == 1 else "s",
                st.get("post_list", "?"), "" if st.get("post_list") == 1 else "s",
                st.get("signal_every", "?"))
            desc += side_desc(r["sverbs"])
            vs = r.get("vs_post_list")
            L.append("| %s | %s | %s | %s | %s |" % (
                desc, fmt(r["stock"]["kpps"]), fmt(r["sverbs"]["kpps"]),
                fmt_ratio(r["kpps_ratio"], r["kpps_ratio_paired"]),
                fmt_paired(vs.get("paired")) if vs and vs.get("paired") else
                fmt(vs["ratio"], "x") if vs else "-"))
        L.append("")
        L.append("Goal: one WR per call through sverbs at >= 0.95x stock with --post_list 16.  "
                 "The last column pairs each repetition's sverbs run with the same "
                 "repetition's stock --post_list 16 run: the median of those ratios (min..max; CI).")
        L.append("")
        withcpu = [r for r in rate if r["stock"].get("cpu_us_per_wr") or
                   r["sverbs"].get("cpu_us_per_wr")]
        if withcpu:
            L += ["### The machine's CPU per WR (µs, both vCPUs of the guest, medians)", "",
                  "/proc/stat over the measured window: the poster's user time, rxe's "
                  "protocol in system calls and softirq (both ends are in this guest), "
                  "and idle: a rate that CPU bounds shows little idle.  Timer thread: the "
                  "layer's budget thread (`sverbs-timer`, its user + system, part of those "
                  "columns; - where the run did not read it).", "",
                  "| config | side | busy | user | system | softirq | idle | timer thread |",
                  "|---|---|---|---|---|---|---|---|"]
            for r in withcpu:
                for side in ("stock", "sverbs"):
                    c = r[side].get("cpu_us_per_wr")
                    if c:
                        L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                            r["cfg"], side, fmt(c["busy"]), fmt(c["user"]), fmt(c["system"]),
                            fmt(c["softirq"]), fmt(c["idle"]), fmt(c.get("timer"))))
            L.append("")
    if lat:
        L += ["## Latency at low load: post one 64 B WRITE, wait for its completion", "",
              "| | stock p50 | stock p99 | sverbs p50 | sverbs p99 | p99 sverbs/stock |",
              "|---|---|---|---|---|---|"]
        for r in lat:
            L.append("| post -> CQE%s | %s | %s | %s | %s | %s |" % (
                side_desc(r["sverbs"]),
                fmt_us(r["stock"]["p50_us"]), fmt_us(r["stock"]["p99_us"]),
                fmt_us(r["sverbs"]["p50_us"]), fmt_us(r["sverbs"]["p99_us"]),
                fmt_ratio(r["p99_ratio"], r["p99_ratio_paired"])))
        L.append("")
    if summ.get("syscalls"):
        L += ["## System calls per WR (strace -c -f, setup subtracted)", "",
              "| config | stock syscalls/WR | sverbs syscalls/WR | sverbs/stock | stock top | sverbs top |",
              "|---|---|---|---|---|---|"]
        for r in summ["syscalls"]:
            def top(side):
                d = r.get(side, {}).get("per_wr", {})
                return ", ".join("%s %.3f" % kv for kv in
                                 sorted(d.items(), key=lambda kv: -kv[1])[:3]) or "-"
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                r["cfg"], fmt(r.get("stock", {}).get("syscalls_per_wr")),
                fmt(r.get("sverbs", {}).get("syscalls_per_wr")), fmt_ratio(r.get("ratio")),
                top("stock"), top("sverbs")))
        L.append("")
    if summ.get("perftest"):
        L += ["## perftest", "", "| test | stock | sverbs | sverbs/stock, median of paired runs (min..max) |",
              "|---|---|---|---|"]
        for r in summ["perftest"]:
            def show(d):
                # perftest reports Mpps; rxe's rates read better in kpps
                return ", ".join("kpps %s" % fmt(v * 1000) if k == "mpps" and v is not None
                                 else "%s %s" % (k, fmt(v)) for k, v in d.items()) or "-"
            pr = ", ".join("%s %s" % ("rate" if k == "mpps" else k, fmt_ratio(p["median"], p))
                           for k, p in r.get("paired", {}).items()) or "-"
            L.append("| %s | %s | %s | %s |" % (r["test"], show(r["stock"]), show(r["sverbs"]), pr))
        L.append("")
    if summ.get("budget"):
        L += ["## A budget's cost to a closed-loop program (both sides with the layer on)", "",
              "| program | metric | budget / no budget, median of paired runs (min..max; CI) |",
              "|---|---|---|"]
        for r in summ["budget"]:
            p = r["paired"]
            L.append("| %s | %s | %s |" % (r["what"], r["metric"],
                                          fmt_ratio(p["median"], p) if p else "-"))
        L.append("")
    if errors:
        L += ["## Failed runs", ""] + ["- `%s`" % json.dumps(e) for e in errors] + [""]
    return "\n".join(L)


def demo_table(summ):
    """The short side-by-side table perf/demo.sh prints: medians over the
    repetitions; a ratio is the median of the per-repetition (paired) ratios
    with their min..max where there are several repetitions, else the ratio
    of the medians."""
    rows = []

    def shown_ratio(r):
        if r < 0.1:  # e.g. a p99 hundreds of times lower: say by how much
            return "1/%.0fx" % (1 / r) if r > 0 else "0x"
        return "%.2fx" % r

    def add(what, metric, st, sv, fmtf, paired_r=None):
        r = ratio(sv, st)
        if paired_r and paired_r["n"] > 1:
            shown = "%s (%s..%s, n=%d)" % (shown_ratio(paired_r["median"]),
                                           shown_ratio(paired_r["min"]),
                                           shown_ratio(paired_r["max"]), paired_r["n"])
        elif r is None:
            shown = "-"
        else:
            shown = shown_ratio(r)
        rows.append((what, metric, fmtf(st), fmtf(sv), shown))

    for r in summ.get("hol", []):
        bg = r["background"]
        what = "HOL unloaded 64B" if bg == "none" else "HOL 64B behind %s x%s" % (bg, r["depth"])
        add(what, "p50", r["stock"]["p50_us"], r["sverbs"]["p50_us"], fmt_us)
        add("", "p99", r["stock"]["p99_us"], r["sverbs"]["p99_us"], fmt_us, r.get("p99_ratio_paired"))
        if r.get("sched_p99_ratio_paired") and bg != "none":
            add("", "p99 from schedule", r["stock"]["sched"]["p99_us"],
                r["sverbs"]["sched"]["p99_us"], fmt_us, r["sched_p99_ratio_paired"])
        if bg != "none":
            add("", "large MB/s", r["stock"]["mb_per_s"], r["sverbs"]["mb_per_s"], fmt,
                r.get("mbps_ratio_paired"))
    for r in summ.get("perftest", []):
        st, sv, pr = r["stock"], r["sverbs"], r.get("paired", {})
        if "mpps" in st or "mpps" in sv:
            k = lambda d: None if d.get("mpps") is None else d["mpps"] * 1000
            add(r["test"], "kpps", k(st), k(sv), fmt, pr.get("mpps"))
        if "lat_typical_us" in st or "lat_typical_us" in sv:
            add(r["test"], "typical", st.get("lat_typical_us"), sv.get("lat_typical_us"),
                fmt_us, pr.get("lat_typical_us"))
            add("", "p99", st.get("lat_p99_us"), sv.get("lat_p99_us"), fmt_us, pr.get("lat_p99_us"))
    head = ("", "", "stock", "sverbs", "sverbs/stock (min..max)")
    w = [max(len(str(x[i])) for x in rows + [head]) for i in range(5)]
    out = []
    for x in [head] + rows:
        out.append("  ".join([x[0].ljust(w[0]), x[1].ljust(w[1])] +
                             [str(v).rjust(w[i + 2]) for i, v in enumerate(x[2:])]))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("runs", nargs="+", help="files of JSON lines")
    ap.add_argument("--meta", help="JSON object of run facts (host, guest, args)")
    ap.add_argument("--demo", action="store_true",
                    help="print only the short side-by-side table (perf/demo.sh)")
    ap.add_argument("--outdir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "results"))
    a = ap.parse_args()
    runs = []
    for p in a.runs:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        runs.append(json.loads(line))
                    except json.JSONDecodeError:
                        print("summarize: skipping a bad line: %s" % line[:80], file=sys.stderr)
    meta = {}
    if a.meta:
        with open(a.meta) as f:
            meta = json.load(f)
    for r in runs:
        if r.get("mtu"):
            meta.setdefault("mtu", r["mtu"])
    hol = summarize_hol(runs)
    hol_var = hol_variants(hol)
    for r in hol:
        r.pop("_on_runs", None)
    for r in runs:
        r.pop("_variant", None)
    summ = {"hol": hol, "hol_variants": hol_var, "rate": summarize_rate(runs),
            "syscalls": summarize_syscalls(runs), "perftest": summarize_perftest(runs),
            "budget": budget_cost(runs)}
    summ = {k: v for k, v in summ.items() if v}
    errors = [r for r in runs if "error" in r]
    os.makedirs(a.outdir, exist_ok=True)
    doc = {"name": a.name, "meta": meta, "summary": summ, "errors": errors, "runs": runs}
    with open(os.path.join(a.outdir, a.name + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    md = markdown(a.name, meta, summ, errors)
    with open(os.path.join(a.outdir, a.name + ".md"), "w") as f:
        f.write(md + "\n")
    if a.demo:
        print(demo_table(summ))
        for e in errors:
            print("FAILED: %s" % json.dumps(e))
    else:
        print(md)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
