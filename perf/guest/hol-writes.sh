#!/bin/bash
# hol-writes.sh - runs INSIDE the guest (perf/run-threads.sh): which thread
# rings rxe's doorbells while hol_bench --stream-thread runs, stock vs the
# layer.  On rxe a post's doorbell is a write() on the uverbs device, and the
# kernel runs the requester inside it: the thread that writes does the
# stream's protocol work.  hol_bench runs under `strace -f -e trace=write`,
# which slows every system call a lot under TCG: the rates of these runs mean
# nothing, only who writes.
#
#   hol-writes.sh SECONDS "SIZES" [hol_bench args...]
#
# Prints one JSON line per (size, mode): the write() calls (stdout and
# stderr left out) of the poll thread (the process's first thread, which
# polls the CQ and posts the small messages) and of the others (the stream
# thread), over the whole run.
# Exit 1 if any run failed.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SECONDS SIZES [hol_bench args]" >&2; exit 2; }
secs=$1 sizes=$2
shift 2
bin=${PERF_BIN:?}/hol_bench
tmp=$(mktemp -d)
fail=0
for s in $sizes; do
	for m in off on; do
		# the shell's pid is hol_bench's (exec), and its first thread's tid
		# shellcheck disable=SC2016 # $$ and $@ are the inner shell's
		if SVERBS=$m strace -f -e trace=write -o "$tmp/st" \
			sh -c 'echo $$ >"$0"; exec "$@"' "$tmp/pid" "$bin" -L "$s" -t "$secs" \
			--stream-thread "$@" >"$tmp/json" 2>/dev/null; then
			# strace -f -o: "<tid> write(FD, ...)" (a resumed call's
			# second line starts "<... write resumed>": not counted
			# again); stdout and stderr (the shell's echo, hol_bench's
			# results) are not doorbells
			awk -v m="$m" -v s="$s" -v main="$(cat "$tmp/pid")" '
				$2 ~ /^write\(/ && $2 !~ /^write\([12],/ { if ($1 == main) p++; else o++ }
				END { printf "{\"bench\":\"hol-writes\",\"sverbs\":\"%s\",\"large_size\":\"%s\",\"poll_thread_writes\":%d,\"other_thread_writes\":%d}\n", m, s, p, o }
			' "$tmp/st"
		else
			fail=1
			printf '{"bench":"hol-writes","sverbs":"%s","large_size":"%s","error":"hol_bench under strace failed"}\n' "$m" "$s"
		fi
	done
done
rm -rf "$tmp"
exit $fail
