#!/bin/bash
# fix-rpaths.sh ROOT - make an installed sverbs tree relocatable: every ELF
# file under ROOT (the install prefix, perhaps under a DESTDIR) that needs a
# library shipped in ROOT/lib gets a RUNPATH relative to its own place
# ($ORIGIN/../lib for bin/, $ORIGIN for lib/, ...); every other ELF loses any
# RPATH/RUNPATH it had (e.g. meson's or CMake's paths into the build tree).
#
#   fix-rpaths.sh --check ROOT   change nothing; fail if any ELF has an
#                                RPATH/RUNPATH entry that is not $ORIGIN-based
#                                or that leads outside ROOT, or a NEEDED
#                                library of ROOT/lib it cannot reach.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then
	check=1
	shift
fi
[ $# -eq 1 ] || {
	echo "usage: $0 [--check] ROOT" >&2
	exit 2
}
ROOT=$(cd "$1" && pwd -P)
LIB=$ROOT/lib
command -v patchelf >/dev/null || {
	echo "fix-rpaths: patchelf is not installed (apt-get install patchelf)" >&2
	exit 1
}

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }

bad=0
n=0
while IFS= read -r -d '' f; do
	is_elf "$f" || continue
	n=$((n + 1))
	dir=$(dirname "$f")
	rel=$(realpath -m --relative-to="$dir" "$LIB")
	if [ "$rel" = . ]; then
		want='$ORIGIN:$ORIGIN/..'
	else
		want="\$ORIGIN/$rel"
	fi
	ours=0
	for so in $(patchelf --print-needed "$f"); do
		if [ -e "$LIB/$so" ]; then
			ours=1
			break
		fi
	done
	have=$(patchelf --print-rpath "$f")
	if [ $check = 0 ]; then
		if [ $ours = 1 ]; then
			[ "$have" = "$want" ] || patchelf --set-rpath "$want" "$f"
		elif [ -n "$have" ]; then
			patchelf --remove-rpath "$f"
		fi
		continue
	fi
	# --check
	IFS=: read -r -a entries <<<"$have"
	for e in "${entries[@]}"; do
		case "$e" in
		'$ORIGIN' | '$ORIGIN'/* | '${ORIGIN}' | '${ORIGIN}'/*)
			e2=${e/\$\{ORIGIN\}/\$ORIGIN}
			p=$(realpath -m "$dir/${e2#\$ORIGIN}")
			case "$p/" in
			"$ROOT"/*) ;;
			*)
				echo "fix-rpaths: ${f#"$ROOT"/}: RUNPATH entry $e leads outside the prefix ($p)" >&2
				bad=$((bad + 1))
				;;
			esac
			;;
		*)
			echo "fix-rpaths: ${f#"$ROOT"/}: RPATH/RUNPATH entry '$e' is not \$ORIGIN-relative" >&2
			bad=$((bad + 1))
			;;
		esac
	done
	if [ $ours = 1 ] && [ "$have" != "$want" ]; then
		echo "fix-rpaths: ${f#"$ROOT"/}: needs a library of lib/ but its RUNPATH is '$have', not '$want'" >&2
		bad=$((bad + 1))
	fi
done < <(find "$ROOT" -type f -print0)
if [ $check = 1 ]; then
	[ $bad = 0 ] || {
		echo "fix-rpaths: $bad problem(s) in $n ELF files under $ROOT" >&2
		exit 1
	}
	echo "fix-rpaths: $n ELF files under $ROOT: every RUNPATH is \$ORIGIN-relative and inside it"
else
	echo "fix-rpaths: $n ELF files under $ROOT made relocatable"
fi
