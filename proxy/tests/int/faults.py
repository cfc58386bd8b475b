#!/usr/bin/env python3
"""Fault tests of sverbs-proxy (issue 17, part 1) over the TCP transport on 127.0.0.1.

usage: faults.py <test> <sverbs-proxy> <sverbs-compute>
       faults.py --list

Every test counts the answers: each request it sends must get exactly one HTTP response
(never none, never two).  A test that cannot run fails and says why.
"""
import atexit
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

TESTS = {}


def test(fn):
    TESTS[fn.__name__.replace("_", "-")] = fn
    return fn


class Failed(Exception):
    pass


FAILS = []


def check(cond, what):
    if cond:
        print(f"ok: {what}", flush=True)
    else:
        print(f"FAIL: {what}", flush=True)
        FAILS.append(what)
    return cond


def wait_for(cond, timeout=30.0):
    """Polls cond() until it is true or `timeout` s of wall-clock time have passed (however
    long each try takes on a loaded host) and returns its last value: the caller checks it,
    so a state that never comes fails loudly instead of a fixed sleep being too short."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v or time.time() >= deadline:
            return v
        time.sleep(0.05)


PORT_CLAIMS = "/tmp/sverbs-proxy-ports"
_claimed = []


def _release_ports():
    for d in _claimed:
        shutil.rmtree(d, ignore_errors=True)


def _claim(port):
    """An atomic mkdir claims the port against the other proxy tests that
    meson runs in parallel (run.sh claims its bases the same way); a claim
    whose owner process is gone is stale."""
    d = os.path.join(PORT_CLAIMS, "p%d" % port)
    os.makedirs(PORT_CLAIMS, exist_ok=True)
    try:
        os.mkdir(d)
    except FileExistsError:
        try:
            with open(os.path.join(d, "pid")) as f:
                os.kill(int(f.read()), 0)
            return False
        except (OSError, ValueError):
            shutil.rmtree(d, ignore_errors=True)
            try:
                os.mkdir(d)
            except FileExistsError:
                return False
    with open(os.path.join(d, "pid"), "w") as f:
        f.write(str(os.getpid()))
    if not _claimed:
        atexit.register(_release_ports)
    _claimed.append(d)
    return True


def free_port():
    """A free port below the kernel's ephemeral range (32768 up), which the
    outgoing connections of every test draw from: a port the kernel handed
    out with bind(0) and that was then released could be taken as a source
    port before the proxy binds it."""
    rnd = random.Random()
    for _ in range(500):
        port = rnd.randrange(12000, 20000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if _claim(port):
            return port
    raise RuntimeError("no free port in 12000-19999")


# ------------------------------------------------------------------ HTTP client that counts


class Answer:
    def __init__(self, status, headers, body, count, raw_headers=""):
        self.status, self.headers, self.body, self.count = status, headers, body, count
        self.raw_headers = raw_headers

    def __repr__(self):
        return f"<{self.count} answer(s), status {self.status}>"


def parse_responses(data, head=False):
    """Splits a byte stream into HTTP/1.1 responses; returns a list of (status, headers, body)."""
    out = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            out.append((-1, {}, data))  # garbage / partial
            break
        head_txt = data[:end].decode("latin-1")
        data = data[end + 4:]
        lines = head_txt.split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
        if not m:
            out.append((-1, {}, head_txt.encode()))
            break
        status = int(m.group(1))
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs.setdefault(k.strip().lower(), []).append(v.strip())
        if status == 100:
            continue
        n = 0
        if "content-length" in hdrs and not head and status not in (204, 304):
            n = int(hdrs["content-length"][0])
        elif "content-length" not in hdrs and not head and status not in (204, 304):
            n = len(data)  # read until close
        body, data = data[:n], data[n:]
        out.append((status, hdrs, body, head_txt))
    return out


def request(port, method="GET", path="/echo", body=b"", headers=None, timeout=20, version="1.1",
            host="127.0.0.1"):
    """One request on its own connection (Connection: close); reads until EOF and counts the
    responses.  Returns an Answer (count 0 when none came)."""
    hdrs = {"Host": "x", "Connection": "close"}
    if version == "1.0":
        hdrs = {}
    if headers is not None:
        hdrs.update(headers)
        hdrs = {k: v for k, v in hdrs.items() if v is not None}
    if body or method in ("POST", "PUT"):
        hdrs.setdefault("Content-Length", str(len(body)))
    req = f"{method} {path} HTTP/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    req = req.encode() + b"\r\n" + body
    data = b""
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        return Answer(0, {}, str(e).encode(), 0)
    try:
        s.sendall(req)
        s.settimeout(timeout)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        s.close()
    rs = parse_responses(data, head=(method == "HEAD"))
    if not rs:
        return Answer(0, {}, b"", 0)
    st, h, b = rs[0][0], rs[0][1], rs[0][2]
    raw = rs[0][3] if len(rs[0]) > 3 else ""
    return Answer(st, h, b, len(rs), raw)


def parallel(fn, args_list):
    res = [None] * len(args_list)

    def run(i, a):
        res[i] = fn(*a)

    ts = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(args_list)]
    for t in ts:
        t.start()
    return ts, res


def answer_of(s):
    """Reads an open connection until the peer closes it (or its timeout), closes it, and
    counts the responses it carried."""
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    s.close()
    rs = parse_responses(data)
    return Answer(rs[0][0] if rs else 0, {}, b"", len(rs))


def status_counts(answers):
    codes = {}
    for a in answers:
        codes[a.status] = codes.get(a.status, 0) + 1
    return codes


def exactly_once(answers, what):
    counts = [a.count for a in answers]
    bad = [c for c in counts if c != 1]
    return check(not bad, f"{what}: {len(answers)} requests, every one answered exactly once"
                 + (f" (answers per request: {counts})" if bad else ""))


# ------------------------------------------------------------------ processes


class Stack:
    def __init__(self, proxy, compute, name):
        self.proxy, self.compute = proxy, compute
        self.dir = tempfile.mkdtemp(prefix=f"sverbs-fault-{name}.")
        self.p_in, self.p_eg, self.p_met, self.p_svc, self.p_imet = (free_port() for _ in range(5))
        self.procs = {}
        self.ingress_extra, self.egress_extra, self.channel_extra = "", "", ""
        self.upstreams = None
        self.hosts = None
        self.ingress_metrics = False

    def config(self):
        hosts = self.hosts or f"""
[[ingress.egress]]
name = "local"
address = "127.0.0.1:{self.p_eg}"
connections = 1
"""
        ups = self.upstreams or f"""
[[upstream]]
name = "compute"
class = "latency"
slo_p99_ms = 5000
service = "127.0.0.1:{self.p_svc}"
pool = 2
service_timeout_ms = 3000
service_connect_timeout_ms = 500

[[route]]
prefix = "/echo"
upstream = "compute"

[[route]]
prefix = "/healthz"
upstream = "compute"

[[route]]
prefix = "/matmul"
upstream = "compute"
"""
        imet = f'metrics_listen = "127.0.0.1:{self.p_imet}"\n' if self.ingress_metrics else ""
        return f"""log_level = "info"

[channel]
transport = "tcp"
credits = 16
reconnect_min_ms = 20
reconnect_max_ms = 200
heartbeat_ms = 300
{self.channel_extra}

[ingress]
listen = "127.0.0.1:{self.p_in}"
workers = 1
request_timeout_ms = 8000
{imet}{self.ingress_extra}
{hosts}
[egress]
listen = "127.0.0.1:{self.p_eg}"
workers = 1
metrics_listen = "127.0.0.1:{self.p_met}"
{self.egress_extra}
{ups}
"""

    def write(self):
        self.cfg = os.path.join(self.dir, "proxy.toml")
        with open(self.cfg, "w") as f:
            f.write(self.config())

    def start(self, what, argv, env=None, preexec=None):
        log = open(os.path.join(self.dir, f"{what}.log"), "ab")
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=e,
                             preexec_fn=preexec)
        self.procs[what] = p
        return p

    def start_compute(self):
        return self.start("compute", [self.compute, "-l", f"127.0.0.1:{self.p_svc}", "-w", "1"])

    def start_egress(self, **kw):
        return self.start("egress", [self.proxy, "-c", self.cfg, "--role", "egress"], **kw)

    def start_ingress(self, argv_prefix=(), **kw):
        return self.start("ingress", list(argv_prefix) + [self.proxy, "-c", self.cfg, "--role",
                                                          "ingress"], **kw)

    def up(self, compute=True, **kw):
        self.write()
        if compute:
            self.start_compute()
        self.start_egress()
        self.start_ingress(**kw)
        return self.wait_200()

    def wait_200(self, path="/healthz", tries=150):
        for _ in range(tries):
            a = request(self.p_in, "GET", path, timeout=5)
            if a.status == 200:
                return True
            time.sleep(0.1)
        return False

    def egress_metric(self, name):
        try:
            a = request(self.p_met, "GET", "/metrics", timeout=5)
        except OSError:
            return None
        for ln in a.body.decode(errors="replace").splitlines():
            if ln.startswith(name):
                return float(ln.split()[-1])
        return None

    def rss_kib(self, what):
        with open(f"/proc/{self.procs[what].pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
        return 0

    def cpu_s(self, what):
        with open(f"/proc/{self.procs[what].pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def busy_s(self, what):
        """Seconds the process's threads ran or waited to run (runnable): a busy loop is
        runnable all the time even when a loaded host gives it little CPU."""
        pid = self.procs[what].pid
        t = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run, wait, _ = f.read().split()
                t += int(run) + int(wait)
            except OSError:
                pass
        return t / 1e9

    def wait_exit(self, what, timeout=15):
        try:
            return self.procs[what].wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                except ProcessLookupError:
                    pass
                p.wait()

    def dump(self):
        for f in sorted(os.listdir(self.dir)):
            if f.endswith(".log"):
                print(f"---- {f}")
                with open(os.path.join(self.dir, f), errors="replace") as fh:
                    print("".join(fh.readlines()[-25:]))


def refused(port, timeout=2.0):
    """True when a connection to 127.0.0.1:port is refused (nothing listens)."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.connect(("127.0.0.1", port))
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    # Connected: something accepted it (or it sits in a listen backlog).
    s.close()
    return False


# ------------------------------------------------------------------ a scriptable fake service


class FakeService:
    """HTTP/1.1 service on 127.0.0.1 run by the test: records every request it reads, answers
    by a per-path rule.  rule(path, req, conn_no, req_no_on_conn) -> bytes to send or None to
    close the connection without answering."""

    def __init__(self, rule):
        self.rule = rule
        self.log = []  # (conn_no, method, path, headers dict lower->list, body)
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.conns = 0
        self.socks = {}  # conn_no -> its socket (a test may write to an idle connection)
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            threading.Thread(target=self.serve, args=(c, self.conns), daemon=True).start()

    def serve(self, c, cno):
        self.socks[cno] = c
        buf = b""
        n = 0
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdrs = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    hdrs.setdefault(k.strip().lower(), []).append(v.strip())
                ln = int(hdrs.get("content-length", ["0"])[0])
                while len(buf) < ln:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                body, buf = buf[:ln], buf[ln:]
                n += 1
                with self.lock:
                    self.log.append((cno, method, path, hdrs, body, lines))
                out = self.rule(method, path, hdrs, body, cno, n)
                if out is DIE_AFTER_READING:
                    # A service that read (and executed) what was pipelined behind, then died.
                    c.settimeout(0.5)
                    try:
                        while True:
                            d = c.recv(65536)
                            if not d:
                                break
                            buf += d
                    except OSError:
                        pass
                    while b"\r\n\r\n" in buf:
                        head, rest = buf.split(b"\r\n\r\n", 1)
                        lines = head.decode("latin-1").split("\r\n")
                        m2, p2, _ = lines[0].split(" ", 2)
                        h2 = {}
                        for ln in lines[1:]:
                            k, _, v = ln.partition(":")
                            h2.setdefault(k.strip().lower(), []).append(v.strip())
                        ln2 = int(h2.get("content-length", ["0"])[0])
                        if len(rest) < ln2:
                            break
                        with self.lock:
                            self.log.append((cno, m2, p2, h2, rest[:ln2], lines))
                        buf = rest[ln2:]
                    c.shutdown(socket.SHUT_RDWR)
                    return
                if out is None:
                    c.shutdown(socket.SHUT_RDWR)
                    return
                c.sendall(out)
        except OSError:
            return
        finally:
            c.close()

    def count(self, method, path):
        with self.lock:
            return sum(1 for e in self.log if e[1] == method and e[2] == path)


DIE_AFTER_READING = object()


def ok_response(body=b"ok\n", extra=""):
    return (f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def fake_upstream(port, prefix="/f", pool=1, pipeline=1):
    return f"""
[[upstream]]
name = "fake"
slo_p99_ms = 5000
service = "127.0.0.1:{port}"
pool = {pool}
pipeline = {pipeline}
service_timeout_ms = 3000
service_connect_timeout_ms = 500

[[route]]
prefix = "{prefix}"
upstream = "fake"

[[route]]
prefix = "/healthz"
upstream = "fake"
"""


# ------------------------------------------------------------------ the tests


@test
def drain_refuses_new(st):
    """1. After SIGTERM the listeners (client, channel, egress metrics) refuse new connections
    at once, and every request already accepted still gets its answer."""
    if not check(st.up(), "stack answers 200"):
        return
    os.kill(st.procs["compute"].pid, signal.SIGSTOP)
    ts, res = parallel(request, [(st.p_in, "POST", "/echo", f"held-{i}".encode()) for i in range(6)])
    check(wait_for(lambda: st.egress_metric('sverbs_proxy_inflight_requests{role="egress"}') == 6),
          "6 requests held at the stopped service")
    os.kill(st.procs["ingress"].pid, signal.SIGTERM)
    os.kill(st.procs["egress"].pid, signal.SIGTERM)
    # The held requests keep both processes alive (draining) until the service resumes.
    check(wait_for(lambda: refused(st.p_in)),
          "ingress client port refuses new connections while draining")
    check(wait_for(lambda: refused(st.p_eg)),
          "egress channel port refuses new connections while draining")
    check(wait_for(lambda: refused(st.p_met)),
          "egress metrics port refuses new connections while draining")
    check(st.procs["ingress"].poll() is None and st.procs["egress"].poll() is None,
          "ingress and egress still draining with requests held")
    os.kill(st.procs["compute"].pid, signal.SIGCONT)
    for t in ts:
        t.join()
    exactly_once(res, "held requests")
    check(all(a.status == 200 and a.body == f"held-{i}".encode() for i, a in enumerate(res)),
          f"held requests answered 200 with their bodies: {[a.status for a in res]}")
    check(st.wait_exit("ingress") == 0, "ingress exits 0")
    check(st.wait_exit("egress") == 0, "egress exits 0")


@test
def reload_during_drain(st):
    """2. SIGHUP while the workers shut down (the window widened by a test hook) must not touch
    a destroyed worker."""
    env = {"SVERBS_PROXY_TEST_EXIT_DELAY_MS": "400"}
    st.write()
    st.start_compute()
    st.start_egress(env=env)
    st.start_ingress(env=env)
    if not check(st.wait_200(), "stack answers 200"):
        return
    for what in ("ingress", "egress"):
        p = st.procs[what]
        p.send_signal(signal.SIGTERM)
        t0 = time.time()
        while p.poll() is None and time.time() - t0 < 10:
            try:
                p.send_signal(signal.SIGHUP)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        rc = st.wait_exit(what)
        check(rc == 0, f"{what}: SIGHUP storm during drain, exit code {rc}")


@test
def reload_channel(st):
    """2b. A reload that changes [channel] is refused as a whole (the channels keep the
    settings they started with, so half of it would apply): the running configuration stays,
    a body over the old limit gets 413, not a 502 from a frame the peer refuses."""
    st.channel_extra = "max_frame_bytes = 1048576\n"
    st.ingress_extra = "max_body_bytes = 524288\n"
    if not check(st.up(), "stack answers 200"):
        return
    st.channel_extra = "max_frame_bytes = 4194304\n"
    st.ingress_extra = "max_body_bytes = 2097152\n"
    st.write()
    logs = {w: os.path.join(st.dir, f"{w}.log") for w in ("ingress", "egress")}
    for what in ("ingress", "egress"):
        st.procs[what].send_signal(signal.SIGHUP)

    def refused_in(what):
        with open(logs[what], "rb") as f:
            return b"[channel] changes only on restart" in f.read()

    for what in ("ingress", "egress"):
        check(wait_for(lambda: refused_in(what), timeout=10),
              f"{what}: the reload is refused, [channel] named")
    a = request(st.p_in, "POST", "/echo", b"z" * 1500000)
    check(a.count == 1 and a.status == 413,
          f"a body over the running limit: 413 (got {a.count} answer(s), {a.status})")
    a = request(st.p_in, "POST", "/echo", b"small")
    check(a.count == 1 and a.status == 200 and a.body == b"small",
          f"a request after it: 200 (got {a.status})")


@test
def egress_emfile(st):
    """3. socket() failing with EMFILE at the egress answers 502 once, and the pool slot is
    given back: once descriptors are free again the upstream answers 200 (not 504 forever)."""
    st.channel_extra = "connect_timeout_ms = 60000\n"
    st.write()
    st.start_compute()
    lim = 48
    st.start_egress(preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (lim, lim)))
    st.start_ingress()
    if not check(wait_for(lambda: (st.egress_metric("sverbs_proxy_channel_up") or 0) >= 1),
                 "channel up"):
        return
    pid = st.procs["egress"].pid
    hogs = []
    # Take every free descriptor of the egress with idle channel connections.
    for _ in range(200):
        if len(os.listdir(f"/proc/{pid}/fd")) >= lim:
            break
        hogs.append(socket.create_connection(("127.0.0.1", st.p_eg)))
        time.sleep(0.01)

    def nfd():
        return len(os.listdir(f"/proc/{pid}/fd"))

    wait_for(lambda: nfd() >= lim, 10)
    n = nfd()
    check(n >= lim, f"egress holds {n} of {lim} descriptors")
    res = [request(st.p_in, "POST", "/echo", b"emfile", timeout=15) for _ in range(3)]
    exactly_once(res, "requests while the egress has no descriptor")
    check(all(a.status in (502, 503) for a in res), f"answered 502: {[a.status for a in res]}")
    for h in hogs:
        h.close()
    check(wait_for(lambda: nfd() < lim - 8), f"egress closed the idle connections ({nfd()} fds)")
    res = [request(st.p_in, "POST", "/echo", b"again", timeout=15) for _ in range(4)]
    exactly_once(res, "requests after descriptors are free")
    check(all(a.status == 200 for a in res), f"answered 200 again: {[a.status for a in res]}")


@test
def accept_emfile(st):
    """7. With RLIMIT_NOFILE exhausted the ingress does not spin on accept, it serves again once
    descriptors are free, and it raises its soft limit to the hard limit at start."""
    lim = 40
    st.write()
    st.start_compute()
    st.start_egress()
    st.start_ingress(preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (lim, lim)))
    if not check(st.wait_200(), "stack answers 200"):
        return
    pid = st.procs["ingress"].pid
    conns = [socket.create_connection(("127.0.0.1", st.p_in)) for _ in range(lim + 20)]
    time.sleep(0.5)
    c0, b0, t0 = st.cpu_s("ingress"), st.busy_s("ingress"), time.time()
    time.sleep(2.0)
    used = st.cpu_s("ingress") - c0
    busy = st.busy_s("ingress") - b0
    wall = time.time() - t0
    print(f"ingress while out of descriptors: {used:.2f} CPU-s, runnable {busy:.2f} s in "
          f"{wall:.2f} s", flush=True)
    # A busy loop is runnable all the time (however little CPU a loaded host gives it); a
    # paused acceptor sleeps between its timers.
    check(busy < 0.9 * wall and used < 0.25 * wall,
          f"no accept busy loop (runnable {busy:.2f} s, CPU {used:.2f} s, of {wall:.2f} s)")
    for c in conns:
        c.close()
    time.sleep(0.3)
    check(st.wait_200(tries=50), "serves again once descriptors are free")
    st.stop()
    # Soft limit raised to the hard one.
    st.procs = {}
    st.p_in = free_port()
    st.write()
    st.start_compute()
    st.start_egress()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft = min(256, hard)
    st.start_ingress(preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    st.wait_200()
    got = None
    with open(f"/proc/{st.procs['ingress'].pid}/limits") as f:
        for ln in f:
            if ln.startswith("Max open files"):
                got = ln.split()[3:5]
    check(got and got[0] == got[1], f"RLIMIT_NOFILE soft raised to hard at start: {got}")


@test
def no_resend_non_idempotent(st):
    """5. A POST that may have reached the service (the connection dies after it was written) is
    answered 502, never executed twice; a GET may be retried; a request behind a
    `Connection: close` answer (provably not processed) is re-sent."""

    def rule(method, path, hdrs, body, cno, n):
        if path == "/f/warm":
            return ok_response()
        if path.startswith("/f/die") and cno <= 2 and n >= 2:
            return None  # read it (maybe executed), then the connection dies
        if path == "/f/closeafter":
            return ok_response(b"last\n", "Connection: close\r\n")
        return ok_response(body or b"ok\n")

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port, pool=1, pipeline=1)
    if not check(st.up(compute=False), "stack answers 200"):
        return
    a = request(st.p_in, "GET", "/f/warm")
    check(a.status == 200, "keep-alive service connection warmed")
    a = request(st.p_in, "POST", "/f/die-post", b"pay once")
    exactly_once([a], "POST whose connection died")
    check(a.status == 502, f"POST answered 502 (got {a.status})")
    check(fake.count("POST", "/f/die-post") == 1,
          f"POST executed once by the service (seen {fake.count('POST', '/f/die-post')} times)")
    # GET is idempotent: a retry on a fresh connection is allowed and answers 200.
    a = request(st.p_in, "GET", "/f/warm")
    a = request(st.p_in, "GET", "/f/die-get")
    exactly_once([a], "GET whose connection died")
    check(a.status == 200 and fake.count("GET", "/f/die-get") == 2,
          f"GET retried once: status {a.status}, seen {fake.count('GET', '/f/die-get')} times")


@test
def idle_closing_not_reused(st):
    """5. A request is never written to a service connection the egress has begun to close:
    an idle keep-alive connection that gets bytes nobody asked for (here a 408, as some
    services send before closing an idle connection) is closed; a POST that arrives before
    that close has finished goes to a fresh connection and is answered 200, not 502."""

    def rule(method, path, hdrs, body, cno, n):
        return ok_response(body or b"ok\n")

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port, pool=1, pipeline=1)
    if not check(st.up(compute=False), "stack answers 200"):
        return
    a = request(st.p_in, "GET", "/f/warm")
    check(a.status == 200 and fake.conns == 1, f"one keep-alive service connection ({fake.conns})")
    # The egress stops; the service's bytes and the POST's frame both wait for it, and it
    # reads them in that order in one turn of its loop when it goes on.
    os.kill(st.procs["egress"].pid, signal.SIGSTOP)
    try:
        fake.socks[1].sendall(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        time.sleep(0.3)
        ts, res = parallel(request, [(st.p_in, "POST", "/f/once", b"pay once")])
        time.sleep(0.5)  # the ingress has written the POST's frame to the channel
    finally:
        os.kill(st.procs["egress"].pid, signal.SIGCONT)
    for t in ts:
        t.join()
    exactly_once(res, "POST behind a closing idle connection")
    check(res[0].status == 200, f"POST answered 200 on a fresh connection (got {res[0].status})")
    check(fake.count("POST", "/f/once") == 1,
          f"POST executed once (seen {fake.count('POST', '/f/once')} times)")


@test
def no_resend_pipelined(st):
    """5. Pipelined POSTs behind one whose connection died are not re-sent (502)."""
    gate = threading.Event()

    def rule(method, path, hdrs, body, cno, n):
        if path == "/f/slow" and cno == 1:
            gate.wait(5)
            return DIE_AFTER_READING  # dies with the POSTs behind it read (executed)
        return ok_response(body or b"ok\n")

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port, pool=1, pipeline=8)
    if not check(st.up(compute=False), "stack answers 200"):
        return
    ts, res = parallel(request, [(st.p_in, "GET", "/f/slow")])
    check(wait_for(lambda: fake.count("GET", "/f/slow") >= 1), "the slow GET reached the service")
    ts2, res2 = parallel(request, [(st.p_in, "POST", f"/f/p{i}", b"x") for i in range(4)])
    check(wait_for(lambda: st.egress_metric('sverbs_proxy_inflight_requests{role="egress"}') == 5),
          "the 4 POSTs are at the egress behind the slow GET")
    time.sleep(0.3)  # and written behind it (not observable; a later write only tests less)
    gate.set()
    for t in ts + ts2:
        t.join()
    res = res + res2
    exactly_once(res, "pipelined requests on a dying connection")
    posts = [fake.count("POST", f"/f/p{i}") for i in range(4)]
    check(all(c <= 1 for c in posts), f"no POST executed twice (service saw {posts})")
    check(all(a.status == 502 for a, c in zip(res[1:], posts) if c == 1),
          f"POSTs that reached the service answered 502: {[a.status for a in res[1:]]}")


@test
def http_correctness(st):
    """9. Host matched case-insensitively and exactly, hop-by-hop headers (and those Connection
    names) stripped both ways, no Content-Length on 204/304, /metrics only on its listener."""

    def rule(method, path, hdrs, body, cno, n):
        if path == "/f/204":
            return b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"
        if path == "/f/304":
            return b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"
        if path == "/f/hop":
            return ok_response(b"hop\n", "Connection: X-Resp-Hop\r\nX-Resp-Hop: 1\r\n"
                               "Keep-Alive: timeout=5\r\n")
        return ok_response(json.dumps(hdrs).encode())

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port)
    st.ingress_metrics = True
    if not check(st.up(compute=False), "stack answers 200"):
        return
    a = request(st.p_in, "GET", "/f/h", version="1.0", headers={"X-Forwarded-Host": "fwd"})
    h = json.loads(a.body or b"{}")
    check(a.count == 1 and h.get("host"), f"no Host from the client: the service gets one ({h})")
    a = request(st.p_in, "GET", "/f/h", headers={"Host": None, "HOST": "upper.example"})
    h = json.loads(a.body or b"{}")
    check(h.get("host") == ["upper.example"], f"HOST: forwarded once, not doubled ({h.get('host')})")
    a = request(st.p_in, "GET", "/f/h", headers={"Connection": "close, X-Hop", "X-Hop": "secret",
                                                  "TE": "trailers", "Upgrade": "h2c",
                                                  "Keep-Alive": "timeout=5", "X-Keep": "1"})
    h = json.loads(a.body or b"{}")
    check("x-hop" not in h and "te" not in h and "upgrade" not in h and "keep-alive" not in h
          and h.get("x-keep") == ["1"], f"request hop-by-hop headers stripped ({sorted(h)})")
    a = request(st.p_in, "GET", "/f/hop")
    check(a.count == 1 and "x-resp-hop" not in a.headers and "keep-alive" not in a.headers,
          f"response hop-by-hop headers stripped ({sorted(a.headers)})")
    for code in (204, 304):
        a = request(st.p_in, "GET", f"/f/{code}")
        check(a.count == 1 and a.status == code and "content-length" not in a.headers,
              f"{code} without Content-Length ({a.raw_headers!r})")
    a = request(st.p_in, "GET", "/metrics")
    check(a.count == 1 and b"sverbs_proxy_" not in a.body,
          f"/metrics not served on the client port (status {a.status})")
    a = request(st.p_imet, "GET", "/metrics")
    check(a.status == 200 and b"sverbs_proxy_requests_total" in a.body,
          "/metrics served on the ingress metrics_listen")
    # A malformed request after a HEAD on the same connection: its 400 carries the body its
    # Content-Length announces (before, the HEAD's flag stayed set: the body was left out, and
    # a client read a truncated answer).
    with socket.create_connection(("127.0.0.1", st.p_in), timeout=10) as s:
        s.sendall(b"HEAD /f/h HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        first = parse_responses(got, head=True)
        check(len(first) == 1 and first[0][0] == 200, f"HEAD answered 200 ({first})")
        s.sendall(b"GARBAGE\r\n\r\n")
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    end = got.find(b"\r\n\r\n")
    m = re.search(rb"(?i)content-length: *(\d+)", got[:end]) if end >= 0 else None
    body = got[end + 4:] if end >= 0 else b""
    check(got.startswith(b"HTTP/1.1 400") and m and int(m.group(1)) == len(body) > 0,
          f"a 400 after a HEAD carries its body ({got!r})")


@test
def pipeline_unread_bound(st):
    """9. A client that pipelines requests and does not read its answers: the ingress takes
    its next request only while the answers waiting to go out fit in connection_buffer_bytes,
    so what it buffers stays bounded (before: it went on answering every pipelined request
    into memory until send_timeout_ms).  Once the client reads, every request is answered,
    in order, exactly once."""
    big = b"y" * (32 * 1024)  # (under malloc's mmap threshold: meson's MALLOC_PERTURB_)

    def rule(method, path, hdrs, body, cno, n):
        return ok_response(big)

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port, pool=2, pipeline=1)
    # (a request waiting for the answers before it is not a slow client: client_timeout_ms
    # runs out while the client does not read, and must not answer it 408)
    st.ingress_extra = ("connection_buffer_bytes = \"256KiB\"\nsend_timeout_ms = 60000\n"
                        "client_timeout_ms = 1000\n")
    if not check(st.up(compute=False), "stack answers 200"):
        return
    n = 600
    base = fake.count("GET", "/f/big")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", st.p_in))
    with s:
        s.sendall(b"".join(b"GET /f/big HTTP/1.1\r\nHost: x\r\n\r\n" for _ in range(n)))
        t0 = time.monotonic()
        # until the service has seen no new request for a second (every one, before the fix)
        last, still = -1, 0
        while still < 5 and fake.count("GET", "/f/big") - base < n:
            c = fake.count("GET", "/f/big") - base
            still = still + 1 if c == last else 0
            last = c
            time.sleep(0.2)
        seen = fake.count("GET", "/f/big") - base
        time.sleep(max(0.0, t0 + 2.5 - time.monotonic()))  # past client_timeout_ms
        # 256 KiB of answers waiting, the one being answered, and what the sockets hold (the
        # sender's buffer grows up to tcp_wmem's maximum; the receiver's was set small)
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            wmem = int(f.read().split()[2])
        bound = (256 * 1024 + wmem + 64 * 1024) // len(big) + 2
        check(0 < seen <= bound < n,
              f"requests taken while the client does not read: {seen} of {n} (bound {bound})")
        # streamed: a head, then its body checked as it comes (no copy of 37 MB)
        head, body_left, body_ok, answers = b"", 0, True, []
        buf = bytearray(1 << 16)  # one buffer: a fresh one per recv costs a lot under
        while len(answers) < n or body_left:  # MALLOC_PERTURB_ (the socket gives ~4 KB)
            got = s.recv_into(buf)
            if not got:
                break
            chunk = bytes(buf[:got])
            while chunk:
                if body_left:
                    part, chunk = chunk[:body_left], chunk[body_left:]
                    body_ok = body_ok and part.count(b"y") == len(part)
                    body_left -= len(part)
                    if not body_left:
                        answers[-1] = (answers[-1][0], body_ok)
                    continue
                head += chunk
                chunk = b""
                end = head.find(b"\r\n\r\n")
                if end < 0:
                    break
                m = re.search(rb"(?i)content-length: *(\d+)", head[:end])
                body_left = int(m.group(1)) if m else 0
                ok_len = body_left == len(big)
                answers.append((head[:12], False))
                body_ok = ok_len
                head, chunk = b"", head[end + 4:]
    ok = sum(1 for h, b in answers if h == b"HTTP/1.1 200" and b)
    check(len(answers) == n and ok == n, f"every pipelined request answered 200 once: {ok} of "
          f"{len(answers)} answers, {n} requests")
    check(fake.count("GET", "/f/big") - base == n, "the service saw each request once")


@test
def small_frame(st):
    """9b. A [channel] max_frame_bytes under 128 KiB (64 KiB here): a service's answer too big
    for one frame gets 502 on its own, and the channel stays up, so a request in flight beside
    it still gets its 200."""

    def rule(method, path, hdrs, body, cno, n):
        if path == "/f/slow":
            time.sleep(1.5)
            return ok_response(b"slow\n")
        if path == "/f/big":
            return ok_response(b"x" * 100000)
        return ok_response()

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port, pool=2)
    st.channel_extra = "max_frame_bytes = 65536\n"
    st.ingress_extra = "max_body_bytes = 32768\nmax_header_bytes = 8192\n"
    if not check(st.up(compute=False), "stack answers 200"):
        return
    ts, res = parallel(request, [(st.p_in, "GET", "/f/slow")])
    check(wait_for(lambda: fake.count("GET", "/f/slow") == 1), "the slow request reached the service")
    big = request(st.p_in, "GET", "/f/big")
    for t in ts:
        t.join()
    exactly_once(res + [big], "slow and big requests")
    check(big.status == 502, f"the answer too big for a frame: 502 (got {big.status})")
    check(res[0].status == 200 and res[0].body == b"slow\n",
          f"the request in flight beside it: 200, the channel stayed up (got {res[0].status})")
    a = request(st.p_in, "GET", "/f/x")
    check(a.count == 1 and a.status == 200, f"a request after it: 200 (got {a.status})")


DNS_DELAY = 2.0


def fake_dns(sock, names):
    """Answers A queries for `names` with 127.0.0.1 after DNS_DELAY, everything else NXDOMAIN
    after DNS_DELAY: a slow resolver."""

    def reply(data, addr):
        time.sleep(DNS_DELAY)
        qid, flags, qd = struct.unpack(">HHH", data[:6])
        i = 12
        labels = []
        while data[i]:
            labels.append(data[i + 1:i + 1 + data[i]].decode())
            i += data[i] + 1
        qtype = struct.unpack(">H", data[i + 1:i + 3])[0]
        q = data[12:i + 5]
        name = ".".join(labels).lower()
        if name in names and qtype == 1:
            ans = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 5, 4) + socket.inet_aton("127.0.0.1")
            hdr = struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0)
            out = hdr + q + ans
        elif name in names:
            out = struct.pack(">HHHHHH", qid, 0x8180, 1, 0, 0, 0) + q
        else:
            out = struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + q
        try:
            sock.sendto(out, addr)
        except OSError:
            pass

    while True:
        try:
            data, addr = sock.recvfrom(512)
        except OSError:
            return
        threading.Thread(target=reply, args=(data, addr), daemon=True).start()


@test
def no_blocking_resolve(st):
    """8. A host name is never resolved on the event loop: with a slow resolver (a fake DNS
    server on 127.0.0.1:53, seen through a private mount of /etc/resolv.conf) and an egress
    host by name that keeps failing, requests through another egress stay fast."""
    if os.geteuid() != 0:
        check(False, "needs root for unshare -m (private /etc/resolv.conf)")
        return
    try:
        dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dns.bind(("127.0.0.1", 53))
    except OSError as e:
        check(False, f"cannot bind the fake DNS server to 127.0.0.1:53: {e}")
        return
    threading.Thread(target=fake_dns, args=(dns, {"slow.sverbs.test"}), daemon=True).start()
    dead = free_port()
    st.hosts = f"""
[[ingress.egress]]
name = "local"
address = "127.0.0.1:{st.p_eg}"

[[ingress.egress]]
name = "slow"
address = "slow.sverbs.test:{dead}"
"""
    st.upstreams = f"""
[[upstream]]
name = "compute"
egress = ["local"]
slo_p99_ms = 5000
service = "127.0.0.1:{st.p_svc}"

[[upstream]]
name = "other"
egress = ["slow"]

[[route]]
prefix = "/echo"
upstream = "compute"

[[route]]
prefix = "/healthz"
upstream = "compute"
"""
    rc = os.path.join(st.dir, "resolv.conf")
    with open(rc, "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:5 attempts:1\n")
    st.write()
    st.start_compute()
    st.start_egress()
    st.start_ingress(argv_prefix=["unshare", "-m", "sh", "-c",
                                  f'mount --bind "{rc}" /etc/resolv.conf && exec "$0" "$@"'])
    if not check(st.wait_200(tries=300), "stack answers 200"):
        return
    lat = []
    t_end = time.time() + 4 * DNS_DELAY
    while time.time() < t_end:
        t0 = time.time()
        a = request(st.p_in, "POST", "/echo", b"quick", timeout=30)
        lat.append((time.time() - t0, a.count, a.status))
    worst = max(x[0] for x in lat)
    exactly_once([Answer(s, {}, b"", c) for _, c, s in lat], "requests while a name keeps failing")
    print(f"{len(lat)} requests, slowest {worst * 1000:.0f} ms", flush=True)
    check(worst < DNS_DELAY / 2, f"no request waited on the resolver (slowest {worst:.2f} s, "
          f"resolver delay {DNS_DELAY} s)")


@test
def memory_bound(st):
    """6. Memory is bounded per connection and in total: 10,000 idle and 1,000 slow (slowloris)
    connections; RSS of the ingress reported; every slow request answered exactly once."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 12000:
        check(False, f"needs RLIMIT_NOFILE >= 12000 for 10,000 connections (hard limit {hard})")
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    st.ingress_extra = ("max_connections = 20000\nmax_body_bytes = 65536\nclient_timeout_ms = 6000\n"
                        "idle_timeout_ms = 60000\nconnection_buffer_bytes = \"64KiB\"\n"
                        "memory_limit_bytes = \"8MiB\"\n")
    if not check(st.up(), "stack answers 200"):
        return
    base = st.rss_kib("ingress")
    idle = []
    for i in range(10000):
        idle.append(socket.create_connection(("127.0.0.1", st.p_in)))
    time.sleep(2.0)
    r_idle = st.rss_kib("ingress")
    per = (r_idle - base) * 1024 / 10000
    print(f"RSS ingress: {base} KiB at start, {r_idle} KiB with 10,000 idle connections "
          f"({per:.0f} B each)", flush=True)
    check(per < 16384, f"an idle connection costs {per:.0f} B (< 16 KiB)")
    for s in idle:
        s.close()
    time.sleep(1.0)
    base2 = st.rss_kib("ingress")
    slow = []
    chunk = b"a" * 40000
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", st.p_in))
        s.setblocking(False)
        try:
            s.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n" + chunk)
        except BlockingIOError:
            pass
        slow.append(s)
    time.sleep(2.0)
    r_slow = st.rss_kib("ingress")
    grow = (r_slow - base2) / 1024
    print(f"RSS ingress: {base2} KiB before, {r_slow} KiB with 1,000 slow requests holding 40 KB "
          f"each ({grow:.1f} MiB more; memory_limit_bytes = 8 MiB)", flush=True)
    check(grow < 8 + 16, f"RSS bounded by memory_limit_bytes (+{grow:.1f} MiB)")
    # Every slow request gets exactly one answer (503 when shed, 408 at client_timeout).
    answers = []
    deadline = time.time() + 30
    for s in slow:
        s.setblocking(True)
        s.settimeout(max(0.1, deadline - time.time()))
        answers.append(answer_of(s))
    exactly_once(answers, "slow requests")
    codes = status_counts(answers)
    print(f"slow requests answered: {codes}", flush=True)
    check(st.wait_200(), "still serves after the slow clients")


@test
def memory_shed_once(st):
    """6b. Over memory_limit_bytes, only a connection with a request under way is shed (503):
    a request the ingress has just answered itself (404 no route, 400 malformed) gets that one
    answer, never a 503 after it.  90 slow POSTs hold 16,000-byte bodies: 1.4 MB, over the
    1 MiB limit (those past it are shed, each with its one 503)."""
    st.ingress_extra = ("max_connections = 1000\nmax_body_bytes = 65536\n"
                        "client_timeout_ms = 20000\nmemory_limit_bytes = \"1MiB\"\n")
    if not check(st.up(), "stack answers 200"):
        return
    slow = []
    part = b"a" * 8000
    for i in range(90):
        s = socket.create_connection(("127.0.0.1", st.p_in))
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  b"Content-Length: 16000\r\n\r\n" + part)
        slow.append(s)
    time.sleep(1.0)
    a = request(st.p_in, "GET", "/nope")
    check(a.count == 1 and a.status == 404,
          f"no route: one answer, 404 ({a.count} answer(s), first {a.status})")
    a = request(st.p_in, "GET", "/echo", headers={"Bad header line": None, "X": "y\r\nbad"})
    check(a.count == 1 and a.status == 400,
          f"malformed: one answer, 400 ({a.count} answer(s), first {a.status})")
    # The slow POSTs finish: every one gets exactly one answer (200, or its 503 if shed).
    for s in slow:
        try:
            s.sendall(part)
        except OSError:
            pass
    answers = []
    for s in slow:
        s.settimeout(10)
        answers.append(answer_of(s))
    exactly_once(answers, "slow POSTs")
    codes = status_counts(answers)
    print(f"slow POSTs answered: {codes}", flush=True)
    check(codes.get(503, 0) > 0, "some slow POSTs were shed (the limit was reached)")
    check(st.wait_200(), "still serves after the slow clients")


def notify_listener(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    msgs = []

    def loop():
        while True:
            try:
                d = s.recv(4096)
            except OSError:
                return
            msgs.append(d.decode())

    threading.Thread(target=loop, daemon=True).start()
    return s, msgs


@test
def systemd_notify(st):
    """10. sd_notify READY/RELOADING/STOPPING, and socket activation (the listening socket
    passed by systemd-socket-activate; the unit files in proxy/systemd)."""
    sock_path = os.path.join(st.dir, "notify.sock")
    _, msgs = notify_listener(sock_path)
    st.write()
    st.start_compute()
    st.start_egress()
    act = "systemd-socket-activate"
    if subprocess.call(["sh", "-c", f"command -v {act} >/dev/null"]) != 0:
        check(False, f"{act} is not installed (Debian package systemd)")
        return
    st.start_ingress(argv_prefix=[act, "-l", f"127.0.0.1:{st.p_in}", "-E", "NOTIFY_SOCKET"],
                     env={"NOTIFY_SOCKET": sock_path})
    ok = st.wait_200()
    check(ok, "ingress serves on the socket systemd-socket-activate passed")
    check(wait_for(lambda: any("READY=1" in m for m in msgs)), f"READY=1 sent: {msgs}")
    log = open(os.path.join(st.dir, "ingress.log"), errors="replace").read()
    check("socket activation" in log, "ingress logs that it uses the passed socket")
    n = len(msgs)
    st.procs["ingress"].send_signal(signal.SIGHUP)
    wait_for(lambda: any("RELOADING=1" in m for m in msgs[n:])
             and any("READY=1" in m for m in msgs[n:]))
    check(any("RELOADING=1" in m for m in msgs[n:]), f"RELOADING=1 on SIGHUP: {msgs[n:]}")
    check(any("READY=1" in m for m in msgs[n:]), "READY=1 after the reload")
    st.procs["ingress"].send_signal(signal.SIGTERM)
    rc = st.wait_exit("ingress")
    check(wait_for(lambda: any("STOPPING=1" in m for m in msgs), 10), f"STOPPING=1 on SIGTERM: {msgs}")
    check(rc == 0, f"ingress exits 0 ({rc})")
    here = os.path.dirname(os.path.abspath(__file__))
    unit = os.path.join(here, "..", "..", "systemd", "sverbs-proxy@.service")
    check(os.path.exists(unit), "systemd unit proxy/systemd/sverbs-proxy@.service in the repo")
    if os.path.exists(unit):
        txt = open(unit).read()
        check("Type=notify-reload" in txt or "Type=notify" in txt, "unit is Type=notify")


# ------------------------------------------------------------------ batched service calls


def keepalive_requests(port, reqs, timeout=20):
    """Sends reqs [(method, path, body)] one after another on one keep-alive connection; returns
    one Answer per request (count = responses that came for it: 1 expected)."""
    out = []
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as e:
        return [Answer(0, {}, str(e).encode(), 0) for _ in reqs]
    s.settimeout(timeout)
    buf = b""
    try:
        for method, path, body in reqs:
            h = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
            s.sendall(h.encode() + body)
            while True:
                rs = parse_responses(buf) if b"\r\n\r\n" in buf else []
                if rs and rs[0][0] > 0 and "content-length" in rs[0][1]:
                    n = int(rs[0][1]["content-length"][0])
                    end = buf.find(b"\r\n\r\n") + 4 + n
                    if len(buf) >= end:
                        st, hd, bd = rs[0][0], rs[0][1], buf[end - n:end]
                        buf = buf[end:]
                        out.append(Answer(st, hd, bd, 1))
                        break
                d = s.recv(65536)
                if not d:
                    raise OSError("closed")
                buf += d
    except OSError:
        pass
    finally:
        s.close()
    out += [Answer(0, {}, b"", 0) for _ in range(len(reqs) - len(out))]
    return out


def batch_mix(clients, per_client):
    """The requests of each client: /matmul (generated operands, and bodies whose B some
    share), /echo with a body, GET /healthz."""
    import random
    rnd = random.Random(17)
    shared_b = [float(rnd.randint(-4, 4)) for _ in range(36)]
    mix = []
    for c in range(clients):
        reqs = []
        for k in range(per_client):
            kind = (c + k) % 5
            if kind == 0:
                reqs.append(("POST", "/matmul?n=8", b""))
            elif kind == 1:
                a = [float(rnd.randint(-9, 9)) for _ in range(36)]
                b = shared_b if k % 2 else [float(rnd.randint(-9, 9)) for _ in range(36)]
                reqs.append(("POST", "/matmul?n=6", struct.pack("<72d", *(a + b))))
            elif kind == 2:
                a = [rnd.random() for _ in range(36)]
                reqs.append(("POST", "/matmul?n=6&out=raw", struct.pack("<72d", *(a + shared_b))))
            elif kind == 3:
                reqs.append(("POST", f"/echo/{c}/{k}", f"body {c} {k}".encode() * (k + 1)))
            else:
                reqs.append(("GET", "/healthz", b""))
        mix.append(reqs)
    return mix


@test
def batch_endpoint(st):
    """Part 2: with batch_path, the egress sends the requests queued for the service as one
    POST /batch (sverbs-compute: one stacked dgemm per group of /matmul sharing n and B).  Every
    request gets exactly one answer, identical to the service's own answer to it alone, and the
    batch path was taken (sverbs_proxy_service_batches_total > 0)."""
    st.upstreams = f"""
[[upstream]]
name = "compute"
slo_p99_ms = 5000
controller = "aimd"
service = "127.0.0.1:{st.p_svc}"
pool = 1
pipeline = 1
batch_path = "/batch"
service_timeout_ms = 8000

[[route]]
prefix = "/"
upstream = "compute"
"""
    if not check(st.up(), "stack answers 200"):
        return
    mix = batch_mix(clients=24, per_client=10)
    # What the service answers to each request alone (no proxy, no batch).
    direct = [keepalive_requests(st.p_svc, reqs) for reqs in mix]
    ts, res = parallel(keepalive_requests, [(st.p_in, reqs) for reqs in mix])
    for t in ts:
        t.join()
    flat = [a for r in res for a in r]
    exactly_once(flat, "requests through the batch endpoint")
    same = sum(1 for r, d in zip(res, direct) for a, b in zip(r, d)
               if a.status == b.status == 200 and a.body == b.body)
    check(same == len(flat), f"answers identical to the per-request path: {same} of {len(flat)}")
    batches = st.egress_metric("sverbs_proxy_service_batches_total")
    sent = st.egress_metric("sverbs_proxy_service_requests_total")
    check(batches is not None and batches > 0,
          f"the egress used the batch endpoint ({batches} batches, {sent} service requests for "
          f"{len(flat)} client requests)")


@test
def batch_endpoint_absent(st):
    """Part 2: a service without the batch endpoint (404 on batch_path) still gets every request
    exactly once, one by one: the egress turns batching off and re-sends what the 404 batch
    carried (the service did not process it)."""

    def rule(method, path, hdrs, body, cno, n):
        if path == "/batch":
            time.sleep(0.05)
            return (b"HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\n\r\nnot found\n")
        time.sleep(0.01)  # requests queue at the egress meanwhile: batches form
        return ok_response(path.encode())

    fake = FakeService(rule)
    st.upstreams = fake_upstream(fake.port, pool=1, pipeline=1).replace(
        "pipeline = 1\n", 'pipeline = 1\nbatch_path = "/batch"\n', 1)
    if not check(st.up(compute=False), "stack answers 200"):
        return
    reqs = [(st.p_in, "POST", f"/f/r{i}", b"x") for i in range(30)]
    ts, res = parallel(request, reqs)
    for t in ts:
        t.join()
    exactly_once(res, "requests to a service without a batch endpoint")
    check(all(a.status == 200 and a.body == f"/f/r{i}".encode() for i, a in enumerate(res)),
          f"every request answered 200 by its own answer: {[a.status for a in res]}")
    runs = [fake.count("POST", f"/f/r{i}") for i in range(30)]
    check(all(c == 1 for c in runs), f"each request executed once by the service: {runs}")
    check(fake.count("POST", "/batch") >= 1,
          f"the batch endpoint was tried ({fake.count('POST', '/batch')} times) and then left")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--list":
        print("\n".join(TESTS))
        return 0
    if len(sys.argv) != 4 or sys.argv[1] not in TESTS:
        print(__doc__)
        print("tests:", ", ".join(TESTS))
        return 2
    name, proxy, compute = sys.argv[1:]
    st = Stack(proxy, compute, name)
    try:
        TESTS[name](st)
    except Exception as e:  # a test that cannot run fails, and says why
        import traceback
        traceback.print_exc()
        FAILS.append(f"exception: {e}")
    finally:
        st.stop()
        if FAILS:
            st.dump()
            print(f"logs and configuration kept in {st.dir}")
        else:
            shutil.rmtree(st.dir, ignore_errors=True)
    print(f"{name}: {len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
