"""Helpers for the sverbs pyverbs integration tests (stdlib + pyverbs only).

The tests run inside the Soft-RoCE guest (tests/vm/run-in-vm.sh), normally
with two rxe devices on the two ends of a veth pair: RXE_VM_DEV (rxe0,
10.77.0.1) and RXE_VM_PEER_DEV (rxe1, 10.77.0.2).  GID index 1 is the RoCE v2
GID ::ffff:<IPv4>.  Override with PV_DEV / PV_PEER_DEV / PV_GID_INDEX.

    from sverbs_testlib import RCPair, layer_expected_on

    class MyTest(unittest.TestCase):
        def setUp(self):
            self.pair = RCPair()          # skips the test if no device
            self.addCleanup(self.pair.close)
"""
import os
import time
import unittest

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

DEV = os.environ.get("PV_DEV") or os.environ.get("RXE_VM_DEV") or "rxe0"
PEER_DEV = (os.environ.get("PV_PEER_DEV") or os.environ.get("RXE_VM_PEER_DEV")
            or DEV)
GID_INDEX = int(os.environ.get("PV_GID_INDEX", "1"))
PORT = 1
POLL_TIMEOUT_S = 20.0     # a hang guard only, never a performance threshold

ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)


def layer_expected_on():
    """What SVERBS in the environment asks for (the layer's default is on)."""
    v = os.environ.get("SVERBS", "on").strip().lower()
    return v not in ("off", "0", "no", "false")


def _env_size(name, default):
    v = os.environ.get(name, "").strip().lower().rstrip("b").rstrip("i")
    if not v:
        return default
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(v[-1], 1)
    return int(v.rstrip("kmg")) * mult


def imm_byte_len(length):
    """The byte_len the responder's completion of a WRITE_WITH_IMM of
    `length` bytes from a QP that states no priority reports: stock, the
    whole length; with the layer slicing from the first WR
    (SVERBS_SLICE_ALWAYS) and a fixed SVERBS_SLICE_BYTES below the length,
    the final slice's length - a documented semantic (docs/semantics.md,
    "Slicing": each slice is its own RDMA message).  None: the layer
    slices adaptively, the final slice's length is not known here."""
    always = os.environ.get("SVERBS_SLICE_ALWAYS", "off").strip().lower()
    if not layer_expected_on() or always not in ("on", "1", "yes", "true"):
        return length
    sl = _env_size("SVERBS_SLICE_BYTES", 0)
    if sl == 0:
        return None
    return length if length <= sl else length - sl * ((length - 1) // sl)


def open_context(name):
    """Open a device or skip the calling test."""
    try:
        return Context(name=name)
    except Exception as ex:  # PyverbsRDMAError, PyverbsError
        raise unittest.SkipTest(f"cannot open device {name}: {ex}")


class Side:
    """One end of an RC connection: context, PD, CQ, QP and one MR."""

    def __init__(self, devname, mr_size, max_send_wr, max_recv_wr, cqe):
        self.ctx = open_context(devname)
        self.devname = devname
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, cqe, None, None, 0)
        cap = QPCap(max_send_wr=max_send_wr, max_recv_wr=max_recv_wr,
                    max_send_sge=1, max_recv_sge=1)
        # sq_sig_all=0 (pyverbs defaults to 1): IBV_SEND_SIGNALED decides
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                          cap=cap, sq_sig_all=0)
        self.qp = QP(self.pd, init)
        self.mr = MR(self.pd, mr_size, ACCESS)
        self.gid = self.ctx.query_gid(PORT, GID_INDEX)
        self.psn = 0x1000 + hash(devname) % 0x1000

    def close(self):
        for obj in (self.qp, self.mr, self.cq, self.pd, self.ctx):
            obj.close()


class RCPair:
    """Two connected RC QPs in one process: `a` on DEV, `b` on PEER_DEV.

    Each side has an MR of mr_size bytes (registered for local write and
    remote read/write) and a CQ shared by its send and receive queues.
    """

    def __init__(self, mr_size=1 << 20, max_send_wr=64, max_recv_wr=64,
                 cqe=256):
        self.a = Side(DEV, mr_size, max_send_wr, max_recv_wr, cqe)
        try:
            self.b = Side(PEER_DEV, mr_size, max_send_wr, max_recv_wr, cqe)
        except BaseException:
            self.a.close()
            raise
        self.a.peer, self.b.peer = self.b, self.a
        self._connect(self.a, self.b)
        self._connect(self.b, self.a)

    @staticmethod
    def _connect(me, peer):
        attr = QPAttr(port_num=PORT, path_mtu=e.IBV_MTU_1024)
        attr.qp_access_flags = ACCESS
        attr.pkey_index = 0
        me.qp.to_init(attr)
        gr = GlobalRoute(dgid=peer.gid, sgid_index=GID_INDEX, hop_limit=64)
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=PORT)
        attr.dest_qp_num = peer.qp.qp_num
        attr.rq_psn = peer.psn
        attr.max_dest_rd_atomic = 4
        attr.min_rnr_timer = 12
        me.qp.to_rtr(attr)
        attr.sq_psn = me.psn
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.max_rd_atomic = 4
        me.qp.to_rts(attr)

    def close(self):
        self.a.peer = self.b.peer = None
        self.b.close()
        self.a.close()


# ---------------------------------------------------------------- WR helpers
def post_send(side, wr_id, opcode, offset, length, remote=None,
              remote_offset=0, signaled=True, imm_data=0, send_flags=0):
    """Post one WR from side.mr[offset:offset+length].  For RDMA opcodes,
    remote is the peer Side whose MR is the target at remote_offset."""
    flags = send_flags | (e.IBV_SEND_SIGNALED if signaled else 0)
    sge = SGE(side.mr.buf + offset, length, side.mr.lkey)
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                send_flags=flags, imm_data=imm_data)
    if remote is not None:
        wr.set_wr_rdma(remote.mr.rkey, remote.mr.buf + remote_offset)
    side.qp.post_send(wr)


def post_recv(side, wr_id, offset, length):
    sge = SGE(side.mr.buf + offset, length, side.mr.lkey)
    side.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[sge]))


def poll(side, count, timeout=POLL_TIMEOUT_S):
    """Busy-poll side.cq until `count` completions arrived; return them in
    arrival order.  Raises AssertionError after `timeout` s (a hang guard),
    listing what did arrive."""
    wcs = []
    deadline = time.monotonic() + timeout
    while len(wcs) < count:
        n, got = side.cq.poll(count - len(wcs))
        wcs.extend(got)
        if n == 0 and time.monotonic() > deadline:
            raise AssertionError(
                f"{side.devname}: {len(wcs)} of {count} completions after "
                f"{timeout:.0f}s: {[describe(w) for w in wcs]}")
    return wcs


MARK_WRITE = 0x5EB5_0000_0001   # wr_ids of assert_no_more's markers
MARK_RECV = 0x5EB5_0000_0002


def assert_no_more(testcase, side, timeout=POLL_TIMEOUT_S):
    """No further completion shows up on side.cq - decided by draining to a
    known state, not by waiting a while: side posts a signaled, fenced,
    zero-length RDMA WRITE (its completion comes after every completion of
    a WR posted before it on side's QP: in-order RC completions, and the
    fence waits for every earlier WR at any level), and side's peer sends an
    unsignaled zero-length SEND into a receive posted on side now (receives
    complete in the order they were posted, so it comes after any earlier
    receive completion).  Polls side.cq until both markers arrived; any other
    completion seen on the way fails the test.  (timeout: a hang guard.)"""
    peer = side.peer
    post_recv(side, MARK_RECV, 0, 0)
    post_send(side, MARK_WRITE, e.IBV_WR_RDMA_WRITE, 0, 0, remote=peer,
              remote_offset=0, send_flags=e.IBV_SEND_FENCE)
    post_send(peer, MARK_RECV, e.IBV_WR_SEND, 0, 0, signaled=False)
    want = {MARK_WRITE: e.IBV_WC_RDMA_WRITE, MARK_RECV: e.IBV_WC_RECV}
    wcs = poll(side, 2, timeout)
    others = [describe(w) for w in wcs if w.wr_id not in want]
    testcase.assertEqual(others, [], "unexpected completion(s) before the markers")
    for w in wcs:
        testcase.assertEqual((w.status, w.opcode), (e.IBV_WC_SUCCESS, want[w.wr_id]),
                             f"marker: {describe(w)}")
    testcase.assertEqual(sorted(w.wr_id for w in wcs), sorted(want))


def describe(wc):
    return (f"wr_id={wc.wr_id} status={wc.status} opcode={wc.opcode} "
            f"byte_len={wc.byte_len} qp_num={wc.qp_num}")


def pattern(length, seed):
    """Deterministic seed-dependent bytes with a period of 251 (prime): a
    block that lands at a wrong multiple of any power-of-two size shows."""
    block = bytes((i * 7 + seed * 13) & 0xFF for i in range(251))
    return (block * (length // 251 + 1))[:length]
