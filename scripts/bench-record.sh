#!/usr/bin/env bash
# bench-record.sh: what the record stage costs and how fast it writes (docs/benchmarks/record.md;
# method: docs/benchmarks/method.md). Release binary, as root (SCHED_FIFO threads), nothing else
# running. Three parts, interleaved repeats in one run:
#   A. write rate: the DADA and pcap sinks' rate while writing (bytes / time in write calls,
#      4 MiB O_DIRECT writes) against `dd oflag=direct bs=4M` writing the same file system;
#   B. highest loss-free receive+record rate of the default shape (configs/host-udp-record.toml)
#      against the same shape without recording (configs/host-loopback-udp.toml);
#   C. the pcap sink against `tcpdump -w` on the same loopback stream (rtdaq recording off,
#      tcpdump capturing it): packets recorded, kernel drops, CPU per packet.
#   E. (BENCH_PARTS=E, with BENCH_BASELINE_BIN=an earlier commit's release rtdaq) the record
#      path before/after: configs/host-udp-record.toml at 1 Gb/s run by this build and by the
#      baseline in turn; consumer CPU per packet, loss, packets not recorded.
# Usage: [BENCH_PARTS="A B C"] [BENCH_BASELINE_BIN=PATH] scripts/bench-record.sh [DIR] [REPEATS]
#        (DIR: a directory on the disk to measure, default target/bench-record; REPEATS
#        default 3). Writes DIR/results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/bench-record}
reps=${2:-3}
bin=target/release/rtdaq
cargo build -q --release -p rtdaq
mkdir -p "$dir"
out="$dir/results.txt"
: > "$out"
say() { echo "$*" | tee -a "$out"; }
say "# bench-record.sh $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, dir $dir ($(findmnt -T "$dir" -o FSTYPE -n))"

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# A and B: one recording run at RATE Gb/s; prints loss, rx Gb/s, the sinks' write MB/s, CPU.
record_run() { # rate secs tag
    local cfg="$dir/rec-$1.toml" rep="$dir/rep.json"
    sed -e "s/^rate_gbps = 1.0 .*/rate_gbps = $1/" configs/host-udp-record.toml > "$cfg"
    rm -rf "$dir/out"
    "$bin" run --config "$cfg" --duration "$2" --output-dir "$dir/out" --report-json "$rep" > /dev/null 2>&1 || true
    local q='r["rx"]["queues"][0]'
    say "$3 rate $1: $(field "$rep" "' '.join([f'lost {r[\"lost\"]} rx_gbps {round(${q}[\"gbps\"],3)} packets {${q}[\"packets\"]}',
        f'not_recorded {sum(sum(s[\"dropped\"].values()) for s in ${q}[\"record\"])}',
        f'pcap_write_MBps {round(${q}[\"record\"][0][\"write_mb_s\"])} dada_write_MBps {round(${q}[\"record\"][1][\"write_mb_s\"])}',
        f'consumer_cpu_s {round(${q}[\"consumer_cpu_s\"],3)} pcap_writer_cpu_s {round(${q}[\"record\"][0][\"writer_cpu_s\"],3)}'])")"
    rm -rf "$dir/out"
}
plain_run() { # rate secs tag
    local cfg="$dir/plain-$1.toml" rep="$dir/rep.json"
    sed -e "s/^rate_gbps = 1.0 .*/rate_gbps = $1/" configs/host-loopback-udp.toml > "$cfg"
    "$bin" run --config "$cfg" --duration "$2" --report-json "$rep" > /dev/null 2>&1 || true
    say "$3 rate $1: lost $(field "$rep" 'r["lost"]') rx_gbps $(field "$rep" 'round(r["rx"]["queues"][0]["gbps"],3)') consumer_cpu_s $(field "$rep" 'r["rx"]["queues"][0]["consumer_cpu_s"]') packets $(field "$rep" 'r["rx"]["queues"][0]["packets"]')"
}
dd_run() {
    local f="$dir/dd.bin"
    rm -f "$f"
    local line
    line=$(dd if=/dev/zero of="$f" bs=4M count=256 oflag=direct 2>&1 | tail -1)
    rm -f "$f"
    say "A dd oflag=direct bs=4M count=256: $line"
}

parts=" ${BENCH_PARTS:-A B C} "
part() { [[ $parts == *" $1 "* ]]; }

if part E; then
    base=${BENCH_BASELINE_BIN:?part E needs BENCH_BASELINE_BIN, the release rtdaq of an earlier commit}
    after=$bin
    say "## E: the record path, $after ($("$after" version | head -1)) vs $base ($("$base" version | head -1)), 1.0 Gb/s, 5 s, interleaved"
    for _ in $(seq "$reps"); do
        bin=$after
        record_run 1.0 5 E-after
        bin=$base
        record_run 1.0 5 E-before
    done
    bin=$after
fi
part A && say "## A: sink write rate vs dd (same file system), interleaved"
part A && for _ in $(seq "$reps"); do
    dd_run
    record_run 1.0 5 A
done
part B && say "## B: highest loss-free rate, recording (pcap + DADA) vs not, interleaved"
part B && for rate in 1.0 1.5 2.0 2.5; do
    for _ in $(seq "$reps"); do
        plain_run "$rate" 5 B-plain
        record_run "$rate" 5 B-record
    done
done

part C && say "## C: pcap sink vs tcpdump -w on the same stream (1.0 Gb/s, 5 s), interleaved"
part C && for _ in $(seq "$reps"); do
    record_run 1.0 5 C-rtdaq
    port=5000
    cap="$dir/tcpdump.pcap"
    rm -f "$cap"
    tcpdump -i lo -n -s 0 -w "$cap" -Z root udp dst port $port > "$dir/tcpdump.err" 2>&1 &
    tpid=$!
    sleep 1
    plain_run 1.0 5 C-tcpdump-stream
    sleep 1
    cpu=$(awk '{print ($14+$15)/100}' /proc/$tpid/stat)
    kill -INT $tpid
    wait $tpid || true
    say "C-tcpdump: $(tr '\n' ' ' < "$dir/tcpdump.err" | sed 's/tcpdump: listening[^)]*) //') cpu_s $cpu file_packets $(capinfos -c -M "$cap" | awk -F: '/Number of packets/{gsub(/ /,"",$2); print $2}')"
    rm -f "$cap"
done
say "# done"
