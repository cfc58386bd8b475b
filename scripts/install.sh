#!/bin/bash
# install.sh - install sverbs into a prefix (default /opt/sverbs): our
# rdma-core (libibverbs, librdmacm, every provider, rxe and mlx5 with the
# layer, libsverbs, headers, etc/libibverbs.d, etc/sverbs.conf, tools, man
# pages), sverbs-proxy, sverbs-compute, the benchmarks, sverbs-run,
# sverbs-select and bin/env.sh.  The system's rdma-core is not touched.
#
#   scripts/install.sh [--prefix DIR] [--destdir DIR] [--build DIR]
#
#   --prefix DIR    where it will live (default /opt/sverbs); rdma-core
#                   compiles this path in (its provider list and the layer's
#                   sverbs.conf), so it gets a build of its own per prefix
#   --destdir DIR   stage under DIR instead (DIR/opt/sverbs/...), for packaging
#   --build DIR     the meson build dir (default ./build, set up by setup.sh)
#
# It wraps `meson configure -Dprefix=DIR` (when the prefix differs) and
# `meson install`; every installed ELF gets a $ORIGIN-relative RUNPATH and
# none points into the build tree (checked).  docs/install.md: the rest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
prefix=/opt/sverbs
destdir=
build=$ROOT/build
die() {
	echo "install: error: $*" >&2
	exit 1
}
while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
	--prefix=*) prefix=${1#*=}; shift ;;
	--destdir) destdir=${2:?--destdir needs a directory}; shift 2 ;;
	--destdir=*) destdir=${1#*=}; shift ;;
	--build) build=${2:?--build needs a directory}; shift 2 ;;
	--build=*) build=${1#*=}; shift ;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
case "$prefix" in /*) ;; *) die "--prefix must be absolute" ;; esac
prefix=${prefix%/}
[ -n "$prefix" ] || die "--prefix / is not supported"
[ -f "$build/build.ninja" ] || die "no meson build in $build: run scripts/setup.sh first"
if [ -n "$destdir" ]; then
	mkdir -p "$destdir"
	destdir=$(cd "$destdir" && pwd -P)
fi
target=$destdir$prefix
probe=$target
while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
[ -w "$probe" ] || die "$target is not writable ($probe): run as root, or use --prefix/--destdir"
case "$prefix/" in
"$ROOT"/* | "$build"/*) die "the prefix $prefix is inside the source or build tree" ;;
esac

current=$(meson introspect --buildoptions "$build" |
	/usr/bin/python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
if [ "$current" != "$prefix" ]; then
	echo "install: meson configure -Dprefix=$prefix (was $current)"
	meson configure "$build" -Dprefix="$prefix" >/dev/null
fi
meson compile -C "$build"
meson compile -C "$build" rdma-core-install
args=(--no-rebuild -C "$build")
[ -z "$destdir" ] || args+=(--destdir "$destdir")
meson install "${args[@]}"
echo "install: done: $target"
echo "  per program:  $prefix/bin/sverbs-run CMD...   (or: . $prefix/bin/env.sh)"
echo "  per host:     $prefix/bin/sverbs-select host on   (undo: host off)"
