#!/bin/bash
# two-host.sh PREFIX [MODE...] - traffic that really crosses a network: two
# guests (SVERBS_VM_HOSTS=2), host A (rxe0, 10.77.0.1) and host B (rxe1,
# 10.77.0.2), joined by a QEMU dgram link.  B runs the servers, A the
# clients, per MODE (off, on, defer, queue, budget: use_mode in lib.sh;
# default all five, ITEST_MODES):
#   ibv_rc_pingpong -g 1 (100 x 4 KiB, data checked), ib_write_bw -x 1 -F.
# Each host then compares its cases' outcomes in every mode with stock's.
# Each host asserts its own side (exit 0, results, libs from PREFIX, layer
# state); the harness tags their lines [A] / [B] and fails if either fails.
# The hosts meet through vm-sync-post / vm-sync-wait (tests/vm/guest/bin).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

if [ -z "${RXE_VM_HOST:-}" ]; then      # on the host: start both guests
  why=$("$SVERBS_VM_RUNNER" --check 2>&1) || cannot_run "cannot start a guest: $why"
  a=$(printf '%q ' bash "$0" "$@")
  export SVERBS_VM_HOSTS=2
  exec "$SVERBS_VM_RUNNER" "$a" "$a"
fi

itest_use_prefix "${1:?usage: two-host.sh PREFIX [off|on|defer|queue|budget]...}"
shift
MODES=("$@"); [ ${#MODES[@]} -gt 0 ] || read -ra MODES <<< "$ITEST_MODES"
[ "${MODES[0]}" = off ] || { echo "two-host.sh: the first mode must be off (stock: the reference)" >&2; exit 2; }
for mode in "${MODES[@]}"; do use_mode "$mode" || exit 2; done
itest_need ibv_rc_pingpong ib_write_bw
me=$RXE_VM_HOST
[ "$me" = A ] || [ "$me" = B ] || skip_all "not in two-host mode (RXE_VM_HOST=$me)"
check "[$me] only this host's device ($RXE_VM_DEV) is here" \
  [ "$(ls /sys/class/infiniband)" = "$RXE_VM_DEV" ]

# side NAME PORT CMD...: B serves (and announces it), A connects; both check
# exit status + served by our build.  Output: $ITEST_OUT/NAME.out
side() {
  local name=$1 port=$2 o=$ITEST_OUT/$1 pid rc; shift 2
  if [ "$me" = B ]; then
    LD_DEBUG=libs LD_DEBUG_OUTPUT=$o.ld timeout 120 "$@" > "$o.out" 2>&1 &
    pid=$!
    vm-wait-listen "$port" 60 && vm-sync-post "listen-$name" || kill $pid 2>/dev/null
    wait $pid && rc=0 || rc=$?
  else
    if vm-sync-wait "listen-$name" 90; then
      LD_DEBUG=libs LD_DEBUG_OUTPUT=$o.ld timeout 120 "$@" "$RXE_VM_PEER_IP" > "$o.out" 2>&1 && rc=0 || rc=$?
    else
      rc=125; echo "server on B never listened" > "$o.out"
    fi
  fi
  check "[$me] $name exits 0" [ $rc = 0 ]
  check "[$me] $name served by our build" libs_from_prefix "$name"
}

for mode in "${MODES[@]}"; do
  use_mode "$mode"
  echo "# ---- [$me] $mode: $(mode_env)"
  if [ "$ITEST_PREFIX" != system ]; then
    state=$(layer_state "$RXE_VM_DEV") || true
    check "[$me] layer state is $(mode_state "$mode") ($state)" [ "${state%% *}" = "$(mode_state "$mode")" ]
  fi
  f=$ITEST_FAIL
  side "pp-$mode" 18515 ibv_rc_pingpong -d "$RXE_VM_DEV" -g 1 -n 100 -c
  check "[$me] rc_pingpong: 100 iters" grep -Eq '^100 iters in' "$ITEST_OUT/pp-$mode.out"
  check "[$me] rc_pingpong: peer GID ::ffff:$RXE_VM_PEER_IP" \
    grep -q "remote address:.*GID ::ffff:$RXE_VM_PEER_IP" "$ITEST_OUT/pp-$mode.out"
  [ "$f" = "$ITEST_FAIL" ] || show "$ITEST_OUT/pp-$mode.out"
  case_outcome "$mode" rc_pingpong "$f"

  f=$ITEST_FAIL
  # pinned: the guest's vCPU TSCs are unsynchronized (see perftest.sh)
  side "bw-$mode" 18516 taskset -c 0 ib_write_bw -d "$RXE_VM_DEV" -x 1 -F -u 20 -p 18516 -s 65536 -n 100
  row=$(awk 'f { print; exit } /^ *#bytes/ { f = 1 }' "$ITEST_OUT/bw-$mode.out")
  echo "# [$me] ib_write_bw SVERBS=$mode: $row"
  # shellcheck disable=SC2086
  set -- $row
  check "[$me] ib_write_bw: 100 x 65536 B" [ "${1:-}" = 65536 -a "${2:-}" = 100 ]
  check "[$me] ib_write_bw: BW average > 0" awk -v bw="${4:-0}" 'BEGIN { exit !(bw > 0) }'
  [ "$f" = "$ITEST_FAIL" ] || show "$ITEST_OUT/bw-$mode.out"
  case_outcome "$mode" ib_write_bw "$f"
done
outcomes_compare
itest_done
