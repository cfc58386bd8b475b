#!/usr/bin/python3
"""insns.py NAME RUNS.jsonl [--meta META.json] [--outdir DIR] [--fndir DIR]:
the table of perf/run-insns.sh (instructions per WR, callgrind) as
DIR/NAME.{json,md,png}; with --fndir (build/perf-insns), where the layer's
instructions go per function group (mlx5 lat, from the .self files) and
its post call against its poll call (from the .fn files)."""
import argparse
import json
import os
import re
import sys

CASES = {
    ("mlx5", "lat"): "post 1 signaled 64 B WRITE, poll it",
    ("mlx5", "burst16"): "16 posts of 1 WR (16th signaled), poll",
    ("mlx5", "list16"): "the same 16 WRs in one post call (--post_list 16), poll",
    ("mlx5", "mib"): "1 MiB WRITE (layer: PRIO(7), 4 KiB slices), per WR",
    ("mlx5", "mib1-*"): "1 MiB WRITE on a serial wire (the fake HCA executes one WQE "
                        "between two polls, completions one by one as on rxe), "
                        "<slice> KiB slices, window w<slices>, s<signaled WQEs per window>",
    ("rxe", "t1"): "rate_bench -T 1: 1 WR per post, 1 in 16 signaled",
    ("rxe", "pl16"): "rate_bench -l 16: 16 WRs per post",
    ("rxe", "lat"): "rate_bench --lat --settle-us 2000: post 1, sleep 2 ms, poll it (polls / WR: how many polls it took)",
    ("rxe", "ptbw"): "perftest ib_write_bw -s 64, client (on rxe it posts with ibv_post_send)",
    ("rxe", "mib"): "rate_bench -s 1M (layer: PRIO(7), 4 KiB slices), per WR",
}
MODES = {"stock": "stock", "off": "stock", "pt": "pass-through", "queue": "queue path",
         "budget": "budget 50 us", "sliced": "sliced"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("runs")
    ap.add_argument("--meta")
    ap.add_argument("--outdir", default=".")
    ap.add_argument("--fndir")
    a = ap.parse_args()
    runs = [json.loads(l) for l in open(a.runs) if l.startswith("{")]
    meta = json.load(open(a.meta)) if a.meta else {}
    out = {"meta": meta, "runs": runs}
    json.dump(out, open(f"{a.outdir}/{a.name}.json", "w"), indent=1)
    lines = [f"# {a.name}: instructions per WR (callgrind)", "",
             f"git {meta.get('git', '?')}, `{meta.get('args', '')}`. "
             "User-space instructions per WR, post + poll (mlx5: only the "
             "post and poll calls against the fake objects; rxe: rate_bench's "
             "posting thread or its lat loop (callgrind --toggle-collect), perftest's whole "
             "client process with a run of N WRs subtracted from one of 2N). "
             "The budget's rows vary by a few instructions between runs "
             "(its timer thread). "
             "Δ = over stock in the same case.", "",
             "| path | case | mode | instructions / WR | Δ vs stock | doorbells / WR | CQEs / WR | polls / WR |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    bad = 0
    for r in runs:
        if "error" in r:
            bad += 1
    seen = []
    for r in runs:
        k = (r["path"], r["case"])
        if k not in seen:
            seen.append(k)
    for k in seen:
        rs = [r for r in runs if (r["path"], r["case"]) == k]
        base = next((r["per_wr"] for r in rs if r["mode"] in ("stock", "off") and "per_wr" in r), None)
        for r in rs:
            if "per_wr" not in r:
                lines.append(f"| {k[0]} | {k[1]} | {MODES.get(r['mode'], r['mode'])} | failed | | | | |")
                continue
            d = "" if base is None or r["mode"] in ("stock", "off") else f"{r['per_wr'] - base:+d}"
            db = r.get("doorbells_per_wr")
            db = "" if db is None else f"{db:.3g}"
            cq = r.get("cqes_per_wr")
            cq = "" if cq is None else f"{cq:.3g}"
            pl = r.get("polls_per_wr")
            pl = "" if pl is None else f"{pl:.3g}"
            lines.append(f"| {k[0]} | {k[1]} | {MODES.get(r['mode'], r['mode'])} | {r['per_wr']} | {d} | {db} | {cq} | {pl} |")
    lines += ["", "Cases:", ""]
    lines += [f"* {p} {c}: {d}" for (p, c), d in CASES.items()
              if (p, c) in seen or (c.endswith("*") and any(
                  q == p and k.startswith(c[:-1]) for q, k in seen))]
    if a.fndir:
        lines += breakdown(a.fndir)
    open(f"{a.outdir}/{a.name}.md", "w").write("\n".join(lines) + "\n")
    plot(runs, [k for k in seen if not k[1].startswith("mib1")], f"{a.outdir}/{a.name}.png")
    plot_slicing(runs, f"{a.outdir}/{a.name}-slicing.png")
    return 1 if bad else 0


# Where the layer's instructions go: function -> group (exclusive counts).
GROUPS = [
    ("watch: a budgeted QP in pass-through (sched/watch.c, the glue's sv_post_watched)",
     r"^(sv_watch_\w+|sv_post_watched|mlx5_sv_cq_consumed|rxe_sv_cq_consumed)$"),
    ("entry points: the provider's post and poll with the layer's tests inside "
     "(less stock's), the glue's dispatch",
     r"^(mlx5_post_send|mlx5_poll_cq|mlx5_poll_cq_v1|rxe_post_send|rxe_poll_cq|"
     r"mlx5_sv_post_send|mlx5_sv_post_layered|mlx5_sv_poll_layered|mlx5_sv_stock_poll_cq|"
     r"rxe_sv_\w+)$"),
    ("admit: checks, the slot and its copy of the WR",
     r"^(sverbs_post_queued|sverbs_post_send|post_queue|post_passthrough|post_stock|"
     r"sverbs_post_send_checked|sv_wr_stamp|wr_check|wr_load|sv_slot_\w+|"
     r"sv_wr_app_signaled|sv_wr_prio|sv_wr_commit|sv_level_\w+|sv_fifo_\w+)$"),
    ("post: the lone-WR path, WQE record, call bookkeeping",
     r"^(sv_post_direct|sv_call_begin|sv_call_end|sv_qp_post_unlock|sv_wqe_\w+)$"),
    ("pump, slicing, batching counters",
     r"^(sv_qp_pump|pump_queued|pick|signal_last|ring_doorbell|batch_rang|rollback|"
     r"sv_qp_unhold|sverbs_batch_\w+|sv_slicer_\w+|sv_ring_now|build_wqe|"
     r"fill_wqe|wqe_new|adapter_post|holdable|sverbs_now_ns|sverbs_timer_\w+|clock_gettime\S*|"
     r"__vdso_clock_gettime|sv_hr_\w+)$"),
    ("completion: wr_id translation, retiring WQEs",
     r"^(translate|translate_polled|sv_qp_complete|complete_wr|sv_qp_owns|sv_emit|"
     r"retire\w*|sv_cq_qp\w*|lookup_qp\w*)$"),
    ("poll: the CQ lock's rounds, pumping waiting QPs",
     r"^(poll_layered|poll_round|finish_round|pump_waiting|ring_pop|sverbs_poll_cq|raw_poll|"
     r"sverbs_poll_fixup|fast_fixup|pump_qp)$"),
    ("locks (spin lock / unlock beyond stock's)", r"^pthread_spin_\w+"),
]


# The provider's post / poll built with the layer's tests inside (patches
# 0002, 0003), counted against the stock function they are built from.
HOOKED = {
    "mlx5_sv_post_pt": "mlx5_post_send",
    "mlx5_sv_poll_cq": "mlx5_poll_cq",
    "mlx5_sv_poll_cq_v1": "mlx5_poll_cq_v1",
    "rxe_sv_post_pt": "rxe_post_send",
    "rxe_sv_poll_cq": "rxe_poll_cq",
}


def self_costs(path, wrs):
    """Exclusive instructions per WR by function name (a callgrind_annotate
    --inclusive=no listing of the 2N run, whose WRs are 2 * wrs)."""
    out = {}
    for l in open(path):
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+)", l)
        if not m or ":" not in m.group(2):
            continue
        fn = m.group(2).rsplit(":", 1)[1].split("@")[0]
        fn = re.sub(r"\.(constprop|isra|part)\.\d+", "", fn)
        fn = HOOKED.get(fn, fn)
        out[fn] = out.get(fn, 0) + int(m.group(1).replace(",", "")) / (2 * wrs)
    return out


def breakdown(fndir):
    """Per function group, the layer's instructions per WR over stock (mlx5,
    lone 64 B WRITE, post + poll)."""
    base = os.path.join(fndir, "mlx5-lat-stock.self")
    if not os.path.exists(base):
        return []
    runs = {}
    for m in ("pt", "queue", "budget"):
        f = os.path.join(fndir, f"mlx5-lat-{m}.self")
        if os.path.exists(f):
            runs[m] = f
    # the lat case's WRs: N, the 2N run's listing (run-insns.sh -N)
    n = None
    for l in open(base):
        m = re.search(r"--count \S+ \S+ (\d+)", l)
        if m:
            n = int(m.group(1)) // 2
            break
    if not n:
        return []
    st = self_costs(base, n)
    cols = {m: self_costs(f, n) for m, f in runs.items()}
    lines = ["", "## Where the layer's instructions go (mlx5, lone 64 B WRITE, post + poll)", "",
             "Exclusive instructions per WR by function group, each function's count "
             "less its count in stock (mlx5's own functions cancel out).", "",
             "| group | " + " | ".join(MODES[m] for m in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    totals = {m: 0.0 for m in cols}
    done = {m: set() for m in cols}
    for name, rx in GROUPS:
        row = []
        for m, c in cols.items():
            v = 0.0
            for fn, x in c.items():
                if fn not in done[m] and re.match(rx, fn):
                    v += x - st.get(fn, 0)
                    done[m].add(fn)
            totals[m] += v
            row.append(f"{v:+.0f}")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    row = []
    for m, c in cols.items():
        fns = set(c) | set(st)
        v = sum(c.get(fn, 0) - st.get(fn, 0) for fn in fns if fn not in done[m])
        totals[m] += v
        row.append(f"{v:+.0f}")
    lines.append("| everything else (the caller, mlx5's own, the timer) | " + " | ".join(row) + " |")
    lines.append("| **total over stock** | " + " | ".join(f"**{totals[m]:+.0f}**" for m in cols) + " |")
    return lines + sides(fndir, n, list(cols))


def side_costs(path, wrs):
    """Inclusive instructions per WR of the test's post and poll calls
    (insn_post, insn_poll) from a callgrind_annotate --inclusive=yes
    listing of the 2N run."""
    out = {}
    for l in open(path):
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+\S+:(insn_post|insn_poll)[.\w]*\s", l)
        if m and m.group(2) not in out:
            out[m.group(2)] = int(m.group(1).replace(",", "")) / (2 * wrs)
    return out


def sides(fndir, n, modes):
    """The post side and the poll side of the lone WR, inclusive, per mode."""
    base = os.path.join(fndir, "mlx5-lat-stock.fn")
    if not os.path.exists(base):
        return []
    st = side_costs(base, n)
    cols = {}
    for m in modes:
        f = os.path.join(fndir, f"mlx5-lat-{m}.fn")
        if os.path.exists(f):
            cols[m] = side_costs(f, n)
    if len(st) != 2:
        return []
    lines = ["", "## Post side and poll side (mlx5, lone 64 B WRITE)", "",
             "Inclusive instructions per WR of the post call and the poll call "
             "(Δ over stock).", "",
             "| side | stock | " + " | ".join(MODES[m] for m in cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    for side, name in (("insn_post", "post"), ("insn_poll", "poll")):
        row = [f"{c[side]:.0f} ({c[side] - st[side]:+.0f})" if side in c else "–"
               for c in cols.values()]
        lines.append(f"| {name} | {st[side]:.0f} | " + " | ".join(row) + " |")
    return lines


def plot(runs, cases, path):
    """Grouped bars: instructions per WR by case and mode (log scale: a
    sliced 1 MiB WRITE is 500x a 64 B one)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("insns: no matplotlib, no plot", file=sys.stderr)
        return
    modes = ["stock", "pt", "queue", "budget", "sliced"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    w = 0.8 / len(modes)
    for j, m in enumerate(modes):
        xs, ys = [], []
        for i, k in enumerate(cases):
            r = next((r for r in runs if (r["path"], r["case"]) == k and "per_wr" in r and
                      (r["mode"] == m or (m == "stock" and r["mode"] == "off"))), None)
            if r:
                xs.append(i + (j - len(modes) / 2 + 0.5) * w)
                ys.append(r["per_wr"])
        if xs:
            bars = ax.bar(xs, ys, w, label=MODES[m])
            ax.bar_label(bars, fontsize=6, rotation=90, padding=2)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{p}\n{c}" for p, c in cases])
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 8)  # room for the labels
    ax.set_ylabel("user-space instructions per WR")
    title = "Instructions per WR (callgrind): stock vs the layer's paths"
    if any(c.startswith("mib") for _, c in cases):
        title += " (mib: 1 MiB WRITE, the layer slices it)"
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_slicing(runs, path):
    """The slicing levers (mib1-* cases): doorbells, CQEs and instructions
    per 1 MiB WRITE by slice size, for each window / signals setting."""
    rs = [r for r in runs if r["case"].startswith("mib1-") and "per_wr" in r]
    if not rs:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    sizes = sorted({r["case"].split("-")[1] for r in rs}, key=lambda k: int(k[:-1]))
    sets = []
    for r in rs:
        ws = r["case"].split("-")[2]
        if ws not in sets:
            sets.append(ws)
    label = {"w2s2": "window 2, 2 signals (default)", "w2s1": "window 2, 1 signal",
             "w4s2": "window 4, 2 signals"}
    fig, axs = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key, title in zip(axs, ("doorbells_per_wr", "cqes_per_wr", "per_wr"),
                              ("doorbells (rxe: post system calls)", "CQEs",
                               "instructions (user space)")):
        w = 0.8 / len(sets)
        for j, ws in enumerate(sets):
            xs, ys = [], []
            for i, sz in enumerate(sizes):
                r = next((r for r in rs if r["case"] == f"mib1-{sz}-{ws}"), None)
                if r and r.get(key) is not None:
                    xs.append(i + (j - len(sets) / 2 + 0.5) * w)
                    ys.append(r[key])
            bars = ax.bar(xs, ys, w, label=label.get(ws, ws))
            ax.bar_label(bars, fontsize=6, fmt="%.0f", padding=1)
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([f"{s[:-1]} KiB slices" for s in sizes])
        ax.set_yscale("log")
        ax.set_title(f"{title} per 1 MiB WRITE", fontsize=9)
    axs[0].legend(fontsize=7)
    fig.suptitle("Slicing levers, mlx5 fake objects, serial wire (one WQE executed between "
                 "two polls): window_slices / window_signals", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
