#!/bin/bash
# run-bw-why.sh - where a batch budget's cost to ib_write_bw goes (issue 18,
# goal 2): ib_write_bw 64 B, one WR per post, the layer on, without and with
# SVERBS_BATCH_BUDGET_US (and with SVERBS_BATCH_LINGER=on), in rotated order in
# ONE guest boot; per WR: the client's
# user and system CPU, the layer's WQEs per doorbell, system calls by name.
# Writes perf/results/<name>.json and <name>.md.
#
#   perf/run-bw-why.sh [-n NAME] [-r REPS] [-i ITERS] [-m "MODES"]
#     -n NAME   results name (default: bw-why)
#     -r REPS   repetitions, the order of the modes rotated (default: 5)
#     -i ITERS  WRs per run (default: 100000)
#     -m MODES  the client's modes, the first the reference (default "none
#               budget nolinger"): none (no budget), budget (a budget, the
#               rest as configured), linger / nolinger (the budget with
#               SVERBS_BATCH_LINGER=on / off)
#
# Environment: PERF_BUDGET_US (default 50), SVERBS_VM_* (tests/vm/run-in-vm.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

name=bw-why reps=5 iters=100000 modes="none budget nolinger"
while [ $# -gt 0 ]; do
	case $1 in
	-n) name=$2; shift 2 ;;
	-r) reps=$2; shift 2 ;;
	-i) iters=$2; shift 2 ;;
	-m) modes=$2; shift 2 ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) perf_die "unknown argument $1 (see --help)" ;;
	esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || perf_die "-r wants a positive number"
[[ $iters =~ ^[1-9][0-9]*$ ]] && [ "$iters" -ge 1000 ] || perf_die "-i wants at least 1000 WRs"
budget=${PERF_BUDGET_US:-50}
[[ $budget =~ ^[1-9][0-9]*$ ]] || perf_die "PERF_BUDGET_US must be a positive number of microseconds"
perf_need_bins
out=$PERF_DIR/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm=$(wc -w <<<"$modes")
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$((reps * nm * (iters / 5000 + 20) + 2 * nm * (iters / 500 + 60) + 120))}
perf_meta "$tmp/meta.json" "run-bw-why.sh -r $reps -i $iters -m '$modes' (budget ${budget} us)"
perf_log "$reps x {$modes; ${budget}us} x ib_write_bw -n $iters, then strace, in one guest (timeout ${SVERBS_VM_TIMEOUT}s)"
rc=0
vm_run "'$PERF_DIR/guest/bw-why.sh' $reps $iters $budget $modes" >"$tmp/runs.jsonl" || rc=$?
[ -s "$tmp/runs.jsonl" ] || perf_die "no results (guest exit status $rc)"
$PY - "$tmp/runs.jsonl" "$tmp/meta.json" "$out/$name" "$budget" $modes <<'PYEOF' || rc=1
import json, statistics, sys

runs_path, meta_path, base, budget = sys.argv[1:5]
MODES = tuple(sys.argv[5:])
lines = [json.loads(l) for l in open(runs_path) if l.strip().startswith("{")]
meta = json.load(open(meta_path))
errors = [l for l in lines if "error" in l]
runs = [l for l in lines if l["kind"] == "run" and "error" not in l]
sysc = {l["mode"]: l for l in lines if l["kind"] == "syscalls" and "error" not in l}
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
           "pass-through, where the layer counts nothing):", "",
           "| mode | WQEs per doorbell | held WRs per WR | held p99 (µs) |", "|---|---:|---:|---:|"]
    for m in MODES[1:]:
        lay = [by[m][k] for k in reps if "wqes" in by[m][k] and by[m][k]["doorbells"]]
        if lay:
            md.append("| {} | {:.2f} | {:.2f} | {:.1f} |".format(
                m, med([r["wqes"] / r["doorbells"] for r in lay]),
                med([r["held"] / r["layer_wrs"] for r in lay if r["layer_wrs"]]),
                med([r["held_p99_us"] for r in lay])))
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
json.dump({"meta": meta, "budget_us": int(budget), "runs": lines}, open(base + ".json", "w"), indent=1)
open(base + ".md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
sys.exit(1 if errors or not reps else 0)
PYEOF
perf_log "wrote $out/$name.json, $out/$name.md"
exit $rc
