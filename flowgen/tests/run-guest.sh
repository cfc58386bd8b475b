#!/bin/bash
# run-guest.sh - meson tests "flowgen-*" (suite flowgen): boots the Soft-RoCE
# guest (tests/vm/run-in-vm.sh) and runs one case of guest/cases.sh there with
# the built sverbs-flowgen.  A guest that cannot start FAILS the test (the
# reason is printed): these checks cannot be done without one.
#
#   flowgen/tests/run-guest.sh CASE FLOWGEN_BINARY
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 CASE FLOWGEN_BINARY" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
bin=$(cd "$(dirname "$2")" && pwd -P)/$(basename "$2")
runner=${FLOWGEN_VM_RUNNER:-$repo/tests/vm/run-in-vm.sh}
build=$(cd "$(dirname "$bin")/.." && pwd -P)
[ -x "$runner" ] || { echo "FAIL: no VM runner $runner"; exit 1; }
if ! why=$("$runner" --check 2>&1); then
	echo "FAIL: cannot start a guest: $why"
	exit 1
fi
# bmr-model: up to 16 MPI ranks (~40 MiB each) and a long sweep
case $1 in bmr-model) t=2300 ;; *) t=900 ;; esac
export SVERBS_VM_TIMEOUT=${SVERBS_VM_TIMEOUT:-$t}
# 4,096 flows: ~50 KiB per flow in each process plus ~100 KiB in the kernel
case $1 in many | bmr-model) export SVERBS_VM_MEM=${SVERBS_VM_MEM:-3G} ;; esac
out=$build/flowgen/results/$1
rm -rf "$out"
mkdir -p "$out"
"$runner" ". '$build/prefix/env.sh'; '$here/guest/cases.sh' '$1' '$bin' '$out'"
