#!/bin/bash
# install-stage.sh SRCROOT BUILDROOT STAMP - meson's install script (see
# packaging/meson.build): builds the rdma-core stage for the install prefix
# if needed (ninja target rdma-core-install; a no-op when up to date), copies
# it into $MESON_INSTALL_DESTDIR_PREFIX, then makes every ELF there
# relocatable and checks it (fix-rpaths.sh).
set -euo pipefail
SRCROOT=$1
BUILDROOT=$2
STAMP=$3
: "${MESON_INSTALL_PREFIX:?run by meson install}"
: "${MESON_INSTALL_DESTDIR_PREFIX:?run by meson install}"
say() { echo "install-stage: $*"; }

ninja -C "$BUILDROOT" "${STAMP#"$BUILDROOT"/}" >/dev/null ||
	{ echo "install-stage: building the rdma-core stage failed" >&2; exit 1; }
TAG=$(printf '%s' "${MESON_INSTALL_PREFIX%/}" | sha256sum | cut -c1-12)
STAGE=$BUILDROOT/packaging/rdma-core-$TAG/stage${MESON_INSTALL_PREFIX%/}
[ -d "$STAGE/lib" ] || { echo "install-stage: no rdma-core stage in $STAGE" >&2; exit 1; }
DEST=$MESON_INSTALL_DESTDIR_PREFIX
mkdir -p "$DEST"
# An edited sverbs.conf of an earlier install is kept (like write-env.sh).
keep=
if [ -e "$DEST/etc/sverbs.conf" ]; then
	keep=$(mktemp)
	cp -p "$DEST/etc/sverbs.conf" "$keep"
fi
cp -a "$STAGE/." "$DEST/"
if [ -n "$keep" ]; then
	cp -p "$keep" "$DEST/etc/sverbs.conf"
	rm -f "$keep"
	say "kept the existing $MESON_INSTALL_PREFIX/etc/sverbs.conf (the new one is sverbs.conf.example)"
fi
"$SRCROOT/packaging/fix-rpaths.sh" "$DEST"
"$SRCROOT/packaging/fix-rpaths.sh" --check "$DEST"
say "rdma-core with the sverbs providers installed in ${DESTDIR:+$DESTDIR}$MESON_INSTALL_PREFIX"
