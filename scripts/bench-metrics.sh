#!/usr/bin/env bash
# bench-metrics.sh: what the metrics endpoint costs the data path (issue #18). The default
# deployment (configs/host-loopback-udp.toml, 1 Gb/s of 1400-byte datagrams over loopback),
# interleaved A B A B (method: docs/benchmarks/method.md; results: docs/benchmarks/metrics.md):
#   plain     `rtdaq run`
#   scraped   `rtdaq run --metrics 127.0.0.1:PORT` with curl fetching /metrics every second
# Per sample: exit code, lost, packets received, CPU ns per packet of the RX I/O and consumer
# threads (the report's thread CPU times), scrapes answered. Tables: min / median / max.
# Env: BENCH_REPEATS (5), BENCH_SECONDS (10), BENCH_OUT (target/bench-metrics/<timestamp>).
# Needs root (SCHED_FIFO threads) and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
REPEATS=${BENCH_REPEATS:-5}
SECS=${BENCH_SECONDS:-10}
OUT=${BENCH_OUT:-target/bench-metrics/$(date -u +%Y%m%dT%H%M%SZ)}
[ "$(id -u)" -eq 0 ] || { echo "bench-metrics.sh needs root (SCHED_FIFO queue threads)" >&2; exit 2; }
command -v curl >/dev/null || { echo "bench-metrics.sh needs curl" >&2; exit 2; }
mkdir -p "$OUT"
log() { printf '[bench-metrics %s] %s\n' "$(date -u +%T)" "$*" >&2; }

cargo build --release -q -p rtdaq
BIN=target/release/rtdaq
PORT=${BENCH_PORT:-19464}
{
    bench_host_facts
    echo "binary: $($BIN version | head -1) ($(git rev-parse --short HEAD))"
    echo "repeats: $REPEATS  seconds: $SECS  metrics port: $PORT"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

for rep in $(seq 1 "$REPEATS"); do
    for v in plain scraped; do
        rc=0 scrapes=0
        if [ $v = plain ]; then
            RUST_LOG=warn "$BIN" run --duration "$SECS" --report-json "$OUT/$v-$rep.json" > "$OUT/$v-$rep.log" 2>&1 || rc=$?
        else
            RUST_LOG=warn "$BIN" run --metrics "127.0.0.1:$PORT" --duration "$SECS" --report-json "$OUT/$v-$rep.json" > "$OUT/$v-$rep.log" 2>&1 &
            pid=$!
            sleep 0.5
            for _ in $(seq 1 "$((SECS - 1))"); do
                curl -sf -o /dev/null "http://127.0.0.1:$PORT/metrics" && scrapes=$((scrapes + 1))
                sleep 1
            done
            wait $pid || rc=$?
        fi
        echo "$v $rep $rc $scrapes" >> "$OUT/samples.txt"
        log "$v repeat $rep: exit $rc, scrapes $scrapes"
    done
done

python3 - "$OUT" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
print(open(out + "/host.txt").read())
rows = {}
for line in open(out + "/samples.txt"):
    v, rep, rc, scrapes = line.split()
    r = json.load(open(f"{out}/{v}-{rep}.json"))
    q = r["rx"]["queues"][0]
    n = q["packets"] or 1
    rows.setdefault(v, []).append({
        "rc": int(rc), "lost": r["lost"], "rx": q["packets"], "scrapes": int(scrapes),
        "io": q["io_cpu_s"] * 1e9 / n, "cons": (q["consumer_cpu_s"] or 0) * 1e9 / n})
def mmm(xs, f):
    return " / ".join(f.format(x) for x in (min(xs), st.median(xs), max(xs)))
print("| variant | runs with loss | packets received | scrapes answered | RX I/O ns/pkt | RX consumer ns/pkt | RX both ns/pkt |")
print("|---|---:|---:|---:|---:|---:|---:|")
for v, rs in rows.items():
    bad = sum(1 for r in rs if r["lost"] or r["rc"])
    print(f"| {v} | {bad} of {len(rs)} | {mmm([r['rx'] for r in rs], '{:.0f}')} | "
          f"{mmm([r['scrapes'] for r in rs], '{:.0f}')} | {mmm([r['io'] for r in rs], '{:.0f}')} | "
          f"{mmm([r['cons'] for r in rs], '{:.0f}')} | {mmm([r['io'] + r['cons'] for r in rs], '{:.0f}')} |")
PY
