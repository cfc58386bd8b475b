#!/usr/bin/python3
"""insns.py NAME RUNS.jsonl [--meta META.json] [--outdir DIR]: the table of
perf/run-insns.sh (instructions per WR, callgrind) as DIR/NAME.{json,md}."""
import argparse
import json
import sys

CASES = {
    ("mlx5", "lat"): "post 1 signaled 64 B WRITE, poll it",
    ("mlx5", "burst16"): "16 posts of 1 WR (16th signaled), poll",
    ("mlx5", "list16"): "the same 16 WRs in one post call (--post_list 16), poll",
    ("mlx5", "mib"): "1 MiB WRITE (layer: PRIO(7), 4 KiB slices), per WR",
    ("rxe", "t1"): "rate_bench -T 1: 1 WR per post, 1 in 16 signaled",
    ("rxe", "pl16"): "rate_bench -l 16: 16 WRs per post",
    ("rxe", "lat"): "rate_bench --lat: post 1, wait for it",
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
    a = ap.parse_args()
    runs = [json.loads(l) for l in open(a.runs) if l.startswith("{")]
    meta = json.load(open(a.meta)) if a.meta else {}
    out = {"meta": meta, "runs": runs}
    json.dump(out, open(f"{a.outdir}/{a.name}.json", "w"), indent=1)
    lines = [f"# {a.name}: instructions per WR (callgrind)", "",
             f"git {meta.get('git', '?')}, `{meta.get('args', '')}`. "
             "User-space instructions per WR, post + poll (mlx5: only the "
             "post and poll calls against the fake objects; rxe: rate_bench's "
             "posting thread (callgrind --toggle-collect), perftest's whole "
             "client process with a run of N WRs subtracted from one of 2N). "
             "The budget's rows vary by a few instructions between runs "
             "(its timer thread). "
             "Δ = over stock in the same case.", "",
             "| path | case | mode | instructions / WR | Δ vs stock | doorbells / WR |",
             "|---|---|---|---:|---:|---:|"]
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
                lines.append(f"| {k[0]} | {k[1]} | {MODES.get(r['mode'], r['mode'])} | failed | | |")
                continue
            d = "" if base is None or r["mode"] in ("stock", "off") else f"{r['per_wr'] - base:+d}"
            db = r.get("doorbells_per_wr")
            db = "" if db is None else f"{db:.3g}"
            lines.append(f"| {k[0]} | {k[1]} | {MODES.get(r['mode'], r['mode'])} | {r['per_wr']} | {d} | {db} |")
    lines += ["", "Cases:", ""]
    lines += [f"* {p} {c}: {d}" for (p, c), d in CASES.items() if (p, c) in seen]
    open(f"{a.outdir}/{a.name}.md", "w").write("\n".join(lines) + "\n")
    plot(runs, seen, f"{a.outdir}/{a.name}.png")
    return 1 if bad else 0


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
    ax.set_title("Instructions per WR (callgrind): stock vs the layer's paths "
                 "(mib: 1 MiB WRITE, the layer slices it)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
