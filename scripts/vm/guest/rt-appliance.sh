#!/bin/bash
# Guest side of scripts/vm/rt-appliance.sh, on the PREEMPT_RT kernel: the host-built rtdaq
# (on PATH through guest-run.sh --bin) runs its embedded default deployment for 3 s, and
# while it runs its threads' scheduling classes are read from /proc; then rtdaq doctor runs.
# Leaves in $RTDAQ_VM_OUT: run.json (the run's report), run.exit, threads.txt (ps -L while
# running), doctor.txt, doctor.json, doctor.exit. The host side judges them.
set -u
O=$RTDAQ_VM_OUT
echo "rt-appliance: kernel $(uname -r) $(uname -v), /sys/kernel/realtime = $(cat /sys/kernel/realtime 2>/dev/null || echo absent)"
rtdaq version
# The default deployment puts its queue threads (SCHED_FIFO 50) on cores 0 and 1. On a
# PREEMPT_RT kernel the main thread's sleep is a soft hrtimer, expired by ktimers/N (SCHED_FIFO
# 1) on the core it slept on: with a busy queue thread on that core it never fires and the
# run overruns its duration (seen: 43 s for 3 s on a 2-CPU guest, a hang with 3). So the guest
# has a third CPU as the housekeeping core, and the process starts there (the queue threads
# pin themselves to their cores), as on a tuned board.
hk=$(( $(nproc) - 1 ))
taskset -c "$hk" rtdaq run --duration 3 --report-json "$O/run.json" > "$O/run.txt" 2>&1 & pid=$!
# the sampler at SCHED_FIFO 90: above the queue threads (50), or it would only run after them
chrt -f 90 sh -c "sleep 1.5; ps -L -o tid=,cls=,rtprio=,psr=,comm= -p $pid" > "$O/threads.txt"
wait "$pid"; echo $? > "$O/run.exit"
echo "rt-appliance: rtdaq run --duration 3 (started on housekeeping CPU $hk of $(nproc)) exited $(cat "$O/run.exit"); its threads 1.5 s in (tid class rtprio cpu name):"
sed 's/^/  /' "$O/threads.txt"
echo "rt-appliance: rtdaq run output:"
sed 's/^/  | /' "$O/run.txt"
rtdaq doctor > "$O/doctor.txt" 2>&1; echo $? > "$O/doctor.exit"
rtdaq doctor --json > "$O/doctor.json" 2> /dev/null
echo "rt-appliance: rtdaq doctor exited $(cat "$O/doctor.exit"):"
sed 's/^/  | /' "$O/doctor.txt"
