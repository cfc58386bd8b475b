#!/bin/bash
# run-in-vm.sh - run a command on a real (Soft-RoCE) verbs device: boot a
# throw-away QEMU guest with Debian's 6.1 kernel, create rxe devices in it, run
# the command there, stream its stdout/stderr here, exit with its status.
#
#   run-in-vm.sh 'shell command'            one guest: rxe0 + rxe1 (see NET)
#   run-in-vm.sh --check                    only check that a guest can be
#                                           started (qemu, kernel, busybox,
#                                           modules): exit 0, or 125 + reason
#   SVERBS_VM_HOSTS=2 run-in-vm.sh 'command on A' 'command on B'
#                                           two guests, one rxe device each
#
# The command runs with `bash -c` in the guest, as root, with the host's
# exported environment and working directory, stdin = /dev/null and
# memlock = unlimited.  The guest sees the host's "/" read-only (writes go to a
# throw-away tmpfs overlay) and the SVERBS_VM_RW dirs read-write at the same
# paths, so build outputs and test scripts are used in place.
#
# Exit status: the command's;  124: timeout (guest killed);  125: the guest or
# its setup failed (no qemu / kernel, boot or rxe setup error).
# Two hosts: A's status if it is not 0, else B's; both are printed on stderr
# ("run-in-vm: status A=.. B=..").  When one command fails, the other gets
# SVERBS_VM_GRACE seconds to finish, then its guest is killed (status 124).
#
# Console log (kernel messages + stage 1/2 setup): on any nonzero status it is
# kept in $SVERBS_VM_CACHE/logs/<time>-<pid>-<host>.console.log (the path is
# printed; the last 20 runs are kept), or always written to SVERBS_VM_LOG.
#
# Network, per mode (GID index 1 is the RoCE v2 GID ::ffff:<IPv4>: use
# `-x 1` for perftest, `-g 1` for ibv_*_pingpong):
#   one guest, SVERBS_VM_NET=veth (default): veth0 10.77.0.1 = rxe0 and
#          veth1 10.77.0.2 = rxe1, both ends in the guest's one netns
#          (accept_local=1, rp_filter=0 make that work);
#   SVERBS_VM_NET=dummy: dummy0 10.77.0.1 = rxe0 only;  none: nothing.
#   two guests (SVERBS_VM_HOSTS=2): host A has rxe0 on its virtio-net NIC with
#          10.77.0.1, host B rxe1 with 10.77.0.2 (so command lines written for
#          the one-guest veth mode work unchanged); the NICs are joined by a
#          QEMU stream (or dgram) netdev over a unix socket in the run dir: no
#          host network at all.  (Two network namespaces in ONE guest do not work
#          with the 6.1 rxe: it binds UDP 4791 and routes only in init_net.
#          See tests/vm/README.md.)
# The SVERBS_VM_* knobs are not passed to the guest (the sverbs layer would
# take them for its own settings).  In the guest, commands see RXE_VM_HOST (single|A|B), RXE_VM_DEV /
# RXE_VM_IP (this host's device and address), RXE_VM_PEER_DEV /
# RXE_VM_PEER_IP (the other one), RXE_VM_SYNC (a dir shared by all guests
# of the run) and, first on PATH, tests/vm/guest/bin: vm-sync-post NAME,
# vm-sync-wait NAME [s], vm-wait-listen [--cm] PORT [s] (start a server in the
# background, wait until it listens, then run the client).
#
# Knobs (environment):
#   SVERBS_VM_HOSTS    1 | 2                    (default 1)
#   SVERBS_VM_SMP      vCPUs per guest          (default 2; with 1, a busy-polling
#                      client+server pair is ~200x slower)
#   SVERBS_VM_MEM      RAM per guest            (default 1G)
#   SVERBS_VM_NET      veth | dummy | none      (one guest only; default veth)
#   SVERBS_VM_MTU      MTU of those netdevs     (default 1500 -> RoCE MTU 1024;
#                      4500+ -> 4096)
#   SVERBS_VM_TIMEOUT  seconds from start to kill (default 600) -> status 124
#   SVERBS_VM_GRACE    two hosts: seconds the other host gets after one
#                      command failed (default 15)
#   SVERBS_VM_BOOT_TIMEOUT  seconds a guest gets to come up (its setup done,
#                      the command about to start; default 45, 0: no limit;
#                      a boot takes ~10 s on this 2-core host).
#                      A guest not up by then is logged, every guest is
#                      started again once, and a second miss is status 125.
#   SVERBS_VM_TEST_STALL  N: the harness's self-test: the last guest's first N
#                      boots never come up (QEMU -S)
#   SVERBS_VM_LINK     two hosts: stream | dgram, the QEMU netdev joining
#                      them (default stream: a unix stream socket, lossless;
#                      dgram drops frames under load and RoCE retransmits)
#   SVERBS_VM_RW       colon list of host dirs shared read-write (default:
#                      <repo>/build, created if missing, + $PWD unless it is /
#                      or inside a dir already listed)
#   SVERBS_VM_KERNEL   vmlinuz to boot; SVERBS_VM_MODDIR its module tree.
#                      Default: what tests/vm/fetch-kernel.sh put in the cache
#                      (kernel/current.env), else the newest /boot/vmlinuz-*.
#   SVERBS_VM_CACHE    initramfs / vmlinux cache, run dirs, kept logs
#                      (default <repo>/build/vm)
#   SVERBS_VM_PVH      1: boot the vmlinux extracted from vmlinuz directly (PVH
#                      entry, skips SeaBIOS + decompression: ~2 s) (default 1)
#   SVERBS_VM_ACCEL    tcg | kvm                (default tcg: this host's KVM
#                      cannot run a stock kernel)
#   SVERBS_VM_LOG      write the console log here (two hosts: .A / .B added)
#   SVERBS_VM_VERBOSE  1: print boot timing on stderr, trace the guest setup
#                      (with guest uptimes) on the console log
#   SVERBS_VM_BUSYBOX  static busybox for the initramfs (default /bin/busybox)
#   SVERBS_VM_CMDLINE  extra kernel command line (default "tsc=reliable": TCG's
#                      TSC follows the host's, but the guest's boot check calls
#                      it unsynchronized and falls back to hpet, which makes
#                      every clock_gettime() a system call)
# The command line always has no_timer_check: under TCG on a loaded host the
# boot-time check that the IO-APIC timer interrupt arrives in time can fail
# and panic the guest ("IO-APIC + timer doesn't work!", seen on this 2-core
# host at load ~30); the timer works, only the check's time window is missed.
#
# Host packages (Debian 12): qemu-system-x86 busybox-static kmod cpio xz-utils
# zstd iproute2 (in the guest: ip, rdma, ss) + a kernel (fetch-kernel.sh) +
# whatever the command runs (the guest uses the host's binaries).
set -euo pipefail
# The whole script is one { ... } block: bash parses it completely before
# running it, so editing this file cannot disturb runs already going.
{
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
START=$(date +%s.%N)

die() { echo "run-in-vm: $*" >&2; exit 125; }
vlog() { [ "${SVERBS_VM_VERBOSE:-0}" = 1 ] && echo "run-in-vm: $*" >&2 || true; }
elapsed() { awk -v s="$START" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }'; }

# ---------------------------------------------------------------- options
CHECK=0
if [ "${1:-}" = --check ]; then CHECK=1; set -- true; fi
HOSTS=${SVERBS_VM_HOSTS:-1}
[ $CHECK = 0 ] || HOSTS=1
case "$HOSTS" in
  1) [ $# -ge 1 ] || die "usage: $0 'shell command'"
     CMDS=("$*"); ROLES=(single) ;;
  2) [ $# -eq 2 ] || die "usage: SVERBS_VM_HOSTS=2 $0 'command on A' 'command on B'"
     CMDS=("$1" "$2"); ROLES=(A B) ;;
  *) die "SVERBS_VM_HOSTS must be 1 or 2" ;;
esac
SMP=${SVERBS_VM_SMP:-2}
MEM=${SVERBS_VM_MEM:-1G}
NET=${SVERBS_VM_NET:-veth}
[ "$HOSTS" = 1 ] || NET=nic
MTU=${SVERBS_VM_MTU:-1500}
TIMEOUT=${SVERBS_VM_TIMEOUT:-600}
GRACE=${SVERBS_VM_GRACE:-15}
BOOT_TIMEOUT=${SVERBS_VM_BOOT_TIMEOUT:-45}
TEST_STALL=${SVERBS_VM_TEST_STALL:-0}
LINK=${SVERBS_VM_LINK:-stream}
CACHE=${SVERBS_VM_CACHE:-$REPO/build/vm}
ACCEL=${SVERBS_VM_ACCEL:-tcg}
BUSYBOX=${SVERBS_VM_BUSYBOX:-/bin/busybox}
for v in SMP MTU TIMEOUT GRACE BOOT_TIMEOUT TEST_STALL; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "SVERBS_VM_$v=${!v} is not a number"
done

# ---------------------------------------------------------------- kernel
KERNEL=${SVERBS_VM_KERNEL:-}
MODDIR=${SVERBS_VM_MODDIR:-}
if [ -z "$KERNEL" ] && [ -r "$CACHE/kernel/current.env" ]; then
  # shellcheck disable=SC1091  # written by fetch-kernel.sh
  KERNEL=$(. "$CACHE/kernel/current.env" && echo "$SVERBS_VM_KERNEL")
  [ -n "$MODDIR" ] || MODDIR=$(. "$CACHE/kernel/current.env" && echo "$SVERBS_VM_MODDIR")
fi
[ -n "$KERNEL" ] || KERNEL=$(ls -1v /boot/vmlinuz-* 2>/dev/null | tail -n1 || true)
[ -n "$KERNEL" ] && [ -r "$KERNEL" ] ||
  die "no kernel: run tests/vm/fetch-kernel.sh (or set SVERBS_VM_KERNEL)"
KVER=${KERNEL##*/vmlinu[xz]-}
MODDIR=${MODDIR:-/lib/modules/$KVER}
[ -d "$MODDIR/kernel" ] || die "no module tree $MODDIR for $KERNEL"

command -v qemu-system-x86_64 >/dev/null || die "no qemu-system-x86_64 (apt-get install qemu-system-x86)"
[ -x "$BUSYBOX" ] && ! LC_ALL=C grep -q '/lib64/ld-linux-x86-64.so.2' "$BUSYBOX" ||
  die "need a static busybox at $BUSYBOX (apt-get install busybox-static)"
MODPROBE=$(command -v modprobe || echo /sbin/modprobe)
DEPMOD=$(command -v depmod || echo /sbin/depmod)
[ -x "$MODPROBE" ] || die "no modprobe (apt-get install kmod)"
mkdir -p "$CACHE" || die "cannot create $CACHE"
for m in rdma_rxe veth virtio_net 9p; do
  [ -n "$(find "$MODDIR/kernel" -name "$m.ko*" -print -quit)" ] || die "no $m module in $MODDIR"
done
if [ $CHECK = 1 ]; then
  echo "run-in-vm: can start a guest: kernel $KERNEL, qemu $(command -v qemu-system-x86_64)"
  exit 0
fi

# ---------------------------------------------------------------- initramfs
# busybox + guest/init + the modules below with their dependencies, in load
# order (the guest needs nothing from the module tree to get to stage 2).
# Cached under a key of everything that goes in.
MODS="virtio_pci virtio_net 9pnet_virtio 9p overlay virtio_console crypto-crc32
      rdma_rxe ib_uverbs rdma_ucm ib_umad veth dummy"
build_initrd() {
  local key initrd t base
  key=$( { echo "$KERNEL $MODDIR $MODS"; stat -c %Y "$KERNEL";
           cat "$HERE/guest/init" "$BUSYBOX"; } | md5sum | cut -c1-12)
  initrd=$CACHE/initrd-$KVER-$key.cpio.gz
  if [ ! -s "$initrd" ]; then
    t=$(mktemp -d "$CACHE/initrd.XXXXXX")
    mkdir -p "$t/bin" "$t/mods"
    cp "$BUSYBOX" "$t/bin/busybox"
    cp "$HERE/guest/init" "$t/init" && chmod +x "$t/init"
    # modprobe -d wants <base>/lib/modules/<ver>: fake that layout if needed
    base=${MODDIR%/lib/modules/$KVER}
    if [ "$base" = "$MODDIR" ]; then
      base=$t/root; mkdir -p "$base/lib/modules"; ln -s "$MODDIR" "$base/lib/modules/$KVER"
    fi
    [ -n "$base" ] || base=/
    [ -s "$MODDIR/modules.dep" ] || "$DEPMOD" -b "$base" "$KVER" || die "depmod failed"
    local m
    for m in $MODS; do
      "$MODPROBE" -d "$base" -S "$KVER" --show-depends "$m" || die "module $m not in $MODDIR"
    done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' > "$t/list"
    : > "$t/mods/order"
    local p n
    while read -r p; do
      n=${p##*/}
      case "$n" in
        *.ko.xz)  xz -dc "$p" > "$t/mods/${n%.xz}"; n=${n%.xz} ;;
        *.ko.zst) zstd -qdc "$p" > "$t/mods/${n%.zst}"; n=${n%.zst} ;;
        *)        cp "$p" "$t/mods/$n" ;;
      esac
      echo "$n" >> "$t/mods/order"
    done < "$t/list"
    rm -rf "$t/root" "$t/list"
    (cd "$t" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp.$$"
    mv "$initrd.tmp.$$" "$initrd"; rm -rf "$t"
  fi
  echo "$initrd"
}

# ---------------------------------------------------------------- PVH boot
# QEMU can start the uncompressed vmlinux (an ELF with the PVH note, needs
# CONFIG_PVH=y) directly: no SeaBIOS, no xz decompression under TCG: ~2 s.
# The vmlinux is cut out of the bzImage at its compressed payload's magic.
boot_image() {
  local config=${KERNEL%/*}/config-$KVER vmlinux magic pos
  if [ "${SVERBS_VM_PVH:-1}" != 1 ] || [ "${KERNEL##*/vmlinuz}" = "$KERNEL" ] ||
     { [ -r "$config" ] && ! grep -q '^CONFIG_PVH=y' "$config"; }; then
    echo "$KERNEL"; return
  fi
  vmlinux=$CACHE/vmlinux-$KVER-$(stat -c %Y-%s "$KERNEL")
  if [ ! -s "$vmlinux" ]; then
    for magic in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -qdc'; do
      pos=$(LC_ALL=C grep -obUaP "${magic%%:*}" "$KERNEL" 2>/dev/null | head -n1 | cut -d: -f1)
      [ -n "$pos" ] || continue
      tail -c +$((pos + 1)) "$KERNEL" | ${magic#*:} > "$vmlinux.tmp.$$" 2>/dev/null || true
      if [ "$(head -c4 "$vmlinux.tmp.$$" | od -An -c | tr -d ' \n')" = '177ELF' ]; then
        mv "$vmlinux.tmp.$$" "$vmlinux"; break
      fi
    done
    rm -f "$vmlinux.tmp.$$"
  fi
  if [ -s "$vmlinux" ]; then echo "$vmlinux"; else echo "$KERNEL"; fi
}

INITRD=$(build_initrd)
BOOT=$(boot_image)

# ---------------------------------------------------------------- run dir
RUN=$(mktemp -d "$CACHE/run.XXXXXX")
QPIDS=(); READERS=()
cleanup() {
  local p
  for p in "${QPIDS[@]}"; do [ "$p" = - ] || kill "$p" 2>/dev/null || true; done
  for p in "${QPIDS[@]}"; do [ "$p" = - ] || wait "$p" 2>/dev/null || true; done
  for p in "${READERS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$RUN/sync"

# read-write shares: deduplicated, no dir inside another one, never "/"
RWLIST=()
add_rw() {
  local d=$1 e
  [ -n "$d" ] && [ -d "$d" ] || return 0
  d=$(cd "$d" && pwd -P)
  [ "$d" != / ] || { echo "run-in-vm: not sharing / read-write" >&2; return 0; }
  for e in "${RWLIST[@]}"; do
    case "$d/" in "$e"/*) return 0 ;; esac
  done
  RWLIST+=("$d")
}
if [ -n "${SVERBS_VM_RW+set}" ]; then
  IFS=: read -r -a rw <<< "$SVERBS_VM_RW"
  for d in "${rw[@]}"; do add_rw "$d"; done
else
  mkdir -p "$REPO/build"
  add_rw "$REPO/build"
  add_rw "$PWD"
fi

# The host's environment, minus what must not cross: our own SVERBS_VM_*
# knobs too (the sverbs layer reads every SVERBS_* variable as a setting and
# warns about unknown ones; the guest-side variables are named RXE_VM_*).
HOSTENV=$(export -p | grep -vE '^declare -x (PWD|OLDPWD|SHLVL|_|HOSTNAME|TERM|SVERBS_VM_[A-Z_]*)=' || true)

IPS=(10.77.0.1 10.77.0.2)
DEVS=(rxe0 rxe1)
# unix socket paths are limited to 107 bytes: fall back to /tmp
SOCKDIR=$RUN
[ ${#RUN} -lt 90 ] || SOCKDIR=$(mktemp -d /tmp/sverbs-vm.XXXXXX)

# prepare_guest I: ctl dir, fifos, streaming readers for guest I
prepare_guest() {
  local i=$1 role j g d tag
  role=${ROLES[$i]} j=$((1 - i)) g=$RUN/${ROLES[$i]}
  mkdir -p "$g/ctl"
  printf '%s\n' "${CMDS[$i]}" > "$g/ctl/cmd"
  {
    printf 'KVER=%q\nMODDIR=%q\nROLE=%q\nNET=%q\nMTU=%q\nWD=%q\n' \
      "$KVER" "$MODDIR" "$role" "$NET" "$MTU" "$PWD"
    printf 'IP=%q\nDEV=%q\nPEER_IP=%q\nPEER_DEV=%q\n' \
      "${IPS[$i]}" "${DEVS[$i]}" "${IPS[$j]}" "${DEVS[$j]}"
    printf 'VERBOSE=%q\n' "${SVERBS_VM_VERBOSE:-0}"
    printf 'NRW=%d\n' ${#RWLIST[@]}
    for d in "${!RWLIST[@]}"; do printf 'RW%d=%q\n' "$d" "${RWLIST[$d]}"; done
  } > "$g/ctl/config"
  {
    echo "$HOSTENV"
    printf 'export RXE_VM_HOST=%q RXE_VM_DEV=%q RXE_VM_IP=%q\n' \
      "$role" "${DEVS[$i]}" "${IPS[$i]}"
    printf 'export RXE_VM_PEER_DEV=%q RXE_VM_PEER_IP=%q\n' "${DEVS[$j]}" "${IPS[$j]}"
    printf 'export RXE_VM_SYNC=/run/sverbs-vm/sync PATH=%q:"$PATH"\n' "$HERE/guest/bin"
  } > "$g/ctl/env"
  mkfifo "$g/out.in" "$g/out.out" "$g/err.in" "$g/err.out"
  # stream the guest's stdout/stderr; with two hosts, tag each line
  if [ "$HOSTS" = 1 ]; then
    cat "$g/out.out" & READERS+=($!)
    cat "$g/err.out" >&2 & READERS+=($!)
  else
    tag="[$role] "
    sed -u "s/^/$tag/" "$g/out.out" & READERS+=($!)
    sed -u "s/^/$tag/" "$g/err.out" >&2 & READERS+=($!)
  fi
}

# start_guest I: launch qemu for guest I in the background, pid in QPIDS[I]
start_guest() {
  local i=$1 role g acc net=() fs=() d
  role=${ROLES[$i]} g=$RUN/${ROLES[$i]}
  case "$ACCEL" in
    kvm) acc=(-accel kvm -cpu host) ;;
    *)   acc=(-accel "tcg,thread=multi" -cpu max) ;;
  esac
  for d in "${!RWLIST[@]}"; do
    fs+=(-fsdev "local,id=rw$d,path=${RWLIST[$d]},security_model=none,multidevs=remap"
         -device "virtio-9p-pci,fsdev=rw$d,mount_tag=rw$d")
  done
  if [ "$NET" = nic ]; then
    # a point-to-point "cable" between the two guests over unix sockets
    local nd
    case "$LINK" in
      stream)  # A listens, B connects (QEMU 7.2 cannot reconnect: B starts
               # once A's socket exists); a stream never drops a frame
        if [ "$role" = A ]; then
          nd="stream,id=n0,server=on,addr.type=unix,addr.path=$SOCKDIR/net.sock"
        else
          nd="stream,id=n0,server=off,addr.type=unix,addr.path=$SOCKDIR/net.sock"
        fi ;;
      dgram)   # each end sends datagrams to the other's socket; a full
               # receive queue drops frames (RoCE then retransmits: slow)
        nd="dgram,id=n0,local.type=unix,local.path=$SOCKDIR/net-$role.sock"
        nd+=",remote.type=unix,remote.path=$SOCKDIR/net-${ROLES[$((1 - i))]}.sock" ;;
      *) die "SVERBS_VM_LINK must be stream or dgram" ;;
    esac
    net=(-netdev "$nd" -device "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:0$((i + 1))")
  fi
  # the harness's own test (selftest.sh): the last guest's first N boots
  # start with their CPUs stopped, a guest that never comes up
  local stall=()
  [ "$BOOTS" -gt "$TEST_STALL" ] || [ "$i" != $((${#ROLES[@]} - 1)) ] || stall=(-S)
  qemu-system-x86_64 -nodefaults -no-user-config -nographic -no-reboot \
    "${stall[@]}" "${acc[@]}" -machine q35 -smp "$SMP" -m "$MEM" \
    -kernel "$BOOT" -initrd "$INITRD" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init mitigations=off no_timer_check ${SVERBS_VM_CMDLINE-tsc=reliable} sverbs_vm_stage2=$HERE/guest/stage2.sh" \
    -serial "file:$g/console.log" -monitor none -nic none "${net[@]}" \
    -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
    -fsdev "local,id=ctl,path=$g/ctl,security_model=none" \
    -device virtio-9p-pci,fsdev=ctl,mount_tag=ctl \
    -fsdev "local,id=sync,path=$RUN/sync,security_model=none" \
    -device virtio-9p-pci,fsdev=sync,mount_tag=sync \
    "${fs[@]}" \
    -device virtio-serial-pci \
    -chardev "pipe,id=out,path=$g/out" -device virtserialport,chardev=out,name=sverbs.out \
    -chardev "pipe,id=err,path=$g/err" -device virtserialport,chardev=err,name=sverbs.err \
    </dev/null >"$g/qemu.log" 2>&1 &
  QPIDS[$i]=$!
}

# start_all: prepare and launch every guest
start_all() {
  local i
  for i in "${!ROLES[@]}"; do prepare_guest "$i"; done
  for i in "${!ROLES[@]}"; do
    start_guest "$i"
    if [ "$NET" = nic ] && [ "$LINK" = stream ] && [ "$i" = 0 ]; then
      # B connects to A's listening socket: wait until QEMU A created it
      for _ in $(seq 200); do
        [ -S "$SOCKDIR/net.sock" ] || ! kill -0 "${QPIDS[0]}" 2>/dev/null && break
        sleep 0.05
      done
    fi
  done
}

# stop_all: kill every guest still running and reap its output readers
# (qemu gone: the fifos' writers are gone and the readers see EOF; a reader
# still blocked in open(), qemu having died before opening, is unblocked)
stop_all() {
  local i p
  for i in "${!ROLES[@]}"; do
    [ "${QPIDS[$i]:--}" = - ] && continue
    kill "${QPIDS[$i]}" 2>/dev/null || true
    wait "${QPIDS[$i]}" 2>/dev/null || true
    QPIDS[$i]=-
  done
  for i in "${!ROLES[@]}"; do
    : <>"$RUN/${ROLES[$i]}/out.out"; : <>"$RUN/${ROLES[$i]}/err.out"
  done
  for p in "${READERS[@]}"; do wait "$p" 2>/dev/null || true; done
  READERS=()
}

# keep_log I WHY: copy guest I's console log to $CACHE/logs (newest 20 kept)
keep_log() {
  local g=$RUN/${ROLES[$1]} dst
  mkdir -p "$CACHE/logs"
  dst=$CACHE/logs/$(date +%Y%m%d-%H%M%S)-$$-${ROLES[$1]}$2.console.log
  cat "$g/console.log" "$g/qemu.log" > "$dst" 2>/dev/null || true
  ls -1t "$CACHE"/logs/*.console.log 2>/dev/null | tail -n +21 | xargs -r rm -f
  echo "$dst"
}

# restart_all: a guest that never came up (QEMU under TCG has been seen to
# stall in its firmware, "Booting from ROM..", on this loaded 2-core host:
# no line of ours ran) is not a test result.  Every guest is started again
# from scratch, both of a linked pair (QEMU 7.2 cannot reconnect a stream
# netdev); a guest whose command had started runs it again.
restart_all() {
  local i g
  stop_all
  for i in "${!ROLES[@]}"; do
    g=$RUN/${ROLES[$i]}
    rm -rf "$g"
  done
  rm -rf "$RUN/sync"; mkdir -p "$RUN/sync"
  rm -f "$SOCKDIR"/net*.sock
  STATUS=(); READY=(); GRACE_END=
  start_all
}

BOOTS=1
start_all

# ---------------------------------------------------------------- wait
# STATUS[i]: the command's status, 124 (killed: timeout / grace), or 125
STATUS=(); READY=()
DEADLINE=$((SECONDS + TIMEOUT))
BOOT_DEADLINE=$((SECONDS + BOOT_TIMEOUT))
GRACE_END=
running() { local p; for p in "${QPIDS[@]}"; do [ "$p" = - ] || return 0; done; return 1; }
kill_guest() {  # kill_guest I STATUS
  kill "${QPIDS[$1]}" 2>/dev/null || true
  wait "${QPIDS[$1]}" 2>/dev/null || true
  QPIDS[$1]=-; STATUS[$1]=$2
}
while running; do
  for i in "${!ROLES[@]}"; do
    g=$RUN/${ROLES[$i]}
    if [ -z "${READY[$i]:-}" ] && [ -s "$g/ctl/ready" ]; then
      READY[$i]=1
      vlog "guest ${ROLES[$i]} ready after $(elapsed) s (guest uptime $(cat "$g/ctl/ready") s)"
    fi
    [ "${QPIDS[$i]}" != - ] || continue
    kill -0 "${QPIDS[$i]}" 2>/dev/null && continue
    wait "${QPIDS[$i]}" 2>/dev/null || true
    QPIDS[$i]=-
    if [ -s "$g/ctl/rc" ]; then STATUS[$i]=$(cat "$g/ctl/rc"); else STATUS[$i]=125; fi
    vlog "guest ${ROLES[$i]} done after $(elapsed) s, status ${STATUS[$i]}"
    # one command failed: the other (a server waiting for it?) gets a grace period
    [ "${STATUS[$i]}" = 0 ] || [ -n "$GRACE_END" ] || GRACE_END=$((SECONDS + GRACE))
  done
  stalled=
  if [ "$BOOT_TIMEOUT" -gt 0 ] && [ $SECONDS -ge $BOOT_DEADLINE ]; then
    for i in "${!ROLES[@]}"; do
      [ -z "${READY[$i]:-}" ] && [ "${QPIDS[$i]}" != - ] && stalled+=" ${ROLES[$i]}"
    done
  fi
  if [ -n "$stalled" ]; then
    for i in "${!ROLES[@]}"; do
      [ -z "${READY[$i]:-}" ] && [ "${QPIDS[$i]}" != - ] || continue
      echo "run-in-vm: host ${ROLES[$i]}: not up after ${BOOT_TIMEOUT}s (SVERBS_VM_BOOT_TIMEOUT, boot $BOOTS of 2); console tail:" >&2
      tail -n 3 "$RUN/${ROLES[$i]}/console.log" 2>/dev/null | sed 's/^/  /' >&2 || true
      echo "run-in-vm: host ${ROLES[$i]}: console log kept in $(keep_log "$i" "-boot$BOOTS")" >&2
    done
    if [ "$BOOTS" -ge 2 ]; then
      echo "run-in-vm: the guest did not come up twice; giving up" >&2
      for i in "${!ROLES[@]}"; do [ "${QPIDS[$i]}" = - ] || kill_guest "$i" 125; done
      continue
    fi
    echo "run-in-vm: restarting every guest (boot 2 of 2)" >&2
    BOOTS=2
    restart_all
    BOOT_DEADLINE=$((SECONDS + BOOT_TIMEOUT))
    continue
  fi
  if [ $SECONDS -ge $DEADLINE ]; then
    echo "run-in-vm: timeout after ${TIMEOUT}s (SVERBS_VM_TIMEOUT), killing the guest" >&2
    for i in "${!ROLES[@]}"; do [ "${QPIDS[$i]}" = - ] || kill_guest "$i" 124; done
  elif [ -n "$GRACE_END" ] && [ $SECONDS -ge "$GRACE_END" ]; then
    for i in "${!ROLES[@]}"; do
      [ "${QPIDS[$i]}" = - ] && continue
      echo "run-in-vm: host ${ROLES[$i]} still running ${GRACE}s after the other failed, killing it" >&2
      kill_guest "$i" 124
    done
  fi
  sleep 0.05
done
stop_all
QPIDS=()

# ---------------------------------------------------------------- report
FINAL=0
for i in "${!ROLES[@]}"; do
  role=${ROLES[$i]} st=${STATUS[$i]}
  g=$RUN/$role
  if [ "$st" = 125 ] && [ ! -s "$g/ctl/rc" ]; then
    echo "run-in-vm: host $role: the guest failed before reporting a status; qemu said:" >&2
    sed 's/^/  /' "$g/qemu.log" >&2 || true
    echo "run-in-vm: console tail:" >&2
    tail -n 25 "$g/console.log" 2>/dev/null | sed 's/^/  /' >&2 || true
  elif [ "$st" = 124 ]; then
    echo "run-in-vm: host $role: console tail:" >&2
    tail -n 10 "$g/console.log" 2>/dev/null | sed 's/^/  /' >&2 || true
  fi
  cat "$g/qemu.log" >> "$g/console.log" 2>/dev/null || true
  if [ -n "${SVERBS_VM_LOG:-}" ]; then
    dst=$SVERBS_VM_LOG; [ "$HOSTS" = 1 ] || dst=$SVERBS_VM_LOG.$role
    cp "$g/console.log" "$dst"
  elif [ "$st" != 0 ]; then
    mkdir -p "$CACHE/logs"
    dst=$CACHE/logs/$(date +%Y%m%d-%H%M%S)-$$-$role.console.log
    cp "$g/console.log" "$dst"
    echo "run-in-vm: host $role status $st; console log kept in $dst" >&2
    # keep the newest 20
    ls -1t "$CACHE"/logs/*.console.log 2>/dev/null | tail -n +21 | xargs -r rm -f
  fi
  [ "$FINAL" != 0 ] || FINAL=$st
done
[ "$HOSTS" = 1 ] || echo "run-in-vm: status A=${STATUS[0]} B=${STATUS[1]}" >&2
[ "$SOCKDIR" = "$RUN" ] || rm -rf "$SOCKDIR"
vlog "total $(elapsed) s"
exit "$FINAL"
}
