#!/usr/bin/env python3
"""Plot slo-step.sh's samples: batch size target and arrival rate, p99 against the target,
and the service time model and sheds, over time.
usage: slo_plot.py METRICS.csv LATENCY.csv OUT.png STEPS SLO_MS"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    mcsv, lcsv, png, steps, slo = sys.argv[1:6]
    m = list(csv.DictReader(open(mcsv)))
    lat = list(csv.DictReader(open(lcsv)))
    fig, ax = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    t = [float(r["t_s"]) for r in m]
    ax[0].step(t, [float(r["target"]) for r in m], where="post", label="batch size target")
    ax[0].set_ylabel("batch size")
    ax0b = ax[0].twinx()
    ax0b.plot(t, [float(r["rate"]) for r in m], "g:", label="arrival rate (model)")
    ax0b.set_ylabel("req/s")
    ax[0].legend(loc="upper left")
    ax0b.legend(loc="upper right")
    lt = [float(r["t_s"]) for r in lat]
    ax[1].plot(lt, [float(r["p99_ms"]) for r in lat], label="p99 per 100 ms (open loop)")
    ax[1].plot(t, [float(r["window_p99_ms"]) for r in m], label="ingress window p99")
    ax[1].axhline(float(slo), color="r", ls="--", label="target")
    ax[1].set_ylabel("ms")
    ax[1].set_yscale("log")
    ax[1].legend()
    ax[2].plot(t, [float(r["alpha_ms"]) for r in m], label="alpha (ms per batch)")
    ax[2].plot(t, [float(r["beta_ms"]) for r in m], label="beta (ms per request)")
    ax2b = ax[2].twinx()
    ax2b.plot(t, [float(r["shed"]) for r in m], "r:", label="shed (503), total")
    ax[2].set_xlabel("s")
    ax[2].legend(loc="upper left")
    ax2b.legend(loc="upper right")
    fig.suptitle(f"SLO controller under a load step {steps} (target p99 {slo} ms)")
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    print("wrote", png)


if __name__ == "__main__":
    main()
