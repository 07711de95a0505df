# shellcheck shell=bash
# Shared by the benchmark scripts that run beside busy loops (bench-busy-host.sh,
# bench-stalls.sh): the host facts a result needs, and one busy loop per CPU.

# The host facts, one per line (date, CPUs, kernel, CPU model, RT throttling, load).
bench_host_facts() {
    echo "date_utc: $(date -u +%FT%TZ)"
    echo "nproc: $(nproc)  uname_r: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "sched_rt_runtime_us: $(cat /proc/sys/kernel/sched_rt_runtime_us)"
    echo "loadavg_start: $(cat /proc/loadavg)"
}

# With $1 = 1: one busy loop per CPU at normal priority (taskset -c N sh -c 'while :; ...'),
# killed when the calling script exits.
bench_busy_pids=()
bench_stop_busy() { [ ${#bench_busy_pids[@]} -eq 0 ] || kill "${bench_busy_pids[@]}" 2>/dev/null || true; }
bench_start_busy() {
    trap bench_stop_busy EXIT
    [ "$1" = 1 ] || return 0
    local c
    for c in $(seq 0 $(($(nproc) - 1))); do
        taskset -c "$c" sh -c 'while :; do :; done' &
        bench_busy_pids+=($!)
    done
    sleep 0.2
}
