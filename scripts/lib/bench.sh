# shellcheck shell=bash
# Shared by the benchmark scripts: the host facts a result needs, one busy loop per CPU (for
# those that run beside busy loops: bench-busy-host.sh, bench-stalls.sh), and a cargo bench's
# executable (bench-egress-ucx-stage.sh, gpu-host-egress.sh --prepare).

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

# The executable of the cargo bench target $1 (further cargo args after it), built if needed;
# fails naming the target when cargo reports none.
bench_exe() {
    local name=$1 exe
    shift
    exe=$(cargo bench "$@" --bench "$name" --no-run --message-format=json |
        jq -r --arg n "$name" 'select(.reason == "compiler-artifact" and .executable != null
            and .target.name == $n) | .executable' | tail -1)
    if [ -z "$exe" ]; then
        echo "bench_exe: cargo built no executable for bench '$name' ($*)" >&2
        return 1
    fi
    echo "$exe"
}
