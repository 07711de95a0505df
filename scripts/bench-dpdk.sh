#!/usr/bin/env bash
# bench-dpdk.sh: rtdaq's DPDK RX vs dpdk-testpmd --forward-mode=rxonly on DPDK's null PMD
# (net_null), in the same run, interleaved A B A B (method: docs/benchmarking.md in the shared
# docs; results: docs/benchmarks/dpdk.md).
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
# Environment: BENCH_REPEATS (3), BENCH_SECONDS (3), BENCH_SIZES ("64 1500", bytes per packet),
# BENCH_TESTPMD_MODES ("rxonly csum"),
# BENCH_RX_CPU (1), BENCH_MAIN_CPU (0), BENCH_OUT (target/bench-dpdk/<timestamp>),
# BENCH_TABLES_ONLY=DIR re-prints the tables of a finished run. Needs root and Debian's dpdk.
# Builds the release binary with scripts/build-engines.sh --release dpdk.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPEATS=${BENCH_REPEATS:-3}
SECS=${BENCH_SECONDS:-3}
SIZES=${BENCH_SIZES:-"64 1500"}
MODES=${BENCH_TESTPMD_MODES:-"rxonly csum"}
RX_CPU=${BENCH_RX_CPU:-1}
MAIN_CPU=${BENCH_MAIN_CPU:-0}
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
PY
}
if [ -n "${BENCH_TABLES_ONLY:-}" ]; then tables "$BENCH_TABLES_ONLY"; exit 0; fi
[ "$(id -u)" -eq 0 ] || { echo "bench-dpdk.sh needs root (DPDK EAL, SCHED_FIFO)" >&2; exit 2; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd is missing: apt-get install dpdk" >&2; exit 2; }
mkdir -p "$OUT"
RES=$OUT/results.jsonl
: > "$RES"

log "building the release binary (scripts/build-engines.sh --release dpdk)"
scripts/build-engines.sh --release dpdk >&2
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
  echo "repeats: $REPEATS seconds: $SECS sizes: $SIZES testpmd modes: $MODES"
} > "$OUT/host.txt"
cat "$OUT/host.txt" >&2

rtdaq_config() { # size file
  sed -e "s/\"--vdev\", \"net_ring0\"/\"--vdev\", \"net_null0,size=$1\", \"--file-prefix\", \"bench-dpdk-rtdaq\"/" \
      -e 's/^address = "net_ring0".*/address = "net_null0"/' \
      -e "s/^main_core = 0 .*/main_core = $MAIN_CPU/" \
      -e "s/^cpu_core = 1$/cpu_core = $RX_CPU/" \
      -e 's/^mode = "direct"$/mode = "direct"\nbusy_poll = true/' \
      -e '/^\[\[interfaces.tx_queues\]\]/,/^\[run\]/{/^\[run\]/!d}' \
      -e 's/^loss_tolerance = 0$/loss_tolerance = 0\nvalidate = "count"/' \
      configs/vdev-dpdk-ring.toml > "$2"
  "$BIN" config check "$2" > /dev/null
}

record() { # who size rep tag packets secs cpu_s
  printf '{"part":"sample","who":"%s","size":%s,"rep":%s,"tag":"%s","packets":%s,"secs":%s,"cpu_s":%s}\n' \
    "$@" >> "$RES"
}
failed() { # tag why
  printf '{"part":"failed","tag":"%s","error":"%s"}\n' "$1" "$2" >> "$RES"
  log "FAILED $1: $2"
}

sample_rtdaq() { # size rep
  local size=$1 rep=$2 tag=rtdaq-$1-$2
  rtdaq_config "$size" "$OUT/$tag.toml"
  local rc=0 vals
  "$BIN" run --config "$OUT/$tag.toml" --duration "$SECS" --report-json "$OUT/$tag.json" \
      > "$OUT/$tag.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then failed "$tag" "rtdaq exit $rc"; return; fi
  vals=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); t=r["rx"]["totals"]
print(t["packets"], r["duration_s"], t["io_cpu_s"])' "$OUT/$tag.json")
  # shellcheck disable=SC2086 # three numbers
  record rtdaq "$size" "$rep" "$tag" $vals
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
  local i
  for ((i = 0; i < $4 * 20; i++)); do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0
    sleep 0.05
  done
  return 1
}

sample_testpmd() { # mode size rep
  local mode=$1 size=$2 rep=$3 tag=testpmd-$1-$2-$3 fifo pid t0 t1 c0 c1 hz worker
  fifo=$OUT/$tag.in
  rm -f "$fifo"; mkfifo "$fifo"
  chrt -f 50 stdbuf -o0 dpdk-testpmd -l "$MAIN_CPU,$RX_CPU" --main-lcore "$MAIN_CPU" \
      --no-huge -m 512 --no-shconf --no-pci --file-prefix bench-dpdk-testpmd \
      --vdev "net_null0,size=$size" --log-level=lib.eal:notice -- \
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

for rep in $(seq 1 "$REPEATS"); do
  for size in $SIZES; do
    log "rep=$rep size=$size rtdaq"
    sample_rtdaq "$size" "$rep"
    for mode in $MODES; do
      log "rep=$rep size=$size testpmd $mode"
      sample_testpmd "$mode" "$size" "$rep"
    done
  done
done
echo "loadavg_end: $(cat /proc/loadavg)" >> "$OUT/host.txt"

tables "$OUT" | tee "$OUT/tables.md"
log "results: $OUT"
