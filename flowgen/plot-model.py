#!/usr/bin/python3
# plot-model.py - the BMR model check (docs/flowgen.md, "The model check"):
# sverbs-bmr-fit does the arithmetic (fit_bmr() in flowgen/src/stats.cpp,
# unit-tested); this prints its table and draws OUT/model.png (matplotlib):
# left, the measured overhead against the paper's x = N (1 + log2 N) / (4M)
# with the fitted line and the line of slope T_comm/T_flops; right, the
# overhead minus the fitted T_sched term against (1 + log2 N) / (2M), where
# the model predicts slope T_comm/T_flops.
#
#   flowgen/plot-model.py --out DIR bmr-*.json
import argparse
import json
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))


def default_fit_bin():
    """sverbs-bmr-fit of the checkout's build (flowgen/ -> build/flowgen/),
    else of the installed prefix (share/sverbs/flowgen/ -> bin/), else PATH."""
    for c in (os.path.join(here, "..", "build", "flowgen", "sverbs-bmr-fit"),
              os.path.join(here, "..", "..", "..", "bin", "sverbs-bmr-fit")):
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    return "sverbs-bmr-fit"


ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--out", required=True, help="directory for fit.json, model.png, model.md")
ap.add_argument("--fit-bin", default=default_fit_bin())
ap.add_argument("runs", nargs="+", help="sverbs-bmr --json results")
a = ap.parse_args()

p = subprocess.run([a.fit_bin, *a.runs], capture_output=True, text=True)
if p.returncode != 0:
    sys.exit(f"plot-model.py: sverbs-bmr-fit failed: {p.stderr.strip()}")
fit = json.loads(p.stdout)
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "fit.json"), "w") as f:
    f.write(p.stdout)

ratio = fit["t_comm_over_t_flops"]
lines = [
    f"T_comm {fit['t_comm']:.3e} s/element, T_flops {fit['t_flops']:.3e} s/flop, "
    f"T_comm/T_flops {ratio:.1f}, T_sched {fit['t_sched']:.3e} s ({fit['runs']} runs)",
    "",
    "| N | M | runs | T(N) s (min-max) | T(1) s | overhead | x = N(1+log2 N)/(4M) | (1+log2 N)/(2M) | overhead - sched |",
    "|---|---|---|---|---|---|---|---|---|",
]
for r in fit["rows"]:
    lines.append(
        f"| {r['n']:.0f} | {r['m']:.0f} | {r['runs']} | {r['seconds']:.3f} ({r['seconds_min']:.3f}-{r['seconds_max']:.3f}) "
        f"| {r['t1']:.3f} | {r['overhead']:.3f} | {r['x_paper']:.4f} | {r['x_model']:.5f} | {r['overhead_minus_sched']:.3f} |")
pp, pm = fit["paper"], fit["model"]
lines += [
    "",
    f"paper's x: fitted slope {pp['slope']:.1f} (intercept {pp['intercept']:.3f}, r2 {pp['r2']:.3f}) "
    f"vs T_comm/T_flops {ratio:.1f}: error {fit['paper_error'] * 100:.1f}%",
    f"model's x: fitted slope {pm['slope']:.1f} (through 0, r2 {pm['r2']:.3f}) "
    f"vs T_comm/T_flops {ratio:.1f}: error {fit['model_error'] * 100:.1f}%",
]
text = "\n".join(lines)
print(text)
with open(os.path.join(a.out, "model.md"), "w") as f:
    f.write(text + "\n")

fig, ax = plt.subplots(1, 2, figsize=(12, 5))
ns = sorted({r["n"] for r in fit["rows"]})
for n in ns:
    rows = [r for r in fit["rows"] if r["n"] == n]
    ax[0].scatter([r["x_paper"] for r in rows], [r["overhead"] for r in rows], label=f"N = {n:.0f}")
    ax[1].scatter([r["x_model"] for r in rows], [r["overhead_minus_sched"] for r in rows],
                  label=f"N = {n:.0f}")
xp = [0, max(r["x_paper"] for r in fit["rows"]) * 1.05]
ax[0].plot(xp, [pp["intercept"] + pp["slope"] * x for x in xp], "k-",
           label=f"fit: slope {pp['slope']:.1f}")
ax[0].plot(xp, [ratio * x for x in xp], "r--", label=f"T_comm/T_flops = {ratio:.1f}")
ax[0].set_xlabel("x = N (1 + log2 N) / (4M)")
ax[0].set_ylabel("overhead (N T(N) - T(1)) / T(1)")
ax[0].set_title(f"paper's x: slope error {fit['paper_error'] * 100:.0f}%")
xm = [0, max(r["x_model"] for r in fit["rows"]) * 1.05]
ax[1].plot(xm, [pm["slope"] * x for x in xm], "k-", label=f"fit: slope {pm['slope']:.1f}")
ax[1].plot(xm, [ratio * x for x in xm], "r--", label=f"T_comm/T_flops = {ratio:.1f}")
ax[1].set_xlabel("(1 + log2 N) / (2M)")
ax[1].set_ylabel("overhead - N^2 (N+1) T_sched / (2 M^3 T_flops)")
ax[1].set_title(f"model's x: slope error {fit['model_error'] * 100:.0f}%")
for x in ax:
    x.legend(fontsize=8)
    x.grid(alpha=0.3)
fig.suptitle("BMR parallel overhead vs the cost model (sverbs-bmr, measured)")
fig.tight_layout()
fig.savefig(os.path.join(a.out, "model.png"), dpi=100)
print(f"wrote {os.path.join(a.out, 'model.png')}")
