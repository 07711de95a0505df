#!/usr/bin/env bash
# bench-validate.sh: the validate stage's CPU per packet for each stream format against the
# plain count path, in one run (app/runtime/benches/validate.rs: interleaved, min / median /
# max), and for scale the receive threads' CPU per packet of the default deployment
# (configs/host-loopback-udp.toml, 5 s: the report's io_cpu_s + consumer_cpu_s over the
# packets received), measured right after. Results: docs/benchmarks/formats.md.
# Env: VALIDATE_BENCH_REPEATS (7), VALIDATE_BENCH_ROUNDS (4), BENCH_OUT
# (target/bench-validate/<timestamp>).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
OUT=${BENCH_OUT:-target/bench-validate/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
{ bench_host_facts; echo "commit: $(git rev-parse --short HEAD)"; } > "$OUT/host.txt"
cat "$OUT/host.txt" >&2
cargo bench -q -p rtdaq-runtime --bench validate | tee "$OUT/validate.md"
cargo build --release -q -p rtdaq
target/release/rtdaq run --duration 5 --report-json "$OUT/default.json" > "$OUT/default.txt" 2>&1 || true
python3 - "$OUT/default.json" <<'PY' | tee "$OUT/receive.txt"
import json, sys
r = json.load(open(sys.argv[1]))
q = r["rx"]["queues"][0]
cpu = (q["io_cpu_s"] or 0) + (q["consumer_cpu_s"] or 0)
print(f"default deployment, 5 s: {q['packets']} packets, receive threads {cpu:.3f} CPU s "
      f"(I/O {q['io_cpu_s']:.3f} + consumer {q['consumer_cpu_s']:.3f}) = "
      f"{cpu / q['packets'] * 1e9:.0f} ns per packet, lost {r['lost']}")
PY
