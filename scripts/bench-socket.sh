#!/usr/bin/env bash
# bench-socket.sh: rtdaq's socket engine against baselines, in the same run, interleaved.
# Method: docs/benchmarks/method.md. Results: docs/benchmarks/socket.md.
#
# Parts (BENCH_PARTS, default "udp lossfree iperf tcp ping"):
#   udp      UDP receive rate per core: benches/socket/sendmmsg_tx (core 0, unpaced) blasts at
#            a receiver on core 1 over 127.0.0.1: the plain C recvmmsg_rx, rtdaq direct mode
#            (defaults: kernel timestamps, full validation), rtdaq "lean" (direct mode,
#            rx_timestamps = "batch", validate = "sequence"), rtdaq "coalesce" (lean +
#            engine.socket.rx_coalesce_us = BENCH_COALESCE_US) and rtdaq indirect mode
#            (consumer on core 0), interleaved per size in the order of BENCH_VARIANTS.
#   udppaced as udp, but the sender paced (BENCH_PACED "size:Gb/s ...", default
#            "1472:2 8000:8 64000:25"): the same offered load for every receiver, below what
#            each takes, so the per-core figure compares the receivers' own work at one load
#            (an unpaced sender lets the faster receiver drain a shorter, warmer socket queue).
#   udp2     2 RX queues: sendmmsg_tx --sources 8 (core 0) at two SO_REUSEPORT receivers on
#            cores 0 and 1: two C recvmmsg_rx processes vs one rtdaq with 2 direct queues.
#   lossfree rtdaq's own generator -> receiver (the default config shape, 1 RX queue, 1472 B):
#            unpaced drain rate and paced steps, interleaved per repeat; highest rate with
#            lost == 0 and rx packets == tx packets in every repeat.
#   iperf    iperf3 UDP (-u -b 0 -l SIZE, client core 0, server core 1) at each UDP size,
#            interleaved with the C sender -> rtdaq direct receiver at the same size.
#   tcp      iperf3 TCP (8000 B writes) interleaved with rtdaq TCP loopback (1 connection,
#            unpaced generator, 8000 B records, server RX queue core 1, client TX core 0).
#   ping     sockperf UDP ping-pong (1472 B) and, interleaved, rtdaq's paced loopback run's
#            one-way latency p50/p99 (generator timestamp -> RX kernel timestamp), also with
#            rx_coalesce_us = BENCH_COALESCE_US (what coalescing costs in latency).
#
# Environment: BENCH_TABLES_ONLY=DIR re-prints the tables of a finished run; BENCH_REPEATS (3), BENCH_SECONDS (3), BENCH_SIZES ("1472 8000 64000"),
# BENCH_RATES ("0.5 1 2 3 4 5 6"), BENCH_VARIANTS ("c direct lean indirect"; also "coalesce";
# any rtdaq variant + "-base", e.g. "coalesce-base", runs it with BENCH_BASELINE_BIN, an earlier
# build, in the same interleaved run),
# BENCH_COALESCE_US (50), BENCH_OUT (target/bench-socket/<timestamp>), BENCH_TX_FIFO (0:
# SCHED_FIFO priority of the C sender; e.g. 40 keeps concurrent builds off the measured cores).
# Needs root for SCHED_FIFO / SO_RCVBUFFORCE (it runs without, with other numbers), and
# iperf3 + sockperf for the last parts (Debian: apt-get install iperf3 sockperf).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
REPEATS=${BENCH_REPEATS:-3}
SECS=${BENCH_SECONDS:-3}
SIZES=${BENCH_SIZES:-"1472 8000 64000"}
RATES=${BENCH_RATES:-"0.5 1 2 3 4 5 6"}
PARTS=${BENCH_PARTS:-"udp udp2 lossfree iperf tcp ping"}
VARIANTS=${BENCH_VARIANTS:-"c direct lean indirect"}
COALESCE_US=${BENCH_COALESCE_US:-50}
OUT=${BENCH_OUT:-$ROOT/target/bench-socket/$(date -u +%Y%m%dT%H%M%SZ)}
BIN=$ROOT/target/bench-socket/bin
RTDAQ=$ROOT/target/release/rtdaq
# BENCH_TX_FIFO: SCHED_FIFO priority of the C sender (0 = normal). With the sender and the
# receivers all SCHED_FIFO, other work on the host (builds) gets only the RT throttling slack.
TX_FIFO=${BENCH_TX_FIFO:-0}
PORT=${BENCH_PORT:-5650}
RX_CPU=${BENCH_RX_CPU:-1}   # receiver core (every generated config's RX queue goes here)
TX_CPU=${BENCH_TX_CPU:-0}   # sender core (and rtdaq's consumer / TX queue core)
# the tables of a finished run (BENCH_TABLES_ONLY=DIR re-prints them)
tables() { # OUT
python3 - "$1" <<'EOF'
import json, statistics as st, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out + "/results.jsonl") if l.strip()]
def mmm(xs, f="{:.2f}"):
    xs = [x for x in xs if x is not None]
    if not xs: return "n/a"
    return " / ".join(f.format(v) for v in (min(xs), st.median(xs), max(xs)))
def ratios(a, b):  # pairwise by repeat: a[i] / b[i]
    return [x / y for x, y in zip(a, b) if y]
def steal(rs):  # the RX core's hypervisor steal of each sample, in run order
    return ",".join("%.2f" % r["rx_core_steal_s"] if "rx_core_steal_s" in r else "?" for r in rs)
print("host:"); print(open(out + "/host.txt").read())
failed = [r["tag"] for r in rows if r["part"] == "failed"]
print("failed samples (no report):", ", ".join(failed) if failed else "none"); print()
for part, title in (("udp", "sender sendmmsg_tx unpaced"), ("udppaced", "sender sendmmsg_tx paced, the same offered load for every receiver")):
  udp = [r for r in rows if r["part"] == part]
  if udp:
    print(f"## UDP receive rate, part {part} ({title} on TX_CPU, receiver on RX_CPU, see host; 127.0.0.1)")
    print("min / median / max over repeats; Gb/s of UDP payload; ratio = rtdaq / C paired by repeat\n")
    print("per core = datagrams per CPU-second of the receiving thread(s) (CLOCK_THREAD_CPUTIME_ID: the C "
          "receiver's one thread; rtdaq's I/O thread, plus its consumer thread in indirect mode); "
          "ns/datagram = the same as CPU time per datagram\n")
    print("| size B | receiver | Mdatagrams/s | Gb/s | ratio rtdaq/C (pps) | RX core busy % | thread CPU ns/datagram | M datagrams per CPU-s | ratio rtdaq/C per core | loss in window (seq) | rtdaq drops: kernel | rtdaq drops: ring_full | sender Gb/s | RX core steal s per sample | rc |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    names = (("c", "C recvmmsg_rx"), ("direct", "rtdaq direct"), ("lean", "rtdaq direct, lean"),
             ("coalesce", "rtdaq direct, lean, rx_coalesce_us"), ("indirect", "rtdaq indirect"))
    names = names + tuple((v + "-base", n + " (BENCH_BASELINE_BIN)") for v, n in names[1:])
    percore = lambda r: r["packets"] / r["cpu_s"] if r.get("cpu_s") else 0.0
    for size in sorted({r["size"] for r in udp}):
        by = {v: sorted([r for r in udp if r["size"] == size and r["variant"] == v], key=lambda r: r["rep"]) for v, _ in names}
        cp = [r["pps"] for r in by["c"]]
        cc = [percore(r) for r in by["c"]]
        for v, name in names:
            rs = by[v]
            if not rs: continue
            pp = [r["pps"] for r in rs]
            pc = [percore(r) for r in rs]
            ratio = "1" if v == "c" else mmm(ratios(pp, cp), "{:.3f}")
            ratio_pc = "1" if v == "c" else mmm(ratios(pc, cc), "{:.3f}")
            print(f"| {size} | {name} | {mmm([x/1e6 for x in pp], '{:.3f}')} | {mmm([r['gbps'] for r in rs])} | {ratio} | "
                  f"{mmm([r['core1_busy_pct'] for r in rs], '{:.0f}')} | {mmm([1e9/x for x in pc if x], '{:.0f}')} | {mmm([x/1e6 for x in pc], '{:.3f}')} | {ratio_pc} | {mmm([r['lost'] for r in rs], '{:.0f}')} | "
                  f"{mmm([r.get('kernel_drops') for r in rs], '{:.0f}')} | {mmm([r.get('ring_full') for r in rs], '{:.0f}')} | {mmm([r['tx_gbps'] for r in rs])} | {steal(rs)} | {','.join(str(r['rc']) for r in rs)} |")
    print()
u2 = [r for r in rows if r["part"] == "udp2"]
if u2:
    print("## UDP, 2 RX queues (SO_REUSEPORT; sender --sources 8 on TX_CPU; receivers on TX_CPU and RX_CPU)")
    print("min / median / max over repeats; ratio = rtdaq / C paired by repeat\n")
    print("| size B | receivers | Mdatagrams/s (both) | ratio rtdaq/C | per queue (median split) | TX_CPU busy % | RX_CPU busy % | lost | rc |")
    print("|---:|---|---:|---:|---|---:|---:|---:|---|")
    for size in sorted({r["size"] for r in u2}):
        by = {v: sorted([r for r in u2 if r["size"] == size and r["variant"] == v], key=lambda r: r["rep"]) for v in ("c", "direct", "lean")}
        cp = [r["pps"] for r in by["c"]]
        for v, name in (("c", "2 x C recvmmsg_rx"), ("direct", "rtdaq 2 direct queues"), ("lean", "rtdaq 2 direct queues, lean")):
            rs = by[v]
            if not rs: continue
            pp = [r["pps"] for r in rs]
            ratio = "1" if v == "c" else mmm(ratios(pp, cp), "{:.3f}")
            split = sorted(rs, key=lambda r: r["pps"])[len(rs) // 2]["per_queue"]
            print(f"| {size} | {name} | {mmm([x/1e6 for x in pp], '{:.3f}')} | {ratio} | {split} | "
                  f"{mmm([r['busy_tx_core_pct'] for r in rs], '{:.0f}')} | {mmm([r['busy_rx_core_pct'] for r in rs], '{:.0f}')} | "
                  f"{mmm([r['lost'] for r in rs], '{:.0f}')} | {','.join(str(r['rc']) for r in rs)} |")
    print()
lf = [r for r in rows if r["part"] == "lossfree"]
if lf:
    print("## Loss-free rate: rtdaq generator -> rtdaq receiver, 1472 B, 1 RX queue (default config shape)\n")
    print("| rate | tx Gb/s | rx Gb/s | rx Mpps | lost (min/med/max) | rx pkts == tx pkts in all | loss-free in all repeats |")
    print("|---|---:|---:|---:|---:|---|---|")
    rates = []
    for r in lf:
        if r["rate"] not in rates: rates.append(r["rate"])
    best = None
    for rate in rates:
        rs = [r for r in lf if r["rate"] == rate]
        ok = all(r["lost"] == 0 and r["rx_packets"] == r["tx_packets"] and r["tx_drops"] == 0 for r in rs)
        if ok and rate != "unpaced": best = max(best or 0, float(rate))
        print(f"| {rate} | {mmm([r['tx_gbps'] for r in rs])} | {mmm([r['rx_gbps'] for r in rs])} | {mmm([r['rx_mpps'] for r in rs], '{:.3f}')} | "
              f"{mmm([r['lost'] for r in rs], '{:.0f}')} | {all(r['rx_packets'] == r['tx_packets'] for r in rs)} | {ok} |")
    drain = [r["rx_gbps"] for r in lf if r["rate"] == "unpaced"]
    if drain and best and best > st.median(drain):
        print(f"\nhighest loss-free paced rate: {best} Gb/s; the unpaced run delivered only {st.median(drain):.2f} Gb/s "
              "(median), below that, so it is NOT a valid drain rate here (e.g. an unpaced generator at equal "
              "SCHED_FIFO priority on the receiver's core starves it); no share is computed\n")
    elif drain and best:
        print(f"\nhighest loss-free paced rate: {best} Gb/s = {100*best/st.median(drain):.0f} % of the median unpaced drain rate "
              f"({st.median(drain):.2f} Gb/s; min {min(drain):.2f}, max {max(drain):.2f})\n")
    else:
        print("\nno paced rate was loss-free in all repeats\n")
ip = [r for r in rows if r["part"] == "iperf_udp"]
if ip:
    print("## iperf3 UDP vs rtdaq direct (C sender), paired by repeat\n")
    print("| size B | iperf3 rx Gb/s | iperf3 rx Mpps | iperf3 loss % | rtdaq direct Gb/s | rtdaq Mpps | ratio rtdaq/iperf3 (pps) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    pr = [r for r in rows if r["part"] == "udp_iperfpair"]
    for size in sorted({r["size"] for r in ip}):
        a = sorted([r for r in ip if r["size"] == size], key=lambda r: r["rep"])
        b = sorted([r for r in pr if r["size"] == size], key=lambda r: r["rep"])
        print(f"| {size} | {mmm([r['gbps'] for r in a])} | {mmm([r['pps']/1e6 for r in a], '{:.3f}')} | {mmm([r['lost_percent'] for r in a], '{:.1f}')} | "
              f"{mmm([r['gbps'] for r in b])} | {mmm([r['pps']/1e6 for r in b], '{:.3f}')} | {mmm(ratios([r['pps'] for r in b], [r['pps'] for r in a]), '{:.3f}')} |")
    print()
it = sorted([r for r in rows if r["part"] == "iperf_tcp"], key=lambda r: r["rep"])
rt = sorted([r for r in rows if r["part"] == "rtdaq_tcp"], key=lambda r: r["rep"])
if it or rt:
    print("## TCP, 1 connection, 8000 B writes/records, sender TX_CPU, receiver RX_CPU (see host)\n")
    print("| | Gb/s (min/med/max) | notes |\n|---|---:|---|")
    print(f"| iperf3 TCP | {mmm([r['gbps'] for r in it])} | receiver-side bits/s |")
    print(f"| rtdaq TCP | {mmm([r['gbps'] for r in rt])} | lost {mmm([r['lost'] for r in rt], '{:.0f}')}, rc {','.join(str(r['rc']) for r in rt)} |")
    if it and rt: print(f"| ratio rtdaq/iperf3 | {mmm(ratios([r['gbps'] for r in rt], [r['gbps'] for r in it]), '{:.3f}')} | paired by repeat |")
    print()
sp = sorted([r for r in rows if r["part"] == "sockperf"], key=lambda r: r["rep"])
la = sorted([r for r in rows if r["part"] == "latency"], key=lambda r: r["rep"])
lr = sorted([r for r in rows if r["part"] == "latency_read"], key=lambda r: r["rep"])
lc = sorted([r for r in rows if r["part"] == "latency_co"], key=lambda r: r["rep"])
if sp or la:
    print("## Latency (different quantities, see the page)\n")
    print("| | p50 µs | p99 µs | p99.9 µs | max µs |\n|---|---:|---:|---:|---:|")
    print(f"| sockperf UDP ping-pong 1472 B (half round trip) | {mmm([r['p50_us'] for r in sp])} | {mmm([r['p99_us'] for r in sp])} | {mmm([r['p999_us'] for r in sp])} | {mmm([r['max_us'] for r in sp])} |")
    print(f"| rtdaq one-way, generator stamp -> RX kernel stamp, 1 Gb/s paced, 1472 B | {mmm([r['lat_ns']['p50']/1e3 for r in la])} | {mmm([r['lat_ns']['p99']/1e3 for r in la])} | {mmm([r['lat_ns']['p999']/1e3 for r in la])} | {mmm([r['lat_ns']['max']/1e3 for r in la])} |")
    for rs, what in ((lr, "rtdaq one-way, generator stamp -> the queue's read (rx_timestamps = batch)"),
                     (lc, "the same with rx_coalesce_us")):
        if rs:
            print(f"| {what} (lost {mmm([r['lost'] for r in rs], '{:.0f}')}) | {mmm([r['lat_ns']['p50']/1e3 for r in rs])} | {mmm([r['lat_ns']['p99']/1e3 for r in rs])} | {mmm([r['lat_ns']['p999']/1e3 for r in rs])} | {mmm([r['lat_ns']['max']/1e3 for r in rs])} |")
EOF
}
if [ -n "${BENCH_TABLES_ONLY:-}" ]; then tables "$BENCH_TABLES_ONLY"; exit 0; fi

mkdir -p "$OUT" "$BIN"
RES=$OUT/results.jsonl
: > "$RES"

log() { printf '[bench-socket %s] %s\n' "$(date -u +%T)" "$*" >&2; }

# ---------------------------------------------------------------- build
log "building benches/socket (cc -O2) and rtdaq (cargo build --release -p rtdaq)"
cc -O2 -Wall -o "$BIN/recvmmsg_rx" benches/socket/recvmmsg_rx.c
cc -O2 -Wall -o "$BIN/sendmmsg_tx" benches/socket/sendmmsg_tx.c
cargo build --release -p rtdaq >&2

# ---------------------------------------------------------------- host
{
  echo "date_utc: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc)"
  echo "uname_r: $(uname -r)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "loadavg_start: $(cat /proc/loadavg)"
  echo "other busy processes at start (ps, top 3 by %CPU): $(ps -eo pid,cls,rtprio,pcpu,comm --sort=-pcpu | sed -n 2,4p | tr -s ' ' | tr '\n' ';')"
  echo "rmem_max: $(sysctl -n net.core.rmem_max) wmem_max: $(sysctl -n net.core.wmem_max)"
  echo "lo_mtu: $(cat /sys/class/net/lo/mtu)"
  echo "uid: $(id -u)"
  echo "rtdaq: $("$RTDAQ" version 2>/dev/null | head -1)"
  echo "iperf3: $(iperf3 --version 2>/dev/null | head -1 || echo absent)"
  echo "sockperf: $(sockperf --version 2>/dev/null | grep -m1 -i version || echo absent)"
  echo "sender core (TX_CPU): $TX_CPU receiver core (RX_CPU): $RX_CPU sender SCHED_FIFO: $TX_FIFO"
  echo "repeats: $REPEATS seconds: $SECS sizes: $SIZES rates: $RATES parts: $PARTS"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

# busy jiffies and total jiffies of one CPU, from /proc/stat
cpu_jiffies() {
  awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}
# steal jiffies of one CPU (time the hypervisor ran something else on it), from /proc/stat
cpu_steal() { awk -v c="cpu$1" '$1 == c { print $9 }' /proc/stat; }
busy_pct() { # before_busy before_total after_busy after_total
  awk -v a="$1" -v b="$2" -v c="$3" -v d="$4" 'BEGIN { printf "%.1f", (d > b) ? 100 * (c - a) / (d - b) : 0 }'
}

# round a payload size up to a buffer size (multiple of 2048)
bufsize_for() { echo $(( ($1 + 2047) / 2048 * 2048 )); }

# receive-only rtdaq config, derived from configs/host-udp-rx-only.toml
# mode: direct | lean (direct + batch timestamps + sequence-only validation) | coalesce (lean +
# rx_coalesce_us = COALESCE_US) | indirect;
# queues: 1, or 2 (direct queues on TX_CPU and RX_CPU, SO_REUSEPORT)
rx_only_config() { # size mode port file [queues]
  local size=$1 mode=$2 port=$3 f=$4 queues=${5:-1} buf
  buf=$(bufsize_for "$size")
  sed -e "0,/^name = .*/s//name = \"bench-udp-rx-$mode-$size\"/" \
      -e 's/^gro = true.*/gro = false                             # per datagram, like recvmmsg_rx/' \
      -e "s/^buf_size = 65536.*/buf_size = $buf/" \
      -e "s/^max_message_size = 65507.*/max_message_size = $size/" \
      -e "s#udp://0.0.0.0:5000#udp://127.0.0.1:$port#" \
      -e '/^report_json/d' \
      -e "s/^cpu_core = 1/cpu_core = $RX_CPU/" -e "s/^consumer_core = 0/consumer_core = $TX_CPU/" \
      configs/host-udp-rx-only.toml > "$f"
  if [ "$mode" != indirect ]; then
    sed -i 's/^consumer_core = 0.*/mode = "direct"/' "$f"
  fi
  if [ "$mode" = lean ] || [ "$mode" = coalesce ]; then
    sed -i -e 's/^gro = false.*/&\nrx_timestamps = "batch"                 # one clock read per recvmmsg/' \
           -e 's/^drain_ms = 0.*/&\nvalidate = "sequence"                   # header + sequence, no pattern/' "$f"
  fi
  if [ "$mode" = coalesce ]; then
    sed -i "s/^gro = false.*/&\nrx_coalesce_us = $COALESCE_US                     # receive interrupt moderation/" "$f"
  fi
  if [ "$queues" = 2 ]; then
    python3 - "$f" "$TX_CPU" <<'PY'
import re, sys
f, other = sys.argv[1], sys.argv[2]
s = open(f).read()
m = re.search(r"\[\[interfaces\.rx_queues\]\]\n(?:[^\[\n].*\n)*", s)
q1 = m.group(0).replace("id = 0", "id = 1", 1)
q1 = re.sub(r"^cpu_core = \d+", f"cpu_core = {other}", q1, flags=re.M)
s = s[:m.end()] + "\n" + q1 + s[m.end():]
s = s.replace("buf_count = 1024", "buf_count = 2048", 1)
open(f, "w").write(s)
PY
  fi
}

# loopback generator config, derived from configs/host-loopback-udp.toml (the default)
loopback_config() { # rate(unpaced|Gb/s) size port file [rx_coalesce_us|read]
  local rate=$1 size=$2 port=$3 f=$4 coalesce=${5:-0} ratekey
  if [ "$rate" = unpaced ]; then ratekey='unpaced = true'; else ratekey="rate_gbps = $rate"; fi
  sed -e "0,/^name = .*/s//name = \"bench-loopback-${rate//./p}\"/" \
      -e "s/127.0.0.1:5000/127.0.0.1:$port/g" \
      -e "s/^payload_size = 1400.*/payload_size = $size/" \
      -e "s/^rate_gbps = 1.0.*/$ratekey/" \
      -e "s/^cpu_core = 1/cpu_core = $RX_CPU/" -e "s/^cpu_core = 0/cpu_core = $TX_CPU/" \
      -e "s/^consumer_core = 0/consumer_core = $TX_CPU/" \
      configs/host-loopback-udp.toml > "$f"
  # "read" or a coalescing time: stamp datagrams when the queue reads them (rx_timestamps =
  # "batch"), so the latency includes the time they waited in the socket
  if [ "$coalesce" != 0 ]; then
    sed -i "s/^gro = false.*/&\nrx_timestamps = \"batch\"/" "$f"
  fi
  if [ "$coalesce" != 0 ] && [ "$coalesce" != read ]; then
    sed -i "s/^gro = false.*/&\nrx_coalesce_us = $coalesce/" "$f"
  fi
}

# one receive-rate sample: sender on TX_CPU, receiver (c | direct | indirect) on RX_CPU
udp_sample() { # variant size rep [part [rate_gbps]]
  local v=$1 size=$2 rep=$3 part=${4:-udp} rate=${5:-0} port=$((PORT + 1)) b0 t0 b1 t1 s0 s1 rc=0
  local tag=$part-$v-$size-$rep
  "$BIN/sendmmsg_tx" --port "$port" --cpu "$TX_CPU" --size "$size" --seconds $((SECS + 10)) --fifo "$TX_FIFO" \
      --rate-gbps "$rate" \
      > "$OUT/$tag.tx.json" &
  local txpid=$!
  sleep 0.5
  read -r b0 t0 < <(cpu_jiffies "$RX_CPU"); s0=$(cpu_steal "$RX_CPU")
  if [ "$v" = c ]; then
    "$BIN/recvmmsg_rx" --port "$port" --cpu "$RX_CPU" --seconds "$SECS" --batch 64 \
        --bufsize "$(bufsize_for "$size")" --rcvbuf 16777216 --fifo 50 > "$OUT/$tag.rx.json" || rc=$?
  else
    # VARIANT-base: the same variant run by BENCH_BASELINE_BIN (a same-run baseline of a change)
    local bin=$RTDAQ
    case $v in *-base) bin=${BENCH_BASELINE_BIN:?"variant $v needs BENCH_BASELINE_BIN"} ;; esac
    rx_only_config "$size" "${v%-base}" "$port" "$OUT/$tag.toml"
    timeout -k 5 $((SECS + 30)) "$bin" run --config "$OUT/$tag.toml" --duration "$SECS" --report-json "$OUT/$tag.rx.json" \
        > "$OUT/$tag.log" 2>&1 || rc=$?
  fi
  read -r b1 t1 < <(cpu_jiffies "$RX_CPU"); s1=$(cpu_steal "$RX_CPU")
  kill -INT $txpid; wait $txpid || true
  [ -s "$OUT/$tag.rx.json" ] || { log "$tag: no result (rc=$rc), recorded as failed"; echo "{\"part\": \"failed\", \"tag\": \"$tag\", \"rc\": $rc}" >> "$RES"; return 0; }
  python3 - "$v" "$size" "$rep" "$OUT/$tag.rx.json" "$OUT/$tag.tx.json" "$(busy_pct "$b0" "$t0" "$b1" "$t1")" "$rc" "$part" \
      "$(awk -v a="$s0" -v b="$s1" -v hz="$(getconf CLK_TCK)" 'BEGIN { print (b - a) / hz }')" >> "$RES" <<'EOF'
import json, sys
v, size, rep, rxf, txf, busy, rc, part, steal = sys.argv[1:]
rx = json.load(open(rxf)); tx = json.load(open(txf))
r = {"part": part, "variant": v, "size": int(size), "rep": int(rep), "core1_busy_pct": float(busy),
     "rx_core_steal_s": float(steal),
     "rc": int(rc), "tx_pps": tx["pps"], "tx_gbps": tx["gbps"]}
if v == "c":
    r.update(packets=rx["packets"], bytes=rx["bytes"], seconds=rx["seconds"], lost=rx["lost"],
             kernel_drops=None, avg_batch=rx["avg_batch"], cpu_s=rx["cpu_s"])
else:
    t = rx["rx"]["totals"]
    r.update(packets=t["packets"], bytes=t["bytes"], seconds=rx["duration_s"], lost=rx["lost"],
             kernel_drops=t["drops"]["kernel"], ring_full=t["drops"]["ring_full"],
             drops_total=t["drops_total"], seq_gaps=t["seq_gaps"], malformed=t["malformed"],
             cpu_s=(t.get("io_cpu_s") or 0) + (t.get("consumer_cpu_s") or 0))
r["pps"] = r["packets"] / r["seconds"]; r["gbps"] = r["bytes"] * 8 / r["seconds"] / 1e9
print(json.dumps(r))
EOF
}

# one 2-queue receive sample: sender (8 sources) on TX_CPU; receivers on TX_CPU and RX_CPU
udp2_sample() { # variant(c|direct|lean) size rep
  local v=$1 size=$2 rep=$3 port=$((PORT + 5)) rc=0 a0 at0 b0 bt0 a1 at1 b1 bt1
  local tag=udp2-$v-$size-$rep
  "$BIN/sendmmsg_tx" --port "$port" --cpu "$TX_CPU" --size "$size" --sources 8 --seconds $((SECS + 10)) --fifo "$TX_FIFO" \
      > "$OUT/$tag.tx.json" &
  local txpid=$!
  sleep 0.5
  read -r a0 at0 < <(cpu_jiffies "$TX_CPU"); read -r b0 bt0 < <(cpu_jiffies "$RX_CPU")
  if [ "$v" = c ]; then
    local cpu k=0 pids=()
    for cpu in "$TX_CPU" $RX_CPU; do
      "$BIN/recvmmsg_rx" --port "$port" --cpu "$cpu" --seconds "$SECS" --batch 64 --reuseport 1 \
          --bufsize "$(bufsize_for "$size")" --rcvbuf 16777216 --fifo 50 > "$OUT/$tag.rx$k.json" &
      pids+=($!); k=$((k + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  else
    rx_only_config "$size" "$v" "$port" "$OUT/$tag.toml" 2
    timeout -k 5 $((SECS + 30)) "$RTDAQ" run --config "$OUT/$tag.toml" --duration "$SECS" --report-json "$OUT/$tag.rx.json" \
        > "$OUT/$tag.log" 2>&1 || rc=$?
  fi
  read -r a1 at1 < <(cpu_jiffies "$TX_CPU"); read -r b1 bt1 < <(cpu_jiffies "$RX_CPU")
  kill -INT $txpid; wait $txpid || true
  python3 - "$v" "$size" "$rep" "$OUT/$tag" "$(busy_pct "$a0" "$at0" "$a1" "$at1")" "$(busy_pct "$b0" "$bt0" "$b1" "$bt1")" "$rc" >> "$RES" <<'EOF2'
import json, os, sys
v, size, rep, tag, busy_tx, busy_rx, rc = sys.argv[1:]
tx = json.load(open(tag + ".tx.json"))
r = {"part": "udp2", "variant": v, "size": int(size), "rep": int(rep), "rc": int(rc),
     "busy_tx_core_pct": float(busy_tx), "busy_rx_core_pct": float(busy_rx), "tx_pps": tx["pps"]}
try:
    if v == "c":
        rs = [json.load(open(f"{tag}.rx{k}.json")) for k in (0, 1)]
        r.update(packets=sum(x["packets"] for x in rs), per_queue=[x["packets"] for x in rs],
                 seconds=max(x["seconds"] for x in rs), lost=sum(x["lost"] for x in rs))
    else:
        j = json.load(open(tag + ".rx.json"))
        r.update(packets=j["rx"]["totals"]["packets"], per_queue=[q["packets"] for q in j["rx"]["queues"]],
                 seconds=j["duration_s"], lost=j["lost"], kernel_drops=j["rx"]["totals"]["drops"]["kernel"])
    r["pps"] = r["packets"] / r["seconds"]
except (OSError, KeyError, ValueError) as e:
    r = {"part": "failed", "tag": os.path.basename(tag), "rc": int(rc), "error": str(e)}
print(json.dumps(r))
EOF2
}

# one rtdaq generator -> receiver loopback sample
loop_sample() { # part rate size rep [rx_coalesce_us]
  local part=$1 rate=$2 size=$3 rep=$4 tag=$1-$2-$3-$4 port=$((PORT + 2)) rc=0
  loopback_config "$rate" "$size" "$port" "$OUT/$tag.toml" "${5:-0}"
  timeout -k 5 $((SECS + 30)) "$RTDAQ" run --config "$OUT/$tag.toml" --duration "$SECS" --report-json "$OUT/$tag.json" \
      > "$OUT/$tag.log" 2>&1 || rc=$?
  [ -s "$OUT/$tag.json" ] || { log "$tag: no result (rc=$rc), recorded as failed"; echo "{\"part\": \"failed\", \"tag\": \"$tag\", \"rc\": $rc}" >> "$RES"; return 0; }
  python3 - "$part" "$rate" "$size" "$rep" "$OUT/$tag.json" "$rc" >> "$RES" <<'EOF'
import json, sys
part, rate, size, rep, f, rc = sys.argv[1:]
j = json.load(open(f)); rx = j["rx"]["totals"]; tx = j["tx"]["totals"]
print(json.dumps({"part": part, "rate": rate, "size": int(size), "rep": int(rep), "rc": int(rc),
    "lost": j["lost"], "rx_packets": rx["packets"], "tx_packets": tx["packets"],
    "tx_drops": tx["drops_total"], "rx_drops": rx["drops_total"], "kernel_drops": rx["drops"]["kernel"],
    "seq_gaps": rx["seq_gaps"], "rx_gbps": rx["gbps"], "tx_gbps": tx["gbps"], "rx_mpps": rx["mpps"],
    "duration_s": j["duration_s"], "lat_ns": rx["latency_ns"]}))
EOF
}

# iperf3 UDP sample: client on TX_CPU, server on RX_CPU
iperf_udp_sample() { # size rep
  local size=$1 rep=$2 tag=iperf-udp-$1-$2 port=$((PORT + 3))
  iperf3 -s -1 -p "$port" -A "$RX_CPU" -J > "$OUT/$tag.srv.json" 2> "$OUT/$tag.srv.err" &
  local spid=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -u -b 0 -l "$size" -t "$SECS" -A "$TX_CPU" -J > "$OUT/$tag.cli.json" 2> "$OUT/$tag.cli.err" || true
  wait $spid || true
  python3 - "$size" "$rep" "$OUT/$tag.srv.json" "$OUT/$tag.cli.json" >> "$RES" <<'EOF'
import json, sys
size, rep, sf, cf = sys.argv[1:]
s = json.load(open(sf))["end"]["sum"]; c = json.load(open(cf))["end"]["sum"]
# server side: what arrived. iperf3 counts UDP payload bytes (the -l size).
print(json.dumps({"part": "iperf_udp", "size": int(size), "rep": int(rep),
    "seconds": s["seconds"], "rx_packets": s["packets"] - s["lost_packets"], "sent_packets": s["packets"],
    "lost_packets": s["lost_packets"], "lost_percent": s["lost_percent"],
    # iperf3 3.12's server JSON reports bytes = 0 for UDP: payload rate from received datagrams
    "gbps": (s["packets"] - s["lost_packets"]) * int(size) * 8 / s["seconds"] / 1e9, "pps": (s["packets"] - s["lost_packets"]) / s["seconds"],
    "client_gbps": c["bits_per_second"] / 1e9}))
EOF
}

iperf_tcp_sample() { # rep
  local rep=$1 tag=iperf-tcp-$1 port=$((PORT + 4))
  iperf3 -s -1 -p "$port" -A "$RX_CPU" -J > "$OUT/$tag.srv.json" 2> "$OUT/$tag.srv.err" &
  local spid=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -l 8000 -t "$SECS" -A "$TX_CPU" -J > "$OUT/$tag.cli.json" 2> "$OUT/$tag.cli.err" || true
  wait $spid || true
  python3 - "$rep" "$OUT/$tag.cli.json" >> "$RES" <<'EOF'
import json, sys
rep, cf = sys.argv[1:]
e = json.load(open(cf))["end"]
print(json.dumps({"part": "iperf_tcp", "rep": int(rep), "gbps": e["sum_received"]["bits_per_second"] / 1e9,
    "seconds": e["sum_received"]["seconds"], "bytes": e["sum_received"]["bytes"]}))
EOF
}

tcp_config() { # file port
  cat > "$1" <<EOF
# bench-socket: rtdaq TCP loopback, 1 connection, unpaced generator, 8000 B records
name = "bench-tcp-1conn"
platform = "host"
[engine]
kind = "socket"
[[memory_regions]]
name = "srv_rx"
kind = "host"
buf_size = 8192
buf_count = 2048
[[memory_regions]]
name = "cli_tx"
kind = "host"
buf_size = 8192
buf_count = 1024
[[interfaces]]
name = "server"
address = "tcp://127.0.0.1:$2"
role = "server"
connections = 1
max_message_size = 8000
[[interfaces.rx_queues]]
id = 0
cpu_core = $RX_CPU
rt_priority = 50
batch_size = 64
ring_depth = 1024
memory_regions = ["srv_rx"]
mode = "direct"
[[interfaces]]
name = "client"
address = "tcp://127.0.0.1:$2"
role = "client"
connections = 1
max_message_size = 8000
[[interfaces.tx_queues]]
id = 0
cpu_core = $TX_CPU
rt_priority = 50
batch_size = 64
ring_depth = 1024
memory_regions = ["cli_tx"]
[generator]
interface = "client"
tx_queue = 0
payload_size = 8000
unpaced = true
[run]
duration_s = $SECS
drain_ms = 200
[rt]
required = false
EOF
}

rtdaq_tcp_sample() { # rep
  local rep=$1 tag=rtdaq-tcp-$1 port=$((PORT + 5)) rc=0
  tcp_config "$OUT/$tag.toml" "$port"
  timeout -k 5 $((SECS + 30)) "$RTDAQ" run --config "$OUT/$tag.toml" --duration "$SECS" --report-json "$OUT/$tag.json" \
      > "$OUT/$tag.log" 2>&1 || rc=$?
  [ -s "$OUT/$tag.json" ] || { log "$tag: no result (rc=$rc), recorded as failed"; echo "{\"part\": \"failed\", \"tag\": \"$tag\", \"rc\": $rc}" >> "$RES"; return 0; }
  python3 - "$rep" "$OUT/$tag.json" "$rc" >> "$RES" <<'EOF'
import json, sys
rep, f, rc = sys.argv[1:]
j = json.load(open(f)); rx = j["rx"]["totals"]; tx = j["tx"]["totals"]
print(json.dumps({"part": "rtdaq_tcp", "rep": int(rep), "rc": int(rc), "gbps": rx["gbps"],
    "rx_packets": rx["packets"], "tx_packets": tx["packets"], "lost": j["lost"],
    "seq_gaps": rx["seq_gaps"], "duration_s": j["duration_s"]}))
EOF
}

sockperf_sample() { # rep
  local rep=$1 tag=sockperf-$1 port=$((PORT + 6))
  taskset -c "$RX_CPU" sockperf server -i 127.0.0.1 -p "$port" > "$OUT/$tag.srv.log" 2>&1 &
  local spid=$!
  sleep 0.5
  taskset -c "$TX_CPU" sockperf ping-pong -i 127.0.0.1 -p "$port" -m 1472 -t "$SECS" \
      > "$OUT/$tag.cli.log" 2>&1 || true
  kill -INT $spid 2>/dev/null || true; wait $spid 2>/dev/null || true
  python3 - "$rep" "$OUT/$tag.cli.log" >> "$RES" <<'EOF'
import re, sys
rep, f = sys.argv[1:]
t = open(f).read()
def pct(p):
    m = re.search(r"percentile\s+%s\s*=\s*([0-9.]+)" % re.escape(p), t)
    return float(m.group(1)) if m else None
m = re.search(r"avg-latency=([0-9.]+)", t)
mx = re.search(r"<MAX> observation\s*=\s*([0-9.]+)", t)
import json
print(json.dumps({"part": "sockperf", "rep": int(rep), "avg_half_rtt_us": float(m.group(1)) if m else None,
    "p50_us": pct("50.000"), "p99_us": pct("99.000"), "p999_us": pct("99.900"),
    "max_us": float(mx.group(1)) if mx else None}))
EOF
}

# the paced rate of part udppaced for a size (BENCH_PACED "size:Gb/s ..."; default 1 Gb/s)
PACED=${BENCH_PACED:-"1472:2 8000:8 64000:25"}
paced_rate() {
  local e
  for e in $PACED; do [ "${e%%:*}" = "$1" ] && { echo "${e#*:}"; return; }; done
  echo 1
}

# ---------------------------------------------------------------- runs
for part in $PARTS; do
  case $part in
  udp)
    for size in $SIZES; do
      for rep in $(seq 1 "$REPEATS"); do
        for v in $VARIANTS; do
          log "udp size=$size rep=$rep receiver=$v"; udp_sample "$v" "$size" "$rep"
        done
      done
    done ;;
  udppaced)
    for size in $SIZES; do
      rate=$(paced_rate "$size")
      for rep in $(seq 1 "$REPEATS"); do
        for v in $VARIANTS; do
          log "udppaced size=$size rate=${rate}Gb/s rep=$rep receiver=$v"
          udp_sample "$v" "$size" "$rep" udppaced "$rate"
        done
      done
    done ;;
  udp2)
    for size in $SIZES; do
      for rep in $(seq 1 "$REPEATS"); do
        for v in c direct lean; do
          log "udp2 size=$size rep=$rep receivers=$v"; udp2_sample "$v" "$size" "$rep"
        done
      done
    done ;;
  lossfree)
    for rep in $(seq 1 "$REPEATS"); do
      for rate in unpaced $RATES; do
        log "lossfree rep=$rep rate=$rate"; loop_sample lossfree "$rate" 1472 "$rep"
      done
    done ;;
  iperf)
    command -v iperf3 >/dev/null || { log "iperf3 missing: skipped"; continue; }
    for size in $SIZES; do
      for rep in $(seq 1 "$REPEATS"); do
        log "iperf3 udp size=$size rep=$rep"; iperf_udp_sample "$size" "$rep"
        log "udp size=$size rep=$rep receiver=direct (paired with iperf3)"
        udp_sample direct "$size" "$rep" udp_iperfpair
      done
    done ;;
  tcp)
    command -v iperf3 >/dev/null || { log "iperf3 missing: skipped"; continue; }
    for rep in $(seq 1 "$REPEATS"); do
      log "iperf3 tcp rep=$rep"; iperf_tcp_sample "$rep"
      log "rtdaq tcp rep=$rep"; rtdaq_tcp_sample "$rep"
    done ;;
  ping)
    command -v sockperf >/dev/null || { log "sockperf missing: skipped"; continue; }
    for rep in $(seq 1 "$REPEATS"); do
      log "sockperf ping-pong rep=$rep"; sockperf_sample "$rep"
      log "rtdaq loopback latency (1 Gb/s paced, 1472 B) rep=$rep"; loop_sample latency 1 1472 "$rep"
      log "rtdaq loopback latency to the read rep=$rep"; loop_sample latency_read 1 1472 "$rep" read
      log "rtdaq loopback latency to the read, rx_coalesce_us = $COALESCE_US rep=$rep"; loop_sample latency_co 1 1472 "$rep" "$COALESCE_US"
    done ;;
  *) log "unknown part $part"; exit 2 ;;
  esac
done

echo "loadavg_end: $(cat /proc/loadavg)" >> "$OUT/host.txt"
echo "other busy processes at end: $(ps -eo pid,cls,rtprio,pcpu,comm --sort=-pcpu | sed -n 2,4p | tr -s ' ' | tr '\n' ';')" >> "$OUT/host.txt"
log "loadavg_end: $(cat /proc/loadavg)"

# ---------------------------------------------------------------- tables
tables "$OUT" | tee "$OUT/tables.md"
log "raw results: $RES"
