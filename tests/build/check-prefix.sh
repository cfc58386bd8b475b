#!/bin/bash
# check-prefix.sh PREFIX - the installed sverbs rdma-core prefix is complete
# and self-contained: programs resolve rdma-core from it, pyverbs imports from
# it under Debian's python3, our providers carry the layer, nothing was
# installed outside it.
set -euo pipefail
PREFIX=$(cd "$1" && pwd -P)
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
ok() { echo "ok: $*"; }

[ -r "$PREFIX/env.sh" ] || fail "no $PREFIX/env.sh"
# shellcheck disable=SC1091
. "$PREFIX/env.sh"
[ "${LD_LIBRARY_PATH%%:*}" = "$PREFIX/lib" ] || fail "env.sh does not put $PREFIX/lib first"
ok "env.sh puts the prefix first"

# perftest (Debian's) resolves the verbs libraries from the prefix.
bin=$(command -v ib_write_bw || true)
[ -n "$bin" ] || fail "ib_write_bw not installed (apt-get install perftest)"
out=$(LD_LIBRARY_PATH=$PREFIX/lib ldd "$bin")
for lib in libibverbs.so.1 librdmacm.so.1 libmlx5.so.1; do
	line=$(grep -F "$lib =>" <<<"$out" || true)
	[ -n "$line" ] || fail "$bin does not link $lib"
	grep -qF "$PREFIX/lib/$lib" <<<"$line" || fail "$lib resolves outside the prefix: $line"
done
ok "ib_write_bw resolves libibverbs, librdmacm, libmlx5 from $PREFIX/lib"

# pyverbs under Debian's python3, from the prefix.
where=$(cd / && /usr/bin/python3 -c 'import pyverbs.device, os; print(os.path.realpath(pyverbs.device.__file__))')
case "$where" in
"$PREFIX"/*) ok "pyverbs.device imports from $where" ;;
*) fail "pyverbs.device comes from $where, not the prefix" ;;
esac

# The prefix's own libibverbs.d selects our rxe and mlx5 providers.
for drv in rxe mlx5; do
	[ -r "$PREFIX/etc/libibverbs.d/$drv.driver" ] || fail "no $drv.driver in $PREFIX/etc/libibverbs.d"
done
rxe=$(ls "$PREFIX"/lib/libibverbs/librxe-rdmav*.so)
for so in "$rxe" "$PREFIX/lib/libmlx5.so.1"; do
	# (a variable, not a pipe into grep -q: with pipefail nm would die of SIGPIPE)
	syms=$(nm "$so")
	grep -q ' sverbs_qp_create$' <<<"$syms" || fail "$so does not carry the sverbs layer"
	dyn=$(nm -D --defined-only "$so")
	! grep -q 'sverbs_' <<<"$dyn" || fail "$so exports sverbs symbols (they must stay private)"
done
ok "rxe and mlx5 providers carry the layer, privately"

[ -r "$PREFIX/include/infiniband/sverbs.h" ] || fail "sverbs.h not installed"
dyn=$(nm -D --defined-only "$PREFIX/lib/libsverbs.so.1")
grep -q ' sverbs_query_qp_stats@' <<<"$dyn" || fail "libsverbs.so.1 does not export sverbs_query_qp_stats"
[ -r "$PREFIX/etc/sverbs.conf" ] || fail "etc/sverbs.conf not installed"
ok "sverbs.h and etc/sverbs.conf installed"

manifest=$(dirname "$PREFIX")/rdma-core/build/install_manifest.txt
[ -r "$manifest" ] || fail "no $manifest"
outside=$(grep -cv "^$PREFIX/" "$manifest" || true)
[ "$outside" = 0 ] || fail "$outside installed files are outside $PREFIX"
ok "all $(wc -l <"$manifest") installed files are inside the prefix"
