#!/usr/bin/env bash
# bench-busy-host.sh: the default deployment (configs/host-loopback-udp.toml, 1 Gb/s of
# 1400-byte datagrams over loopback) on a busy host, one busy loop per CPU at normal priority,
# for up to three receivers in the same run, interleaved A B C A B C (method:
# docs/benchmarks/method.md; results: docs/benchmarks/busy-host.md):
#   old        a binary of an earlier commit (BENCH_OLD_BIN; skipped when unset)
#   nocoalesce this tree's binary with engine.socket.rx_coalesce_us = 0
#   default    this tree's binary with the shipped config as it is
# Per sample: exit code, lost, ring_full, packets received, the generator's rate, CPU ns per
# packet of the I/O, consumer and TX threads (the report's thread CPU times), latency p99/max.
# Tables: min / median / max over repeats.
# Env: BENCH_REPEATS (5), BENCH_SECONDS (10), BENCH_OLD_BIN, BENCH_BUSY (1: busy loops; 0: a
# quiet host), BENCH_OUT (target/bench-busy/<timestamp>). Needs root (SCHED_FIFO threads).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
REPEATS=${BENCH_REPEATS:-5}
SECS=${BENCH_SECONDS:-10}
BUSY=${BENCH_BUSY:-1}
OUT=${BENCH_OUT:-target/bench-busy/$(date -u +%Y%m%dT%H%M%SZ)}
[ "$(id -u)" -eq 0 ] || { echo "bench-busy-host.sh needs root (SCHED_FIFO queue threads)" >&2; exit 2; }
mkdir -p "$OUT"
log() { printf '[bench-busy %s] %s\n' "$(date -u +%T)" "$*" >&2; }

cargo build --release -q -p rtdaq
NEW=target/release/rtdaq
sed -e 's/^rx_coalesce_us = 50/rx_coalesce_us = 0/' configs/host-loopback-udp.toml > "$OUT/nocoalesce.toml"
grep -q '^rx_coalesce_us = 0' "$OUT/nocoalesce.toml" || { echo "the default config has no rx_coalesce_us = 50 line" >&2; exit 2; }
variants=()
[ -n "${BENCH_OLD_BIN:-}" ] && variants+=(old)
variants+=(nocoalesce default)

{
    bench_host_facts
    echo "new: $($NEW version | head -1) ($(git rev-parse --short HEAD))"
    [ -z "${BENCH_OLD_BIN:-}" ] || echo "old: $BENCH_OLD_BIN: $("$BENCH_OLD_BIN" version | head -1)"
    echo "busy loops: $BUSY  repeats: $REPEATS  seconds: $SECS  variants: ${variants[*]}"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

bench_start_busy "$BUSY"

for rep in $(seq 1 "$REPEATS"); do
    for v in "${variants[@]}"; do
        case $v in
            old) cmd=("$BENCH_OLD_BIN" run) ;;
            nocoalesce) cmd=("$NEW" run --config "$OUT/nocoalesce.toml") ;;
            default) cmd=("$NEW" run) ;;
        esac
        rc=0
        RUST_LOG=warn "${cmd[@]}" --duration "$SECS" --report-json "$OUT/$v-$rep.json" > "$OUT/$v-$rep.log" 2>&1 || rc=$?
        echo "$v $rep $rc" >> "$OUT/samples.txt"
        log "$v repeat $rep: exit $rc"
    done
done
stop_busy

python3 - "$OUT" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
print(open(out + "/host.txt").read())
rows = {}
for line in open(out + "/samples.txt"):
    v, rep, rc = line.split()
    r = json.load(open(f"{out}/{v}-{rep}.json"))
    q, t = r["rx"]["queues"][0], r["tx"]["queues"][0]
    n = q["packets"] or 1
    rows.setdefault(v, []).append({
        "rc": int(rc), "lost": r["lost"], "ring_full": q["drops"]["ring_full"],
        "rx": q["packets"], "tx_gbps": t["gbps"],
        "io": q["io_cpu_s"] * 1e9 / n, "cons": (q["consumer_cpu_s"] or 0) * 1e9 / n,
        "txc": t["io_cpu_s"] * 1e9 / (t["packets"] or 1),
        "p99": q["latency_ns"]["p99"] / 1e3, "max": q["latency_ns"]["max"] / 1e3})
def mmm(xs, f):
    return " / ".join(f.format(x) for x in (min(xs), st.median(xs), max(xs)))
print("| variant | runs with loss | lost per run | ring_full per run | generator Gb/s | I/O ns/pkt | consumer ns/pkt | TX ns/pkt | latency p99 µs | latency max µs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for v, rs in rows.items():
    bad = sum(1 for r in rs if r["lost"] or r["rc"])
    print(f"| {v} | {bad} of {len(rs)} | {', '.join(str(r['lost']) for r in rs)} | "
          f"{', '.join(str(r['ring_full']) for r in rs)} | {mmm([r['tx_gbps'] for r in rs], '{:.3f}')} | "
          f"{mmm([r['io'] for r in rs], '{:.0f}')} | {mmm([r['cons'] for r in rs], '{:.0f}')} | "
          f"{mmm([r['txc'] for r in rs], '{:.0f}')} | {mmm([r['p99'] for r in rs], '{:.0f}')} | "
          f"{mmm([r['max'] for r in rs], '{:.0f}')} |")
PY
