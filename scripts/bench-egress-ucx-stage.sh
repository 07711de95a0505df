#!/usr/bin/env bash
# bench-egress-ucx-stage.sh: the UCX egress stage alone (app/runtime/benches/egress_ucx.rs: a
# feeder thread fills the sink as fast as the sender takes it, no RX queue in front) against
# ucx_perftest tag_bw with PUT off (as rtdaq's context sets it), 1 MiB messages over
# UCX_TLS=tcp on 127.0.0.1, interleaved, on this host's cores 0 and 1:
#   perftest   server core 1, client core 0, 3000 messages
#   the stage  sender core 0 (SCHED_FIFO 40), feeder and ucx_recv on core 1, SECS s;
#              every message checked at the receiver (count, sequence)
#   scripts/bench-egress-ucx-stage.sh OUT [REPS=5] [SECS=3]   -> OUT/results.txt
# On the 16-core GPU host: scripts/gpu-host-egress.sh sender (each on its own core).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
OUT=${1:?usage: bench-egress-ucx-stage.sh OUT [REPS] [SECS]}
REPS=${2:-5}
SECS=${3:-3}
mkdir -p "$OUT"
# A run that stops early leaves no receiver or perftest server behind.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
bench=$(bench_exe egress_ucx -p rtdaq-runtime --features ucx)
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -O2 -Wall -o "$OUT/ucx_recv" scripts/peers/ucx_recv.c $(pkg-config --cflags --libs ucx)
export UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
: > "$OUT/log"
for rep in $(seq 1 "$REPS"); do
    port=$(free_port)
    UCX_TCP_PUT_ENABLE=n taskset -c 1 ucx_perftest -p "$port" > /dev/null 2>&1 &
    sleep 0.5
    UCX_TCP_PUT_ENABLE=n taskset -c 0 ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s 1048576 \
        -n 3000 2>&1 | awk '/^Final:/ {printf "perftest gbps %.3f\n", $6 * 1048576 * 8 / 1e9}' \
        | tee -a "$OUT/log"
    wait
    port=$(free_port)
    taskset -c 1 "$OUT/ucx_recv" --port "$port" --streams 1 --seconds $((SECS + 30)) \
        --max-bytes 2097152 --json "$OUT/recv-$rep.json" > /dev/null 2>&1 &
    sleep 0.3
    line=$(EGRESS_UCX_DEST="127.0.0.1:$port" EGRESS_UCX_SENDER_CORE=0 EGRESS_UCX_FEEDER_CORE=1 \
        EGRESS_UCX_PRIORITY=40 EGRESS_UCX_SECS="$SECS" "$bench")
    wait
    echo "$line $(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print("recv_messages", d["messages"], "missing", d["missing"], "bad", d["bad"])' "$OUT/recv-$rep.json")" |
        tee -a "$OUT/log"
done
python3 - "$OUT/log" <<'EOP' | tee "$OUT/results.txt"
import statistics as st, sys
pt, g, c, ok = [], [], [], True
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "perftest":
        pt.append(float(f[2]))
    elif f[0] == "egress_ucx":
        v = dict(zip(f[1::2], f[2::2]))
        g.append(float(v["gbps"])); c.append(float(v["cpu_s_per_gb"]))
        ok &= v["messages"] == v["recv_messages"] and v["missing"] == "0" and v["bad"] == "0"
fmt = lambda x, d=2: f"{min(x):.{d}f} / {st.median(x):.{d}f} / {max(x):.{d}f}"
print(f"ucx_perftest tag_bw 1 MiB, PUT off: {fmt(pt)} Gb/s (min/median/max, n={len(pt)})")
print(f"egress stage alone: {fmt(g)} Gb/s, sender {fmt(c, 3)} CPU-s/GB (n={len(g)}); "
      f"median ratio {st.median(g) / st.median(pt):.2f}x; receiver got every message: {ok}")
EOP
