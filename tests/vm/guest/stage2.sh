# shellcheck shell=bash
# Stage 2 of the sverbs test guest, run by the host's bash as PID 1 inside the
# overlay root (host "/" read-only + tmpfs), so host binaries are available.
#
# It mounts the per-guest control share (/run/sverbs-vm/ctl: config, env, cmd,
# and where rc / ready are written back), the shared rendezvous dir
# (/run/sverbs-vm/sync) and the read-write host dirs, sets up the network and
# the rxe devices, then runs the command with the host's environment and
# streams its stdout/stderr to two virtio serial ports.  Any setup failure
# prints ===SVERBS_VM_SETUP_FAILED=== on the console and powers off without
# writing rc: the host maps that to status 125.
# One { ... } block: parsed whole before it runs (edits cannot disturb it).
{
B=/run/sverbs-vm/busybox
C=/run/sverbs-vm/ctl
fail() {
  echo "sverbs-vm stage2: $*"
  echo "===SVERBS_VM_SETUP_FAILED==="
  $B sync; $B poweroff -f
}
uptime_s() { $B cut -d' ' -f1 /proc/uptime; }
ninep() {  # ninep TAG DIR: mount a 9p share read-write, uncached
  $B mkdir -p "$2" && $B mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none "$1" "$2"
}

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
$B mkdir -p /dev/pts /dev/shm /tmp
$B mount -t devpts devpts /dev/pts
$B mount -t tmpfs tmpfs /dev/shm
ninep ctl $C || fail "cannot mount the control share"
ninep sync /run/sverbs-vm/sync || fail "cannot mount the sync share"
# config: KVER MODDIR ROLE NET MTU IP DEV PEER_IP PEER_DEV WD VERBOSE NRW RW0..
# (written by run-in-vm.sh)
. $C/config || fail "bad $C/config"
# SVERBS_VM_VERBOSE=1: trace the setup with guest uptimes on the console
[ "$VERBOSE" = 1 ] && { PS4='+[$($B cut -d" " -f1 /proc/uptime)] '; set -x; }

# the host module tree (may be an unpacked .deb) where modprobe looks for it
$B mkdir -p /lib/modules/$KVER && $B mount --bind "$MODDIR" /lib/modules/$KVER ||
  fail "cannot bind $MODDIR"
i=0
while [ $i -lt "$NRW" ]; do
  d=; eval d=\$RW$i
  ninep rw$i "$d" || fail "cannot mount read-write share $d"
  i=$((i + 1))
done

$B hostname "sverbs-vm-$ROLE"
ip link set lo up || fail "lo"
ip link del dummy0 2>/dev/null   # loading dummy.ko made one; "dummy" mode makes its own
# rxe on a netdev; an IPv4 address gives GID index 1 = ::ffff:a.b.c.d (RoCE v2)
add_rxe() { rdma link add "$1" type rxe netdev "$2" || fail "rdma link add $1 netdev $2"; }
case "$NET" in
  veth)  # one guest, rxe0 on veth0 <-> rxe1 on veth1, in the one netns
    ip link add veth0 mtu "$MTU" type veth peer name veth1 mtu "$MTU" || fail "veth"
    ip addr add "$IP/24" dev veth0 && ip addr add "$PEER_IP/24" dev veth1 || fail "veth addr"
    ip link set veth0 up && ip link set veth1 up || fail "veth up"
    # Both ends live in one netns: without accept_local=1 the kernel drops ARP
    # and RoCE packets whose source is one of its own addresses, and rp_filter
    # drops them as spoofed (QP modify to RTR then fails).
    for c in all default veth0 veth1; do
      echo 1 > /proc/sys/net/ipv4/conf/$c/accept_local
      echo 0 > /proc/sys/net/ipv4/conf/$c/rp_filter
    done
    add_rxe "$DEV" veth0
    add_rxe "$PEER_DEV" veth1 ;;
  dummy) # one guest, one device that only talks to itself
    ip link add dummy0 mtu "$MTU" type dummy && ip addr add "$IP/24" dev dummy0 &&
      ip link set dummy0 up || fail "dummy0"
    add_rxe "$DEV" dummy0 ;;
  nic)   # two guests: this one's virtio-net NIC, wired to the other guest
    nic=
    for n in /sys/class/net/*; do [ -e "$n/device" ] && { nic=${n##*/}; break; }; done
    [ -n "$nic" ] || fail "no virtio-net NIC"
    ip link set "$nic" mtu "$MTU" && ip addr add "$IP/24" dev "$nic" &&
      ip link set "$nic" up || fail "$nic setup"
    add_rxe "$DEV" "$nic" ;;
  none) ;;
  *) fail "unknown SVERBS_VM_NET=$NET" ;;
esac

# our output ports, by the names run-in-vm.sh gave them
OUT=/dev/null; ERR=/dev/null
for p in /sys/class/virtio-ports/*; do
  case "$(cat "$p/name" 2>/dev/null)" in
    sverbs.out) OUT=/dev/${p##*/} ;;
    sverbs.err) ERR=/dev/${p##*/} ;;
  esac
done
[ "$OUT" != /dev/null ] && [ "$ERR" != /dev/null ] || fail "no virtio serial ports"

set +x
echo "===SVERBS_VM_READY $(uptime_s)==="
uptime_s > $C/ready
: > /run/sverbs-vm/sync/up-$ROLE
ulimit -l unlimited
# env: the host's `export -p` + the RXE_VM_* guest variables; then the
# host's working directory; stdin is /dev/null.
bash -c '. "$1"; cd "$2" 2>/dev/null || cd /; exec bash -c "$(cat "$3")"' \
  sverbs-vm $C/env "$WD" $C/cmd </dev/null >"$OUT" 2>"$ERR"
echo $? > $C/rc
echo "===SVERBS_VM_DONE $(uptime_s)==="
$B sync
$B poweroff -f
}
