#!/bin/bash
# install-test.sh SRCROOT BUILDROOT - the install suite's test (meson test
# install-deb; packaging/tests/meson.build says what it covers).
#
# Host part: packaging/build-deb.sh (fails on any lintian warning/error),
# then the packages' contents: every ELF's RUNPATH is $ORIGIN-relative and
# inside /opt/sverbs (fix-rpaths.sh --check), no file names the build tree's
# prefix, the compiled-in paths are /opt/sverbs's.  Guest part: this script
# again, with --guest, in a QEMU guest (tests/vm/run-in-vm.sh).  A guest that
# cannot start is a FAIL, not a skip.
set -euo pipefail
SRCROOT=$1
BUILDROOT=$2
OUT=$BUILDROOT/packaging/test-debs
P=/opt/sverbs
fails=0
pass() { echo "ok - $*"; }
fail() {
	echo "not ok - $*"
	fails=$((fails + 1))
}
check() { # check DESCRIPTION CMD...
	local d=$1
	shift
	if "$@"; then pass "$d"; else fail "$d"; fi
}

if [ "${3:-}" != --guest ]; then
	# ------------------------------------------------------------ host
	rm -rf "$OUT"
	"$SRCROOT/packaging/build-deb.sh" --build "$BUILDROOT" --out "$OUT" ||
		{ echo "not ok - packaging/build-deb.sh (lintian included)"; exit 1; }
	pass "packaging/build-deb.sh built the packages, lintian has no warning or error"
	X=$(mktemp -d)
	trap 'rm -rf "$X"' EXIT
	for d in "$OUT"/*.deb; do dpkg-deb -x "$d" "$X"; done
	check "every ELF in the packages has a \$ORIGIN-relative RUNPATH inside $P" \
		"$SRCROOT/packaging/fix-rpaths.sh" --check "$X$P"
	hits=$(grep -rlF "$BUILDROOT/prefix" "$X" || true)
	check "no packaged file names the build tree's prefix ($BUILDROOT/prefix)${hits:+: $hits}" [ -z "$hits" ]
	v=$(ls "$X$P"/lib/libibverbs.so.1.*)
	check "libibverbs reads its provider list from $P/etc/libibverbs.d" grep -qF "$P/etc/libibverbs.d" "$v"
	check "the rxe provider reads $P/etc/sverbs.conf" \
		grep -qF "$P/etc/sverbs.conf" "$X$P"/lib/libibverbs/librxe-rdmav*.so
	check "rxe.driver and mlx5.driver are in $P/etc/libibverbs.d" \
		test -f "$X$P/etc/libibverbs.d/rxe.driver" -a -f "$X$P/etc/libibverbs.d/mlx5.driver"
	for b in sverbs-proxy sverbs-compute hol_bench rate_bench ibv_devinfo; do
		check "$b is packaged" test -x "$X$P/bin/$b"
	done
	fg=("$OUT"/sverbs-flowgen_*_amd64.deb)
	fgls=$(dpkg-deb -c "${fg[0]}" 2>/dev/null || true) # (a variable: grep -q on a pipe would SIGPIPE dpkg-deb)
	for f in bin/sverbs-flowgen bin/sverbs-bmr bin/sverbs-bmr-fit share/sverbs/flowgen/plot-model.py \
		share/sverbs/flowgen/plot-run.py share/sverbs/flowgen/fairness-summary.py; do
		check "$f is in the sverbs-flowgen package" grep -q " \./opt/sverbs/$f\$" <<<"$fgls"
	done
	for b in sverbs-flowgen sverbs-bmr; do
		check "$b loads $P's libraries (RUNPATH \$ORIGIN/../lib)" \
			test "$(patchelf --print-rpath "$X$P/bin/$b" 2>/dev/null)" = '$ORIGIN/../lib'
	done
	check "sverbs-proxy loads $P's libibverbs (RUNPATH \$ORIGIN/../lib)" \
		test "$(patchelf --print-rpath "$X$P/bin/sverbs-proxy")" = '$ORIGIN/../lib'
	check "the systemd unit is packaged" test -f "$X/lib/systemd/system/sverbs-proxy@.service"
	for d in "$OUT"/*.deb; do
		echo "# $(basename "$d"): $(dpkg-deb -f "$d" Depends)"
	done
	dep=$(dpkg-deb -f "$OUT"/sverbs_*_amd64.deb Depends)
	check "sverbs Depends names libnl (from dpkg-shlibdeps)" grep -q 'libnl-route-3-200' <<<"$dep"
	dep=$(dpkg-deb -f "$OUT"/sverbs-proxy_*_amd64.deb Depends)
	check "sverbs-proxy Depends on sverbs (= version) and liburing" \
		grep -Eq 'sverbs \(= [^)]+\).*liburing2|liburing2.*sverbs \(= [^)]+\)' <<<"$dep"
	dep=$(dpkg-deb -f "${fg[0]}" Depends 2>/dev/null || true)
	check "sverbs-flowgen Depends on sverbs (= version) and OpenBLAS" \
		grep -Eq 'sverbs \(= [^)]+\).*libopenblas|libopenblas.*sverbs \(= [^)]+\)' <<<"$dep"
	[ $fails = 0 ] || { echo "# $fails host check(s) failed"; exit 1; }
	rm -rf "$X" # (exec below ends this shell without its EXIT trap)

	runner=${SVERBS_VM_RUNNER:-$SRCROOT/tests/vm/run-in-vm.sh}
	why=$("$runner" --check 2>&1) || { echo "not ok - cannot start a guest: $why"; exit 1; }
	exec "$runner" "$(printf '%q ' bash "$0" "$SRCROOT" "$BUILDROOT" --guest)"
fi

# ------------------------------------------------------------ guest
T=$(mktemp -d /tmp/install-test.XXXXXX)
port=18700
COMMON=(-x 1 -F -u 20)
PIN_SRV=() PIN_CLI=()
if [ "$(nproc)" -ge 2 ]; then PIN_SRV=(taskset -c 1); PIN_CLI=(taskset -c 0); fi

# pair NAME WRAP -- SERVER... -- CLIENT...: run a server/client pair, each
# under WRAP (a command prefix, "-" for none), each with LD_DEBUG=libs;
# statuses in $T/NAME.{srv,cli}.rc, output in .out, loader log in .ld.*
pair() {
	local n=$1 wrap=() srv=() cli=() spid
	[ "$2" = - ] || read -r -a wrap <<<"$2"
	shift 3
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	port=$((port + 1))
	LD_DEBUG=libs LD_DEBUG_OUTPUT=$T/$n.srv.ld timeout 120 "${wrap[@]}" "${PIN_SRV[@]}" \
		"${srv[@]}" >"$T/$n.srv.out" 2>&1 &
	spid=$!
	if vm-wait-listen "$PORT" 60 2>>"$T/$n.srv.out"; then
		LD_DEBUG=libs LD_DEBUG_OUTPUT=$T/$n.cli.ld timeout 120 "${wrap[@]}" "${PIN_CLI[@]}" \
			"${cli[@]}" >"$T/$n.cli.out" 2>&1 && echo 0 >"$T/$n.cli.rc" || echo $? >"$T/$n.cli.rc"
	else
		kill "$spid" 2>/dev/null || true
		echo 125 >"$T/$n.cli.rc"
	fi
	wait "$spid" && echo 0 >"$T/$n.srv.rc" || echo $? >"$T/$n.srv.rc"
}
# perf NAME WRAP TOOL ARGS...: a perftest pair rxe1 (server) <- rxe0 (client)
perf() {
	local n=$1 wrap=$2 tool=$3
	shift 3
	PORT=$((port + 1))
	pair "$n" "$wrap" -- "$tool" -d rxe1 "${COMMON[@]}" -p $PORT "$@" \
		-- "$tool" -d rxe0 "${COMMON[@]}" -p $PORT "$@" 10.77.0.2
}
# pingpong NAME WRAP: ibv_rc_pingpong rxe1 (server) <- rxe0 (client)
pingpong() {
	PORT=$((port + 1))
	pair "$1" "$2" -- ibv_rc_pingpong -d rxe1 -g 1 -p $PORT -n 200 \
		-- ibv_rc_pingpong -d rxe0 -g 1 -p $PORT -n 200 10.77.0.2
}
rc() { cat "$T/$1.rc" 2>/dev/null || echo missing; }
# loaded NAME.srv|NAME.cli DIR: libibverbs.so.1 and the rxe provider came from DIR
loaded() {
	local inits
	inits=$(cat "$T/$1".ld.* 2>/dev/null | sed -n 's/.*calling init: //p')
	grep -qx "$2/lib/libibverbs.so.1" <<<"$inits" &&
		grep -Eqx "$2/lib/libibverbs/librxe-rdmav[0-9]+\.so" <<<"$inits"
}
stock() { # libibverbs and rxe from the system's rdma-core
	local inits
	inits=$(cat "$T/$1".ld.* 2>/dev/null | sed -n 's/.*calling init: //p')
	grep -Eqx '(/usr)?/lib/x86_64-linux-gnu/libibverbs\.so\.1' <<<"$inits" &&
		! grep -q '/opt/sverbs\|/tmp/moved' <<<"$inits"
}
stats() { grep -q 'sverbs: QP [0-9]*: ' "$T/$1.out"; } # (stdout and stderr interleave: not at a line start)
# both pair members exited 0
ok2() { [ "$(rc "$1.srv")" = 0 ] && [ "$(rc "$1.cli")" = 0 ]; }
show() { # on failure: the pair's output
	local f
	for f in "$T/$1".{srv,cli}.out; do
		[ -e "$f" ] && sed "s|^|#   $(basename "$f"): |" "$f" | tail -n 15
	done
}
checkpair() { # checkpair DESC NAME CMD...
	local d=$1 n=$2
	shift 2
	if "$@"; then pass "$d"; else
		fail "$d"
		show "$n"
	fi
}
ldcache_same() { # the linker cache's libibverbs.so.1 entries are as before the install
	ldconfig -p | grep -F libibverbs.so.1 >"$T/ldcache.now" || true
	cmp -s "$T/ldcache.before" "$T/ldcache.now"
}
snapshot() { # names under the places a package may touch
	find /etc /opt /lib/systemd /usr/share/doc /usr/share/lintian /usr/lib/systemd \
		-xdev 2>/dev/null | grep -v '^/etc/ld.so.cache$' | sort
}

echo "# guest $RXE_VM_HOST: $(uname -r), $(ibv_devinfo -l 2>/dev/null | tr '\n' ' ')"
unset SVERBS SVERBS_STATS
[ ! -e $P ] || { echo "not ok - $P exists in the guest before the install"; exit 1; }
snapshot >"$T/before"
ldconfig -p | grep -F libibverbs.so.1 >"$T/ldcache.before" || true

# ---- install
if dpkg -i "$OUT"/sverbs_*_amd64.deb "$OUT"/sverbs-proxy_*_amd64.deb "$OUT"/sverbs-flowgen_*_amd64.deb \
	>"$T/dpkg-i.out" 2>&1; then
	pass "dpkg -i sverbs sverbs-proxy sverbs-flowgen"
else
	fail "dpkg -i sverbs sverbs-proxy sverbs-flowgen"
	sed 's/^/#   /' "$T/dpkg-i.out"
	exit 1
fi
check "dpkg reports all three installed" \
	test "$(dpkg-query -W -f='${db:Status-Abbrev}' sverbs sverbs-proxy sverbs-flowgen)" = "ii ii ii "
check "the install did not change the host's choice (ld.so.cache as before)" \
	ldcache_same
dpkg -L sverbs sverbs-proxy sverbs-flowgen | sort -u >"$T/dpkg-L"

# ---- the flowgen package: both programs start from the installed tree
# alone (--help)
for b in sverbs-flowgen sverbs-bmr; do
	LD_DEBUG=libs LD_DEBUG_OUTPUT=$T/$b.ld timeout 60 $P/bin/$b --help >"$T/$b.out" 2>&1 &&
		echo 0 >"$T/$b.rc" || echo $? >"$T/$b.rc"
	# (the loader names it by RUNPATH: $P/bin/../lib/...)
	inits=$(cat "$T/$b".ld.* 2>/dev/null | sed -n 's/.*calling init: //p' | xargs -r realpath -ms)
	if [ "$(rc $b)" = 0 ] && grep -q 'Usage' "$T/$b.out" && grep -q "^$b: " "$T/$b.out" &&
		grep -qx "$P/lib/libibverbs.so.1" <<<"$inits"; then
		pass "$b --help: exit 0, its own banner, libibverbs from $P"
	else
		fail "$b --help: exit $(rc $b), banner '$(head -n 1 "$T/$b.out")', libibverbs from: $(grep libibverbs.so <<<"$inits" | tr '\n' ' ')"
		tail -n 15 "$T/$b.out" | sed 's/^/#   /'
	fi
done

# ---- the model check from the installed tree: plot-model.py finds the
# installed sverbs-bmr-fit (no checkout on a cluster) and fits the BMR runs
# kept in perf/results
runs=("$SRCROOT"/perf/results/flowgen-bmr-model/runs/bmr-*.json)
if [ -f "${runs[0]}" ] && timeout 120 $P/share/sverbs/flowgen/plot-model.py --out "$T/model" "${runs[@]}" \
	>"$T/model.out" 2>&1 && [ -s "$T/model/model.png" ] && grep -q '^T_comm' "$T/model.out"; then
	pass "plot-model.py from $P fits ${#runs[@]} BMR runs with $P's sverbs-bmr-fit"
else
	fail "plot-model.py from $P (runs: ${#runs[@]})"
	tail -n 15 "$T/model.out" 2>/dev/null | sed 's/^/#   /'
fi

# ---- per program: sverbs-run
out=$($P/bin/sverbs-run --check 2>&1) && pass "sverbs-run --check: sverbs" ||
	{ fail "sverbs-run --check"; }
echo "$out" | sed 's/^/#   /'
perf run-wbw "$P/bin/sverbs-run env SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "sverbs-run ib_write_bw: both sides exit 0" run-wbw ok2 run-wbw
checkpair "sverbs-run ib_write_bw: libibverbs and librxe from $P (client, server)" run-wbw \
	eval 'loaded run-wbw.cli $P && loaded run-wbw.srv $P'
checkpair "sverbs-run ib_write_bw: SVERBS_STATS prints the layer's per-QP line" run-wbw \
	eval 'stats run-wbw.cli && stats run-wbw.srv'
perf run-slat "$P/bin/sverbs-run env SVERBS_STATS=on" ib_send_lat -s 2 -n 200
checkpair "sverbs-run ib_send_lat: exit 0, ours, the layer's line" run-slat \
	eval 'ok2 run-slat && loaded run-slat.cli $P && stats run-slat.cli'
pingpong run-pp "$P/bin/sverbs-run env SVERBS_STATS=on"
checkpair "sverbs-run ibv_rc_pingpong: exit 0, ours, the layer's line" run-pp \
	eval 'ok2 run-pp && loaded run-pp.cli $P && loaded run-pp.srv $P && stats run-pp.cli'
perf run-off "$P/bin/sverbs-run env SVERBS=off SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "sverbs-run with SVERBS=off: exit 0, our libraries, no layer (no per-QP line)" run-off \
	eval 'ok2 run-off && loaded run-off.cli $P && ! stats run-off.cli && ! stats run-off.srv'
perf plain-wbw "env SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "without the wrapper ib_write_bw stays on the system's rdma-core" plain-wbw \
	eval 'ok2 plain-wbw && stock plain-wbw.cli && ! stats plain-wbw.cli'

# ---- the tree moved elsewhere (the only copy): the wrapper names the
# providers itself (rdma-core's provider list is compiled in as $P/etc/...)
mv $P /tmp/moved
out=$(/tmp/moved/bin/sverbs-run --check 2>&1) && grep -q 'librxe-rdmav[0-9]*.so (sverbs)' <<<"$out" &&
	grep -q '/tmp/moved/lib/libibverbs/librxe' <<<"$out" &&
	pass "a moved tree: sverbs-run --check loads its own providers" ||
	{ fail "a moved tree: sverbs-run --check"; echo "$out" | sed 's/^/#   /'; }
perf moved-wbw "/tmp/moved/bin/sverbs-run env SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "a moved tree: ib_write_bw through its sverbs-run loads it, with the layer" moved-wbw \
	eval 'ok2 moved-wbw && loaded moved-wbw.cli /tmp/moved && stats moved-wbw.cli'
mv /tmp/moved $P

# ---- per host: sverbs-select host on
$P/bin/sverbs-select status >"$T/status" 2>&1 || true # (a file: grep -q on a pipe would SIGPIPE it)
check "sverbs-select status: off" grep -q '^host: *off' "$T/status"
$P/bin/sverbs-select host on
# awk reads ldconfig's list to its end (an early exit would SIGPIPE
# ldconfig, and pipefail would fail the check whatever the cache said)
check "host on: ld.so.cache resolves libibverbs.so.1 to $P" \
	eval "ldconfig -p | awk '\$1 == \"libibverbs.so.1\" && !n++ { print \$NF }' | grep -q '^$P/lib/'"
check "host on: sverbs-which on the system's ibv_devinfo says sverbs" \
	$P/libexec/sverbs/sverbs-which $P /usr/bin/ibv_devinfo -l
perf host-wbw "env SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "host on: plain ib_write_bw: exit 0, ours, the layer's line" host-wbw \
	eval 'ok2 host-wbw && loaded host-wbw.cli $P && loaded host-wbw.srv $P && stats host-wbw.cli'
perf host-slat "env SVERBS_STATS=on" ib_send_lat -s 2 -n 200
checkpair "host on: plain ib_send_lat: exit 0, ours, the layer's line" host-slat \
	eval 'ok2 host-slat && loaded host-slat.cli $P && stats host-slat.cli'
pingpong host-pp "env SVERBS_STATS=on"
checkpair "host on: plain ibv_rc_pingpong: exit 0, ours, the layer's line" host-pp \
	eval 'ok2 host-pp && loaded host-pp.cli $P && stats host-pp.cli'
perf host-off "env SVERBS=off SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "host on + SVERBS=off: exit 0, our libraries, no layer" host-off \
	eval 'ok2 host-off && loaded host-off.cli $P && ! stats host-off.cli'
$P/bin/sverbs-select host off
check "host off: ld.so.cache as before the install" \
	ldcache_same
check "host off: sverbs-which on the system's ibv_devinfo says NOT sverbs" \
	eval "! $P/libexec/sverbs/sverbs-which $P /usr/bin/ibv_devinfo -l >/dev/null"
perf undo-wbw "env SVERBS_STATS=on" ib_write_bw -s 65536 -n 100
checkpair "host off: plain ib_write_bw is back on the system's rdma-core" undo-wbw \
	eval 'ok2 undo-wbw && stock undo-wbw.cli && ! stats undo-wbw.cli'

# ---- the proxy package
check "sverbs-proxy --check accepts /etc/sverbs/proxy.toml" \
	$P/bin/sverbs-proxy --config /etc/sverbs/proxy.toml --role egress --check
if command -v systemd-analyze >/dev/null; then
	out=$(systemd-analyze verify /lib/systemd/system/sverbs-proxy@.service 2>&1) &&
		pass "systemd-analyze verify sverbs-proxy@.service" ||
		{ fail "systemd-analyze verify sverbs-proxy@.service"; echo "$out" | sed 's/^/#   /'; }
fi

# ---- purge, with the host switch left on: nothing may stay behind
$P/bin/sverbs-select host on >/dev/null
if dpkg --purge sverbs-flowgen sverbs-proxy sverbs >"$T/purge.out" 2>&1; then pass "dpkg --purge"; else
	fail "dpkg --purge"
	sed 's/^/#   /' "$T/purge.out"
fi
# Left behind: a listed file or symlink that still exists, or a listed
# directory of ours (shared ones like /, /etc, /lib/systemd/system stay; on
# a merged-/usr system /lib is a symlink to usr/lib, a shared directory too:
# -d follows it.  The packages ship no symlink to a directory).
left=$(while read -r f; do
	[ -e "$f" ] || [ -L "$f" ] || continue
	if [ -d "$f" ]; then
		case "$f" in
		$P | $P/* | /etc/sverbs | /etc/sverbs/* | /usr/share/doc/sverbs* | /usr/share/lintian/overrides/sverbs*) echo "$f" ;;
		esac
	else
		echo "$f"
	fi
done <"$T/dpkg-L")
check "purge: no file of dpkg -L is left, nor a directory of ours${left:+: $left}" [ -z "$left" ]
check "purge: $P is gone" test ! -e $P
check "purge: the host switch's ld.so.conf.d entry is gone" test ! -e /etc/ld.so.conf.d/00-sverbs.conf
check "purge: ld.so.cache as before the install" \
	ldcache_same
snapshot >"$T/after"
extra=$(comm -13 "$T/before" "$T/after" | tr '\n' ' ')
check "purge: nothing new under /etc /opt /lib/systemd /usr/share/doc /usr/share/lintian${extra:+: $extra}" \
	[ -z "$extra" ]

echo "# $fails failed"
[ $fails = 0 ]
