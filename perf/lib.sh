# shellcheck shell=bash
# perf/lib.sh - sourced by the perf/ scripts (bash): paths, the VM runner, and
# small helpers.  Nothing here runs anything on its own.
#
#   PERF_DIR     this folder
#   REPO         the repository
#   BUILD        the meson build dir ($SVERBS_BUILD, default <repo>/build)
#   PREFIX       the patched rdma-core prefix ($BUILD/prefix)
#   PERF_BIN     where hol_bench / rate_bench are ($PERF_BIN, default $BUILD/perf)
#   PY           Debian's python3 (matplotlib lives there, not in pyenv's)
#   vm_run CMD   run CMD in the Soft-RoCE guest: tests/vm/run-in-vm.sh, or
#                $PERF_VM_RUNNER if set
PERF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$PERF_DIR/.." && pwd -P)
BUILD=${SVERBS_BUILD:-$REPO/build}
PREFIX=$BUILD/prefix
PERF_BIN=${PERF_BIN:-$BUILD/perf}
PY=/usr/bin/python3
VM_RUNNER=${PERF_VM_RUNNER:-$REPO/tests/vm/run-in-vm.sh}

perf_die() {
	echo "${0##*/}: $*" >&2
	exit 1
}
perf_log() { echo "${0##*/}: $*" >&2; }

# The benchmarks must exist; say how to get them otherwise.
perf_need_bins() {
	local b
	for b in hol_bench rate_bench; do
		[ -x "$PERF_BIN/$b" ] ||
			perf_die "no $PERF_BIN/$b: build it (meson setup --reconfigure $BUILD && meson compile -C $BUILD hol_bench rate_bench), or set PERF_BIN"
	done
	[ -r "$PREFIX/env.sh" ] || perf_die "no $PREFIX/env.sh: build rdma-core first (meson compile -C $BUILD)"
}

# vm_run 'shell command': in the guest, with the prefix's env.sh sourced.
vm_run() {
	[ -x "$VM_RUNNER" ] || perf_die "no VM runner at $VM_RUNNER (set PERF_VM_RUNNER)"
	"$VM_RUNNER" ". '$PREFIX/env.sh'; export PERF_BIN='$PERF_BIN'; $1"
}

# perf_meta FILE ARGS: write the facts that change how to read the numbers
# (the guest is TCG on this host, sharing its CPUs) as a JSON object.
perf_meta() {
	local git
	git=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
	$PY - "$1" "$2" "$git" <<-'PYEOF'
	import json, os, sys
	f, args, git = sys.argv[1:4]
	json.dump({"host_cpus": os.cpu_count(),
	           "host_loadavg": " ".join(open("/proc/loadavg").read().split()[:3]),
	           "vm_smp": os.environ.get("SVERBS_VM_SMP", "2"),
	           "vm_accel": os.environ.get("SVERBS_VM_ACCEL", "tcg"),
	           "git": git, "args": args}, open(f, "w"))
	PYEOF
}
