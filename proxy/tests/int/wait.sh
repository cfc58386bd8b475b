# wait.sh - sourced by run.sh and run-rdma.sh: waiting on a condition.
#
#   wait_until SECONDS WHAT CMD [ARG...]
#
# Runs CMD until it succeeds or SECONDS of wall-clock time have passed,
# whatever each try costs on a loaded host (an iteration count does not bound
# the time, and a fixed sleep does not establish the state).  On the deadline
# it prints "# timed out after SECONDS s waiting for: WHAT" and returns 1.
# Every caller turns that 1 into a counted failure (check, || fail, || exit),
# so a wait that runs out is never silent.
wait_until() {
    local secs=$1 what=$2 end
    shift 2
    end=$(($(date +%s%N) + secs * 1000000000))
    until "$@"; do
        if [ "$(date +%s%N)" -ge "$end" ]; then
            echo "# timed out after $secs s waiting for: $what"
            return 1
        fi
        sleep 0.05
    done
}

# gone PID: the process has exited
gone() { ! kill -0 "$1" 2> /dev/null; }
