"""The process is served by OUR rdma-core build, with the layer state SVERBS
asks for."""
import os
import unittest

from pyverbs.cq import CQ

from sverbs_testlib import DEV, layer_expected_on, open_context


def mapped_paths():
    with open("/proc/self/maps") as f:
        return {line.split()[-1] for line in f if "/" in line}


class TestServedByPrefix(unittest.TestCase):
    def test_libs_from_prefix(self):
        prefix = os.environ.get("SVERBS_PREFIX")
        if not prefix:
            self.skipTest("SVERBS_PREFIX unset: not running with an sverbs prefix (env.sh)")
        ctx = open_context(DEV)     # loads the provider
        self.addCleanup(ctx.close)
        paths = mapped_paths()
        verbs = [p for p in paths if os.path.basename(p).startswith("libibverbs.so")]
        rxe = [p for p in paths if os.path.basename(p).startswith("librxe-rdmav")]
        self.assertEqual(len(verbs), 1, f"libibverbs mapped: {verbs}")
        self.assertTrue(verbs[0].startswith(prefix + "/lib/"), verbs[0])
        self.assertEqual(len(rxe), 1, f"librxe mapped: {rxe}")
        self.assertTrue(rxe[0].startswith(prefix + "/lib/libibverbs/"), rxe[0])
        import pyverbs
        self.assertTrue(pyverbs.__file__.startswith(prefix + "/"), pyverbs.__file__)


class TestLayerState(unittest.TestCase):
    """With the layer on, every CQ it manages gets cq_headroom extra CQEs
    (docs/configuration.md); rxe reports 2^k-1 entries, so 63 stays 63 when
    the layer is off."""

    def test_cq_headroom_matches_SVERBS(self):
        if not os.environ.get("SVERBS_PREFIX"):
            self.skipTest("not running with an sverbs prefix")
        ctx = open_context(DEV)
        self.addCleanup(ctx.close)
        cq = CQ(ctx, 63, None, None, 0)
        self.addCleanup(cq.close)
        headroom = int(os.environ.get("SVERBS_CQ_HEADROOM", "64"))
        if layer_expected_on():
            self.assertGreaterEqual(cq.cqe, 63 + headroom,
                                    f"SVERBS={os.environ.get('SVERBS')}: no headroom")
        else:
            self.assertEqual(cq.cqe, 63, f"SVERBS={os.environ.get('SVERBS')}: CQ grew")


if __name__ == "__main__":
    unittest.main()
