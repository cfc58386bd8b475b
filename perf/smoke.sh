#!/bin/bash
# smoke.sh - meson test "perf-smoke": runs hol_bench and rate_bench in the
# Soft-RoCE guest for about a second each with SVERBS=on and checks that they
# finished with sane output (non-zero counts, no error, the fields the scripts
# read).  Never a timing threshold.
#
#   perf/smoke.sh HOL_BENCH RATE_BENCH
# Exit: 0 ok, 1 failed, 77 (skip) when no guest can be started.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
[ $# = 2 ] || perf_die "usage: $0 HOL_BENCH RATE_BENCH"
PERF_BIN=$(cd "$(dirname "$1")" && pwd -P)
[ "$(cd "$(dirname "$2")" && pwd -P)" = "$PERF_BIN" ] || perf_die "both binaries must be in one dir"
[ -x "$VM_RUNNER" ] || { echo "SKIP: no VM runner $VM_RUNNER"; exit 77; }
if ! why=$("$VM_RUNNER" --check 2>&1); then
	echo "SKIP: cannot start a guest: $why"
	exit 77
fi
# below meson's timeout (perf/meson.build): the harness's own timeout, which
# prints the guest's console tail, comes first.  A run takes ~24 s, boot
# included; the rest is room for a boot the harness restarts (run-in-vm.sh)
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-100}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# streamed, not printed at the end: a run killed midway keeps what it said
set +e
vm_run "'$PERF_DIR/guest/smoke.sh'" | tee "$out"
rc=${PIPESTATUS[0]}
set -e
[ $rc = 0 ] || { echo "FAIL: guest exit status $rc"; exit 1; }
PERF_DIR=$PERF_DIR $PY - "$out" <<'PYEOF'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        runs[r.get("label")] = r
bad = []
def need(label, cond, what):
    r = runs.get(label)
    if r is None:
        bad.append("%s: no JSON line" % label)
    else:
        try:
            ok = "error" not in r and cond(r)
        except (KeyError, TypeError) as e:
            ok = False
            what += " (%s: %s)" % (type(e).__name__, e)
        if not ok:
            bad.append("%s: %s" % (label, what))
for l in ("smoke-write", "smoke-send"):
    need(l, lambda r: r["small"]["count"] > 0 and r["large"]["completed"] > 0
         and r["large"]["mb_per_s"] > 0 and r["small"]["p99_us"] > 0
         and r["sverbs"] == "on", "no small samples or no large WRITE completed")
# the open-loop fields summarize.py reads: a message is scheduled no later
# than it is posted, so its latency from the schedule is never the smaller
need("smoke-write", lambda r: r["window_s"] > 0 and r["interval_us"] > 0
     and r["small_from_schedule"]["count"] == r["small"]["count"]
     and r["small_from_schedule"]["p99_us"] >= r["small"]["p99_us"],
     "small_from_schedule missing, or below the latency from the post")
# the CPU accounting summarize.py reads (/proc/stat and getrusage over the
# window): every kind present, none negative, some time counted, and the
# busy-polling benchmark's own among it
CPU = ("user_s", "system_s", "irq_s", "softirq_s", "idle_s", "steal_s",
       "proc_user_s", "proc_system_s")
need("smoke-write", lambda r: r["cpu"]["interval_s"] > 0
     and all(r["cpu"][k] >= 0 for k in CPU)
     and sum(r["cpu"][k] for k in CPU[:6]) > 0
     and r["cpu"]["proc_user_s"] + r["cpu"]["proc_system_s"] > 0,
     "cpu: a kind missing or negative, or no CPU time counted over the window")
need("smoke-thread", lambda r: r["stream_thread"] and r["small"]["count"] > 0
     and r["large"]["completed"] > 0 and r["large"]["post_call_max_us"] > 0,
     "--stream-thread: no small samples, or its thread posted no large WRITE")
need("smoke-baseline", lambda r: r["small"]["count"] > 0 and r["large"]["completed"] == 0,
     "baseline: no samples, or a background stream ran")
need("smoke-t1", lambda r: r["wrs"] > 0 and r["kpps"] > 0 and r["post_calls"] > 0 and r["post_list"] == 1,
     "no WR completed, or not one WR per post")
need("smoke-t2-pl4", lambda r: r["wrs"] > 0 and len(r["per_thread_kpps"]) == 2
     and all(k > 0 for k in r["per_thread_kpps"]), "a thread completed nothing")
need("smoke-error", lambda r: r["ok"],
     "--inject-error did not abort with 'remote access error'")
need("smoke-pl16", lambda r: r["mpps"] > 0 and r["sverbs"] == "on",
     "perftest.sh bw-pl16 (ib_write_bw --post_list 16) failed or measured nothing")
need("smoke-lat", lambda r: r["lat"]["count"] > 0 and r["lat"]["p50_us"] > 0, "no latency sample")
need("smoke-settle", lambda r: r["settle_us"] == 2000 and r["polls_per_wr"] >= 1,
     "--settle-us: not recorded, or fewer polls than WRs")
need("smoke-write-off", lambda r: r["sverbs"] == "off" and r["large"]["completed"] > 0
     and r["cpu"]["interval_s"] > 0, "the stock run: no large WRITE completed, or no cpu")
# summarize.py over the runs: the hol tables, both latencies
import os, subprocess, tempfile
with tempfile.TemporaryDirectory() as d:
    p = subprocess.run([sys.executable, os.path.join(os.environ["PERF_DIR"], "summarize.py"),
                        "smoke", sys.argv[1], "--outdir", d], capture_output=True, text=True)
    md = open(os.path.join(d, "smoke.md")).read() if os.path.exists(os.path.join(d, "smoke.md")) else ""
    if "CPU per MiB of the stream" not in md:
        bad.append("summarize.py: no CPU table from the stock/sverbs pair (exit %d: %s)" %
                   (p.returncode, p.stderr.strip()[-200:]))
    if "from their scheduled time" not in md or "64K x2" not in md:
        bad.append("summarize.py: no hol table from the schedule (exit %d: %s)" %
                   (p.returncode, p.stderr.strip()[-200:]))
for b in bad:
    print("FAIL:", b)
if not bad:
    print("ok - %d benchmark runs in the guest with sane output" % len(runs))
sys.exit(1 if bad else 0)
PYEOF
