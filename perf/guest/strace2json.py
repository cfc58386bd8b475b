#!/usr/bin/python3
"""strace2json.py CFG SETUP_SUMMARY RUN_SUMMARY RATE_JSON

Turns two `strace -c -f` summaries (a rate_bench run with -n 0 and one with
-n N) plus the JSON line of the -n N run into one JSON line: syscalls per
completed WR, in total and per syscall name (setup subtracted)."""
import json
import sys


def calls(path):
    """{syscall: calls} from an strace -c summary table."""
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 5 or p[0].startswith(("%", "-")) or p[-1] == "total":
                continue
            try:
                float(p[0])
                out[p[-1]] = int(p[3])
            except ValueError:
                continue
    return out


def main():
    cfg, setup_path, run_path, json_path = sys.argv[1:5]
    setup, run = calls(setup_path), calls(run_path)
    with open(json_path) as f:
        rate = json.loads(f.readline())
    wrs = rate["wrs"]
    delta = {k: run.get(k, 0) - setup.get(k, 0) for k in set(run) | set(setup)}
    delta = {k: v for k, v in delta.items() if v > 0}
    total = sum(delta.values())
    out = {
        "bench": "syscalls",
        "sverbs": rate["sverbs"],
        "cfg": cfg,
        "threads": rate["threads"],
        "post_list": rate["post_list"],
        "signal_every": rate["signal_every"],
        "mtu": rate.get("mtu"),
        "wrs": wrs,
        "post_calls": rate["post_calls"],
        "syscalls": total,
        "syscalls_per_wr": round(total / wrs, 4) if wrs else None,
        "per_wr": {k: round(v / wrs, 4) for k, v in sorted(delta.items())} if wrs else {},
        "setup_syscalls": sum(setup.values()),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
