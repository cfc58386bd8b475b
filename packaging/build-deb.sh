#!/bin/bash
# build-deb.sh - build the Debian packages sverbs, sverbs-proxy and sverbs-flowgen with
# Debian's tools (dpkg-buildpackage + debhelper; packaging/debian/), from
# this checkout's meson build, then run lintian on them.
#
#   packaging/build-deb.sh [--build DIR] [--out DIR]
#
# Output: OUT/sverbs_<version>_amd64.deb, OUT/sverbs-proxy_<version>_amd64.deb
# and OUT/sverbs-flowgen_<version>_amd64.deb
# (default OUT: build/packaging/deb-out).  The version is meson's project
# version.  lintian runs with packaging/debian/*.lintian-overrides (each
# override says why); any tag it still reports at warning or error level
# fails the build.  Needs: debhelper, lintian, patchelf (scripts/setup.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
build=$ROOT/build
out=
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-deb: unknown argument $1" >&2; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd -P)
out=${out:-$build/packaging/deb-out}
for t in dpkg-buildpackage dh lintian patchelf; do
	command -v $t >/dev/null || {
		echo "build-deb: $t is missing (apt-get install dpkg-dev debhelper lintian patchelf)" >&2
		exit 1
	}
done
version=$(meson introspect --projectinfo "$build" |
	/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
W=$build/packaging/deb
rm -rf "$W"
mkdir -p "$W" "$out"
cp -r "$ROOT/packaging/debian" "$W/debian"
printf 'SVERBS_SRC := %s\nSVERBS_BUILD := %s\n' "$ROOT" "$build" >"$W/debian/sverbs-paths.mk"
cat >"$W/debian/changelog" <<CL
sverbs ($version) unstable; urgency=medium

  * Built from the sverbs repository$(cd "$ROOT" && git describe --always --dirty 2>/dev/null | sed 's/^/ at /').

 -- sverbs developers <sverbs@example.org>  $(date -R)
CL
# sverbs-proxy's and sverbs-flowgen's binaries need sverbs' private libraries: which package has
# them, for dpkg-shlibdeps.  Written after the install (below) would be too
# late, so from the names rdma-core + libsverbs install (one per soname).
: >"$W/debian/shlibs.local"
for so in libibverbs.so.1 librdmacm.so.1 libsverbs.so.1 libmlx5.so.1 libmlx4.so.1 \
	libefa.so.1 libhns.so.1 libmana.so.1 libibumad.so.3 libibmad.so.5 libibnetdisc.so.5; do
	echo "${so%%.so.*} ${so##*.so.} sverbs (= $version)" >>"$W/debian/shlibs.local"
done
(cd "$W" && dpkg-buildpackage -b -us -uc --no-check-builddeps) >"$build/packaging/deb-build.log" 2>&1 || {
	tail -n 40 "$build/packaging/deb-build.log" >&2
	echo "build-deb: dpkg-buildpackage failed (log: $build/packaging/deb-build.log)" >&2
	exit 1
}
for p in sverbs sverbs-proxy sverbs-flowgen; do
	mv -f "$build/packaging/${p}_${version}_amd64.deb" "$out/"
done
mv -f "$build/packaging/sverbs_${version}_amd64".{changes,buildinfo} "$out/" 2>/dev/null || true
echo "build-deb: lintian"
lintian --fail-on error,warning --info --display-info \
	"$out/sverbs_${version}_amd64.deb" "$out/sverbs-proxy_${version}_amd64.deb" \
	"$out/sverbs-flowgen_${version}_amd64.deb"
for p in sverbs sverbs-proxy sverbs-flowgen; do
	echo "build-deb: $out/${p}_${version}_amd64.deb"
done
