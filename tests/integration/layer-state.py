#!/usr/bin/python3
"""Print whether the sverbs layer is active ("on"/"off") in this environment.

usage: layer-state.py [DEVICE]      (default rxe0; run with our pyverbs)

Seen from outside the layer: when it is on, each CQ it manages is created
with cq_headroom (default 64) extra CQEs for its internal completions, and the
CQE count the provider reports includes them.  rxe reports 2^k - 1 entries, so
a CQ asked for 63 has exactly 63 with the layer off and more with it on.
Exit status 2 when the device cannot be opened.
"""
import sys

from pyverbs.device import Context
from pyverbs.cq import CQ

ASKED = 63


def main():
    dev = sys.argv[1] if len(sys.argv) > 1 else "rxe0"
    try:
        ctx = Context(name=dev)
    except Exception as e:  # pyverbs raises PyverbsRDMAError & co.
        print(f"cannot open {dev}: {e}", file=sys.stderr)
        return 2
    with ctx:
        cq = CQ(ctx, ASKED)
        got = cq.cqe
        cq.close()
    print("on" if got > ASKED else "off", f"(CQ asked {ASKED}, got {got})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
