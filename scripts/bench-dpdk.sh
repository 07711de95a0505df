#!/usr/bin/env bash
# bench-dpdk.sh: rtdaq's DPDK RX vs dpdk-testpmd --forward-mode=rxonly on DPDK's null PMD
# (net_null), in the same run, interleaved A B A B (method: docs/benchmarks/method.md;
# results: docs/benchmarks/dpdk.md).
#
# net_null hands out freshly allocated mbufs of SIZE bytes (devarg size=) on every RX call,
# without writing them: the figure is the receiver's per-packet CPU cost (PMD RX + its own
# per-frame work + bulk free), with no wire, no copy and no sender. Both sides:
#   one RX queue of net_null0 on core RX_CPU, 64-packet bursts, SCHED_FIFO 50, EAL main on
#   MAIN_CPU, --no-huge -m 512 --no-shconf --no-pci, 8192 mbufs of 2048 B data room.
#   rtdaq    target/engines/rtdaq-dpdk run, configs/vdev-dpdk-ring.toml with the vdev changed to
#            net_null0,size=SIZE, the generator and TX queue removed, busy_poll = true,
#            mode = "direct", run.validate = "count" (net_null's frames are all zero bytes)
#   testpmd  dpdk-testpmd -i --forward-mode=MODE --burst=64 --no-mlockall under chrt -f 50;
#            `start`, sleep SECS, `stop` through a FIFO on its stdin. MODE rxonly (the issue's
#            baseline: frees each burst, never reads a packet) and csum (parses each packet's
#            L2/L3/L4 headers, as rtdaq's per-frame classification does, then transmits the
#            burst back into net_null, which frees it)
# Figures per sample:
#   Mpps (wall)     rtdaq: rx packets / report duration_s; testpmd: RX-packets / time between
#                   `start` and `stop` as this script sent them
#   Mpps per CPU s  rtdaq: rx packets / io_cpu_s (the RX thread's CPU time, from its report);
#                   testpmd: RX-packets / the forwarding lcore thread's utime+stime over the
#                   same window (/proc/PID/task/TID/stat, 10 ms ticks)
#   ratio           rtdaq / that testpmd mode, paired by repeat
# Part "veth" (docs/benchmarks/dpdk.md, "veth"): the DPDK engine on a veth vs rtdaq's own raw
# engines on the same veth, in the same run, interleaved per repeat and frame size. Test bed
# scripts/netns.sh (rtdaq-a/rtdaq0a 169.254.90.1 <-> rtdaq-b/rtdaq0b 169.254.90.2, MTU 1500).
#   sender   the same for every receiver: dpdk-testpmd --forward-mode=txonly (unpaced) on
#            net_af_packet0,iface=rtdaq0a in rtdaq-a, both lcores on TX_CPU, frames of SIZE bytes
#            (--txpkts) to rtdaq0b's MAC, 169.254.90.1 -> 169.254.90.2, UDP 5000 -> 5000;
#            `start`, sleep SECS, `stop` through a FIFO
#   receivers, one RX queue on RX_CPU in rtdaq-b, each started first (until it logs "queues
#            running") and run SECS + 4 s; the same flow rule everywhere (udp_dst 5000 ->
#            queue 0, the rest dropped), run.validate = "count" (testpmd's frames carry no
#            rtdaq header), timeout_us = 100 (sleeping queues, as shipped):
#     dpdk-afpacket  rtdaq-dpdk, --vdev net_af_packet0,iface=rtdaq0b,framecnt=4096
#     dpdk-afxdp     rtdaq-dpdk, --vdev net_af_xdp0,iface=rtdaq0b,start_queue=0,queue_count=1
#     afpacket       rtdaq-afpacket, configs/veth-afpacket-rx.toml
#     afxdp          rtdaq-afxdp, configs/veth-afxdp-rx.toml
#   (the DPDK ones with --no-huge -m 512 --no-shconf and engine.dpdk.flow_offload = "software":
#   neither PMD has rte_flow.) Figures per sample: delivered Mpps (packets / SECS), CPU ns per
#   packet (io_cpu_s / packets), testpmd's sent Mpps; ratios dpdk-afpacket / afpacket and
#   dpdk-afxdp / afxdp, paired by repeat, median over repeats.
# Environment: BENCH_REPEATS (3), BENCH_SECONDS (3), BENCH_SIZES ("64 1500", bytes per packet),
# BENCH_PARTS ("null veth"; "pcap" adds full validation vs testpmd csum on frames with rtdaq's
# header, replayed by net_pcap from memory (see the part below; BENCH_PCAP_SIZES "128 1500",
# BENCH_PCAP_FRAMES 1024); "perf" adds a profile of rtdaq's RX core per size: perf record
# -C RX_CPU for BENCH_PERF_SECONDS (3) at BENCH_PERF_FREQ (4999) Hz, perf report by thread,
# library and symbol into perf-SIZE.txt), BENCH_BASELINE_BIN (another rtdaq-dpdk binary, e.g.
# an earlier commit's, sampled as "rtdaq-base" right after rtdaq in every repeat of the null
# and pcap parts: a same-run baseline of a change), BENCH_VETH_RECEIVERS ("dpdk-afpacket afpacket dpdk-afxdp afxdp"),
# BENCH_TX_CPU (0, veth sender), BENCH_TESTPMD_MODES ("rxonly csum"),
# BENCH_RX_CPU (1), BENCH_MAIN_CPU (0), BENCH_OUT (target/bench-dpdk/<timestamp>),
# BENCH_AFXDP_ARGS (",start_queue=0,queue_count=1": dpdk-afxdp's net_af_xdp devargs after iface=),
# BENCH_NO_BUILD=1 (use target/engines/rtdaq-* as they are, e.g. a smoke run of debug builds),
# BENCH_TABLES_ONLY=DIR re-prints the tables of a finished run. Needs root and Debian's dpdk.
# Builds the release binaries with scripts/build-engines.sh --release dpdk (+ afpacket afxdp
# for the veth part).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPEATS=${BENCH_REPEATS:-3}
SECS=${BENCH_SECONDS:-3}
SIZES=${BENCH_SIZES:-"64 1500"}
MODES=${BENCH_TESTPMD_MODES:-"rxonly csum"}
RX_CPU=${BENCH_RX_CPU:-1}
MAIN_CPU=${BENCH_MAIN_CPU:-0}
TX_CPU=${BENCH_TX_CPU:-0}
PARTS=${BENCH_PARTS:-"null veth"}
BASE_BIN=${BENCH_BASELINE_BIN:-}
PERF_SECS=${BENCH_PERF_SECONDS:-3}
VETH_RECEIVERS=${BENCH_VETH_RECEIVERS:-"dpdk-afpacket afpacket dpdk-afxdp afxdp"}
OUT=${BENCH_OUT:-$ROOT/target/bench-dpdk/$(date -u +%Y%m%dT%H%M%SZ)}
log() { printf '[bench-dpdk %s] %s\n' "$(date -u +%T)" "$*" >&2; }

tables() { # OUT: print the tables of a finished run
python3 - "$1" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out + "/results.jsonl") if l.strip()]
print("host:"); print(open(out + "/host.txt").read())
failed = [r["tag"] for r in rows if r["part"] == "failed"]
print("failed samples:", ", ".join(failed) if failed else "none"); print()
ok = [r for r in rows if r["part"] == "sample"]
def mmm(xs, f="{:.2f}"):
    xs = [x for x in xs if x is not None]
    return " / ".join(f.format(v) for v in (min(xs), st.median(xs), max(xs))) if xs else "n/a"
if not ok:
    print("(no net_null samples in this run)")
print("## RX on net_null, one core: Mpps (min / median / max over repeats)")
print("ratio = rtdaq / that receiver, paired by repeat\n")
print("| packet B | receiver | Mpps (wall) | Mpps per CPU s | ns CPU / packet | ratio (wall) | ratio (per CPU s) | packets per repeat |")
print("|---:|---|---:|---:|---:|---:|---:|---|")
for size in sorted({r["size"] for r in ok}):
    whos = ["rtdaq"] + sorted({r["who"] for r in ok if r["who"] != "rtdaq"}, key=lambda w: (w != "testpmd-rxonly", w))
    by = {w: sorted([r for r in ok if r["who"] == w and r["size"] == size], key=lambda r: r["rep"]) for w in whos}
    wall = {w: {r["rep"]: r["packets"] / r["secs"] / 1e6 for r in rs} for w, rs in by.items()}
    cpu = {w: {r["rep"]: (r["packets"] / r["cpu_s"] / 1e6 if r["cpu_s"] else None) for r in rs} for w, rs in by.items()}
    for w in whos:
        rs = by[w]
        if not rs: continue
        if w == "rtdaq":
            rw = rc = "-"
        else:
            rw = mmm([wall["rtdaq"][k] / wall[w][k] for k in wall["rtdaq"] if k in wall[w]], "{:.3f}")
            rc = mmm([cpu["rtdaq"][k] / cpu[w][k] for k in cpu["rtdaq"] if cpu[w].get(k) and cpu["rtdaq"][k]], "{:.3f}")
        ns = [1e3 / c for c in cpu[w].values() if c]
        print(f"| {size} | {w} | {mmm(list(wall[w].values()), '{:.2f}')} | {mmm(list(cpu[w].values()), '{:.2f}')} | "
              f"{mmm(ns, '{:.1f}')} | {rw} | {rc} | {', '.join(str(r['packets']) for r in rs)} |")
print()
print("per sample (in run order):\n")
print("| tag | packets | seconds | CPU s | Mpps (wall) |")
print("|---|---:|---:|---:|---:|")
for r in ok:
    print(f"| {r['tag']} | {r['packets']} | {r['secs']:.3f} | {r['cpu_s']:.2f} | {r['packets'] / r['secs'] / 1e6:.2f} |")
pc = [r for r in rows if r["part"] == "pcap"]
if pc:
    print()
    print("## pcap: full validation vs testpmd csum, count vs rxonly (net_pcap infinite_rx, one core)")
    print("min / median / max over repeats; ratio = rtdaq / its testpmd baseline (rtdaq-base: the")
    print("BENCH_BASELINE_BIN binary / rtdaq, sampled right after it), paired by repeat\n")
    print("| frame B | receiver | Mpps (wall) | Mpps per CPU s | ns CPU / packet | baseline | ratio (wall) | ratio (per CPU s) |")
    print("|---:|---|---:|---:|---:|---|---:|---:|")
    base = {"rtdaq-full": "testpmd-csum", "rtdaq-count": "testpmd-rxonly",
            "rtdaq-base-full": "rtdaq-full", "rtdaq-base-count": "rtdaq-count"}
    for size in sorted({r["size"] for r in pc}):
        by = {w: {r["rep"]: r for r in pc if r["who"] == w and r["size"] == size}
              for w in ("rtdaq-full", "rtdaq-base-full", "testpmd-csum", "rtdaq-count",
                        "rtdaq-base-count", "testpmd-rxonly")}
        wall = lambda r: r["packets"] / r["secs"] / 1e6
        cpu = lambda r: r["packets"] / r["cpu_s"] / 1e6 if r["cpu_s"] else None
        for w, rs in by.items():
            if not rs: continue
            b = base.get(w)
            rw = rc = "-"
            if b and by.get(b):
                reps = [k for k in rs if k in by[b]]
                rw = mmm([wall(rs[k]) / wall(by[b][k]) for k in reps], "{:.3f}")
                rc = mmm([cpu(rs[k]) / cpu(by[b][k]) for k in reps if cpu(rs[k]) and cpu(by[b][k])], "{:.3f}")
            print(f"| {size} | {w} | {mmm([wall(r) for r in rs.values()])} | {mmm([cpu(r) for r in rs.values()])} | "
                  f"{mmm([1e3 / cpu(r) for r in rs.values() if cpu(r)], '{:.1f}')} | {b or '-'} | {rw} | {rc} |")
veth = [r for r in rows if r["part"] == "veth"]
if veth:
    print()
    print("## veth: the DPDK engine (net_af_packet, net_af_xdp) vs the AF_PACKET and AF_XDP engines")
    print("same sender (testpmd txonly, unpaced); min / median / max over repeats; ratio = DPDK receiver / the")
    print("engine of the same kernel interface, paired by repeat (CPU: > 1 means the DPDK engine needs more CPU)\n")
    print("| frame B | receiver | delivered Mpps | CPU ns/packet | ratio delivered | ratio CPU ns/packet | sent Mpps | delivered / sent |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    base = {"dpdk-afpacket": "afpacket", "dpdk-afxdp": "afxdp"}
    for size in sorted({r["size"] for r in veth}):
        whos = [w for w in ("dpdk-afpacket", "afpacket", "dpdk-afxdp", "afxdp") if any(r["who"] == w and r["size"] == size for r in veth)]
        by = {w: {r["rep"]: r for r in veth if r["who"] == w and r["size"] == size} for w in whos}
        mpps = lambda r: r["received"] / r["secs"] / 1e6
        ns = lambda r: r["cpu_s"] * 1e9 / r["received"] if r["received"] else None
        for w in whos:
            rs = list(by[w].values())
            rd = rc = "-"
            b = base.get(w)
            if b in by:
                reps = [k for k in by[w] if k in by[b]]
                rd = mmm([mpps(by[w][k]) / mpps(by[b][k]) for k in reps if by[b][k]["received"]], "{:.3f}")
                rc = mmm([ns(by[w][k]) / ns(by[b][k]) for k in reps if ns(by[w][k]) and ns(by[b][k])], "{:.3f}")
            print(f"| {size} | {w} | {mmm([mpps(r) for r in rs])} | {mmm([ns(r) for r in rs], '{:.0f}')} | {rd} | {rc} | "
                  f"{mmm([r['sent'] / r['secs'] / 1e6 for r in rs])} | {mmm([r['received'] / r['sent'] if r['sent'] else None for r in rs], '{:.3f}')} |")
PY
}
if [ -n "${BENCH_TABLES_ONLY:-}" ]; then tables "$BENCH_TABLES_ONLY"; exit 0; fi
[ "$(id -u)" -eq 0 ] || { echo "bench-dpdk.sh needs root (DPDK EAL, SCHED_FIFO)" >&2; exit 2; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd is missing: apt-get install dpdk" >&2; exit 2; }
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: > "$RES"

has_part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  log "BENCH_NO_BUILD=1: using target/engines/rtdaq-* as they are"
elif has_part veth; then
  log "building the release binaries (scripts/build-engines.sh --release dpdk afpacket afxdp)"
  scripts/build-engines.sh --release dpdk afpacket afxdp >&2
else
  log "building the release binary (scripts/build-engines.sh --release dpdk)"
  scripts/build-engines.sh --release dpdk >&2
fi
BIN=$ROOT/target/engines/rtdaq-dpdk

{
  echo "date_utc: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc)"
  echo "uname_r: $(uname -r)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "loadavg_start: $(cat /proc/loadavg)"
  echo "dpdk: $(dpkg-query -W -f '${Version}' dpdk 2>/dev/null || echo unknown)"
  echo "rtdaq: $("$BIN" version | head -2 | tr '\n' ' ')"
  echo "RX core: $RX_CPU, EAL main core: $MAIN_CPU"
  [ -z "$BASE_BIN" ] || echo "rtdaq-base: $BASE_BIN: $("$BASE_BIN" version | head -2 | tr '\n' ' ')"
  echo "repeats: $REPEATS seconds: $SECS sizes: $SIZES parts: $PARTS testpmd modes: $MODES"
  echo "veth: sender core $TX_CPU, receivers: $VETH_RECEIVERS"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

rtdaq_config() { # size file [vdev [validate]]: net_null0,size=SIZE and "count" by default
  local vdev=${3:-net_null0,size=$1} validate=${4:-count}
  sed -e "s#\"--vdev\", \"net_ring0\"#\"--vdev\", \"$vdev\", \"--file-prefix\", \"bench-dpdk-rtdaq\"#" \
      -e "s/^address = \"net_ring0\".*/address = \"${vdev%%,*}\"/" \
      -e "s/^main_core = 0 .*/main_core = $MAIN_CPU/" \
      -e "s/^cpu_core = 1$/cpu_core = $RX_CPU/" \
      -e 's/^mode = "direct"$/mode = "direct"\nbusy_poll = true/' \
      -e '/^\[\[interfaces.tx_queues\]\]/,/^\[run\]/{/^\[run\]/!d}' \
      -e "s/^loss_tolerance = 0\$/loss_tolerance = 0\nvalidate = \"$validate\"/" \
      configs/vdev-dpdk-ring.toml > "$2"
  "$BIN" config check "$2" > /dev/null
}

REC_PART=sample   # "pcap" while part pcap runs
record() { # who size rep tag packets secs cpu_s
  printf '{"part":"%s","who":"%s","size":%s,"rep":%s,"tag":"%s","packets":%s,"secs":%s,"cpu_s":%s}\n' \
    "$REC_PART" "$@" >> "$RES"
}
failed() { # tag why
  printf '{"part":"failed","tag":"%s","error":"%s"}\n' "$1" "$2" >> "$RES"
  log "FAILED $1: $2"
}

sample_rtdaq() { # size rep [who bin [vdev validate]]
  local size=$1 rep=$2 who=${3:-rtdaq} bin=${4:-$BIN}
  local tag=$REC_PART-$who-$1-$2
  rtdaq_config "$size" "$OUT/$tag.toml" "${5:-}" "${6:-}"
  local rc=0 vals
  "$bin" run --config "$OUT/$tag.toml" --duration "$SECS" --report-json "$OUT/$tag.json" \
      > "$OUT/$tag.log" 2>&1 || rc=$?
  # A looped pcap repeats its sequence numbers: exit 1 (duplicates beyond loss_tolerance)
  # is expected there; the report is what counts.
  if [ "$rc" -ne 0 ] && ! { [ "$REC_PART" = pcap ] && [ "$rc" -eq 1 ] && [ -s "$OUT/$tag.json" ]; }; then
    failed "$tag" "rtdaq exit $rc"; return
  fi
  if [ "$REC_PART" = pcap ]; then
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["rx"]["totals"]
bad = {k: t.get(k, 0) for k in ("corrupt", "malformed")}
assert not any(bad.values()), f"{sys.argv[1]}: frames of scripts/lib/rtdaq_frames.py judged invalid: {bad}"' "$OUT/$tag.json" ||
      { failed "$tag" "corrupt or malformed frames"; return; }
  fi
  vals=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); t=r["rx"]["totals"]
print(t["packets"], r["duration_s"], t["io_cpu_s"])' "$OUT/$tag.json")
  # shellcheck disable=SC2086 # three numbers
  record "$who" "$size" "$rep" "$tag" $vals
}

# perf_rtdaq size: one rtdaq run of PERF_SECS + 2 s, `perf record` of the RX core for PERF_SECS
# once its queue runs; the profile by thread, library and symbol goes to perf-SIZE.txt.
perf_rtdaq() {
  local size=$1 tag=perf-$1 pid
  rtdaq_config "$size" "$OUT/$tag.toml"
  "$BIN" run --config "$OUT/$tag.toml" --duration "$((PERF_SECS + 2))" \
      --report-json "$OUT/$tag.json" > "$OUT/$tag.log" 2>&1 &
  pid=$!
  if ! wait_log "$OUT/$tag.log" 'queues running' 1 30; then
    kill "$pid" 2>/dev/null || true; wait "$pid" || true
    failed "$tag" "rtdaq never logged 'queues running'"; return
  fi
  perf record -q -C "$RX_CPU" -F "${BENCH_PERF_FREQ:-4999}" -o "$OUT/$tag.data" -- sleep "$PERF_SECS" \
      > "$OUT/$tag.perf.log" 2>&1
  wait "$pid" || { failed "$tag" "rtdaq exit $?"; return; }
  {
    echo "# perf record -C $RX_CPU -F ${BENCH_PERF_FREQ:-4999}, ${PERF_SECS} s of the RX core; net_null size=$size"
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["rx"]["totals"]
n, s = t["packets"], t["io_cpu_s"]
print(f"# rtdaq: {n} packets, RX thread {s:.2f} CPU s, {s * 1e9 / n:.1f} ns CPU / packet")' "$OUT/$tag.json"
    perf report -i "$OUT/$tag.data" --stdio --no-children --sort comm,dso,symbol \
        --percent-limit 0.3 2>/dev/null | grep -v '^$'
  } > "$OUT/perf-$size.txt"
  log "profile: $OUT/perf-$size.txt"
}

thread_ticks() { # pid comm: utime+stime (clock ticks) of the thread named comm
  local t
  for t in /proc/"$1"/task/*; do
    if [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ]; then
      awk '{ sub(/.*\) /, ""); print $12 + $13 }' "$t/stat"
      return
    fi
  done
  echo "no thread $2 in $1" >&2
  return 1
}

wait_log() { # file pattern count timeout_s
  local i n
  for ((i = 0; i < $4 * 20; i++)); do
    n=$(grep -c -- "$2" "$1" 2>/dev/null || true)
    [ "${n:-0}" -ge "$3" ] && return 0
    sleep 0.05
  done
  return 1
}

sample_testpmd() { # mode size rep [vdev]
  local mode=$1 size=$2 rep=$3 vdev=${4:-net_null0,size=$2} tag=$REC_PART-testpmd-$1-$2-$3 fifo pid t0 t1 c0 c1 hz worker
  fifo=$OUT/$tag.in
  rm -f "$fifo"; mkfifo "$fifo"
  chrt -f 50 stdbuf -o0 dpdk-testpmd -l "$MAIN_CPU,$RX_CPU" --main-lcore "$MAIN_CPU" \
      --no-huge -m 512 --no-shconf --no-pci --file-prefix bench-dpdk-testpmd \
      --vdev "$vdev" --log-level=lib.eal:notice -- \
      -i --no-mlockall --forward-mode="$mode" --nb-cores=1 --burst=64 --total-num-mbufs=8192 \
      < "$fifo" > "$OUT/$tag.log" 2>&1 &
  pid=$!
  exec 3> "$fifo"
  worker=rte-worker-$RX_CPU
  if ! wait_log "$OUT/$tag.log" 'testpmd> ' 1 60; then
    exec 3>&-; kill "$pid" 2>/dev/null || true; wait "$pid" || true
    failed "$tag" "no testpmd prompt"; return
  fi
  c0=$(thread_ticks "$pid" "$worker")
  t0=$(date +%s.%N)
  echo start >&3
  sleep "$SECS"
  echo stop >&3
  t1=$(date +%s.%N)
  wait_log "$OUT/$tag.log" 'Accumulated forward statistics' 1 30 || true
  sleep 0.2
  c1=$(thread_ticks "$pid" "$worker")
  echo quit >&3
  exec 3>&-
  wait "$pid" || true
  rm -f "$fifo"
  local packets
  packets=$(awk '/Accumulated forward statistics/ { acc = 1 }
                 acc && /RX-packets:/ { print $2; exit }' "$OUT/$tag.log")
  if [ -z "$packets" ]; then failed "$tag" "no RX-packets in the log"; return; fi
  hz=$(getconf CLK_TCK)
  record "testpmd-$mode" "$size" "$rep" "$tag" "$packets" "$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')" \
    "$(awk -v a="$c1" -v b="$c0" -v hz="$hz" 'BEGIN { print (a - b) / hz }')"
}

if has_part null; then
for rep in $(seq 1 "$REPEATS"); do
  for size in $SIZES; do
    log "rep=$rep size=$size rtdaq"
    sample_rtdaq "$size" "$rep"
    if [ -n "$BASE_BIN" ]; then
      log "rep=$rep size=$size rtdaq-base ($BASE_BIN)"
      sample_rtdaq "$size" "$rep" rtdaq-base "$BASE_BIN"
    fi
    for mode in $MODES; do
      log "rep=$rep size=$size testpmd $mode"
      sample_testpmd "$mode" "$size" "$rep"
    done
  done
done
fi

# ---- part "pcap" ----------------------------------------------------------------------------
# Full validation on frames that carry rtdaq's header and pattern: net_pcap replays a pcap of
# PCAP_FRAMES frames (scripts/lib/rtdaq_frames.py, IPv4 and UDP checksums set) from memory
# forever (infinite_rx=1: each RX allocates an mbuf and copies a stored frame into it; TX
# drops). rtdaq validate = "full" (header, pattern over every payload byte, sequence) vs
# testpmd csum (parses L2/L3/L4, recomputes the IPv4 and UDP checksums in software over every
# payload byte, as no checksum offload is set, and sends the burst to net_pcap's TX, which
# drops it); rtdaq validate = "count" vs testpmd rxonly. After the first pass the sequence
# numbers repeat: rtdaq counts them duplicate / too old (the pattern is checked first, so
# every frame is read whole).
PCAP_SIZES=${BENCH_PCAP_SIZES:-"128 1500"}
PCAP_FRAMES=${BENCH_PCAP_FRAMES:-1024}
if has_part pcap; then
  REC_PART=pcap
  for size in $PCAP_SIZES; do
    python3 scripts/lib/rtdaq_frames.py "$OUT/frames-$size.pcap" "$size" "$PCAP_FRAMES"
  done
  for rep in $(seq 1 "$REPEATS"); do
    for size in $PCAP_SIZES; do
      vdev="net_pcap0,rx_pcap=$OUT/frames-$size.pcap,infinite_rx=1"
      for v in full count; do
        log "pcap rep=$rep size=$size rtdaq validate=$v"
        sample_rtdaq "$size" "$rep" "rtdaq-$v" "$BIN" "$vdev" "$v"
        if [ -n "$BASE_BIN" ]; then
          log "pcap rep=$rep size=$size rtdaq-base validate=$v ($BASE_BIN)"
          sample_rtdaq "$size" "$rep" "rtdaq-base-$v" "$BASE_BIN" "$vdev" "$v"
        fi
      done
      for mode in csum rxonly; do
        log "pcap rep=$rep size=$size testpmd $mode"
        sample_testpmd "$mode" "$size" "$rep" "$vdev"
      done
    done
  done
  REC_PART=sample
fi

if has_part perf; then
  command -v perf >/dev/null || { echo "part perf needs perf: apt-get install linux-perf" >&2; exit 2; }
  for size in $SIZES; do
    log "size=$size perf record of the RX core"
    perf_rtdaq "$size"
  done
fi

# ---- part "veth" ----------------------------------------------------------------------------
MAC_B=02:72:74:00:5a:02   # rtdaq0b (scripts/netns.sh)

veth_rx_config() { # receiver file: one RX queue on RX_CPU, udp_dst 5000 -> queue 0, count only
  local who=$1 f=$2
  case $who in
  dpdk-*)
    # net_af_xdp refuses a port with RX but no TX queues: it keeps the (idle) TX queue.
    local vdev=net_af_packet0 args=",framecnt=4096" cut='^\[\[interfaces.tx_queues\]\]'
    if [ "$who" = dpdk-afxdp ]; then
      vdev=net_af_xdp0 args="${BENCH_AFXDP_ARGS:-,start_queue=0,queue_count=1}" cut='^\[generator\]'
    fi
    sed -e "s/\"--vdev\", \"net_ring0\"/\"--vdev\", \"$vdev,iface=rtdaq0b$args\"/" \
        -e 's/"--no-shconf", /"--no-shconf", "--file-prefix", "bench-dpdk-veth-rx", /' \
        -e 's/^address = "net_ring0".*/address = "rtdaq0b"/' \
        -e "s/^main_core = 0 .*/main_core = $MAIN_CPU\nflow_offload = \"software\"/" \
        -e "s/^cpu_core = 1$/cpu_core = $RX_CPU/" \
        -e 's/^default_action = 0$/default_action = "drop"/' \
        -e "/$cut/,/^\\[run\\]/{/^\\[run\\]/!d}" \
        -e 's/^\[run\]$/[[flows]]\ninterface = "ring"\nid = 1\nqueue = 0\n[flows.match]\nudp_dst = 5000\n\n[run]/' \
        -e "s/^loss_tolerance = 0\$/loss_tolerance = 0\nvalidate = \"$validate\"/" \
        configs/vdev-dpdk-ring.toml > "$f" ;;
  afpacket | afxdp)
    sed -e "s/^cpu_core = 1$/cpu_core = $RX_CPU/" \
        -e 's/^drain_ms = 100.*/drain_ms = 100\nvalidate = "count"/' \
        "configs/veth-$who-rx.toml" > "$f" ;;
  esac
}

sample_veth() { # receiver size rep
  local who=$1 size=$2 rep=$3 tag=veth-$1-$2-$3 bin fifo tp rx t0 t1 rc=0
  case $who in
  dpdk-*) bin=$ROOT/target/engines/rtdaq-dpdk ;;
  *) bin=$ROOT/target/engines/rtdaq-$who ;;
  esac
  veth_rx_config "$who" "$OUT/$tag.toml"
  "$bin" config check "$OUT/$tag.toml" > /dev/null
  RUST_LOG=info ip netns exec rtdaq-b "$bin" run --config "$OUT/$tag.toml" --duration "$((SECS + 4))" \
      --report-json "$OUT/$tag.json" > "$OUT/$tag.log" 2>&1 &
  rx=$!
  if ! wait_log "$OUT/$tag.log" 'queues running' 1 60; then
    kill "$rx" 2>/dev/null || true; wait "$rx" || true
    failed "$tag" "receiver did not start"; return
  fi
  fifo=$OUT/$tag.in
  rm -f "$fifo"; mkfifo "$fifo"
  ip netns exec rtdaq-a stdbuf -o0 dpdk-testpmd --lcores "0@$TX_CPU,1@$TX_CPU" \
      --no-huge -m 512 --no-pci --no-shconf --file-prefix bench-dpdk-veth-tp \
      --vdev net_af_packet0,iface=rtdaq0a \
      --log-level=lib.eal:notice -- -i --no-mlockall --forward-mode=txonly --nb-cores=1 \
      --burst=32 --total-num-mbufs=8192 --txpkts="$size" --eth-peer="0,$MAC_B" \
      --tx-ip=169.254.90.1,169.254.90.2 --tx-udp=5000,5000 < "$fifo" > "$OUT/$tag.tp.log" 2>&1 &
  tp=$!
  exec 3> "$fifo"
  if ! wait_log "$OUT/$tag.tp.log" 'testpmd> ' 1 60; then
    exec 3>&-; kill "$tp" "$rx" 2>/dev/null || true; wait "$tp" || true; wait "$rx" || true
    failed "$tag" "no testpmd prompt"; return
  fi
  t0=$(date +%s.%N)
  echo start >&3
  sleep "$SECS"
  echo stop >&3
  t1=$(date +%s.%N)
  wait_log "$OUT/$tag.tp.log" 'Accumulated forward statistics' 1 30 || true
  echo quit >&3
  exec 3>&-
  wait "$tp" || true
  rm -f "$fifo"
  wait "$rx" || rc=$?
  if [ "$rc" -ne 0 ]; then failed "$tag" "receiver exit $rc"; return; fi
  python3 - "$who" "$size" "$rep" "$tag" "$OUT" "$t0" "$t1" >> "$RES" <<'PY'
import json, sys
who, size, rep, tag, out, t0, t1 = sys.argv[1:]
r = json.load(open(f"{out}/{tag}.json"))["rx"]["totals"]
sent = None
acc = False
for line in open(f"{out}/{tag}.tp.log"):
    if "Accumulated forward statistics" in line: acc = True
    if acc and "TX-packets:" in line:
        sent = int(line.split("TX-packets:")[1].split()[0]); break
print(json.dumps({"part": "veth", "who": who, "size": int(size), "rep": int(rep), "tag": tag,
    "received": r["packets"], "drops": r["drops_total"], "cpu_s": r["io_cpu_s"],
    "secs": float(t1) - float(t0), "sent": sent or 0}))
PY
}

if has_part veth; then
  trap 'scripts/netns.sh down >/dev/null 2>&1 || true' EXIT
  scripts/netns.sh up --mtu 1500 >/dev/null
  for rep in $(seq 1 "$REPEATS"); do
    for size in $SIZES; do
      for who in $VETH_RECEIVERS; do
        log "rep=$rep size=$size veth receiver=$who"
        sample_veth "$who" "$size" "$rep"
      done
    done
  done
fi
echo "loadavg_end: $(cat /proc/loadavg)" >> "$OUT/host.txt"

tables "$OUT" | tee "$OUT/tables.md"
log "results: $OUT"
