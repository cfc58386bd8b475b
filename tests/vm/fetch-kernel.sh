#!/bin/bash
# fetch-kernel.sh - put Debian's stock kernel (the one the guest of run-in-vm.sh
# boots) into a cache directory, WITHOUT installing it into /boot.
#
#   usage: fetch-kernel.sh [CACHE_DIR]
#          CACHE_DIR defaults to $SVERBS_VM_CACHE, else <repo>/build/vm
#
# What it does (idempotent: a second run with the same candidate is a no-op):
#   1. resolves the versioned image package that the meta package
#      linux-image-amd64 depends on (apt-cache depends), e.g.
#      linux-image-6.1.0-56-amd64, and its candidate version (apt-cache show);
#   2. apt-get download's that .deb into CACHE_DIR/debs/;
#   3. dpkg-deb -x's it into CACHE_DIR/kernel/<package>_<version>/ and runs
#      depmod on the extracted module tree (a dpkg-deb -x tree has no modules.dep);
#   4. points CACHE_DIR/kernel/current at that tree and writes
#      CACHE_DIR/kernel/current.env:
#          SVERBS_VM_KERNEL=<tree>/boot/vmlinuz-<kver>
#          SVERBS_VM_MODDIR=<tree>/lib/modules/<kver>
#      which run-in-vm.sh reads by default.
# It prints the vmlinuz path on stdout; progress goes to stderr.
#
# Needs: apt (with `apt-get update` done), dpkg, kmod (depmod). No root needed
# for the download itself, but apt-get download wants a writable cwd.
# Offline (apt cannot resolve or download): an already extracted tree in the
# cache is reused, with a warning; with none, exit 1.
# Knobs: SVERBS_VM_KERNEL_META  meta package to resolve (default linux-image-amd64)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CACHE=${1:-${SVERBS_VM_CACHE:-$repo/build/vm}}
META=${SVERBS_VM_KERNEL_META:-linux-image-amd64}
KDIR=$CACHE/kernel

log() { echo "fetch-kernel: $*" >&2; }

# Write current.env + the current symlink for an extracted tree, print vmlinuz.
publish() {
  local tree=$1 vmlinuz kver
  vmlinuz=$(ls -1v "$tree"/boot/vmlinuz-* 2>/dev/null | tail -n1)
  [ -n "$vmlinuz" ] || { log "no vmlinuz in $tree"; return 1; }
  kver=${vmlinuz##*/vmlinuz-}
  [ -d "$tree/lib/modules/$kver/kernel" ] || { log "no modules in $tree"; return 1; }
  if [ ! -s "$tree/lib/modules/$kver/modules.dep" ]; then
    log "depmod $kver"
    depmod -b "$tree" "$kver"
  fi
  ln -sfn "${tree##*/}" "$KDIR/current"
  printf 'SVERBS_VM_KERNEL=%q\nSVERBS_VM_MODDIR=%q\n' \
    "$KDIR/current/boot/vmlinuz-$kver" "$KDIR/current/lib/modules/$kver" \
    > "$KDIR/current.env.tmp.$$"
  mv "$KDIR/current.env.tmp.$$" "$KDIR/current.env"
  echo "$KDIR/current/boot/vmlinuz-$kver"
}

reuse_cached() {
  local tree
  tree=$(ls -1dv "$KDIR"/*_*/ 2>/dev/null | tail -n1)
  [ -n "$tree" ] || { log "no kernel cached in $KDIR and apt cannot provide one: $*"; exit 1; }
  log "WARNING: $*; reusing cached ${tree%/}"
  publish "${tree%/}"
}

mkdir -p "$KDIR" "$CACHE/debs"

# 1. linux-image-amd64 -> linux-image-6.1.0-NN-amd64 (first Depends: line)
pkg=$(apt-cache depends "$META" 2>/dev/null |
      awk '$1=="Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}') || true
[ -n "$pkg" ] || reuse_cached "apt-cache depends $META found no versioned image (apt-get update?)"
ver=$(apt-cache show "$pkg" 2>/dev/null | awk '$1=="Version:"{print $2; exit}') || true
[ -n "$ver" ] || reuse_cached "apt-cache show $pkg has no Version"

tree=$KDIR/${pkg}_$ver
if [ -e "$tree/.complete" ]; then
  publish "$tree"
  exit 0
fi

# 2. download (apt-get download writes to the cwd; name it ourselves)
deb=$CACHE/debs/${pkg}_${ver}_amd64.deb
if [ ! -s "$deb" ]; then
  log "downloading $pkg=$ver"
  tmp=$(mktemp -d "$CACHE/debs/dl.XXXXXX")
  if ! (cd "$tmp" && apt-get download -q "$pkg=$ver" >&2); then
    rm -rf "$tmp"
    reuse_cached "apt-get download $pkg=$ver failed"
  fi
  mv "$tmp"/*.deb "$deb"
  rmdir "$tmp"
fi

# 3. extract into a temporary dir, then rename: an interrupted run leaves no
#    half tree that looks complete
log "extracting $deb"
rm -rf "$tree.tmp"
dpkg-deb -x "$deb" "$tree.tmp"
rm -rf "$tree"
mv "$tree.tmp" "$tree"
publish "$tree" >/dev/null
touch "$tree/.complete"
rm -f "$deb"   # the tree is what we keep
publish "$tree"
