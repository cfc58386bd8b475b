#!/usr/bin/python3
# plot-run.py - the plots of one or more sverbs-flowgen runs (their --json):
# per-flow throughput CDF, latency CDF (the merged histogram, total.lat.
# histogram) and fairness over time (Jain's index per second, the timeline),
# one PNG with three panels; several runs (e.g. allocation on and off) are
# drawn over each other, labelled by their --label or file name.
#
#   flowgen/plot-run.py run.json [more.json ...] -o plots.png
#
# --cdf-by-flows draws instead one panel per flow count (run-fairness.sh):
# the per-flow throughput CDF of every run at that scale, each flow's
# throughput divided by its run's mean (a perfectly fair run is a step at 1;
# the host's load moves the absolute rates several-fold between runs).
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ap = argparse.ArgumentParser(description="plots of sverbs-flowgen JSON results")
ap.add_argument("runs", nargs="+")
ap.add_argument("-o", "--out", required=True, help="the PNG to write")
ap.add_argument("--cdf-by-flows", action="store_true",
                help="one panel per flow count: per-flow throughput / run mean, CDF")
a = ap.parse_args()


def cdf(values):
    v = sorted(values)
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def load(path):
    try:
        j = json.load(open(path))
    except (OSError, ValueError) as e:
        sys.exit(f"plot-run.py: {path}: {e}")
    if j.get("tool") != "sverbs-flowgen" or "per_flow" not in j:
        sys.exit(f"plot-run.py: {path} is not a sverbs-flowgen client result")
    return j


if a.cdf_by_flows:
    runs = [(p, load(p)) for p in a.runs]
    scales = sorted({j["flows"] for _, j in runs})
    fig, ax = plt.subplots(1, len(scales), figsize=(5.5 * len(scales), 4.8), squeeze=False)
    for k, n in enumerate(scales):
        x = ax[0][k]
        for path, j in runs:
            if j["flows"] != n:
                continue
            g = [f["gbps"] for f in j["per_flow"]]
            mean = sum(g) / len(g)
            if mean <= 0:
                continue
            name = j.get("label") or os.path.basename(path)
            xs, ys = cdf([v / mean for v in g])
            x.step(xs, ys, where="post",
                   label=f"{name}: Jain {j['jain']:.3f}, {j['total']['gbps'] * 1e3:.1f} Mbit/s")
        x.set_xlabel("per-flow throughput / the run's mean")
        x.set_ylabel("fraction of flows")
        x.set_title(f"{n} flows: per-flow throughput CDF")
        x.grid(alpha=0.3)
        x.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=100)
    print(f"wrote {a.out}")
    sys.exit(0)

fig, ax = plt.subplots(1, 3, figsize=(16, 4.8))
for path in a.runs:
    j = load(path)
    name = j.get("label") or os.path.basename(path)
    name = f"{name} ({j['flows']} flows, Jain {j['jain']:.3f})"
    x, y = cdf([f["gbps"] * 1e3 for f in j["per_flow"]])
    ax[0].step(x, y, where="post", label=name)
    hist = j["total"]["lat"].get("histogram", [])
    if hist:
        total = sum(n for _, n in hist)
        acc, xs, ys = 0, [], []
        for upper, n in hist:
            acc += n
            xs.append(upper)
            ys.append(acc / total)
        ax[1].step(xs, ys, where="post", label=name)
    tl = j.get("timeline", [])
    if tl:
        ax[2].plot([p["t"] for p in tl], [p["jain"] for p in tl], marker=".", label=name)
ax[0].set_xlabel("per-flow throughput (Mbit/s)")
ax[0].set_ylabel("fraction of flows")
ax[0].set_title("per-flow throughput CDF")
ax[1].set_xscale("log")
ax[1].set_xlabel("latency post -> completion (us, bucket upper edge)")
ax[1].set_ylabel("fraction of operations")
ax[1].set_title("latency CDF")
ax[2].set_xlabel("time (s)")
ax[2].set_ylabel("Jain's index over the flows")
ax[2].set_ylim(0, 1.05)
ax[2].set_title("fairness over time")
for x in ax:
    x.grid(alpha=0.3)
    x.legend(fontsize=7)
fig.tight_layout()
fig.savefig(a.out, dpi=100)
print(f"wrote {a.out}")
