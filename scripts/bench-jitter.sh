#!/usr/bin/env bash
# bench-jitter.sh: how late rtdaq's real-time loop wakes, side by side in the same run with
# cyclictest (Debian rt-tests) at the same SCHED_FIFO priority on the same core (issue #33;
# method: docs/benchmarks/method.md; results: docs/benchmarks/jitter.md).
#
#   scripts/bench-jitter.sh            on this host (builds target/release/rtdaq)
#   scripts/bench-jitter.sh --guest    in the PREEMPT_RT QEMU guest (scripts/vm/guest-run.sh
#                                      --kernel rt), the same samples, summarised here
#
# One sample: rtdaq runs the default deployment (configs/host-loopback-udp.toml) with its
# generator paced to BENCH_PPS packets/s (default 1000: the generator sleeps until the next
# packet is due, once a millisecond, as cyclictest -i 1000 does) for BENCH_SECONDS, and
# cyclictest runs meanwhile with the generator's priority, on its core, at the same interval:
#   cyclictest -m -q -p PRIO -a CORE -t 1 -i INTERVAL -D SECS -h 10000
# rtdaq's figures are the report's tx wake_latency_ns (how late the generator ran after the
# time it asked to wake at, every sleep) and loop_turns_ns; cyclictest's are its histogram
# (1 µs bins), both read as the nearest-rank p50/p99/p99.9 and the max.
# Loads, interleaved per repeat: idle, and stress (stress-ng --cpu on every core but the
# measured one, at normal priority: the "ordinary work" SCHED_FIFO must stay ahead of).
# Tables: min / median / max over repeats, and rtdaq's p99.9 over cyclictest's per sample.
# Env: BENCH_REPEATS (3), BENCH_SECONDS (20), BENCH_PPS (1000), BENCH_LOADS ("idle stress"),
# BENCH_OUT (target/bench-jitter/<timestamp>[-guest]). Needs root (SCHED_FIFO), cyclictest
# and stress-ng (scripts/install-test-deps.sh installs both; the guest image has them).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${BENCH_REPEATS:-3}
SECS=${BENCH_SECONDS:-20}
PPS=${BENCH_PPS:-1000}
LOADS=${BENCH_LOADS:-idle stress}
log() { printf '[bench-jitter %s] %s\n' "$(date -u +%T)" "$*" >&2; }

# The config's generator queue: its core and priority (the TX queue of lo_udp).
tx_field() { awk -v k="$1" '/^\[\[interfaces.tx_queues\]\]/ {t = 1} t && $1 == k {print $3; exit}' configs/host-loopback-udp.toml; }

# collect BIN OUT: every sample into OUT (run here or in the guest).
collect() {
    local bin=$1 out=$2 core prio interval rep load rc others spid cpid
    core=$(tx_field cpu_core)
    prio=$(tx_field rt_priority)
    interval=$((1000000 / PPS))
    mkdir -p "$out"
    sed -e "s/^rate_gbps = 1.0 .*/rate_pps = $PPS/" configs/host-loopback-udp.toml > "$out/jitter.toml"
    grep -q "^rate_pps = $PPS" "$out/jitter.toml" || { echo "configs/host-loopback-udp.toml has no 'rate_gbps = 1.0 ' line" >&2; return 2; }
    others=$(seq 0 $(($(nproc) - 1)) | grep -vx "$core" | paste -sd, -)
    {
        echo "date_utc: $(date -u +%FT%TZ)"
        echo "nproc: $(nproc)  uname_r: $(uname -r)  uname_v: $(uname -v)"
        echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
        echo "sched_rt_runtime_us: $(cat /proc/sys/kernel/sched_rt_runtime_us)"
        echo "rtdaq: $("$bin" version | head -1)  cyclictest: $(cyclictest --help 2>&1 | head -1)"
        echo "generator: core $core, SCHED_FIFO $prio, $PPS packets/s; cyclictest -p $prio -a $core -i $interval"
        echo "load stress: stress-ng --cpu on cores ${others:-none}; repeats $REPEATS, $SECS s each"
    } > "$out/host.txt"
    for rep in $(seq 1 "$REPEATS"); do
        for load in $LOADS; do
            spid=""
            if [ "$load" = stress ] && [ -n "$others" ]; then
                stress-ng --cpu "$(echo "$others" | tr ',' '\n' | wc -l)" --taskset "$others" \
                    --timeout $((SECS + 10))s > "$out/stress-$load-$rep.log" 2>&1 &
                spid=$!
                sleep 1
            fi
            cyclictest -m -q -p "$prio" -a "$core" -t 1 -i "$interval" -D "${SECS}s" -h 10000 \
                > "$out/cyclictest-$load-$rep.txt" 2>&1 &
            cpid=$!
            rc=0
            RUST_LOG=warn "$bin" run --config "$out/jitter.toml" --duration "$SECS" \
                --report-json "$out/rtdaq-$load-$rep.json" > "$out/rtdaq-$load-$rep.log" 2>&1 || rc=$?
            wait "$cpid" || rc=$((rc + 100))
            [ -z "$spid" ] || { kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; }
            echo "$load $rep $rc" >> "$out/samples.txt"
            log "$load repeat $rep: exit $rc"
        done
    done
}

if [ "${1:-}" = --collect ]; then # in the guest: RTDAQ_VM_OUT is copied back
    collect "$2" "$RTDAQ_VM_OUT"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "bench-jitter.sh needs root (SCHED_FIFO threads)" >&2; exit 2; }
if [ "${1:-}" = --guest ]; then
    OUT=${BENCH_OUT:-target/bench-jitter/$(date -u +%Y%m%dT%H%M%SZ)-guest}
    cargo build --release -q -p rtdaq
    mkdir -p "$OUT"
    BENCH_REPEATS=$REPEATS BENCH_SECONDS=$SECS BENCH_PPS=$PPS BENCH_LOADS=$LOADS \
        scripts/vm/guest-run.sh --kernel rt --bin target/release/rtdaq --out "$OUT" \
        --timeout $((REPEATS * 2 * (SECS + 15) + 60)) \
        -- env BENCH_REPEATS="$REPEATS" BENCH_SECONDS="$SECS" BENCH_PPS="$PPS" BENCH_LOADS="$LOADS" \
        bash scripts/bench-jitter.sh --collect rtdaq
else
    for t in cyclictest stress-ng; do
        command -v $t > /dev/null || { echo "bench-jitter.sh needs $t (scripts/install-test-deps.sh installs it)" >&2; exit 2; }
    done
    OUT=${BENCH_OUT:-target/bench-jitter/$(date -u +%Y%m%dT%H%M%SZ)}
    cargo build --release -q -p rtdaq
    collect target/release/rtdaq "$OUT"
fi

python3 scripts/lib/jitter_summary.py "$OUT" | tee "$OUT/summary.md"
