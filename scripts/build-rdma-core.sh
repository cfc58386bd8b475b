#!/bin/bash
# build-rdma-core.sh - build the patched rdma-core 56.1 with the sverbs layer
# and install it into a private prefix.  Called by meson (custom target
# "rdma-core"); safe to run by hand.
#
#   build-rdma-core.sh SRCROOT BUILDROOT STAMP [DEPFILE]
#
#   SRCROOT    the sverbs repository (patches/, sched/, batch/, providers/...)
#   BUILDROOT  where to work: BUILDROOT/rdma-core/{src,build}, BUILDROOT/prefix
#   STAMP      written on success (meson's output: a header naming the prefix)
#   DEPFILE    if given, a Makefile-style list of every input (our sources,
#              their folders, the patches, the tarball) for ninja
#
# The tarball comes from $SVERBS_RDMA_CORE_TARBALL if set, else from a cached
# copy in BUILDROOT, else from the Debian pool of the mirror that this
# machine's apt sources name.  Its sha256 is verified either way.
#
# SVERBS_RDMA_CORE_SANITIZE (e.g. address,undefined) builds rdma-core, the
# providers and the layer in them with -fsanitize=...: for
# scripts/sanitize.sh guest, into a BUILDROOT of its own.  pyverbs is not
# built then (a Python extension cannot load the sanitizer's runtime first).
# No check recovers (-fno-sanitize-recover=all) except those named in
# SVERBS_RDMA_CORE_SANITIZE_RECOVER (e.g. nonnull-attribute): only a
# recoverable check can be suppressed (UBSAN_OPTIONS=suppressions=...).  A
# change of either knob configures afresh.
#
# Only what changed is redone: a new tarball or patch series unpacks and
# configures afresh; a change in our own sources only re-runs ninja (rdma-core's
# CMake lists them as sources of the rxe and mlx5 providers).
set -euo pipefail

RDMA_CORE_VERSION=56.1
RDMA_CORE_SHA256=63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8
TARBALL_NAME=rdma-core_${RDMA_CORE_VERSION}.orig.tar.gz

die() {
	echo "build-rdma-core: error: $*" >&2
	exit 1
}
say() { echo "build-rdma-core: $*"; }

[ $# -eq 3 ] || [ $# -eq 4 ] || die "usage: $0 SRCROOT BUILDROOT STAMP [DEPFILE]"
SRCROOT=$(cd "$1" && pwd -P)
mkdir -p "$2"
BUILDROOT=$(cd "$2" && pwd -P)
STAMP=$3
DEPFILE=${4:-}
WORK=$BUILDROOT/rdma-core
SRC=$WORK/src
BLD=$WORK/build
PREFIX=$BUILDROOT/prefix
PY=/usr/bin/python3

# ------------------------------------------------------------------ tarball
# Print the mirror URIs that apt is configured with (deb822 and one-line).
apt_mirrors() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		# deb [opts] URI suite components
		sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" |
			awk '$1 == "deb" || $1 == "deb-src" { print $2 }'
	done
}

sha_ok() { [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$RDMA_CORE_SHA256" ]; }

fetch_tarball() {
	local dest=$1 uri url tmp
	tmp=$dest.part.$$
	for uri in $(apt_mirrors | grep -v -- '-security' | awk '!seen[$0]++'); do
		case "$uri" in
		http://* | https://*) ;;
		*) continue ;;
		esac
		url=${uri%/}/pool/main/r/rdma-core/$TARBALL_NAME
		say "downloading $url"
		if command -v curl >/dev/null; then
			curl -fsSL --retry 2 -o "$tmp" "$url" || continue
		else
			/usr/lib/apt/apt-helper download-file "$url" "$tmp" \
				"SHA256:$RDMA_CORE_SHA256" >/dev/null || continue
		fi
		if sha_ok "$tmp"; then
			mv "$tmp" "$dest"
			return 0
		fi
		say "sha256 mismatch for $url, ignoring it"
	done
	rm -f "$tmp"
	return 1
}

TARBALL=${SVERBS_RDMA_CORE_TARBALL:-}
if [ -n "$TARBALL" ]; then
	[ -r "$TARBALL" ] || die "SVERBS_RDMA_CORE_TARBALL=$TARBALL is not a readable file"
	sha_ok "$TARBALL" || die "$TARBALL: sha256 is not $RDMA_CORE_SHA256 (expected the upstream rdma-core $RDMA_CORE_VERSION tarball)"
else
	TARBALL=$BUILDROOT/$TARBALL_NAME
	if [ ! -s "$TARBALL" ] || ! sha_ok "$TARBALL"; then
		rm -f "$TARBALL"
		fetch_tarball "$TARBALL" || die "could not obtain $TARBALL_NAME from the apt mirrors ($(apt_mirrors | tr '\n' ' ')).
  Download it yourself (it is in Debian's pool: pool/main/r/rdma-core/$TARBALL_NAME,
  sha256 $RDMA_CORE_SHA256) and run again with
  SVERBS_RDMA_CORE_TARBALL=/path/to/$TARBALL_NAME"
	fi
fi

# ------------------------------------------------------------------ unpack + patch
SERIES=$SRCROOT/patches/series
[ -r "$SERIES" ] || die "no $SERIES"
series_hash() {
	{
		echo "$RDMA_CORE_SHA256"
		cat "$SERIES"
		sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$SERIES" | while read -r p _; do
			cat "$SRCROOT/patches/$p"
		done
	} | sha256sum | cut -d' ' -f1
}
WANT=$(series_hash)
if [ "$(cat "$SRC/.sverbs-series" 2>/dev/null || true)" != "$WANT" ]; then
	say "unpacking $TARBALL_NAME and applying patches/series"
	rm -rf "$SRC" "$BLD"
	mkdir -p "$SRC"
	tar -xzf "$TARBALL" -C "$SRC" --strip-components=1
	sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$SERIES" | while read -r p _; do
		[ -r "$SRCROOT/patches/$p" ] || die "patches/series names $p, which does not exist"
		if ! out=$(patch -d "$SRC" -p1 --forward --batch --no-backup-if-mismatch \
			-i "$SRCROOT/patches/$p" 2>&1); then
			echo "$out" >&2
			die "patch $p does not apply to rdma-core $RDMA_CORE_VERSION"
		fi
		if grep -q 'offset\|fuzz' <<<"$out"; then
			echo "$out" >&2
			die "patch $p applies only with offset/fuzz: refresh it (scripts/patch-dev.sh)"
		fi
		say "applied $p"
	done
	echo "$WANT" >"$SRC/.sverbs-series"
fi

# ------------------------------------------------------------------ configure
san_flags=
if [ -n "${SVERBS_RDMA_CORE_SANITIZE:-}" ]; then
	san_flags="-fsanitize=$SVERBS_RDMA_CORE_SANITIZE -fno-sanitize-recover=all"
	[ -z "${SVERBS_RDMA_CORE_SANITIZE_RECOVER:-}" ] ||
		san_flags+=" -fsanitize-recover=$SVERBS_RDMA_CORE_SANITIZE_RECOVER"
	san_flags+=" -fno-omit-frame-pointer"
fi
[ "$(cat "$BLD/.sverbs-san-flags" 2>/dev/null || true)" = "$san_flags" ] ||
	rm -f "$BLD/build.ninja"
if [ ! -f "$BLD/build.ninja" ]; then
	say "configuring (prefix $PREFIX)"
	mkdir -p "$BLD"
	launcher=() san=()
	if [ -n "${SVERBS_RDMA_CORE_SANITIZE:-}" ]; then
		san=(-DNO_PYVERBS=1 "-DCMAKE_C_FLAGS=$san_flags"
			"-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=$SVERBS_RDMA_CORE_SANITIZE"
			"-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=$SVERBS_RDMA_CORE_SANITIZE")
	fi
	if command -v ccache >/dev/null; then
		launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
	fi
	cmake "${launcher[@]}" "${san[@]}" -S "$SRC" -B "$BLD" -G Ninja \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_INSTALL_PREFIX="$PREFIX" \
		-DCMAKE_INSTALL_LIBDIR=lib \
		-DNO_MAN_PAGES=1 \
		-DPYTHON_EXECUTABLE=$PY \
		-DCMAKE_INSTALL_PYTHON_ARCH_LIB="$PREFIX/lib/python3/dist-packages" \
		-DCMAKE_INSTALL_SYSTEMD_SERVICEDIR="$PREFIX/lib/systemd/system" \
		-DCMAKE_INSTALL_SYSTEMD_BINDIR="$PREFIX/lib/systemd" \
		-DCMAKE_INSTALL_UDEV_RULESDIR="$PREFIX/lib/udev/rules.d" \
		-DCMAKE_INSTALL_PERLDIR="$PREFIX/share/perl5" \
		-DCMAKE_INSTALL_RUNDIR=var/run \
		-DSVERBS_SOURCE_DIR="$SRCROOT" \
		>"$WORK/configure.log" 2>&1 || {
		tail -n 40 "$WORK/configure.log" >&2
		die "cmake configure failed (full log: $WORK/configure.log)"
	}
	if [ -n "$san_flags" ]; then
		echo "$san_flags" >"$BLD/.sverbs-san-flags"
	else
		rm -f "$BLD/.sverbs-san-flags"
	fi
	if [ -z "${SVERBS_RDMA_CORE_SANITIZE:-}" ] &&
		! grep -q 'pyverbs/device' "$BLD/build.ninja"; then
		rm -f "$BLD/build.ninja"
		die "pyverbs would not be built: is cython3 and python3-dev installed? (see $WORK/configure.log)"
	fi
fi

# ------------------------------------------------------------------ build + install
say "building"
ninja -C "$BLD" >"$WORK/build.log" 2>&1 || {
	grep -B2 -A12 'error\|FAILED' "$WORK/build.log" | head -n 80 >&2
	die "build failed (full log: $WORK/build.log)"
}
ninja -C "$BLD" install >"$WORK/install.log" 2>&1 || {
	tail -n 30 "$WORK/install.log" >&2
	die "install failed (full log: $WORK/install.log)"
}
# Nothing may land outside the prefix.
outside=$(grep -v "^$PREFIX/" "$BLD/install_manifest.txt" || true)
[ -z "$outside" ] || die "install wrote outside $PREFIX:
$outside"

"$SRCROOT/scripts/write-env.sh" "$PREFIX" "$SRCROOT"
if [ -z "${SVERBS_RDMA_CORE_SANITIZE:-}" ]; then
	python_ok=$(cd / && . "$PREFIX/env.sh" && $PY -c 'import pyverbs.device; print("ok")' 2>&1) ||
		die "pyverbs is not importable from the prefix: $python_ok"
fi
# The stamp is a header so that meson can order C targets after the prefix.
printf '/* generated by build-rdma-core.sh */\n#define SVERBS_PREFIX "%s"\n' "$PREFIX" >"$STAMP"
if [ -n "$DEPFILE" ]; then
	# Folders too: adding or removing a file changes the folder's mtime.
	{
		printf '%s:' "$STAMP"
		for d in common sched batch libsverbs providers providers/rxe providers/mlx5 providers/mlx5/tests patches include/infiniband scripts; do
			[ -d "$SRCROOT/$d" ] || continue
			printf ' \\\n %s' "$SRCROOT/$d"
			find "$SRCROOT/$d" -maxdepth 1 -type f \( -name '*.[ch]' -o -name '*.patch' -o -name series -o -name '*.cmake' -o -name '*.sh' -o -name '*.conf' \) -printf ' \\\n %p'
		done
		printf ' \\\n %s\n' "$TARBALL"
	} >"$DEPFILE"
fi
say "done: $PREFIX (source $PREFIX/env.sh to use it)"
