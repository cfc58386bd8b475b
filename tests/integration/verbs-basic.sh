#!/bin/bash
# verbs-basic.sh PREFIX [MODE...] - rdma-core's own tools on rxe, in one guest:
#   ibv_devinfo (rxe0 + rxe1, ports active, RoCE v2 GID 1),
#   ibv_rc_pingpong rxe1 (server) <- rxe0 (client) with -g 1, polling and
#   with -e (completion events),
#   rping (rdma_cm) server on 10.77.0.2 <- client from 10.77.0.1,
# once per MODE (off, on, defer, queue, budget: use_mode in lib.sh; default
# all five, off first).  Every process must load libibverbs and librxe from
# PREFIX (LD_DEBUG=libs), and the layer state seen by layer-state.py must be
# MODE's.  Every case's outcome in every mode must be stock's (off).
# PREFIX=system: the distro's rdma-core (developing the tests only; no layer
# check).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_enter_vm "$0" "$@"

itest_use_prefix "${1:?usage: verbs-basic.sh PREFIX [off|on|defer|queue|budget]...}"
shift
MODES=("$@"); [ ${#MODES[@]} -gt 0 ] || read -ra MODES <<< "$ITEST_MODES"
[ "${MODES[0]}" = off ] || { echo "verbs-basic.sh: the first mode must be off (stock: the reference)" >&2; exit 2; }
for mode in "${MODES[@]}"; do use_mode "$mode" || exit 2; done
itest_need ibv_devinfo ibv_rc_pingpong rping

for mode in "${MODES[@]}"; do
  use_mode "$mode"
  echo "# ---- $mode: $(mode_env)"
  if [ "$ITEST_PREFIX" != system ]; then
    state=$(layer_state) || true
    check "[$mode] layer state is $(mode_state "$mode") ($state)" \
      [ "${state%% *}" = "$(mode_state "$mode")" ]
  fi

  # ---- ibv_devinfo
  f=$ITEST_FAIL
  o=$ITEST_OUT/devinfo-$mode.cli
  LD_DEBUG=libs LD_DEBUG_OUTPUT=$o.ld ibv_devinfo -v > "$o.out" 2>&1 && rc=0 || rc=$?
  check "[$mode] ibv_devinfo exits 0" [ $rc = 0 ]
  check "[$mode] ibv_devinfo lists rxe0" grep -qx 'hca_id:[[:space:]]*rxe0' "$o.out"
  check "[$mode] ibv_devinfo lists rxe1" grep -qx 'hca_id:[[:space:]]*rxe1' "$o.out"
  check "[$mode] both ports PORT_ACTIVE" [ "$(grep -c 'state:[[:space:]]*PORT_ACTIVE' "$o.out")" = 2 ]
  check "[$mode] link layer Ethernet" [ "$(grep -c 'link_layer:[[:space:]]*Ethernet' "$o.out")" = 2 ]
  check "[$mode] rxe0 GID[1] is ::ffff:10.77.0.1 (RoCE v2)" \
    grep -Eq 'GID\[ *1\]:[[:space:]]*::ffff:10\.77\.0\.1, RoCE v2' "$o.out"
  check "[$mode] ibv_devinfo uses our libibverbs + librxe" libs_from_prefix "devinfo-$mode.cli"
  [ "$f" = "$ITEST_FAIL" ] || show "$o.out"
  case_outcome "$mode" devinfo "$f"

  # ---- ibv_rc_pingpong: 200 x 4 KiB round trips (counted both ways:
  #      1638400 bytes), received data validated (-c); polling, then with
  #      completion events (-e)
  for ev in "" -e; do
  n=pp$ev-$mode
  # shellcheck disable=SC2086  # $ev: no option or one
  itest_pair "$n" 18515 -- ibv_rc_pingpong -d rxe1 -g 1 -n 200 -c $ev \
                        -- ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c $ev 10.77.0.2
  f=$ITEST_FAIL
  check "[$mode] rc_pingpong $ev client exits 0" [ "$(rc_of "$n.cli")" = 0 ]
  check "[$mode] rc_pingpong $ev server exits 0" [ "$(rc_of "$n.srv")" = 0 ]
  for side in cli srv; do
    check "[$mode] rc_pingpong $ev $side: 200 iters done" grep -Eq '^200 iters in [0-9.]+ seconds' "$ITEST_OUT/$n.$side.out"
    check "[$mode] rc_pingpong $ev $side: bytes moved" grep -Eq '^1638400 bytes in' "$ITEST_OUT/$n.$side.out"
    check "[$mode] rc_pingpong $ev $side: served by our build" libs_from_prefix "$n.$side"
  done
  check "[$mode] rc_pingpong $ev client: remote GID ::ffff:10.77.0.2" \
    grep -q 'remote address:.*GID ::ffff:10.77.0.2' "$ITEST_OUT/$n.cli.out"
  [ "$f" = "$ITEST_FAIL" ] || show "$ITEST_OUT/$n.cli.out" "$ITEST_OUT/$n.srv.out"
  case_outcome "$mode" "rc_pingpong$ev" "$f"
  done

  # ---- rping: rdma_cm connection, 10 RDMA READ/WRITE ping rounds, verbose
  n=rping-$mode
  itest_pair "$n" 7174 --cm -- rping -s -a 10.77.0.2 -C 10 -v \
                            -- rping -c -I 10.77.0.1 -a 10.77.0.2 -C 10 -v
  f=$ITEST_FAIL
  check "[$mode] rping client exits 0" [ "$(rc_of "$n.cli")" = 0 ]
  check "[$mode] rping server exits 0" [ "$(rc_of "$n.srv")" = 0 ]
  check "[$mode] rping client got 10 pings" [ "$(grep -c '^ping data: rdma-ping-' "$ITEST_OUT/$n.cli.out")" = 10 ]
  check "[$mode] rping server got 10 pings" [ "$(grep -c '^server ping data: rdma-ping-' "$ITEST_OUT/$n.srv.out")" = 10 ]
  check "[$mode] rping last ping intact" \
    grep -qx 'ping data: rdma-ping-9: JKLMNOPQRSTUVWXYZ\[\\\]^_`abcdefghijklmnopqrstuvwxyz.*' "$ITEST_OUT/$n.cli.out"
  check "[$mode] rping client: served by our build" libs_from_prefix "$n.cli"
  check "[$mode] rping server: served by our build" libs_from_prefix "$n.srv"
  [ "$f" = "$ITEST_FAIL" ] || show "$ITEST_OUT/$n.cli.out" "$ITEST_OUT/$n.srv.out"
  case_outcome "$mode" rping "$f"
done
outcomes_compare
itest_done
