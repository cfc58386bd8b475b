#!/bin/bash
# ucx.sh PREFIX [MODE...] - UCX (Debian's 1.13, unmodified) over rxe0 -> rxe1
# in one guest through our rdma-core build, once per MODE:
#   off       SVERBS=off (stock)
#   on        SVERBS=on (defaults: one level per QP, so completions stay in
#             posting order, which UCX's rc_verbs counts on)
#   slice     SVERBS=on SVERBS_SLICE_ALWAYS=1 SVERBS_SLICE_BYTES=16k: UCX's
#             RDMA READs (rendezvous) cut into slices
# ucx_perftest (UCX_TLS=rc_verbs,ud_verbs) tag_lat 8 B, tag_bw 64 KiB and
# 1 MiB (rendezvous: RDMA READ of the payload): asserted exit 0 for both
# sides, a "Final:" row with the full iteration count, and libibverbs +
# librxe loaded from PREFIX.  Then, if Open MPI is installed, a 2-rank MPI
# ping-pong with data check (tests/integration/mpi_pingpong) over UCX's
# rc_verbs.  No timing thresholds.
#
# GID index 0 (rxe's IPv6 link-local RoCE v2 GID): with index 1 (IPv4)
# UCX 1.13's endpoints time out in this one-guest setup, stock rdma-core
# included.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
itest_enter_vm "$0" "$@"

itest_use_prefix "${1:?usage: ucx.sh PREFIX [MPI_BINARY] [off|on|slice]...}"
shift
MPI_BIN=""
if [ $# -gt 0 ] && [[ $1 == /* ]]; then MPI_BIN=$1; shift; fi
MODES=("$@"); [ ${#MODES[@]} -gt 0 ] || MODES=(off on slice)
itest_need ucx_perftest ucx_info

export UCX_TLS=rc_verbs,ud_verbs UCX_IB_GID_INDEX=0
ucx_info -d > "$ITEST_OUT/ucx_info" 2>&1 || true
grep -q "rxe0:1" "$ITEST_OUT/ucx_info" ||
  skip_all "UCX sees no rxe0:1 device (ucx_info -d: $(grep -c Device "$ITEST_OUT/ucx_info") devices)"

TESTS=(
  "tag_lat -s 8 -n 500|500"
  "tag_bw -s 65536 -n 300|300"
  "tag_bw -s 1048576 -n 20|20"
)
mode_env() {
  case $1 in
    off) echo "SVERBS=off" ;;
    on) echo "SVERBS=on" ;;
    slice) echo "SVERBS=on SVERBS_SLICE_ALWAYS=1 SVERBS_SLICE_BYTES=16384" ;;
    *) return 1 ;;
  esac
}
# (a failure inside $(mode_env ...) would not stop the script: check first)
for mode in "${MODES[@]}"; do
  mode_env "$mode" > /dev/null || { echo "ucx.sh: unknown mode $mode" >&2; exit 2; }
done
# final_iters FILE: the iteration count of ucx_perftest's "Final:" row
final_iters() { awk '$1 == "Final:" { print $2 }' "$1" | tail -n 1; }

port=13400
for mode in "${MODES[@]}"; do
  # shellcheck disable=SC2046  # the mode's VAR=value words
  export $(mode_env "$mode")
  echo "# ---- $mode: $(mode_env "$mode")"
  for t in "${TESTS[@]}"; do
    IFS='|' read -r args iters <<< "$t"
    port=$((port + 1))
    n=ucx-$mode-$port
    # shellcheck disable=SC2086  # $args is a list of options
    itest_pair "$n" $port -- env UCX_NET_DEVICES=rxe1:1 ucx_perftest -p $port \
                          -- env UCX_NET_DEVICES=rxe0:1 ucx_perftest 10.77.0.2 -p $port -t $args
    f=$ITEST_FAIL
    check "[$mode] ucx_perftest -t $args: client exits 0" [ "$(rc_of "$n.cli")" = 0 ]
    check "[$mode] ucx_perftest -t $args: server exits 0" [ "$(rc_of "$n.srv")" = 0 ]
    check "[$mode] ucx_perftest -t $args: $iters iterations reported" \
      [ "$(final_iters "$ITEST_OUT/$n.cli.out")" = "$iters" ]
    check "[$mode] ucx_perftest client: served by our build" libs_from_prefix "$n.cli"
    echo "# [$mode] $args: $(grep '^Final:' "$ITEST_OUT/$n.cli.out" | tr -s ' ' ' ')"
    [ "$f" = "$ITEST_FAIL" ] || show "$ITEST_OUT/$n.cli.out" "$ITEST_OUT/$n.srv.out"
  done
  if [ -n "$MPI_BIN" ]; then
    o=$ITEST_OUT/mpi-$mode
    # two ranks in this guest, forced onto UCX's rc_verbs (no shared memory)
    if timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 \
      --mca pml ucx --mca btl self \
      -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=rxe0:1 -x UCX_IB_GID_INDEX \
      -x SVERBS -x SVERBS_SLICE_ALWAYS -x SVERBS_SLICE_BYTES -x LD_LIBRARY_PATH \
      -x LD_DEBUG=libs -x LD_DEBUG_OUTPUT="$o.ld" \
      "$MPI_BIN" > "$o.out" 2>&1; then rc=0; else rc=$?; fi
    check "[$mode] MPI ping-pong over UCX rc_verbs: exit 0" [ "$rc" = 0 ]
    check "[$mode] MPI ping-pong: every message verified" grep -q "^mpi_pingpong: ok" "$o.out"
    check "[$mode] MPI ranks: libibverbs + librxe from our build" libs_from_prefix "mpi-$mode"
    echo "# [$mode] mpi: $(grep '^mpi_pingpong' "$o.out" | tail -n 1)"
    [ "$rc" = 0 ] || show "$o.out"
  else
    skip "[$mode] MPI ping-pong: no mpi_pingpong binary (meson found no MPI for C)"
  fi
  unset SVERBS SVERBS_SLICE_ALWAYS SVERBS_SLICE_BYTES
done
itest_done
