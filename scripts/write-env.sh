#!/bin/bash
# write-env.sh PREFIX SRCROOT - write PREFIX/env.sh, which puts the sverbs
# prefix first for the dynamic linker, python, pkg-config and the shell, and
# install the documented default configuration PREFIX/etc/sverbs.conf (an
# existing one, perhaps edited by the user, is kept).
set -euo pipefail
PREFIX=$1
SRCROOT=$2
cat >"$PREFIX/env.sh" <<ENV
# source me: use the sverbs rdma-core build in $PREFIX
# (its etc/libibverbs.d selects our providers; etc/sverbs.conf configures the layer)
export SVERBS_PREFIX=$PREFIX
export LD_LIBRARY_PATH=$PREFIX/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONPATH=$PREFIX/lib/python3/dist-packages\${PYTHONPATH:+:\$PYTHONPATH}
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
export PATH=$PREFIX/bin:$PREFIX/sbin\${PATH:+:\$PATH}
ENV
mkdir -p "$PREFIX/etc"
install -m 0644 "$SRCROOT/common/sverbs.conf" "$PREFIX/etc/sverbs.conf.example"
[ -e "$PREFIX/etc/sverbs.conf" ] || install -m 0644 "$SRCROOT/common/sverbs.conf" "$PREFIX/etc/sverbs.conf"
