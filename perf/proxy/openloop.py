#!/usr/bin/env python3
"""Open-loop HTTP/1.1 load at a constant offered rate, with coordinated-omission correction.

Requests are scheduled at fixed times (rate R over C keep-alive connections: connection i
sends at t0 + (i + k*C)/R); a request's latency is measured from its *scheduled* time, so a
stall of the target shows as latency of every request that should have been sent meanwhile
(as wrk2 does), not as a lower rate.  A connection with a request outstanding queues the next
ones (HTTP/1.1 pipelining is not used: the next leaves when the answer came).

usage: openloop.py URL --rate R --duration S [--connections C] [--method POST --body B]
                   [--steps "R1:S1,R2:S2,..."] [--json out.json] [--series out.csv]
Prints p50/p99/p99.9 (ms), achieved rate, errors, and status counts; --series writes one
line per 100 ms window (t, offered, completed, p99_ms) for plots.
"""
import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urlparse


def pct(sorted_v, p):
    if not sorted_v:
        return float("nan")
    i = min(len(sorted_v) - 1, max(0, int(round(p / 100.0 * len(sorted_v) + 0.5)) - 1))
    return sorted_v[i]


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    n = 0
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        if k.strip().lower() == "content-length":
            n = int(v.strip())
    if n:
        await reader.readexactly(n)
    return status


async def conn_worker(i, args, u, schedule, results, t0, stop_at):
    req = (f"{args.method} {u.path or '/'}{('?' + u.query) if u.query else ''} HTTP/1.1\r\n"
           f"Host: {u.hostname}\r\n").encode()
    body = args.body.encode()
    if body or args.method in ("POST", "PUT"):
        req += f"Content-Length: {len(body)}\r\n".encode()
    req += b"\r\n" + body
    reader = writer = None
    for t_sched in schedule:
        now = time.perf_counter() - t0
        if t_sched > now:
            await asyncio.sleep(t_sched - now)
        if time.perf_counter() - t0 > stop_at + args.timeout:
            break
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
            writer.write(req)
            status = await asyncio.wait_for(read_response(reader), args.timeout)
            results.append((t_sched, time.perf_counter() - t0 - t_sched, status))
        except Exception:
            results.append((t_sched, None, 0))
            if writer is not None:
                writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


def build_schedule(steps, conns):
    """steps: [(rate, seconds)] -> per-connection lists of scheduled send times."""
    per = [[] for _ in range(conns)]
    t, k = 0.0, 0
    for rate, secs in steps:
        n = int(rate * secs)
        for j in range(n):
            per[k % conns].append(t + j / rate)
            k += 1
        t += secs
    return per, t


async def main_async(args):
    u = urlparse(args.url)
    steps = ([(float(a), float(b)) for a, b in (s.split(":") for s in args.steps.split(","))]
             if args.steps else [(args.rate, args.duration)])
    per, total = build_schedule(steps, args.connections)
    results = []
    t0 = time.perf_counter() + 0.2
    await asyncio.gather(*(conn_worker(i, args, u, per[i], results, t0, total)
                           for i in range(args.connections)))
    return steps, total, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--steps", default="")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--method", default="GET")
    ap.add_argument("--body", default="")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--series", default="")
    args = ap.parse_args()
    steps, total, results = asyncio.run(main_async(args))
    ok = sorted(lat for _, lat, st in results if lat is not None and 200 <= st < 300)
    errors = sum(1 for _, lat, _ in results if lat is None)
    codes = {}
    for _, lat, st in results:
        codes[st] = codes.get(st, 0) + 1
    offered = sum(int(r * s) for r, s in steps)
    out = {
        "url": args.url, "offered": offered, "seconds": total, "connections": args.connections,
        "completed": len(results) - errors, "errors": errors, "codes": codes,
        "rate": (len(results) - errors) / total if total else 0,
        "p50_ms": pct(ok, 50) * 1e3, "p99_ms": pct(ok, 99) * 1e3, "p999_ms": pct(ok, 99.9) * 1e3,
    }
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)
    if args.series:
        win = {}
        for t, lat, st in results:
            w = int(t * 10)
            win.setdefault(w, []).append(lat if lat is not None else float("inf"))
        with open(args.series, "w") as f:
            f.write("t_s,completed,p99_ms\n")
            for w in sorted(win):
                v = sorted(win[w])
                f.write(f"{w / 10:.1f},{len(v)},{pct(v, 99) * 1e3:.3f}\n")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
