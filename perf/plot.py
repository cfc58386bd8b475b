#!/usr/bin/python3
"""plot.py - PNGs from a perf/results/<name>.json written by summarize.py.

    plot.py RESULTS.json [--outdir DIR]

Writes, next to the JSON (or in DIR):
  <name>-latency.png         small-message p50/p99 per background size, stock vs sverbs
                             (log), and the p99 from the scheduled time when the runs have it
  <name>-throughput.png      large-stream MB/s per background size, stock vs sverbs
  <name>-cpu.png             CPU ms per MiB of the stream by kind (user, system, softirq),
                             stock vs sverbs, when the runs have hol_bench's "cpu"
  <name>-kpps.png            message rate per configuration, stock vs sverbs
Every repetition is drawn as a dot over the median bar.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"stock": "#7f7f7f", "sverbs": "#1f77b4"}


def bars(ax, labels, series, ylabel, log=False, dots=None):
    n = len(labels)
    w = 0.38
    for i, (name, vals) in enumerate(series.items()):
        xs = [x + (i - 0.5) * w for x in range(n)]
        ax.bar(xs, [v if v is not None else 0 for v in vals], w, label=name, color=COLORS.get(name))
        if dots:
            for x, pts in zip(xs, dots[name]):
                ax.scatter([x] * len(pts), pts, s=10, color="black", zorder=3)
    ax.set_xticks(range(n))
    # many bars or long labels (variants): smaller, slanted labels that
    # do not overlap
    if n > 8 or n * max(len(str(x)) for x in labels) > 40:
        ax.set_xticklabels(labels, rotation=50, ha="right", fontsize=8)
    else:
        ax.set_xticklabels(labels)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()


def plot_hol(doc, outdir, name):
    rows = doc["summary"].get("hol")
    if not rows:
        return []
    made = []
    labels = [("unloaded" if r["background"] == "none" else r["background"]) +
              (" " + r["variant"] if r.get("variant") else "") for r in rows]
    # the third panel: the p99 from each message's scheduled time (the
    # open-loop latency, which counts a late post; summarize.py's sched)
    sched = all("sched" in r[s] for r in rows for s in ("stock", "sverbs"))
    panels = [(lambda r, s: r[s], "p50_us", "p50 from the post"),
              (lambda r, s: r[s], "p99_us", "p99 from the post")]
    if sched:
        panels.append((lambda r, s: r[s]["sched"], "p99_us", "p99 from the schedule"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2))
    for ax, (side, key, title) in zip(axes, panels):
        series = {s: [(side(r, s)[key] or 0) / 1000.0 for r in rows] for s in ("stock", "sverbs")}
        dots = None
        if key == "p99_us":
            dots = {s: [[v / 1000.0 for v in side(r, s)["p99_runs_us"]] for r in rows]
                    for s in ("stock", "sverbs")}
        bars(ax, labels, series, "latency (ms, log)", log=True, dots=dots)
        ax.set_title("64 B high-prio %s" % title)
        ax.set_xlabel("background WRITE size")
    fig.tight_layout()
    p = os.path.join(outdir, name + "-latency.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    made.append(p)

    loaded = [r for r in rows if r["background"] != "none"]
    if loaded:
        fig, ax = plt.subplots(figsize=(6, 4))
        series = {s: [r[s]["mb_per_s"] for r in loaded] for s in ("stock", "sverbs")}
        dots = {s: [r[s]["mb_per_s_runs"] for r in loaded] for s in ("stock", "sverbs")}
        bars(ax, [r["background"] + (" " + r["variant"] if r.get("variant") else "")
                  for r in loaded], series, "MB/s", dots=dots)
        ax.set_title("large-WRITE stream throughput")
        ax.set_xlabel("background WRITE size")
        fig.tight_layout()
        p = os.path.join(outdir, name + "-throughput.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    cpu = [r for r in loaded if r.get("cpu_ms_per_mib")]
    if cpu:
        made.append(plot_cpu(cpu, outdir, name))
    return made


CPU_STACK = (("user_ms", "user", "#2ca02c"), ("system_ms", "system", "#d62728"),
             ("softirq_ms", "softirq + irq", "#ff7f0e"))


def plot_cpu(rows, outdir, name):
    """Stacked bars: the guest's CPU ms per MiB of the stream by kind, a
    stock and a sverbs bar per background size (and variant)."""
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 4.5, 4.2))
    w = 0.38
    for i, side in enumerate(("stock", "sverbs")):
        xs = [x + (i - 0.5) * w for x in range(len(rows))]
        bottom = [0.0] * len(rows)
        for key, label, color in CPU_STACK:
            v = [r["cpu_ms_per_mib"][side][key] +
                 (r["cpu_ms_per_mib"][side]["irq_ms"] if key == "softirq_ms" else 0)
                 for r in rows]
            ax.bar(xs, v, w, bottom=bottom, color=color, edgecolor="black",
                   hatch="//" if side == "stock" else None,
                   label="%s (%s)" % (label, side))
            bottom = [b + x for b, x in zip(bottom, v)]
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["background"] + (" " + r["variant"] if r.get("variant") else "")
                        for r in rows])
    ax.set_ylabel("guest CPU ms per MiB streamed")
    ax.set_title("CPU per MiB of the stream (hatched: stock)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    p = os.path.join(outdir, name + "-cpu.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def side_label(sv):
    """What the sverbs side ran with, when it is not the default: a budget
    (the "b" configs) or the queue path (the "q" configs)."""
    if sv.get("budget_us"):
        return "\nsverbs: budget %s µs" % sv["budget_us"]
    if sv.get("path"):
        return "\nsverbs: %s path" % sv["path"]
    return ""


def plot_rate(doc, outdir, name):
    rows = [r for r in doc["summary"].get("rate", []) if r["kind"] == "rate"]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = ["%sT x %s/post%s" % (r["stock"].get("threads", "?"), r["stock"].get("post_list", "?"),
                                   side_label(r["sverbs"]))
              for r in rows]
    series = {s: [r[s]["kpps"] for r in rows] for s in ("stock", "sverbs")}
    dots = {s: [r[s]["kpps_runs"] for r in rows] for s in ("stock", "sverbs")}
    bars(ax, labels, series, "kpps (64 B RDMA WRITE)", dots=dots)
    ax.set_title("message rate")
    fig.tight_layout()
    p = os.path.join(outdir, name + "-kpps.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--outdir")
    a = ap.parse_args()
    with open(a.results) as f:
        doc = json.load(f)
    outdir = a.outdir or os.path.dirname(os.path.abspath(a.results))
    name = doc.get("name") or os.path.splitext(os.path.basename(a.results))[0]
    made = plot_hol(doc, outdir, name) + plot_rate(doc, outdir, name)
    for p in made:
        print("plot: wrote %s" % p, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
