#!/usr/bin/env bash
# bench-egress.sh: what rtdaq's SPEAD egress costs per packet, against spead2's own sender
# (docs/benchmarks/egress.md; method: docs/benchmarks/method.md). Release binary, as root
# (SCHED_FIFO threads), nothing else running. Interleaved repeats in one run:
#   rtdaq    configs/host-udp-egress-spead.toml: its generator at RATE Gb/s of 1400-byte
#            datagrams into one RX queue, every payload forwarded as one SPEAD heap (one
#            1464-byte packet) to 127.0.0.1:7149; the sender thread's CPU time (the report's
#            sender_cpu_s) over the SPEAD packets it sent;
#   spead2   PyPI spead2's sender (scripts/peers/spead_peer.py bench-send: spead2.send.UdpStream,
#            its C++ packetizer and send loop, fed by send_heaps in groups of 64 heaps of a
#            timestamp and 1400 bytes of data, one packet each), 64-48 flavour, at the same
#            rate, pinned to the sender's core; the process's CPU time (getrusage, every
#            thread) over its packets.
# Both send to a UDP sink on 127.0.0.1:7149 that reads and discards (its drops do not matter:
# only the sender's cost is measured).
# Usage: scripts/bench-egress.sh [OUT_DIR] [REPEATS] [RATE_GBPS] [SECONDS]
#        (default target/bench-egress 5 1.0 5). Writes OUT_DIR/results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-egress}
reps=${2:-5}
rate=${3:-1.0}
secs=${4:-5}
py=target/pyenv/bin/python
bin=target/release/rtdaq
if ! { [ -x "$py" ] && "$py" -c 'import spead2'; }; then
    echo "bench-egress.sh: no target/pyenv with spead2 (scripts/install-test-deps.sh makes it)" >&2
    exit 2
fi
cargo build -q --release -p rtdaq
mkdir -p "$dir"
out="$dir/results.txt"
: > "$out"
say() { echo "$*" | tee -a "$out"; }
say "# bench-egress.sh $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, rate $rate Gb/s, $secs s, $reps repeats; $($bin version | head -2 | tr '\n' ' ')"

# A UDP sink on 127.0.0.1:7149 that reads and discards.
"$py" -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
s.bind(("127.0.0.1", 7149))
b = bytearray(65536)
while True:
    s.recv_into(b)
' &
sink=$!
trap 'kill $sink 2>/dev/null' EXIT
sleep 0.5

cfg="$dir/egress.toml"
sed -e "s/^rate_gbps = 1.0 .*/rate_gbps = $rate/" configs/host-udp-egress-spead.toml > "$cfg"
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

rtdaq_run() {
    local rep="$dir/rep.json"
    "$bin" run --config "$cfg" --duration "$secs" --report-json "$rep" > /dev/null 2>&1 || true
    local e='r["rx"]["queues"][0]["egress"][0]'
    say "rtdaq: $(field "$rep" "f'packets {${e}[\"datagrams\"]} cpu_s {${e}[\"sender_cpu_s\"]:.3f} ns_per_packet {${e}[\"sender_cpu_s\"]*1e9/max(1,${e}[\"datagrams\"]):.0f} gbps {${e}[\"gbps\"]:.3f} not_sent {${e}[\"dropped\"]} longest_turn_us {r[\"rx\"][\"queues\"][0][\"longest_stall_us\"]}'")"
}

spead2_run() {
    # As many heaps as rtdaq sends in the same time at the same rate, pinned to the sender's
    # core (1, as the shipped config's egress_core).
    local heaps
    heaps=$(python3 -c "print(int($rate * 1e9 / 8 / 1400 * $secs))")
    local j
    j=$(taskset -c 1 "$py" scripts/peers/spead_peer.py bench-send 127.0.0.1 7149 --heaps "$heaps" \
        --heap-bytes 1400 --packet-size 1472 --rate "$(python3 -c "print($rate * 1e9 / 8)")")
    say "spead2: $(python3 -c "import json; j=json.loads('$j'); print(f\"packets {j['packets']} cpu_s {j['cpu_s']:.3f} ns_per_packet {j['cpu_s']*1e9/j['packets']:.0f} wall_s {j['wall_s']:.2f}\")")"
}

for _ in $(seq "$reps"); do
    rtdaq_run
    spead2_run
done
say "# done"
