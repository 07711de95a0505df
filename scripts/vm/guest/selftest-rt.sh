#!/bin/bash
# shellcheck disable=SC2317  # the check functions run through check()
# Guest side of scripts/vm/selftest.sh on the PREEMPT_RT kernel (run through guest-run.sh
# --kernel rt --bin). Checks: uname -v says PREEMPT_RT and /sys/kernel/realtime is 1; a
# process started with chrt -f 80 runs as SCHED_FIFO 80; cyclictest can create a SCHED_FIFO
# thread (pthread) and run it for 2 s (its latencies are not looked at: the guest is emulated);
# the rxe devices exist on this kernel too.
set -u
fails=0
check() {
    local name=$1; shift
    if "$@"; then echo "selftest-rt: PASS $name"; else echo "selftest-rt: FAIL $name"; fails=$((fails + 1)); fi
}
echo "selftest-rt: uname -v: $(uname -v)"
echo "selftest-rt: /sys/kernel/realtime: $(cat /sys/kernel/realtime 2>&1)"
check "uname -v names PREEMPT_RT" grep -q PREEMPT_RT <<< "$(uname -v)"
check "/sys/kernel/realtime is 1" grep -qx 1 /sys/kernel/realtime
fifo() {
    local o l
    # shellcheck disable=SC2016  # $$ expands in the inner shell
    o=$(chrt -f 80 sh -c 'chrt -p $$') || return 1
    while read -r l; do echo "  $l"; done <<< "$o"
    grep -q 'policy: SCHED_FIFO' <<< "$o" && grep -q 'priority: 80' <<< "$o"
}
check "chrt -f 80: the process runs as SCHED_FIFO 80" fifo
cyclic() {
    local cp threads l
    # cyclictest exits 0 even on a bad option: look at the running thread and at its JSON
    timeout 30 cyclictest -q -m -t 1 -p 80 -i 1000 -D 3 --policy=fifo --json=/tmp/cyclictest.json \
        > /dev/null & cp=$!
    sleep 1.5
    threads=$(ps -L -o tid=,cls=,rtprio=,comm= -C cyclictest)
    wait "$cp" || return 1
    while read -r l; do echo "  thread $l"; done <<< "$threads"
    grep -qE '^ *[0-9]+ +FF +80 +cyclictest' <<< "$threads" &&
        grep -q '"num_threads": 1' /tmp/cyclictest.json && grep -qE '"cycles": [1-9]' /tmp/cyclictest.json
}
check "cyclictest: a SCHED_FIFO 80 thread (pthread) runs for 3 s" cyclic
check "rxe0 and rxe1 on the RT kernel" bash -c 'ibv_devices | grep -qw rxe0 && ibv_devices | grep -qw rxe1'
if [ $fails -ne 0 ]; then echo "selftest-rt: $fails check(s) failed"; exit 1; fi
echo "selftest-rt: all passed"
