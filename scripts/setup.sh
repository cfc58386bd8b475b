#!/bin/bash
# setup.sh - install what sverbs needs from Debian 12's apt (as root), fetch
# the Soft-RoCE guest's kernel, and build everything into ./build.
#
#   scripts/setup.sh            packages + kernel + build
#   SVERBS_SKIP_APT=1 ...       skip apt (packages already there)
#
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT"

PACKAGES=(
	# build: meson, rdma-core's CMake build, pyverbs, CUnit
	meson ninja-build cmake pkg-config gcc g++ ccache patch curl
	cython3 python3-dev libnl-3-dev libnl-route-3-dev libudev-dev
	libsystemd-dev libcunit1-dev clang-format
	# fuzzing (scripts/fuzz.sh: libFuzzer) and sanitizers (scripts/sanitize.sh)
	clang libclang-rt-14-dev
	# the Soft-RoCE guest (tests/vm) and the tools run in it
	qemu-system-x86 busybox-static kmod iproute2 cpio xz-utils zstd
	perftest rdmacm-utils ibverbs-utils strace tcpdump valgrind jq
	# proxy, load generator, benchmarks
	liburing-dev libhttp-parser-dev libcli11-dev libtomlplusplus-dev
	libfmt-dev libspdlog-dev nlohmann-json3-dev libopenblas-dev
	libbenchmark-dev wrk nginx haproxy openmpi-bin libopenmpi-dev
	ucx-utils python3-matplotlib
	systemd # systemd-socket-activate: the proxy-fault-systemd-notify test
	# install + Debian packages (scripts/install.sh, packaging/build-deb.sh)
	patchelf debhelper lintian dpkg-dev
)

if [ "${SVERBS_SKIP_APT:-0}" != 1 ]; then
	missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${PACKAGES[@]}" 2>/dev/null |
		awk '$1 != "ii" { print $2 }' || true)
	# dpkg-query prints nothing for packages it has never heard of
	known=$(dpkg-query -W -f='${Package}\n' "${PACKAGES[@]}" 2>/dev/null || true)
	for p in "${PACKAGES[@]}"; do
		grep -qx "$p" <<<"$known" || missing="$missing $p"
	done
	if [ -n "${missing// /}" ]; then
		[ "$(id -u)" = 0 ] || { echo "setup: run as root to install:$missing" >&2; exit 1; }
		echo "setup: apt-get install$missing"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		# shellcheck disable=SC2086
		apt-get install -y -q --no-install-recommends $missing
	fi
fi

if [ -x tests/vm/fetch-kernel.sh ]; then
	tests/vm/fetch-kernel.sh
fi

if [ ! -f build/build.ninja ]; then
	meson setup build
fi
meson compile -C build
