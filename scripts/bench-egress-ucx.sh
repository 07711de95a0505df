#!/usr/bin/env bash
# bench-egress-ucx.sh: rtdaq's UCX egress against ucx_perftest (docs/benchmarks/egress.md;
# method: docs/benchmarks/method.md). As root (SCHED_FIFO threads), nothing else running,
# UCX_TLS=tcp over 127.0.0.1, 1 MiB messages, interleaved repeats in one run:
#   perftest  Debian's ucx_perftest tag_bw, 1 MiB messages (-s 1048576 -n MSGS), server
#             pinned to core 1, client to core 0: the transport's bandwidth on this host,
#             and the client's CPU time (user + system, /usr/bin/time) per GB sent;
#   rtdaq     configs/host-udp-egress-ucx.toml (release, --features ucx) with its generator
#             at RATE Gb/s of 1400-byte datagrams, 749 payloads a message (1 048 600 bytes +
#             the 40-byte header), sender pinned to core 1 at SCHED_FIFO 40, to the C
#             receiver scripts/peers/ucx_recv.c: what arrived (Gb/s, the receiver's count),
#             what was not sent, and the sender thread's CPU time per GB sent.
# rtdaq's egress can only forward what its receive path takes in, so at a paced input its
# bandwidth is the input rate; the per-GB CPU cost of the sending thread is the figure that
# compares the two senders' work.
# Usage: scripts/bench-egress-ucx.sh [OUT_DIR] [REPEATS] [RATE_GBPS] [SECONDS] [MSGS]
#        (default target/bench-egress-ucx 5 2.0 5 2000). Writes OUT_DIR/results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-egress-ucx}
reps=${2:-5}
rate=${3:-2.0}
secs=${4:-5}
msgs=${5:-2000}
for t in ucx_perftest pkg-config cc /usr/bin/time taskset; do
    command -v "$t" >/dev/null || {
        echo "bench-egress-ucx.sh: no $t (scripts/install-test-deps.sh installs ucx-utils, libucx-dev)" >&2
        exit 2
    }
done
mkdir -p "$dir"
RTDAQ_CONFIG=configs/host-udp-egress-ucx.toml cargo build -q --release -p rtdaq --features ucx
bin="$dir/rtdaq-ucx"
cp target/release/rtdaq "$bin"
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -O2 -Wall -o "$dir/ucx_recv" scripts/peers/ucx_recv.c $(pkg-config --cflags --libs ucx)
out="$dir/results.txt"
: > "$out"
say() { echo "$*" | tee -a "$out"; }
say "# bench-egress-ucx.sh $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, UCX $(ucx_info -v | sed -n 's/^# Version //p' | head -1), rate $rate Gb/s, $secs s, $msgs x 1 MiB, $reps repeats; $($bin version | head -2 | tr '\n' ' ')"
export UCX_TLS=tcp
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

perftest_run() {
    local port
    port=$(free_port)
    taskset -c 1 ucx_perftest -p "$port" > "$dir/pt-server.txt" 2>&1 &
    local server=$!
    sleep 0.5
    /usr/bin/time -f "cpu_s %U %S" -o "$dir/pt-time.txt" taskset -c 0 \
        ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s 1048576 -n "$msgs" > "$dir/pt.txt" 2>&1
    wait "$server" || true
    local mbs cpu
    mbs=$(awk '/^Final:/ { print $7 }' "$dir/pt.txt")
    cpu=$(awk '/^cpu_s/ { print $2 + $3 }' "$dir/pt-time.txt")
    say "perftest: mb_per_s $mbs client_cpu_s $cpu bytes $((msgs * 1048576))"
}

rtdaq_run() {
    local port cfg="$dir/egress.toml" rep="$dir/rep.json" rj="$dir/recv.json"
    port=$(free_port)
    sed -e "s/^rate_gbps = 1.0 .*/rate_gbps = $rate/" \
        -e "s/^packets_per_heap = 64 .*/packets_per_heap = 749/" \
        -e "s/^heap_buffers = 256 .*/heap_buffers = 64/" \
        -e "s/^flush_ms = 10/flush_ms = 50/" \
        -e "s/127.0.0.1:13337\"\\]/127.0.0.1:$port\"]/" \
        configs/host-udp-egress-ucx.toml > "$cfg"
    "$dir/ucx_recv" --port "$port" --streams 1 --seconds $((secs + 30)) --max-bytes 2097152 \
        --json "$rj" > "$dir/recv.txt" 2>&1 &
    local recv=$!
    sleep 0.5
    "$bin" run --config "$cfg" --duration "$secs" --report-json "$rep" > "$dir/run.txt" 2>&1 || true
    wait "$recv" || true
    python3 - "$rep" "$rj" <<'EOP' | tee -a "$out"
import json, sys
r = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
e = r["rx"]["queues"][0]["egress"][0]
print(f"rtdaq: bytes {e['bytes']} sender_cpu_s {e['sender_cpu_s']:.4f} gbps {e['gbps']:.3f} messages {e['heaps']} "
      f"not_sent {sum(e['dropped'].values())} received_bytes {g['bytes']} received_payloads {g['payloads']} "
      f"sent_payloads {e['payloads_sent']} missing {g['missing']} rx_lost {r['lost']}")
EOP
}

for _ in $(seq 1 "$reps"); do
    perftest_run
    rtdaq_run
done
python3 - "$out" <<'EOP' | tee -a "$out"
import re, statistics as st, sys
pt, rt = [], []
for line in open(sys.argv[1]):
    f = dict(zip(line.split()[1::2], line.split()[2::2]))
    if line.startswith("perftest:"):
        mbs, cpu, b = float(f["mb_per_s"]), float(f["client_cpu_s"]), int(f["bytes"])
        pt.append((mbs * 1048576 * 8 / 1e9, cpu / (b / 1e9)))  # perftest MB = 2^20 bytes
    elif line.startswith("rtdaq:"):
        b, cpu = int(f["bytes"]), float(f["sender_cpu_s"])
        rt.append((float(f["gbps"]), cpu / (b / 1e9), int(f["not_sent"]), int(f["missing"])))
def mmm(v): return f"{min(v):.3f} / {st.median(v):.3f} / {max(v):.3f}"
print("\nsender | Gb/s min/median/max | sender CPU s per GB min/median/max")
print(f"ucx_perftest tag_bw (client) | {mmm([x[0] for x in pt])} | {mmm([x[1] for x in pt])}")
print(f"rtdaq UCX egress (sender thread) | {mmm([x[0] for x in rt])} | {mmm([x[1] for x in rt])}")
print(f"rtdaq not sent (max) {max(x[2] for x in rt)}, receiver missing messages (max) {max(x[3] for x in rt)}")
print(f"CPU per GB, rtdaq / perftest (medians): {st.median(x[1] for x in rt) / st.median(x[1] for x in pt):.3f}")
EOP
