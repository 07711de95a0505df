#!/usr/bin/env bash
# gpu-host-egress.sh: the UCX egress on the 16-core GPU host (issue #31), a machine with no
# Rust toolchain, no UCX and no network: everything runs from gpu-carry/.
#
# Prepare here:   scripts/gpu-host-egress.sh --prepare
#   gpu-carry/rtdaq-ucx (release, --features ucx, socket engine), gpu-carry/ucx_recv (the C
#   receiver, scripts/peers/ucx_recv.c), ucx_perftest, and Debian's UCX 1.13 libraries with
#   their modules (gpu-carry/lib, gpu-carry/lib/ucx) and libnuma/libgomp; gpu-carry/recvmmsg_rx
#   (benches/socket/recvmmsg_rx.c, the SPEAD ladder's receiver) and gpu-carry/sendmmsg_tx (the
#   ucx-ext ladder's senders); gpu-carry/egress_ucx_bench (app/runtime/benches/egress_ucx.rs,
#   mode sender); with `--prepare perf` also perf and its libraries (gpu-carry/perf).
# There:          bash scripts/gpu-host-egress.sh        (the `run` tool, carry ["gpu-carry"])
#   perftest  ucx_perftest tag_bw over UCX_TLS=tcp on 127.0.0.1, 1 MiB messages, server on
#             core 6, client on core 5: the transport's bandwidth there (REPS repeats), with
#             UCX's default and with TCP_PUT_ENABLE=n as rtdaq's egress sets it
#   ladder    rtdaq-ucx (configs/host-udp-egress-ucx.toml: its generator -> one RX queue ->
#             UCX egress; 8000-byte payloads, 128 a message = 1 MiB, 64 message buffers;
#             RX I/O core 1, consumer core 2, generator core 3, sender core 4) to ucx_recv on
#             core 7, at RATES Gb/s offered (default "shipped 1 5 10 20 30"; "shipped": the
#             config as shipped, 1 Gb/s of 1400-byte payloads), SECS s each, REPS
#             repeats: loss-free when rtdaq lost nothing and the receiver got every payload;
#             the highest loss-free rate in every repeat, and the sender's CPU per GB.
#   spead     the same ladder with SPEAD egress (configs/host-udp-egress-spead.toml, changed
#             alike: 8000-byte payloads, one a heap, SPEAD packets of at most 8972 bytes) to the
#             plain C receiver benches/socket/recvmmsg_rx (core 7, 64 MiB SO_RCVBUF): loss-free
#             when rtdaq lost nothing and the receiver got every SPEAD packet rtdaq sent
#             (descriptors and end of stream included)
#   ucx-ext   the UCX egress fed by SENDERS (default 4) external sendmmsg_tx processes at
#             EXT_RATES Gb/s (default "10 15 20 25") instead of the generator, which tops out
#             near 10 Gb/s on one core (see one_ext)
#   sender    the UCX egress stage at its own limit (app/runtime/benches/egress_ucx.rs: a
#             feeder thread on core 4 fills the sink as fast as the sender takes it, the
#             sender on core 5, ucx_recv on core 6: perftest's cores), interleaved with
#             ucx_perftest tag_bw PUT off, SECS s, REPS repeats; SENDER_VARIANTS: a list of
#             env settings, one run each (default: "-", as built). The sender runs at the
#             normal scheduler, as perftest does (this host's container grants no real-time
#             budget: cpu.rt_runtime_us = 0); SENDER_PRIORITY=N asks SCHED_FIFO N. With PERF=1 and
#             gpu-carry/perf/ (`--prepare perf`), the first repeat's runs are profiled
#             (perf record -g of the bench process; the reports in OUT/perf-*.txt).
#   bash scripts/gpu-host-egress.sh [ucx|ucx-ext|spead|all]   (default all)
# Output under $OUT (the run tool's folder): log-egress, runs/.
set -u
cd "$(dirname "$0")/.." || exit 2
C=gpu-carry

if [ "${1:-}" = "--prepare" ]; then
    set -e
    RTDAQ_CONFIG=configs/host-udp-egress-ucx.toml cargo build --release -p rtdaq --features ucx
    mkdir -p $C/lib/ucx
    cp target/release/rtdaq $C/rtdaq-ucx
    strip $C/rtdaq-ucx
    # shellcheck disable=SC2046 # pkg-config's flags are words
    cc -O2 -Wall -o $C/ucx_recv scripts/peers/ucx_recv.c $(pkg-config --cflags --libs ucx)
    cc -O2 -Wall -o $C/recvmmsg_rx benches/socket/recvmmsg_rx.c
    cc -O2 -Wall -o $C/sendmmsg_tx benches/socket/sendmmsg_tx.c
    cp "$(command -v ucx_perftest)" "$(command -v ucx_info)" $C/
    for l in libucp libuct libucs libucm libnuma libgomp; do
        cp -L "$(ldconfig -p | awk -v l="$l.so." '$1 ~ "^"l {print $NF; exit}')" $C/lib/
    done
    # UCX finds its transport modules in <libucs's directory>/ucx.
    cp -L /usr/lib/x86_64-linux-gnu/ucx/libuct_*.so.0 $C/lib/ucx/
    git_ex=$(git rev-parse --git-path info/exclude)
    grep -qx '/gpu-carry/' "$git_ex" 2>/dev/null || echo '/gpu-carry/' >> "$git_ex"
    # The egress stage alone (mode sender).
    # shellcheck source=scripts/lib/bench.sh
    . scripts/lib/bench.sh
    cp "$(bench_exe egress_ucx -p rtdaq-runtime --features ucx)" $C/egress_ucx_bench
    strip $C/egress_ucx_bench
    if [ "${2:-}" = perf ]; then # perf and its libraries, to profile there
        mkdir -p $C/perf/lib
        cp -L "$(readlink -f /usr/bin/perf)" $C/perf/perf
        ldd $C/perf/perf | awk '$3 ~ /^\// {print $3}' | grep -v -e libc.so -e libm.so -e ld-linux |
            xargs -I{} cp -L {} $C/perf/lib/
    fi
    ls -la $C $C/lib $C/lib/ucx; du -sh $C
    exit 0
fi

OUT=${OUT:-/tmp/rtdaq-gpu-host}
REPS=${REPS:-2}
SECS=${SECS:-4}
RATES=${RATES:-shipped 1 5 10 20 30}
mkdir -p "$OUT/runs"
export LD_LIBRARY_PATH="$PWD/$C/lib:${LD_LIBRARY_PATH:-}"
export UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# perftest PUT: ucx_perftest with UCX_TCP_PUT_ENABLE=PUT (y: UCX's default; n: what rtdaq's
# egress context sets, see app/runtime/src/egress/ucx.rs), so the comparison is like for like.
perftest() {
    local port put=$1
    port=$(free_port)
    UCX_TCP_PUT_ENABLE=$put taskset -c 6 $C/ucx_perftest -p "$port" > "$OUT/runs/pt-server.txt" 2>&1 &
    local sp=$!
    sleep 0.5
    # The client's CPU time (user + system, getrusage of the child).
    local cpu
    cpu=$(UCX_TCP_PUT_ENABLE=$put python3 -c 'import resource, subprocess, sys
with open(sys.argv[1], "w") as f:
    subprocess.run(sys.argv[2:], stdout=f, stderr=subprocess.STDOUT)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")' "$OUT/runs/pt.txt" taskset -c 5 $C/ucx_perftest 127.0.0.1 \
        -p "$port" -t tag_bw -s 1048576 -n 5000)
    wait $sp
    echo "perftest put=$put: $(grep '^Final:' "$OUT/runs/pt.txt" | tr -s ' ') client_cpu_s $cpu"
}

# one RATE TAG: rtdaq-ucx at RATE Gb/s to ucx_recv; prints one result line.
one() {
    local rate=$1 tag=$2 port cfg="$OUT/runs/$2.toml"
    port=$(free_port)
    if [ "$rate" = shipped ]; then # the shipped config as it is: 1 Gb/s of 1400-byte payloads
        sed -e "s/destinations = \[\"127.0.0.1:13337\"\]/destinations = [\"127.0.0.1:$port\"]/" \
            configs/host-udp-egress-ucx.toml > "$cfg"
    else
        ladder_cfg "$rate" "127.0.0.1:$port" < configs/host-udp-egress-ucx.toml |
            sed -e "s/^packets_per_heap = 64 .*/packets_per_heap = 128/" \
                -e "s/^heap_buffers = 256 .*/heap_buffers = 64/" > "$cfg"
    fi
    taskset -c 7 $C/ucx_recv --port "$port" --streams 1 --seconds $((SECS + 30)) \
        --max-bytes 2097152 --json "$OUT/runs/$tag-recv.json" > "$OUT/runs/$tag-recv.txt" 2>&1 &
    local rp=$!
    sleep 0.5
    RUST_LOG=warn taskset -c 8-15 $C/rtdaq-ucx run --config "$cfg" --duration "$SECS" \
        --report-json "$OUT/runs/$tag.json" > "$OUT/runs/$tag.txt" 2>&1
    local rc=$?
    wait $rp
    python3 - "$OUT/runs/$tag.json" "$OUT/runs/$tag-recv.json" "$rate" "$tag" "$rc" <<'EOP'
import json, sys
try:
    r = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
except Exception as e:
    print(f"{sys.argv[4]}: offered {sys.argv[3]} rc {sys.argv[5]} no report ({e})"); sys.exit(0)
e = r["rx"]["queues"][0]["egress"][0]; t = r["rx"]["totals"]
ok = r["lost"] == 0 and g["payloads"] == t["packets"] and g["missing"] == 0
print(f"{sys.argv[4]}: offered {sys.argv[3]} rc {sys.argv[5]} rx_gbps {t['gbps']:.3f} egress_gbps {e['gbps']:.3f} "
      f"lost {r['lost']} kernel_drops {t['drops'].get('kernel', 0)} not_sent {sum(e['dropped'].values())} "
      f"recv_payloads {g['payloads']} rx_packets {t['packets']} missing {g['missing']} "
      f"sender_cpu_s_per_gb {e['sender_cpu_s'] / max(1e-9, e['bytes'] / 1e9):.3f} loss_free {ok}")
EOP
}

# The ladder's config changes (8000-byte payloads, one RX queue on core 1, consumer core 2,
# generator core 3, sender core 4): sed/awk over a shipped egress config on stdin.
ladder_cfg() {
    local rate=$1 dest=$2
    sed -e "s/destinations = \[\"127.0.0.1:[0-9]*\"\]/destinations = [\"$dest\"]/" \
        -e "s/^rate_gbps = 1.0 .*/rate_gbps = $rate/" \
        -e "s/^payload_size = 1400 .*/payload_size = 8000/" \
        -e "s/^mtu = 1500 .*/mtu = 9000/" \
        -e "s/^buf_size = 2048/buf_size = 9216/" \
        -e "s/^consumer_core = 0/consumer_core = 2/" \
        -e "s/^egress_core = 1 .*/egress_core = 4/" \
        -e "s/^rcvbuf = .*/rcvbuf = 67108864/" |
        awk '/^\[\[interfaces.tx_queues\]\]/ {tx=1} tx && /^cpu_core = 0/ {print "cpu_core = 3"; tx=0; next} {print}'
}

# one_spead RATE TAG: rtdaq's SPEAD egress at RATE Gb/s to recvmmsg_rx; one result line.
one_spead() {
    local rate=$1 tag=$2 port cfg="$OUT/runs/$2.toml"
    port=$(free_port)
    if [ "$rate" = shipped ]; then
        sed -e "s/destinations = \[\"127.0.0.1:7149\"\]/destinations = [\"127.0.0.1:$port\"]/" \
            configs/host-udp-egress-spead.toml > "$cfg"
    else
        ladder_cfg "$rate" "127.0.0.1:$port" < configs/host-udp-egress-spead.toml |
            sed -e "s/^max_packet = 1472 .*/max_packet = 8972/" > "$cfg"
    fi
    local err0
    err0=$(awk '/^Udp:/ {n++} /^Udp:/ && n==2 {print $4 + $6}' /proc/net/snmp)
    $C/recvmmsg_rx --port "$port" --cpu 7 --seconds $((SECS + 4)) --bufsize 9216 \
        --rcvbuf 67108864 > "$OUT/runs/$tag-recv.json" 2> "$OUT/runs/$tag-recv.txt" &
    local rp=$!
    sleep 0.5
    RUST_LOG=warn taskset -c 8-15 $C/rtdaq-ucx run --config "$cfg" --duration "$SECS" \
        --report-json "$OUT/runs/$tag.json" > "$OUT/runs/$tag.txt" 2>&1
    local rc=$?
    wait $rp
    local err1
    err1=$(awk '/^Udp:/ {n++} /^Udp:/ && n==2 {print $4 + $6}' /proc/net/snmp)
    python3 - "$OUT/runs/$tag.json" "$OUT/runs/$tag-recv.json" "$rate" "$tag" "$rc" "$((err1 - err0))" <<'EOP'
import json, sys
try:
    r = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
except Exception as e:
    print(f"{sys.argv[4]}: offered {sys.argv[3]} rc {sys.argv[5]} no report ({e})"); sys.exit(0)
e = r["rx"]["queues"][0]["egress"][0]; t = r["rx"]["totals"]
ok = r["lost"] == 0 and g["packets"] == e["datagrams"] and e["payloads_sent"] == t["packets"]
print(f"{sys.argv[4]}: offered {sys.argv[3]} rc {sys.argv[5]} rx_gbps {t['gbps']:.3f} egress_gbps {e['gbps']:.3f} "
      f"lost {r['lost']} kernel_drops {t['drops'].get('kernel', 0)} not_sent {sum(e['dropped'].values())} "
      f"spead_packets {e['datagrams']} recv_packets {g['packets']} udp_errors_delta {sys.argv[6]} "
      f"sender_cpu_s_per_gb {e['sender_cpu_s'] / max(1e-9, e['bytes'] / 1e9):.3f} loss_free {ok}")
EOP
}

# one_ext RATE TAG: rtdaq's UCX egress fed by SENDERS external sendmmsg_tx processes (cores
# 9.., 4 sources each, paced at RATE/SENDERS Gb/s of 8000-byte datagrams) instead of its
# generator (one core, which tops out near 10 Gb/s): the egress at rates closer to the
# transport's. Loss-free: every datagram the senders sent was received (rtdaq's packets =
# the senders' sum), none lost, every payload at the receiver; invalid when the senders
# reached < 95 % of RATE.
one_ext() {
    local rate=$1 tag=$2 port cfg="$OUT/runs/$2.toml" rxport
    port=$(free_port); rxport=$(free_port)
    ladder_cfg "$rate" "127.0.0.1:$port" < configs/host-udp-egress-ucx.toml |
        sed -e "s/^packets_per_heap = 64 .*/packets_per_heap = 128/" \
            -e "s/^heap_buffers = 256 .*/heap_buffers = 64/" \
            -e "s#udp://127.0.0.1:5000#udp://127.0.0.1:$rxport#" |
        awk '/^\[generator\]/ {skip=1; next} /^\[/ {skip=0} !skip' > "$cfg"
    taskset -c 7 $C/ucx_recv --port "$port" --streams 1 --seconds $((SECS + 40)) \
        --max-bytes 2097152 --json "$OUT/runs/$tag-recv.json" > "$OUT/runs/$tag-recv.txt" 2>&1 &
    local rp=$!
    sleep 0.5
    RUST_LOG=info taskset -c 8-15 $C/rtdaq-ucx run --config "$cfg" --duration $((SECS + 6)) \
        --report-json "$OUT/runs/$tag.json" > "$OUT/runs/$tag.txt" 2>&1 &
    local xp=$! k n=0 per
    while ! grep -q "queues running" "$OUT/runs/$tag.txt" && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    per=$(python3 -c "print($rate / $SENDERS)")
    for k in $(seq 0 $((SENDERS - 1))); do
        $C/sendmmsg_tx --port "$rxport" --cpu $((9 + k)) --size 8000 --sources 4 \
            --stream $((16 + 4 * k)) --rate-gbps "$per" --seconds "$SECS" \
            > "$OUT/runs/$tag-tx$k.json" 2>/dev/null &
    done
    wait $xp
    local rc=$?
    wait $rp
    python3 - "$OUT/runs/$tag.json" "$OUT/runs/$tag-recv.json" "$rate" "$tag" "$rc" "$OUT/runs/$tag-tx" "$SENDERS" <<'EOP'
import json, sys
try:
    r = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
    tx = [json.load(open(f"{sys.argv[6]}{k}.json")) for k in range(int(sys.argv[7]))]
except Exception as e:
    print(f"{sys.argv[4]}: offered {sys.argv[3]} rc {sys.argv[5]} no report ({e})"); sys.exit(0)
e = r["rx"]["queues"][0]["egress"][0]; t = r["rx"]["totals"]
sent = sum(x["packets"] for x in tx); sent_gbps = sum(x["gbps"] for x in tx)
valid = sent_gbps >= 0.95 * float(sys.argv[3])
ok = valid and r["lost"] == 0 and t["packets"] == sent and g["payloads"] == t["packets"] and g["missing"] == 0
print(f"{sys.argv[4]}: offered {sys.argv[3]} rc {sys.argv[5]} senders_gbps {sent_gbps:.3f} valid {valid} "
      f"rx_gbps {t['gbps']:.3f} egress_gbps {e['gbps']:.3f} sent {sent} rx_packets {t['packets']} "
      f"lost {r['lost']} not_sent {sum(e['dropped'].values())} recv_payloads {g['payloads']} missing {g['missing']} "
      f"sender_cpu_s_per_gb {e['sender_cpu_s'] / max(1e-9, e['bytes'] / 1e9):.3f} loss_free {ok}")
EOP
}

# one_sender VARIANT TAG: the egress stage alone (benches/egress_ucx.rs) with the env
# settings VARIANT (NAME=VALUE,NAME=VALUE; "-": none) to ucx_recv; one result line, checked against the receiver.
one_sender() {
    local variant=$1 tag=$2 port wrap=()
    port=$(free_port)
    taskset -c 6 $C/ucx_recv --port "$port" --streams 1 --seconds $((SECS + 30)) \
        --max-bytes 2097152 --json "$OUT/runs/$tag-recv.json" > "$OUT/runs/$tag-recv.txt" 2>&1 &
    local rp=$!
    sleep 0.5
    if [ "${PERF:-0}" = 1 ] && [ -x $C/perf/perf ] && [ "${tag%%-*}" = b1 ]; then
        wrap=(env "LD_LIBRARY_PATH=$PWD/$C/perf/lib:$LD_LIBRARY_PATH" "$C/perf/perf" record -q -g
            -o "$OUT/runs/$tag.perf")
    fi
    local settings=${variant#-}
    # shellcheck disable=SC2086 # VARIANT is a list of NAME=VALUE words
    env ${settings//,/ } EGRESS_UCX_DEST="127.0.0.1:$port" EGRESS_UCX_SENDER_CORE=5 \
        EGRESS_UCX_FEEDER_CORE=4 ${SENDER_PRIORITY:+EGRESS_UCX_PRIORITY=$SENDER_PRIORITY} \
        EGRESS_UCX_SECS="$SECS" \
        "${wrap[@]}" $C/egress_ucx_bench > "$OUT/runs/$tag.txt" 2>&1
    local rc=$?
    wait $rp
    if [ ${#wrap[@]} -gt 0 ]; then
        LD_LIBRARY_PATH="$PWD/$C/perf/lib:$LD_LIBRARY_PATH" $C/perf/perf report \
            -i "$OUT/runs/$tag.perf" --no-children -g none --sort pid,dso,sym --stdio \
            > "$OUT/perf-$tag.txt" 2>&1
        rm -f "$OUT/runs/$tag.perf"
    fi
    python3 - "$OUT/runs/$tag.txt" "$OUT/runs/$tag-recv.json" "$variant" "$tag" "$rc" <<'EOP'
import json, sys
line = next((l for l in open(sys.argv[1]) if l.startswith("egress_ucx ")), None)
try:
    g = json.load(open(sys.argv[2]))
except Exception as e:
    g = None
if line is None or g is None:
    print(f"{sys.argv[4]}: variant {sys.argv[3]} rc {sys.argv[5]} no result"); sys.exit(0)
f = line.split(); v = dict(zip(f[1::2], f[2::2]))
ok = g["messages"] == int(v["messages"]) and g["missing"] == 0 and g["bad"] == 0
print(f"{sys.argv[4]}: variant {sys.argv[3]} rc {sys.argv[5]} gbps {v['gbps']} cpu_s_per_gb {v['cpu_s_per_gb']} "
      f"messages {v['messages']} recv_messages {g['messages']} egress_full {v['egress_full']} receiver_ok {ok}")
EOP
}

SENDERS=${SENDERS:-4}
EXT_RATES=${EXT_RATES:-10 15 20 25}
MODE=${1:-all}
{
    echo "== host"; date -u +%FT%TZ; nproc; uname -r; grep -m1 'model name' /proc/cpuinfo
    echo "rmem_max=$(cat /proc/sys/net/core/rmem_max)"; $C/ucx_info -v | head -1
    $C/rtdaq-ucx version | head -3
    if [ "$MODE" = ucx-ext ] || [ "$MODE" = all ]; then
    echo "== UCX egress fed by $SENDERS external sendmmsg_tx at $EXT_RATES Gb/s offered, $SECS s each, $REPS repeats"
    for rep in $(seq 1 "$REPS"); do
        perftest n
        for rate in $EXT_RATES; do
            one_ext "$rate" "x$rep-$rate"
        done
    done
    fi
    if [ "$MODE" = sender ]; then
    echo "== the UCX egress stage alone (feeder core 4, sender 5, receiver 6) vs ucx_perftest, $SECS s, $REPS repeats, variants: ${SENDER_VARIANTS:--}"
    for rep in $(seq 1 "$REPS"); do
        perftest n
        k=0
        for variant in ${SENDER_VARIANTS:--}; do
            one_sender "$variant" "b$rep-$k"
            k=$((k + 1))
        done
    done
    fi
    if [ "$MODE" = ucx ] || [ "$MODE" = all ]; then
    echo "== UCX egress on the GPU host: ucx_perftest tag_bw 1 MiB x 5000 (tcp, loopback), then rtdaq at $RATES Gb/s offered, $SECS s each, $REPS repeats"
    for rep in $(seq 1 "$REPS"); do
        perftest y
        perftest n
        for rate in $RATES; do
            one "$rate" "r$rep-$rate"
        done
    done
    fi
    if [ "$MODE" = spead ] || [ "$MODE" = all ]; then
    echo "== SPEAD egress on the GPU host: rtdaq at $RATES Gb/s offered to recvmmsg_rx, $SECS s each, $REPS repeats"
    for rep in $(seq 1 "$REPS"); do
        for rate in $RATES; do
            one_spead "$rate" "s$rep-$rate"
        done
    done
    fi
} 2>&1 | tee "$OUT/log-egress"
python3 - "$OUT/log-egress" <<'EOP' | tee -a "$OUT/log-egress"
import re, statistics as st, sys
pt, runs = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"perftest put=(\w): Final:.* client_cpu_s (\S+)", line)
    if m:
        f = line.split()
        gbps = float(f[8]) * 1048576 * 8 / 1e9  # ucx_perftest MB/s: MB = 2^20 bytes (UCS_MBYTE)
        cpu_per_gb = float(m[2]) / (5000 * 1048576 / 1e9) if m[2] else float("nan")
        pt.setdefault(m[1], []).append((gbps, cpu_per_gb))
    m = re.match(r"([rsx])(\d+)-\S+: offered ([\d.]+) .*rx_gbps (\S+) egress_gbps (\S+) .*sender_cpu_s_per_gb (\S+) loss_free (\w+)", line)
    if m:
        proto = {"r": "ucx (generator)", "s": "spead (generator)", "x": "ucx (external senders)"}[m[1]]
        runs.setdefault((proto, int(m[2])), []).append((float(m[3]), float(m[4]), float(m[5]), float(m[6]), m[7] == "True"))
for put, v in sorted(pt.items()):
    g = [x[0] for x in v]; c = [x[1] for x in v]
    print(f"ucx_perftest tag_bw 1 MiB (tcp, TCP_PUT_ENABLE={put}): min/median/max "
          f"{min(g):.2f} / {st.median(g):.2f} / {max(g):.2f} Gb/s, client "
          f"{min(c):.3f} / {st.median(c):.3f} / {max(c):.3f} CPU-s/GB (n={len(v)})")
bench = {}
for line in open(sys.argv[1]):
    m = re.match(r"b\d+-\d+: variant (\S+) rc \d+ gbps (\S+) cpu_s_per_gb (\S+) .*receiver_ok (\w+)", line)
    if m:
        bench.setdefault(m[1], []).append((float(m[2]), float(m[3]), m[4] == "True"))
for variant, v in bench.items():
    g = [x[0] for x in v]; c = [x[1] for x in v]
    print(f"egress stage alone, variant {variant}: min/median/max {min(g):.2f} / {st.median(g):.2f} / "
          f"{max(g):.2f} Gb/s, sender {min(c):.3f} / {st.median(c):.3f} / {max(c):.3f} CPU-s/GB (n={len(v)}, "
          f"receiver got every message: {all(x[2] for x in v)})")
for (proto, rep), v in sorted(runs.items()):
    best = max((x for x in v if x[4]), default=None, key=lambda x: x[0])
    print(f"{proto} repeat {rep}: highest loss-free offered rate {best[0] if best else 'none'} Gb/s"
          + (f" (rx {best[1]:.2f}, egress {best[2]:.2f} Gb/s, sender {best[3]:.3f} CPU-s/GB)" if best else ""))
EOP
tar czf "$OUT/runs.tar.gz" -C "$OUT" runs 2>/dev/null && rm -rf "$OUT/runs"
