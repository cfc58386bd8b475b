#!/usr/bin/python3
"""bw_why.py - perf/run-bw-why.sh's report: the guest's JSON lines (runs.jsonl,
perf/guest/bw-why.sh) and the run's meta -> BASE.json and BASE.md.

    bw_why.py RUNS.jsonl META.json BASE BUDGET_US MODE...

The first mode is the reference.  Exit status 1 if a run failed or no
repetition has every mode."""
import json, statistics, sys

runs_path, meta_path, base, budget = sys.argv[1:5]
MODES = tuple(sys.argv[5:])
lines = [json.loads(l) for l in open(runs_path) if l.strip().startswith("{")]
meta = json.load(open(meta_path))
errors = [l for l in lines if "error" in l]
runs = [l for l in lines if l["kind"] == "run" and "error" not in l]
sysc = {l["mode"]: l for l in lines if l["kind"] == "syscalls" and "error" not in l}
# every line first: a report that fails below loses no run
with open(base + ".json", "w") as f:
    json.dump({"meta": meta, "budget_us": int(budget), "runs": lines}, f, indent=1)
by = {m: {r["rep"]: r for r in runs if r["mode"] == m} for m in MODES}
reps = sorted(set.intersection(*(set(by[m]) for m in MODES)))


def med(xs):
    return statistics.median(xs) if xs else None


def row(label, f, fmt="{:.2f}", ratio=True):
    vals = {m: [f(by[m][k]) for k in reps] for m in MODES}
    cells = [label] + [fmt.format(med(vals[m])) for m in MODES]
    ref = vals[MODES[0]]
    for m in MODES[1:]:
        if ratio:
            q = [y / x for x, y in zip(ref, vals[m]) if x]
            cells.append(f"{med(q):.2f}x ({min(q):.2f}..{max(q):.2f})")
        else:
            d = [y - x for x, y in zip(ref, vals[m])]
            cells.append(f"{med(d):+.2f} ({min(d):+.2f}..{max(d):+.2f})")
    return "| " + " | ".join(cells) + " |"


md = [f"# {base.rsplit('/', 1)[-1]}: where a {budget} µs budget's cost to ib_write_bw goes", "",
      f"git {meta.get('git')}, {meta.get('args')}; ib_write_bw 64 B, one WR per post, client (rxe1) "
      f"with the layer on (none: no budget; budget: SVERBS_BATCH_BUDGET_US={budget}, the rest as "
      "configured; linger / nolinger: the budget and SVERBS_BATCH_LINGER=on / off), server stock; "
      f"{len(reps)} repetitions in one guest boot, the order rotated; medians; against {MODES[0]} per "
      "repetition (min..max): a ratio for the rate, a difference per WR for the times (CPU from "
      "GNU time, setup included, the same in every mode).", ""]
if reps:
    md += ["| per WR | " + " | ".join(MODES) + " | " + " | ".join(f"{m} vs {MODES[0]}" for m in MODES[1:]) + " |",
           "|---|" + "---:|" * (2 * len(MODES) - 1),
           row("message rate (Mpps)", lambda r: r["mpps"], "{:.4f}"),
           row("client CPU, user + system (µs)",
               lambda r: (r["user_s"] + r["sys_s"]) * 1e6 / r["iters"], ratio=False),
           row("client user CPU (µs)", lambda r: r["user_s"] * 1e6 / r["iters"], ratio=False),
           row("client system CPU (µs)", lambda r: r["sys_s"] * 1e6 / r["iters"], ratio=False)]
    md += ["", "The layer's own counters (SVERBS_STATS=1; without a budget the QP stays in "
           "pass-through, where the layer counts nothing; a QP in pass-through with deferred doorbells "
           "counts WQEs and doorbells, and holds nothing: \"-\"):", "",
           "| mode | WQEs per doorbell | held WRs per WR | held p99 (µs) |", "|---|---:|---:|---:|"]
    for m in MODES[1:]:
        lay = [by[m][k] for k in reps if "wqes" in by[m][k] and by[m][k]["doorbells"]]
        if not lay:
            continue
        # a QP in pass-through with deferred doorbells counts WQEs and
        # doorbells, not WRs: nothing was held in its queue
        queued = [r for r in lay if r["layer_wrs"]]
        held = f"{med([r['held'] / r['layer_wrs'] for r in queued]):.2f}" if queued else "-"
        p99 = f"{med([r['held_p99_us'] for r in queued]):.1f}" if queued else "-"
        md.append(f"| {m} | {med([r['wqes'] / r['doorbells'] for r in lay]):.2f} | {held} | {p99} |")
    rung = {m: [by[m][k]["rung"] for k in reps if by[m][k].get("rung")] for m in MODES[1:]}
    rung = {m: v for m, v in rung.items() if v}
    if rung:
        whys = ("target", "poll", "timer", "refused", "state")
        md += ["", "Who rang the deferred WQEs (watch.c's counters): each cause's share of the "
               "doorbells, and its WQEs per doorbell; medians over the repetitions:", "",
               "| mode | " + " | ".join(whys) + " |", "|---|" + "---:|" * len(whys)]
        for m, rs in rung.items():
            cells = []
            for w in whys:
                share = [r.get(w, [0, 0])[0] / max(1, sum(d for d, _ in r.values())) for r in rs]
                per = [r[w][1] / r[w][0] for r in rs if r.get(w, [0, 0])[0]]
                cells.append(f"{100 * med(share):.0f} %" + (f", {med(per):.1f}" if per else ""))
            md.append(f"| {m} | " + " | ".join(cells) + " |")
if sysc:
    names = sorted(set().union(*(s["per_wr"] for s in sysc.values())))
    md += ["", "System calls per WR (strace -c -f, every thread; a run of a tenth as many WRs "
           "subtracted):", "", "| syscall | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
    for n in names + ["total"]:
        v = [(sysc[m]["total_per_wr"] if n == "total" else sysc[m]["per_wr"].get(n, 0))
             if m in sysc else None for m in MODES]
        md.append(f"| {n} | " + " | ".join("-" if x is None else f"{x:.3f}" for x in v) + " |")
if errors:
    md += ["", "Failed runs:", ""] + [f"- {json.dumps(e)}" for e in errors]
open(base + ".md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
sys.exit(1 if errors or not reps else 0)
