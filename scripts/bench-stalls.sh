#!/usr/bin/env bash
# bench-stalls.sh: how long the queue threads of the DPDK ring-PMD loopback
# (configs/vdev-dpdk-ring.toml, release engine binary) are off their cores, and what that
# costs at several generator rates, on this host as it is: one busy loop per CPU at normal
# priority (BENCH_BUSY=0: a quiet host). The ring PMD's ring holds 1023 frames whatever the
# config says (DPDK's net_ring creates it with 1024 slots), so it rides out a stall of the RX
# thread of 1023 / packet rate: 11.6 ms at 1 Gb/s of 1400 B payloads, 38.6 ms at 0.3 Gb/s.
# Rates interleaved R1 R2 ... R1 R2 ... (method: docs/benchmarks/method.md; results:
# docs/benchmarks/busy-host.md). Per sample: exit code, lost, TX ring_full, the longest loop
# turn of the RX and TX threads and when it ended (the report's longest_stall_us /
# longest_stall_at_s), CPU steal on cores 0 and 1 during the run (the report's cpu_steal_s).
# Env: BENCH_RATES ("1.0 0.3", Gb/s), BENCH_REPEATS (8), BENCH_SECONDS (10), BENCH_BUSY (1),
# BENCH_OUT (target/bench-stalls/<timestamp>). Needs root and Debian's DPDK.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
RATES=${BENCH_RATES:-1.0 0.3}
REPEATS=${BENCH_REPEATS:-8}
SECS=${BENCH_SECONDS:-10}
BUSY=${BENCH_BUSY:-1}
OUT=${BENCH_OUT:-target/bench-stalls/$(date -u +%Y%m%dT%H%M%SZ)}
[ "$(id -u)" -eq 0 ] || { echo "bench-stalls.sh needs root (SCHED_FIFO queue threads)" >&2; exit 2; }
mkdir -p "$OUT"
log() { printf '[bench-stalls %s] %s\n' "$(date -u +%T)" "$*" >&2; }

scripts/build-engines.sh --release dpdk >&2
BIN=target/engines/rtdaq-dpdk
for r in $RATES; do
    sed -e "s/^rate_gbps = .*/rate_gbps = $r/" configs/vdev-dpdk-ring.toml > "$OUT/rate-$r.toml"
    grep -q "^rate_gbps = $r\$" "$OUT/rate-$r.toml" || { echo "no rate_gbps line in vdev-dpdk-ring.toml" >&2; exit 2; }
done
{
    bench_host_facts
    echo "binary: $($BIN version | head -1) ($(git rev-parse --short HEAD))"
    echo "busy loops: $BUSY  repeats: $REPEATS  seconds: $SECS  rates: $RATES"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

bench_start_busy "$BUSY"

for rep in $(seq 1 "$REPEATS"); do
    for r in $RATES; do
        json="$OUT/rate-$r-$rep.json"
        set +e
        "$BIN" run --config "$OUT/rate-$r.toml" --duration "$SECS" --report-json "$json" \
            > "$OUT/rate-$r-$rep.txt" 2>&1
        rc=$?
        set -e
        log "rate $r Gb/s run $rep: exit $rc, $(grep -E '^longest loop' "$OUT/rate-$r-$rep.txt" || echo 'no stall line')"
    done
done

python3 - "$OUT" "$RATES" <<'EOF'
import json, sys, glob, statistics as st
out, rates = sys.argv[1], sys.argv[2].split()
def mmm(xs, f="{:.1f}"):
    return " / ".join(f.format(v) for v in (min(xs), st.median(xs), max(xs)))
print("| rate Gb/s | ring holds | runs with loss | lost per run | RX longest turn ms | TX longest turn ms | steal core 0 s | steal core 1 s |")
print("|---:|---:|---:|---|---:|---:|---:|---:|")
for r in rates:
    runs = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/rate-{r}-*.json"))]
    if not runs:
        continue
    rx = [q["rx"]["queues"][0]["longest_stall_us"] / 1e3 for q in runs]
    tx = [q["tx"]["queues"][0]["longest_stall_us"] / 1e3 for q in runs]
    lost = [q["lost"] for q in runs]
    s0 = [q["cpu_steal_s"].get("0", 0.0) for q in runs]
    s1 = [q["cpu_steal_s"].get("1", 0.0) for q in runs]
    measured_pps = st.median(q["rx"]["totals"]["packets"] / q["duration_s"] for q in runs)
    holds = 1023 / measured_pps * 1e3
    print(f"| {r} | {holds:.1f} ms | {sum(1 for l in lost if l)} of {len(runs)} | "
          f"{', '.join(map(str, lost))} | {mmm(rx)} | {mmm(tx)} | {mmm(s0, '{:.2f}')} | {mmm(s1, '{:.2f}')} |")
EOF
