"""RC data path through the provider, checked end to end in one process:
data lands where it should, every signaled WR completes exactly once with its
wr_id, opcode and status, and nothing else completes.  These are the verbs
semantics the sverbs layer must keep whether it is on or off.  No assumption
is made about ordering ACROSS priority levels (small and large WRs may sit in
different levels when the layer is on); within one size class (one level)
completions must come in posting order.
"""
import errno
import unittest

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError

from sverbs_testlib import (RCPair, assert_no_more, describe, imm_byte_len,
                            layer_expected_on, pattern, poll, post_recv,
                            post_send)

KIB = 1024
MIB = 1024 * KIB
# <infiniband/sverbs.h>: SVERBS_WR_ID_RESERVED_MIN/_MAX, the layer's wr_ids
WR_ID_RESERVED_MIN = 0x5356_0000_0000_0000
WR_ID_RESERVED_MAX = 0x5356_FFFF_FFFF_FFFF


class RCTestCase(unittest.TestCase):
    MR_SIZE = 4 * MIB

    def setUp(self):
        self.pair = RCPair(mr_size=self.MR_SIZE)
        self.addCleanup(self.pair.close)
        self.a, self.b = self.pair.a, self.pair.b

    def assertWC(self, wc, wr_id, opcode, byte_len=None):
        self.assertEqual(wc.status, e.IBV_WC_SUCCESS, describe(wc))
        self.assertEqual(wc.wr_id, wr_id, describe(wc))
        self.assertEqual(wc.opcode, opcode, describe(wc))
        if byte_len is not None:
            self.assertEqual(wc.byte_len, byte_len, describe(wc))


class TestRCBasic(RCTestCase):
    def test_write_and_send(self):
        """RDMA WRITE + SEND: both complete on A with their wr_ids, the SEND
        consumes B's receive, and both payloads are in B's memory."""
        wdata, sdata = pattern(4 * KIB, 1), pattern(256, 2)
        self.a.mr.write(wdata, len(wdata), 0)
        self.a.mr.write(sdata, len(sdata), 64 * KIB)
        post_recv(self.b, 77, 128 * KIB, 4 * KIB)
        post_send(self.a, 1, e.IBV_WR_RDMA_WRITE, 0, len(wdata),
                  remote=self.b, remote_offset=1 * MIB)
        post_send(self.a, 2, e.IBV_WR_SEND, 64 * KIB, len(sdata))
        wcs = sorted(poll(self.a, 2), key=lambda w: w.wr_id)
        self.assertWC(wcs[0], 1, e.IBV_WC_RDMA_WRITE)
        self.assertWC(wcs[1], 2, e.IBV_WC_SEND)
        [rwc] = poll(self.b, 1)
        self.assertWC(rwc, 77, e.IBV_WC_RECV, byte_len=len(sdata))
        self.assertEqual(rwc.qp_num, self.b.qp.qp_num)
        self.assertEqual(self.b.mr.read(len(wdata), 1 * MIB), wdata)
        self.assertEqual(self.b.mr.read(len(sdata), 128 * KIB), sdata)
        assert_no_more(self, self.a)
        assert_no_more(self, self.b)

    def test_write_with_imm(self):
        data = pattern(8 * KIB, 3)
        self.a.mr.write(data, len(data), 0)
        post_recv(self.b, 5, 0, 16)   # WRITE_WITH_IMM uses no receive buffer
        post_send(self.a, 9, e.IBV_WR_RDMA_WRITE_WITH_IMM, 0, len(data),
                  remote=self.b, remote_offset=2 * MIB, imm_data=0x1234ABCD)
        [swc] = poll(self.a, 1)
        self.assertWC(swc, 9, e.IBV_WC_RDMA_WRITE)
        [rwc] = poll(self.b, 1)
        # stock: the whole length; the layer, slicing it: the final
        # slice's (a documented semantic: imm_byte_len)
        want = imm_byte_len(len(data))
        self.assertWC(rwc, 5, e.IBV_WC_RECV_RDMA_WITH_IMM, byte_len=want)
        if want is None:
            self.assertTrue(0 < rwc.byte_len <= len(data), describe(rwc))
        self.assertEqual(rwc.imm_data, 0x1234ABCD)
        self.assertEqual(self.b.mr.read(len(data), 2 * MIB), data)

    def test_rdma_read(self):
        data = pattern(64 * KIB, 4)
        self.b.mr.write(data, len(data), 3 * MIB)
        post_send(self.a, 0xFEED, e.IBV_WR_RDMA_READ, 0, len(data),
                  remote=self.b, remote_offset=3 * MIB)
        [wc] = poll(self.a, 1)
        self.assertWC(wc, 0xFEED, e.IBV_WC_RDMA_READ)
        self.assertEqual(self.a.mr.read(len(data), 0), data)
        assert_no_more(self, self.b)      # one-sided: nothing on B

    def test_large_write_and_read(self):
        """1 MiB WRITE and 1 MiB READ (the layer may slice them): one
        completion each, every byte in place."""
        data = pattern(1 * MIB, 5)
        self.a.mr.write(data, len(data), 0)
        post_send(self.a, 41, e.IBV_WR_RDMA_WRITE, 0, len(data),
                  remote=self.b, remote_offset=2 * MIB)
        [wc] = poll(self.a, 1)
        self.assertWC(wc, 41, e.IBV_WC_RDMA_WRITE)
        self.assertEqual(self.b.mr.read(len(data), 2 * MIB), data)
        assert_no_more(self, self.a)
        back = pattern(1 * MIB, 6)
        self.b.mr.write(back, len(back), 0)
        post_send(self.a, 42, e.IBV_WR_RDMA_READ, 1 * MIB, len(back),
                  remote=self.b, remote_offset=0)
        [wc] = poll(self.a, 1)
        self.assertWC(wc, 42, e.IBV_WC_RDMA_READ)
        self.assertEqual(self.a.mr.read(len(back), 1 * MIB), back)
        assert_no_more(self, self.a)

    def test_sends_complete_in_order(self):
        """16 equal SENDs: sender completions in posting order, the receiver
        gets the messages in posting order."""
        n, size = 16, 64
        for i in range(n):
            self.a.mr.write(pattern(size, 10 + i), size, i * size)
            post_recv(self.b, 200 + i, 1 * MIB + i * size, size)
        for i in range(n):
            post_send(self.a, 100 + i, e.IBV_WR_SEND, i * size, size)
        swcs = poll(self.a, n)
        self.assertEqual([w.wr_id for w in swcs], list(range(100, 100 + n)))
        for w in swcs:
            self.assertWC(w, w.wr_id, e.IBV_WC_SEND)
        rwcs = poll(self.b, n)
        self.assertEqual([w.wr_id for w in rwcs], list(range(200, 200 + n)))
        for i, w in enumerate(rwcs):
            self.assertWC(w, 200 + i, e.IBV_WC_RECV, byte_len=size)
            self.assertEqual(self.b.mr.read(size, 1 * MIB + i * size),
                             pattern(size, 10 + i), f"message {i}")

    def test_unsignaled_writes(self):
        """7 unsignaled WRITEs + 1 signaled: exactly one completion (the
        signaled WR's), and all 8 writes landed."""
        n, size = 8, 16 * KIB
        for i in range(n):
            self.a.mr.write(pattern(size, 30 + i), size, i * size)
        for i in range(n):
            post_send(self.a, 300 + i, e.IBV_WR_RDMA_WRITE, i * size, size,
                      remote=self.b, remote_offset=2 * MIB + i * size,
                      signaled=(i == n - 1))
        [wc] = poll(self.a, 1)
        self.assertWC(wc, 300 + n - 1, e.IBV_WC_RDMA_WRITE)
        assert_no_more(self, self.a)
        for i in range(n):
            self.assertEqual(self.b.mr.read(size, 2 * MIB + i * size),
                             pattern(size, 30 + i), f"write {i}")

    def test_many_outstanding_writes(self):
        """48 signaled 16 KiB WRITEs posted at once (max_send_wr 64): 48
        completions, each wr_id exactly once, all data in place."""
        n, size = 48, 16 * KIB
        for i in range(n):
            self.a.mr.write(pattern(size, 50 + i), size, i * size)
        for i in range(n):
            post_send(self.a, 1000 + i, e.IBV_WR_RDMA_WRITE, i * size, size,
                      remote=self.b, remote_offset=1 * MIB + i * size)
        wcs = poll(self.a, n)
        self.assertEqual(sorted(w.wr_id for w in wcs), list(range(1000, 1000 + n)))
        for w in wcs:
            self.assertWC(w, w.wr_id, e.IBV_WC_RDMA_WRITE)
        assert_no_more(self, self.a)
        for i in range(n):
            self.assertEqual(self.b.mr.read(size, 1 * MIB + i * size),
                             pattern(size, 50 + i), f"write {i}")

    def test_reserved_wr_id(self):
        """docs/semantics.md: with the layer on, a post whose wr_id is in
        the layer's range fails with EINVAL (send and receive) and the QP
        keeps working; with it off nothing is refused and the completion
        carries that wr_id, as stock."""
        size = 4 * KIB
        self.a.mr.write(pattern(size, 60), size, 0)
        ids = (WR_ID_RESERVED_MIN, WR_ID_RESERVED_MAX)
        if layer_expected_on():
            for wr_id in ids:
                with self.assertRaises(PyverbsRDMAError) as cm:
                    post_send(self.a, wr_id, e.IBV_WR_RDMA_WRITE, 0, size,
                              remote=self.b, remote_offset=1 * MIB)
                self.assertEqual(cm.exception.error_code, errno.EINVAL)
                with self.assertRaises(PyverbsRDMAError) as cm:
                    post_recv(self.b, wr_id, 0, size)
                self.assertEqual(cm.exception.error_code, errno.EINVAL)
            assert_no_more(self, self.b)
        # the QP still works (layer on); stock takes the wr_id (layer off)
        sent = (600,) if layer_expected_on() else ids
        for wr_id in sent:
            post_send(self.a, wr_id, e.IBV_WR_RDMA_WRITE, 0, size,
                      remote=self.b, remote_offset=1 * MIB)
        wcs = poll(self.a, len(sent))
        self.assertEqual(sorted(w.wr_id for w in wcs), sorted(sent))
        for w in wcs:
            self.assertWC(w, w.wr_id, e.IBV_WC_RDMA_WRITE)
        assert_no_more(self, self.a)
        self.assertEqual(self.b.mr.read(size, 1 * MIB), pattern(size, 60))

    def test_assert_no_more_sees_a_pending_completion(self):
        """The drain helper itself: a completion that is still to come when
        assert_no_more is called (a second signaled WRITE, not polled) makes
        it fail - deterministically, whatever the timing (it drains to a
        marker posted after it)."""
        for i in range(2):
            post_send(self.a, 500 + i, e.IBV_WR_RDMA_WRITE, 0, 64 * KIB,
                      remote=self.b, remote_offset=1 * MIB)
        [wc] = poll(self.a, 1)
        self.assertWC(wc, 500, e.IBV_WC_RDMA_WRITE)
        with self.assertRaises(AssertionError) as cm:
            assert_no_more(self, self.a)
        self.assertIn("wr_id=501", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
