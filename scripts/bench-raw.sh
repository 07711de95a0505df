#!/usr/bin/env bash
# bench-raw.sh: the socket engine vs AF_PACKET vs AF_XDP receiving on the same veth pair, in the
# same run, interleaved (method: docs/benchmarks/method.md; results:
# docs/benchmarks/raw.md).
#
# Test bed: scripts/netns.sh (namespaces rtdaq-a / rtdaq-b, veth rtdaq0a 169.254.90.1 <->
# rtdaq0b 169.254.90.2; MTU 1500, or 9000 for the 8000-byte size). The sender is always the
# same: rtdaq's AF_PACKET generator (TPACKET TX ring) in rtdaq-a on core TX_CPU. The receiver
# is one rtdaq RX queue in rtdaq-b on core RX_CPU, direct mode, sequence-only validation:
#   socket    UDP socket bound to 169.254.90.2:5000 (recvmmsg, rx_timestamps = "batch")
#   afpacket  TPACKET_V3 ring with the flow rule udp_dst = 5000 compiled to classic BPF
#   afxdp     AF_XDP socket with the same rule in the XDP program; 8000 B payloads (MTU 9000)
#             arrive in 3 UMEM frames of 4096 B (multi-buffer, XDP_USE_SG)
# Each sample: receiver starts, sender runs SECS, receiver drains and reports. Figures:
#   received / sent       the receiver's packets over the sender's: the share delivered (the
#                         receiver's own rate is the sender's while it keeps up; its run time
#                         includes the start and drain, so packets / run time would
#                         understate it)
#   CPU ns / packet       the receiving thread's CPU time (io_cpu_s) / packets
#   loss-free rate        highest paced rate at which packets received == packets sent and no
#                         drop, in every repeat
# Environment: BENCH_REPEATS (3), BENCH_SECONDS (2), BENCH_SIZES ("64 1472 8000", UDP payload
# bytes), BENCH_ENGINES ("socket afpacket afxdp"), BENCH_OUT (target/bench-raw/<timestamp>).
# Needs root. Builds the release binaries with scripts/build-engines.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPEATS=${BENCH_REPEATS:-3}
SECS=${BENCH_SECONDS:-2}
SIZES=${BENCH_SIZES:-"64 1472 8000"}
ENGINES=${BENCH_ENGINES:-"socket afpacket afxdp"}
OUT=${BENCH_OUT:-$ROOT/target/bench-raw/$(date -u +%Y%m%dT%H%M%SZ)}
RX_CPU=${BENCH_RX_CPU:-1}
TX_CPU=${BENCH_TX_CPU:-0}
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: > "$RES"
log() { printf '[bench-raw %s] %s\n' "$(date -u +%T)" "$*" >&2; }

tables() { # OUT: print the tables of a finished run (BENCH_TABLES_ONLY=DIR re-prints them)
python3 - "$1" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out + "/results.jsonl") if l.strip()]
print("host:"); print(open(out + "/host.txt").read())
failed = [r["tag"] for r in rows if r["part"] == "failed"]
print("failed samples:", ", ".join(failed) if failed else "none"); print()
raw = [r for r in rows if r["part"] == "raw"]
def mmm(xs, f="{:.2f}"):
    xs = [x for x in xs if x is not None]
    return " / ".join(f.format(v) for v in (min(xs), st.median(xs), max(xs))) if xs else "n/a"
engines = [e for e in ("socket", "afpacket", "afxdp") if any(r["engine"] == e for r in raw)]
print("## Unpaced sender: share delivered and receiving-thread CPU per packet")
print("min / median / max over repeats; ratio = engine / socket, paired by repeat\n")
print("| payload B | receiver | received / sent | CPU ns/packet | CPU ratio vs socket | sender Mpps | drops per repeat (kernel/ring_full/no_flow/other) |")
print("|---:|---|---:|---:|---:|---:|---|")
for size in sorted({r["size"] for r in raw}):
    by = {e: sorted([r for r in raw if r["engine"] == e and r["size"] == size and r["rate"] == "unpaced"], key=lambda r: r["rep"]) for e in engines}
    ns = {e: [r["io_cpu_s"] * 1e9 / r["received"] if r["received"] and r["io_cpu_s"] else None for r in by[e]] for e in engines}
    for e in engines:
        rs = by[e]
        if not rs: continue
        ratio = "1" if e == "socket" else mmm([a / b for a, b in zip(ns[e], ns.get("socket", [])) if a and b], "{:.3f}")
        d = lambda r, k: r["drops"][k]
        drops = [f'{d(r, "kernel")}/{d(r, "ring_full")}/{d(r, "no_flow")}/{r["rx_drops"] - d(r, "kernel") - d(r, "ring_full") - d(r, "no_flow")}' for r in rs]
        print(f"| {size} | {e} | {mmm([r['received'] / r['sent'] if r['sent'] else 0 for r in rs], '{:.4f}')} | {mmm(ns[e], '{:.0f}')} | {ratio} | "
              f"{mmm([r['tx_pps'] / 1e6 for r in rs], '{:.3f}')} | {', '.join(drops)} |")
print()
print("## Loss-free rate (paced sender): every repeat with received == sent, no gap, no drop other than no_flow\n")
print("| payload B | receiver | rates tried (pps) | loss-free in all repeats | highest loss-free pps |")
print("|---:|---|---|---|---:|")
for size in sorted({r["size"] for r in raw}):
    for e in engines:
        rs = [r for r in raw if r["engine"] == e and r["size"] == size and r["rate"] != "unpaced"]
        if not rs: continue
        rates = sorted({int(r["rate"]) for r in rs})
        # no_flow counts frames that are not the stream (e.g. the namespace's own ARP), not loss
        ok = [x for x in rates if all(r["received"] == r["sent"] and r["rx_drops"] == r["drops"]["no_flow"] and r["tx_drops"] == 0
                                      and r["seq_gaps"] == 0 for r in rs if int(r["rate"]) == x)]
        print(f"| {size} | {e} | {', '.join(map(str, rates))} | {', '.join(map(str, ok)) or 'none'} | {max(ok) if ok else 'none'} |")
PY
}
if [ -n "${BENCH_TABLES_ONLY:-}" ]; then tables "$BENCH_TABLES_ONLY"; exit 0; fi
[ "$(id -u)" -eq 0 ] || { echo "bench-raw.sh needs root (namespaces, raw sockets)" >&2; exit 2; }
trap 'scripts/netns.sh down >/dev/null 2>&1 || true' EXIT

log "building release binaries (scripts/build-engines.sh --release)"
scripts/build-engines.sh --release >&2
BIN=$ROOT/target/engines

# paced rates (packets/s) per payload size for the loss-free sweep
rates_for() {
  case $1 in
  64) echo "100000 200000 400000 800000" ;;
  1472) echo "50000 100000 200000 400000" ;;
  *) echo "20000 40000 80000 160000" ;;
  esac
}
mtu_for() { if [ "$1" -gt 1472 ]; then echo 9000; else echo 1500; fi; }
frame_for() { if [ "$1" -gt 1472 ]; then echo 9216; else echo 2048; fi; }
# AF_XDP frames are 2048 or 4096 B; a jumbo frame takes several (multi-buffer RX).
xdp_frame_for() { if [ "$1" -gt 1472 ]; then echo 4096; else echo 2048; fi; }

{
  echo "date_utc: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc)"
  echo "uname_r: $(uname -r)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "loadavg_start: $(cat /proc/loadavg)"
  echo "rtdaq: $("$BIN/rtdaq-afpacket" version | head -2 | tr '\n' ' ')"
  echo "sender core (TX_CPU): $TX_CPU receiver core (RX_CPU): $RX_CPU"
  echo "repeats: $REPEATS seconds: $SECS sizes: $SIZES engines: $ENGINES"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

# sender config: AF_PACKET generator on rtdaq0a
tx_config() { # size rate(unpaced|pps) file
  local size=$1 rate=$2 f=$3 key
  if [ "$rate" = unpaced ]; then key='unpaced = true'; else key="rate_pps = $rate"; fi
  sed -e "s/^rate_gbps = 0.5.*/$key/" -e "s/^payload_size = 1400.*/payload_size = $size/" \
      -e "s/^mtu = 1500/mtu = $(mtu_for "$size")/" \
      -e "s/^frame_size = 2048.*/frame_size = $(frame_for "$size")/" \
      -e "s/^buf_size = 2048/buf_size = $(frame_for "$size")/" \
      -e "s/^cpu_core = 0/cpu_core = $TX_CPU/" -e '/^duration_s = 10$/d' \
      configs/veth-afpacket-tx.toml > "$f"
}

# receiver config per engine
rx_config() { # engine size file
  local e=$1 size=$2 f=$3 buf
  buf=$(frame_for "$size")
  case $e in
  socket)
    cat > "$f" <<EOF
name = "bench-raw-socket-$size"
platform = "host"
[engine]
kind = "socket"
[engine.socket]
rcvbuf = 16777216
rx_timestamps = "batch"
[[memory_regions]]
name = "rx_bufs"
kind = "host"
buf_size = $buf
buf_count = 4096
[[interfaces]]
name = "veth_b"
address = "udp://169.254.90.2:5000"
mtu = $(mtu_for "$size")
max_message_size = $size
default_action = 0
[[interfaces.rx_queues]]
id = 0
cpu_core = $RX_CPU
rt_priority = 50
batch_size = 64
timeout_us = 100
ring_depth = 1024
memory_regions = ["rx_bufs"]
mode = "direct"
[run]
drain_ms = 100
validate = "sequence"
EOF
    ;;
  afpacket | afxdp)
    local fr
    if [ "$e" = afxdp ]; then fr=$(xdp_frame_for "$size"); else fr=$(frame_for "$size"); fi
    sed -e "s/^mtu = 1500/mtu = $(mtu_for "$size")/" \
        -e "s/^frame_size = 2048.*/frame_size = $fr/" \
        -e "s/^buf_size = 2048/buf_size = $fr/" \
        -e "s/^cpu_core = 1/cpu_core = $RX_CPU/" \
        -e 's/^drain_ms = 100.*/drain_ms = 100\nvalidate = "sequence"/' \
        "configs/veth-$e-rx.toml" > "$f"
    ;;
  esac
}

sample() { # engine size rate rep
  local e=$1 size=$2 rate=$3 rep=$4 tag=$1-$2-$3-$4 rc_rx=0 rc_tx=0
  rx_config "$e" "$size" "$OUT/$tag.rx.toml"
  tx_config "$size" "$rate" "$OUT/$tag.tx.toml"
  ip netns exec rtdaq-b "$BIN/rtdaq-$e" run --config "$OUT/$tag.rx.toml" --duration "$((SECS + 2))" \
      --report-json "$OUT/$tag.rx.json" > "$OUT/$tag.rx.log" 2>&1 &
  local rxpid=$!
  sleep 1
  ip netns exec rtdaq-a "$BIN/rtdaq-afpacket" run --config "$OUT/$tag.tx.toml" --duration "$SECS" \
      --report-json "$OUT/$tag.tx.json" > "$OUT/$tag.tx.log" 2>&1 || rc_tx=$?
  wait $rxpid || rc_rx=$?
  python3 - "$e" "$size" "$rate" "$rep" "$OUT/$tag" "$rc_rx" "$rc_tx" >> "$RES" <<'PY'
import json, sys
e, size, rate, rep, tag, rc_rx, rc_tx = sys.argv[1:]
try:
    rx = json.load(open(tag + ".rx.json")); tx = json.load(open(tag + ".tx.json"))
except (OSError, ValueError) as err:
    print(json.dumps({"part": "failed", "tag": tag.rsplit("/", 1)[-1], "error": str(err)})); sys.exit()
r, t = rx["rx"]["totals"], tx["tx"]["totals"]
print(json.dumps({"part": "raw", "engine": e, "size": int(size), "rate": rate, "rep": int(rep),
    "rc_rx": int(rc_rx), "rc_tx": int(rc_tx), "sent": t["packets"], "tx_drops": t["drops_total"],
    "received": r["packets"], "rx_drops": r["drops_total"], "drops": r["drops"], "lost": rx["lost"],
    "seq_gaps": r["seq_gaps"], "rx_s": rx["duration_s"], "tx_s": tx["duration_s"],
    "io_cpu_s": r["io_cpu_s"], "tx_pps": t["packets"] / tx["duration_s"]}))
PY
}

for rep in $(seq 1 "$REPEATS"); do
  for size in $SIZES; do
    scripts/netns.sh up --mtu "$(mtu_for "$size")" >/dev/null
    for rate in unpaced $(rates_for "$size"); do
      for e in $ENGINES; do
        log "rep=$rep size=$size rate=$rate receiver=$e"
        sample "$e" "$size" "$rate" "$rep"
      done
    done
  done
done
echo "loadavg_end: $(cat /proc/loadavg)" >> "$OUT/host.txt"

tables "$OUT" | tee "$OUT/tables.md"
log "results: $OUT"
