#!/bin/bash
# patch-dev.sh - work on patches/ as git commits.
#
#   scripts/patch-dev.sh unpack [DIR]   pristine rdma-core 56.1 in DIR (default
#                                      build/patch-dev) as a git repo: one
#                                      commit "upstream", then one commit per
#                                      patch of patches/series (git am)
#   scripts/patch-dev.sh export [DIR]   write the commits after "upstream" back
#                                      to patches/ (git format-patch) and
#                                      rewrite patches/series
#
# Edit in DIR, commit (or git rebase -i to amend a patch), then export.  The
# tarball is found as the build finds it (SVERBS_RDMA_CORE_TARBALL or
# build/rdma-core_56.1.orig.tar.gz, which the first build downloads).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cmd=${1:-}
DIR=${2:-$ROOT/build/patch-dev}
die() {
	echo "patch-dev: $*" >&2
	exit 1
}
git_() { git -C "$DIR" -c user.name=sverbs -c user.email=sverbs@localhost "$@"; }

case "$cmd" in
unpack)
	TARBALL=${SVERBS_RDMA_CORE_TARBALL:-$ROOT/build/rdma-core_56.1.orig.tar.gz}
	[ -r "$TARBALL" ] || die "no tarball $TARBALL: build once, or set SVERBS_RDMA_CORE_TARBALL"
	[ ! -e "$DIR" ] || die "$DIR exists; remove it first"
	mkdir -p "$DIR"
	tar -xzf "$TARBALL" -C "$DIR" --strip-components=1
	git_ init -q
	git_ add -A
	git_ commit -q -m upstream
	git_ tag upstream
	sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$ROOT/patches/series" | while read -r p _; do
		git_ am -q "$ROOT/patches/$p" || die "git am $p failed (see $DIR)"
	done
	echo "patch-dev: $DIR ready ($(git_ rev-list --count upstream..HEAD) patches applied)"
	;;
export)
	[ -d "$DIR/.git" ] || die "$DIR is not a patch-dev tree"
	rm -f "$ROOT"/patches/[0-9][0-9][0-9][0-9]-*.patch
	git_ format-patch -q --no-signature --zero-commit -N -o "$ROOT/patches" upstream..HEAD
	{
		echo "# Applied in order to rdma-core 56.1 by scripts/build-rdma-core.sh."
		(cd "$ROOT/patches" && ls [0-9][0-9][0-9][0-9]-*.patch)
	} >"$ROOT/patches/series"
	echo "patch-dev: exported $(git_ rev-list --count upstream..HEAD) patches"
	;;
*)
	die "usage: $0 unpack|export [DIR]"
	;;
esac
