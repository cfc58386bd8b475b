#!/usr/bin/env python3
"""Issue 18's verdicts from one run of perf/run-issue18.sh.

Reads perf/results/NAME-{hol,rate,insns,demo}.json (the runs of
run-hol.sh, run-rate.sh, run-insns.sh and ./demo.sh that run-issue18.sh
made), applies the issue's thresholds to their medians and writes
NAME.md (a table: goal, criterion, figure, met or not), NAME.json and
NAME.png (each criterion's figure against its threshold).  Nothing here is
a figure of its own: a criterion whose run is missing is "not measured",
and a goal is met only when every one of its criteria is.
"""
import argparse
import json
import os
import sys


def load(d, name, part):
    f = os.path.join(d, f"{name}-{part}.json")
    if not os.path.exists(f):
        return None
    with open(f) as fh:
        return json.load(fh)


def crit(goal, what, value, op, limit, source, note="", spread=None):
    """One criterion: value op limit (op: ">=" or "<=").  spread: the
    figure's paired repetitions (summarize.py's paired(): ci95, min, max,
    n), when it has them; then "decided" says whether the 95 % bootstrap
    interval of the median lies wholly on one side of the limit (False: it
    spans it, so this many repetitions cannot tell met from not met)."""
    if value is None:
        ok = None
    else:
        ok = value >= limit if op == ">=" else value <= limit
    ci = spread.get("ci95") if isinstance(spread, dict) else None
    decided = None
    if ok is not None and ci:
        lo, hi = ci
        decided = lo >= limit or hi < limit if op == ">=" else hi <= limit or lo > limit
    return {"goal": goal, "what": what, "value": value, "op": op,
            "limit": limit, "met": ok, "source": source, "note": note,
            "ci95": ci, "n": spread.get("n") if ci else None, "decided": decided}


def med(p):
    return p.get("median") if isinstance(p, dict) else None


def goal1(hol, name):
    out = []
    src = f"{name}-hol"
    # with variants (-V), the first is the layer's default settings
    all_rows = (hol or {}).get("summary", {}).get("hol", [])
    first = all_rows[0].get("variant") if all_rows else None
    rows = {r["background"]: r for r in all_rows if r.get("variant") == first}
    for size in ("1M", "4M"):
        r = rows.get(size)
        sp = r.get("mbps_ratio_paired") if r else None
        p99u = r["sverbs"].get("p99_vs_unloaded") if r else None
        out.append(crit("1", f"stream behind {size} WRITEs, sverbs / stock (paired median)",
                        med(sp), ">=", 0.95, src, spread=sp))
        out.append(crit("1", f"64 B p99 behind {size}, sverbs / its own unloaded p99",
                        p99u, "<=", 5.0, src))
    r = rows.get("64K")
    sched_sp = r.get("sched_p99_ratio_paired") if r else None
    post_ratio = med(r.get("p99_ratio_paired")) if r else None
    note = ("timed from the post: %.2fx (stock's poster, blocked in its own posts, "
            "sends only part of the schedule: docs/results.md, stop 26)" % post_ratio
            if post_ratio is not None else "")
    out.append(crit("1", "64 B p99 behind 64 KiB, sverbs / stock, timed from the schedule",
                    med(sched_sp), "<=", 1.0, src, note, spread=sched_sp))
    return out


def paired_or_ratio(v):
    """A one-WR run against stock's --post_list 16 (summarize.py's
    vs_post_list): the median of per-repetition pairs; for runs summarized
    before the pairs existed, the ratio of the two configs' medians."""
    if not v:
        return None
    return v["paired"]["median"] if v.get("paired") else v.get("ratio")


def goal23(rate, name):
    src = f"{name}-rate"
    summ = (rate or {}).get("summary", {})
    budget = {(b["what"], b["metric"]): b.get("paired") for b in summ.get("budget", [])}

    def g2(what, key, op, limit):
        sp = budget.get(key)
        return crit("2", what, med(sp), op, limit, src, spread=sp)

    g2s = [
        g2("rate_bench one WR per call: rate, budget / none", ("rate_bench t1", "kpps"), ">=", 0.98),
        g2("rate_bench post one, wait one: p50, budget / none", ("rate_bench lat", "latency p50"),
           "<=", 1.02),
        g2("ib_write_bw 64 B one WR per call: rate, budget / none", ("ib_write_bw 64B", "mpps"),
           ">=", 0.98),
        g2("ib_write_lat 64 B: typical latency, budget / none", ("ib_write_lat 64B", "lat_typical_us"),
           "<=", 1.02),
    ]
    rates = {r["cfg"]: r for r in summ.get("rate", [])}

    def vs_pl(cfg):
        return rates.get(cfg, {}).get("vs_post_list")

    def cpu_note(cfg, pl_cfg):
        """Why, in the machine's CPU per WR: the budgeted one-WR poster's
        against stock's --post_list 16 (rate_bench's /proc/stat window)."""
        a = rates.get(cfg, {}).get("sverbs", {}).get("cpu_us_per_wr")
        b = rates.get(pl_cfg, {}).get("stock", {}).get("cpu_us_per_wr")
        if not a or not b:
            return "per-repetition pairs of the two configs' runs"
        return ("per-repetition pairs of the two configs' runs; CPU per WR, busy %.1f µs against %.1f "
                "(user %.1f / %.1f, system %.1f / %.1f, softirq %.1f / %.1f), idle %.1f / %.1f"
                % (a["busy"], b["busy"], a["user"], b["user"], a["system"], b["system"],
                   a["softirq"], b["softirq"], a["idle"], b["idle"]))

    def g3(what, v, limit, note):
        return crit("3", what, paired_or_ratio(v), ">=", limit, src, note,
                    spread=(v or {}).get("paired"))

    pt = {t["test"]: t for t in summ.get("perftest", [])}
    vs = pt.get("ib_write_bw 64B budget", {}).get("vs_post_list")
    if vs is None:
        # a summary from before perftest's rows had vs_post_list
        one = pt.get("ib_write_bw 64B budget", {}).get("sverbs", {}).get("mpps")
        pl16 = pt.get("ib_write_bw 64B post_list 16", {}).get("stock", {}).get("mpps")
        vs = {"ratio": round(one / pl16, 3)} if one and pl16 else None
    perftest_how = ("per-repetition pairs of the two tests' runs" if vs and vs.get("paired")
                    else "medians of the two configs' runs" if vs else "")
    g3s = [
        g3("rate_bench 1 thread, one WR per call with a 50 µs budget / stock --post_list 16",
           vs_pl("t1b"), 0.95, cpu_note("t1b", "pl16")),
        g3("rate_bench 4 threads, one WR per call with a 50 µs budget / stock --post_list 16",
           vs_pl("t4b"), 0.90, cpu_note("t4b", "t4pl16")),
        g3("ib_write_bw 64 B -l 1 with a 50 µs budget / stock -l 16", vs, 0.95, perftest_how),
    ]
    return g2s + g3s


def goal4(insns, name):
    src = f"{name}-insns"
    per = {}
    for r in (insns or {}).get("runs", []):
        # a count of 0 is a run that counted nothing (a toggle that
        # matched no function), not a figure
        if r.get("per_wr"):
            per[(r["path"], r["case"], r["mode"])] = r["per_wr"]

    def delta(path, case, mode):
        # stock is "stock" in the mlx5 counts, "off" (SVERBS=off) in rxe's
        b = per.get((path, case, "stock"), per.get((path, case, "off")))
        a = per.get((path, case, mode))
        return a - b if a is not None and b is not None else None

    out = []
    for path, case, what in (("mlx5", "lat", "mlx5 lone WR"), ("mlx5", "burst16", "mlx5 bursts of 16"),
                             ("rxe", "lat", "rxe lone WR"), ("rxe", "t1", "rxe one WR per call")):
        out.append(crit("4a", f"{what}: pass-through over stock, instructions per WR",
                        delta(path, case, "pt"), "<=", 10, src))
    for path, case, what in (("mlx5", "lat", "mlx5 lone WR"), ("rxe", "lat", "rxe lone WR")):
        out.append(crit("4b", f"{what}: queue path over stock, instructions per WR",
                        delta(path, case, "queue"), "<=", 60, src))
    return out


def goal5(demo, name):
    src = f"{name}-demo"
    wall = demo.get("wall_s") if demo else None
    reps = None
    if demo:
        ns = [r["sverbs"]["n"] for r in demo.get("summary", {}).get("hol", [])]
        reps = min(ns) if ns else None
    return [crit("5", "./demo.sh after the build, wall seconds", wall, "<=", 300, src),
            crit("5", "the demo's repetitions per median (stock and sverbs each)",
                 reps, ">=", 5, src)]


def verdict(cs):
    if any(c["met"] is None for c in cs):
        return "not measured"
    return "met" if all(c["met"] for c in cs) else "not met"


def undecided(cs):
    """The criteria whose verdict this many repetitions cannot settle:
    the 95 % interval of the median spans the threshold."""
    return [c for c in cs if c["decided"] is False]


def fmt(c):
    v = c["value"]
    if v is None:
        return "-"
    if c["goal"].startswith("4"):
        return f"{v:+d}"
    if c["goal"] == "5":
        return f"{v:g} s" if "seconds" in c["what"] else str(v)
    s = f"{v:.3g}"
    # a figure that rounds onto its threshold shows the digit that decides
    if float(s) == c["limit"] and v != c["limit"]:
        s = f"{v:.4g}"
    return s + "x"


def fmt_ci(c):
    if not c["ci95"]:
        return "-"
    lo, hi = c["ci95"]
    return f"{lo:.3g}..{hi:.3g} (n={c['n']})"


def fmt_met(c):
    met = {True: "yes", False: "**no**", None: "not measured"}[c["met"]]
    return met + (", undecided: the interval spans the threshold" if c["decided"] is False else "")


def goal_note(g, v, cs):
    """A verdict's caveat: which of the goal's criteria the interval leaves
    open (a "not met" that more repetitions might turn, or a "met" that
    they might)."""
    u = undecided([c for c in cs if c["goal"] == g])
    if v == "not measured" or not u:
        return ""
    return "; ".join(f"{c['what']}: {fmt(c)}, {fmt_ci(c)}" for c in u)


def fmt_limit(c):
    if c["goal"].startswith("4"):
        return f"{c['op']} +{c['limit']}"
    if c["goal"] == "5":
        return f"{c['op']} {c['limit']:g}" + (" s" if "seconds" in c["what"] else "")
    return f"{c['op']} {c['limit']:g}x"


def verdicts(cs):
    """Each goal's verdict, by goal."""
    return {g: verdict([c for c in cs if c["goal"] == g]) for g in sorted({c["goal"] for c in cs})}


def markdown(name, metas, cs, goals):
    lines = [f"# {name}: issue 18's goals, measured", "",
             "From `perf/run-issue18.sh -n " + name + "` (or the runs it makes, made one by one: "
             "each listed below with its arguments); every figure is "
             "read from the runs below and compared with the issue's threshold by "
             "`perf/issue18.py` (a ratio is sverbs / stock or budget / no budget, "
             "the median of the paired repetitions unless the row says otherwise).  "
             "The interval is the 95 % bootstrap interval of that median (summarize.py); "
             "with 5 repetitions it is their min..max.  A criterion is undecided when "
             "its interval spans the threshold: met or not at the median, this many "
             "repetitions cannot tell.", ""]
    for part, m in metas:
        lines.append(f"- `{name}-{part}`: git {m.get('git', '?')}, `{m.get('args', '?')}`, "
                     f"host load {m.get('host_loadavg', '?')}, guest {m.get('vm_accel', '?')}"
                     f" with {m.get('vm_smp', '?')} vCPUs")
    lines += ["", "| goal | criterion | figure | 95 % interval | threshold | met |",
              "|---|---|---:|---|---|---|"]
    for c in cs:
        what = c["what"] + (f" ({c['note']})" if c["note"] else "")
        lines.append(f"| {c['goal']} | {what} | {fmt(c)} | {fmt_ci(c)} | {fmt_limit(c)} "
                     f"| {fmt_met(c)} |")
    lines += ["", "| goal | verdict | undecided criteria |", "|---|---|---|"]
    for g, v in goals.items():
        lines.append(f"| {g} | {v} | {goal_note(g, v, cs) or '-'} |")
    lines.append("")
    return "\n".join(lines)


def plot(path, cs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("issue18.py: no matplotlib, no plot", file=sys.stderr)
        return
    # figure / threshold, so that 1 is the line for every criterion; for
    # "<=" criteria below 1 is good, for ">=" above 1
    pts = [c for c in cs if c["value"] is not None and c["limit"]]
    if not pts:
        return
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(pts) + 1.4))
    ys = list(range(len(pts)))
    vals = []
    for c in pts:
        v = c["value"]
        if c["goal"].startswith("4"):
            # an instruction delta of 0 or less is drawn at a tenth of it
            v = max(v, c["limit"] / 10)
        vals.append(v / c["limit"])
    ax.scatter(vals, ys, c=["tab:green" if c["met"] else "tab:red" for c in pts],
               s=60, zorder=3)
    for c, v, y in zip(pts, vals, ys):
        ax.hlines(y, 1.0, v, color="0.6", lw=1.5, zorder=2)
        if c["ci95"]:
            # the median's 95 % interval, a bar across the point
            lo, hi = (x / c["limit"] for x in c["ci95"])
            ax.errorbar(v, y, xerr=[[v - lo], [hi - v]], fmt="none", ecolor="tab:blue",
                        elinewidth=1, capsize=3, zorder=4)
        ax.annotate(fmt(c), (v, y), xytext=(6, 4), textcoords="offset points", fontsize=7)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{c['goal']}: {c['what'][:64]} ({c['op']} {fmt_limit(c).split()[1]})"
                        for c in pts], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.grid(axis="x", which="both", color="0.9")
    ax.set_xlabel("figure / threshold (log scale): '>=' criteria pass right of 1, '<=' left of it")
    fig.suptitle("Issue 18: each figure / its threshold (green: met, red: not; "
                 "blue bar: the median's 95 % interval)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "results"))
    a = ap.parse_args()
    parts = {p: load(a.dir, a.name, p) for p in ("hol", "rate", "insns", "demo")}
    if not any(parts.values()):
        sys.exit(f"issue18.py: none of {a.name}-{{hol,rate,insns,demo}}.json in {a.dir}")
    cs = (goal1(parts["hol"], a.name) + goal23(parts["rate"], a.name) +
          goal4(parts["insns"], a.name) + goal5(parts["demo"], a.name))
    metas = [(p, d["meta"]) for p, d in parts.items() if d and "meta" in d]
    goals = verdicts(cs)
    with open(os.path.join(a.dir, a.name + ".md"), "w") as f:
        f.write(markdown(a.name, metas, cs, goals))
    with open(os.path.join(a.dir, a.name + ".json"), "w") as f:
        json.dump({"name": a.name, "criteria": cs, "verdicts": goals}, f, indent=1)
    plot(os.path.join(a.dir, a.name + ".png"), cs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
