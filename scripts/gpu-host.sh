#!/usr/bin/env bash
# GPU-host runs of the appliance's GPU data path (issue #6), for a machine with an NVIDIA GPU
# and CUDA 13 but NO Rust toolchain: everything runs from binaries carried in gpu-carry/.
#
# Prepare here (a host with the toolchain), then carry gpu-carry/ to the GPU host:
#   scripts/gpu-host.sh --prepare      # builds with --release --features gpu, fills gpu-carry/
# On the GPU host, from the repository root (the `run` tool: carry ["gpu-carry"]):
#   bash scripts/gpu-host.sh [all|tests|unit|bench|paced|dpdk|watchdog|egress]   # logs, reports under $OUT
#
# What it runs:
#   watchdog  app/tests/notify.rs with --features gpu,test-hooks: an RX I/O thread, an RX
#          consumer, a generator, a record writer and a GPU stage's completions each stall in
#          turn and the WATCHDOG=1 pings stop (also the first part of `tests`)
#   egress app/tests/gpu_egress.rs with --features gpu,ucx: configs/host-loopback-udp-gpu-egress-ucx.toml,
#          each batch's FFT spectra to scripts/peers/ucx_recv.c over UCX (TCP, loopback) and
#          into a DADA file: every product arrives, equal to the recording (also in `tests`)
#   tests  rtdaq-gpu's unit and GPU test binaries (hal/gpu), the runtime's unit tests
#          (gpu feature), the app's GPU integration test (socket loopback -> host_pinned ->
#          GPU reorder -> checksums), the GPUDirect RoCE config with the ibverbs + gpu build
#          (its device region allocated and exported as a dma-buf, then "no RDMA device", exit
#          2: the GPU host has no RDMA NIC), DPDK into GPU memory (configs/vdev-dpdk-null-gpudirect.toml:
#          net_null frames in a `device` region -> GPU gather; every frame accounted for),
#          and the shipped configs/host-loopback-udp-gpu.toml (10 s)
#   dpdk   DPDK net_null -> GPU gather, frames in GPU memory (`device`) vs in pinned host
#          memory (`host_pinned`), REPS interleaved repeats of SECS s each
#   scaling  the socket engine with Q = 1/2/4/8/12 SO_REUSEPORT RX queues (cores 1..Q) against
#          Q plain C recvmmsg_rx receivers on the same cores, same run, interleaved: 8000 B
#          datagrams from up to 8 paced sendmmsg_tx processes (SCALE_SENDERS; 48 source
#          ports in all, SCALE_FLOWS) on the cores above the receivers' (from SCALE_TX_CPU0,
#          default Q+1, never a receiver's core; fewer where fewer cores are left) at a
#          ladder of aggregate rates (SCALE_LADDER, "Q:rate,rate ..." in Gb/s, by default
#          the ladders of docs/benchmarks/socket.md's run 2, from below the loss point to
#          past it or to the senders' ceiling; a queue count without one gets SCALE_MULTS
#          Gb/s per queue);
#          each repeat binds the senders' source ports anew (--sport), the same for C and
#          rtdaq, so both meet the same SO_REUSEPORT spread of the 48 flows over the Q sockets;
#          a run is loss-free when the kernel dropped nothing (/proc/net/snmp Udp InErrors)
#          and every datagram sent arrived, and INVALID (neither loss-free nor
#          lossy) when the senders offered less than 97 % of the rate asked
#          (docs/benchmarks/method.md); the table is the highest rate loss-free in every
#          repeat (REPS, default 3; SECS per run), each rate's invalid repeats, and how
#          evenly SO_REUSEPORT spread the datagrams over the queues (busiest / mean), and
#          which queues the kernel dropped for; SCALE_DIAG="4:88" first runs Q=4 at 88 Gb/s
#          once per system with the threads' cores and classes listed mid-run and, where perf
#          is (PATH, or gpu-carry/perf/perf), a cpu-clock profile of the receivers' cores;
#          SCALE_SYSTEMS="c rtdaq rtdaq-shared" adds rtdaq with one buffer region for all its
#          queues (rtdaq: one region per queue); SCALE_RTDAQ=gpu-carry/rtdaq-sym runs another
#          rtdaq binary (one keeping its symbol table names rtdaq's functions in the profile)
#   boards the sealed IGX Orin / Thor DPDK header-data-split binaries (payloads in GPU memory)
#          run as shipped, with 2 MiB hugepages reserved for the run: they must get as far as
#          the missing NIC (exit 2 naming the PCI address), never "not implemented"
#   bench  RX->GPU throughput at 8000-byte payloads: 1, 2 and 4 SO_REUSEPORT RX queues fed by
#          4 unpaced sendmmsg_tx processes, GPU stage per queue (gather, 1024 packets per
#          batch, depth 4, mapped staging) with workload none / fft / gemm; REPS interleaved
#          repeats (default 3); then the pinned->device copy peak (gpu_bench)
#   paced  the same shapes at a paced offered load (RATE_1/RATE_2/RATE_4 Gb/s, default 20/32/40):
#          with loss-free runs the receive rate equals the offered rate with every workload;
#          with gpu-carry/rtdaq-base (an earlier commit's `--release --features gpu` rtdaq)
#          every run is repeated with it right after (a same-run baseline, "-base" rows)
set -u
cd "$(dirname "$0")/.." || exit 2
C=gpu-carry

# gpu-carry/ stays out of git (also in a linked worktree, where .git is a file).
exclude_carry() {
    local ex
    ex=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$ex")"
    grep -qx '/gpu-carry/' "$ex" 2>/dev/null || echo '/gpu-carry/' >> "$ex"
}

# The watchdog pair (issue #29): a debug rtdaq with the tests' fault hooks (the `test-hooks`
# feature, refused in release builds) and app/tests/notify.rs, both with --features gpu, so
# the GPU kind of stall runs where a GPU is. `--prepare` builds it too; `--prepare watchdog`
# builds only it.
prepare_watchdog() {
    cargo build -p rtdaq --features gpu,test-hooks
    mkdir -p $C
    cp "$(cargo test -p rtdaq --features gpu,test-hooks --test notify --no-run --message-format=json |
        jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test) | .executable' |
        tail -1)" $C/app-notify
    cp "$T/debug/rtdaq" $C/rtdaq-test-hooks
    strip $C/app-notify $C/rtdaq-test-hooks
    exclude_carry
}

# GPU products downstream (issue #31): the gpu + ucx appliance and app/tests/gpu_egress.rs;
# the C receiver and UCX 1.13's libraries come from scripts/gpu-host-egress.sh --prepare.
# `--prepare` builds them too; `--prepare egress` builds only them.
prepare_egress() {
    cargo build --release -p rtdaq --features gpu,ucx
    mkdir -p $C
    cp "$T/release/rtdaq" $C/rtdaq-gpu-ucx
    cp "$(cargo test --release -p rtdaq --features gpu,ucx --test gpu_egress --no-run --message-format=json |
        jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test) | .executable' |
        tail -1)" $C/app-gpu-egress
    strip $C/rtdaq-gpu-ucx $C/app-gpu-egress
    CARGO_TARGET_DIR=target bash scripts/gpu-host-egress.sh --prepare
    exclude_carry
}

if [ "${1:-}" = "--prepare" ]; then
    set -e
    T=${CARGO_TARGET_DIR:-target/h-gpu2}
    export CARGO_TARGET_DIR=$T
    if [ "${2:-}" = "watchdog" ]; then prepare_watchdog; ls -la $C; exit 0; fi
    if [ "${2:-}" = "egress" ]; then prepare_egress; ls -la $C; exit 0; fi
    prepare_watchdog
    prepare_egress
    cargo build --release -p rtdaq --features gpu
    mkdir -p $C
    # Test executables by name from cargo's own report (app/tests/gpu.rs and hal/gpu/tests/gpu.rs
    # are both "gpu-<hash>" in deps/).
    exe() { # cargo test args... -> the one executable built
        cargo test --release "$@" --no-run --message-format=json |
            jq -r 'select(.reason == "compiler-artifact" and .executable != null and .profile.test) | .executable' | tail -1
    }
    cp "$(exe -p rtdaq --features gpu --test gpu)" $C/app-gpu
    cp "$(exe -p rtdaq-runtime --features gpu --lib)" $C/runtime-unit
    cp "$(exe -p rtdaq-gpu --lib)" $C/unit
    cp "$(exe -p rtdaq-gpu --test gpu)" $C/gpu
    exclude_carry
    cp "$T/release/rtdaq" $C/rtdaq
    # The ibverbs + gpu appliance (GPUDirect RoCE config) and the RDMA user-space libraries it
    # links (the GPU host has none; without an RDMA device it must stop with "no RDMA device"
    # after allocating and exporting its GPU memory).
    RTDAQ_CONFIG=configs/host-roce-gpudirect.toml cargo build --release -p rtdaq \
        --no-default-features --features engine-ibverbs,platform-host,gpu
    cp "$T/release/rtdaq" $C/rtdaq-ibverbs-gpu
    mkdir -p $C/lib
    ldd $C/rtdaq-ibverbs-gpu | awk '/lib(ibverbs|rdmacm|nl-3|nl-route-3)\.so/ {print $3}' |
        xargs -r -I{} cp -L {} $C/lib/
    # The DPDK + gpu appliance, the DPDK shared libraries it links and the three plugins a
    # net_null port needs (the GPU host has no DPDK; the EAL loads the plugins with -d).
    RTDAQ_CONFIG=configs/vdev-dpdk-null-gpudirect.toml cargo build --release -p rtdaq \
        --no-default-features --features engine-dpdk,platform-host,gpu
    cp "$T/release/rtdaq" $C/rtdaq-dpdk-gpu
    rm -rf $C/dpdk; mkdir -p $C/dpdk
    pmds=$(dirname "$(find /usr/lib -name 'librte_net_null.so.*' -type f | head -1)")
    for p in librte_net_null librte_mempool_ring librte_bus_vdev; do
        cp -L "$(find "$pmds" -maxdepth 1 -name "$p.so.*" | sort | head -1)" $C/dpdk/  # the ABI soname
    done
    { ldd $C/rtdaq-dpdk-gpu; for f in "$C"/dpdk/*.so.*; do ldd "$f"; done; } |
        awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libgcc_s|ld-linux.*)\.so/ {print $3}' | sort -u |
        xargs -r -I{} cp -Ln {} $C/dpdk/
    # The board deployments that receive into GPU memory through DPDK, sealed as shipped.
    for b in igx-orin igx-thor; do
        RTDAQ_CONFIG=configs/$b/dpdk-hds.toml cargo build --release -p rtdaq \
            --no-default-features --features engine-dpdk,platform-$b,gpu
        cp "$T/release/rtdaq" $C/rtdaq-dpdk-gpu-$b
    done
    cc -O2 -Wall -o $C/sendmmsg_tx benches/socket/sendmmsg_tx.c
    cc -O2 -Wall -o $C/recvmmsg_rx benches/socket/recvmmsg_rx.c
    strip $C/rtdaq-dpdk-gpu-igx-orin $C/rtdaq-dpdk-gpu-igx-thor 2>/dev/null || true
    strip $C/rtdaq $C/rtdaq-ibverbs-gpu $C/rtdaq-dpdk-gpu $C/app-gpu $C/runtime-unit $C/unit $C/gpu 2>/dev/null || true
    ls -la $C; du -sh $C
    exit 0
fi

WHAT=${1:-all}
OUT=${OUT:-/tmp/rtdaq-gpu-host}
REPS=${REPS:-3}
SECS=${SECS:-5}
mkdir -p "$OUT/runs"
LOG=$OUT/log-$WHAT

libs=$( (ldconfig -p 2>/dev/null | awk '/lib(cuda|nvrtc|cufft|cublas)\.so/ {print $NF}'
         find /usr /opt /lib /lib64 -xdev \( -name 'libcuda.so*' -o -name 'libnvrtc*.so*' \
           -o -name 'libcufft.so*' -o -name 'libcublas.so*' \) 2>/dev/null) | sort -u)
dirs=$(echo "$libs" | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:-}"

host_facts() {
    echo "== host"
    date -u +%FT%TZ
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv 2>&1
    uname -r; nproc; grep -m1 'model name' /proc/cpuinfo
    grep -E 'MemTotal' /proc/meminfo
    echo "rmem_max=$(cat /proc/sys/net/core/rmem_max 2>/dev/null)"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if [ -x $C/rtdaq ]; then $C/rtdaq version; else $C/rtdaq-test-hooks version; fi
}

# Each kind of data thread stalled in turn (RTDAQ_TEST_STALL), the GPU stage's completions
# among them: the WATCHDOG=1 pings stop (app/tests/notify.rs, run as a carried binary).
watchdog() {
    echo "== watchdog: every kind of stall stops the pings (notify test, gpu + test-hooks)"
    RTDAQ_BIN=$PWD/$C/rtdaq-test-hooks RTDAQ_ROOT=$PWD timeout 300 $C/app-notify --test-threads=1
    echo "rc=$?"
}

# GPU products to a UCX receiver (app/tests/gpu_egress.rs, gpu + ucx): every product
# arrives, equal byte for byte to the DADA recording of the same run.
gpu_egress() {
    echo "== GPU products -> UCX receiver: configs/host-loopback-udp-gpu-egress-ucx.toml (gpu_egress test, gpu + ucx)"
    LD_LIBRARY_PATH="$PWD/$C/lib:$LD_LIBRARY_PATH" RTDAQ_BIN=$PWD/$C/rtdaq-gpu-ucx \
        RTDAQ_UCX_RECV=$PWD/$C/ucx_recv RTDAQ_ROOT=$PWD timeout 300 $C/app-gpu-egress \
        --test-threads=1 --nocapture
    echo "rc=$?"
}

tests() {
    watchdog
    gpu_egress
    for t in unit gpu; do
        echo "== rtdaq-gpu test binary $t"
        timeout 300 "$C/$t" --test-threads=1; echo "rc=$?"
    done
    echo "== runtime unit tests (gpu feature)"
    RTDAQ_ROOT=$PWD timeout 120 $C/runtime-unit --test-threads=1; echo "rc=$?"
    echo "== app GPU integration test (loopback -> pinned -> GPU reorder -> checksums)"
    RTDAQ_BIN=$PWD/$C/rtdaq RTDAQ_ROOT=$PWD timeout 300 $C/app-gpu --test-threads=1 --nocapture
    echo "rc=$?"
    echo "== GPUDirect RoCE config on a host without RDMA (configs/host-roce-gpudirect.toml): device region allocated + exported, then exit 2 'no RDMA device'"
    LD_LIBRARY_PATH="$PWD/$C/lib:$LD_LIBRARY_PATH" RUST_LOG=info timeout 60 $C/rtdaq-ibverbs-gpu \
        run --config configs/host-roce-gpudirect.toml 2>&1 | tail -n 20
    echo "rc=${PIPESTATUS[0]}"
    dpdk_gpu device check
    dpdk_gpu host_pinned check
    echo "== shipped config configs/host-loopback-udp-gpu.toml (10 s)"
    $C/rtdaq config check configs/host-loopback-udp-gpu.toml
    RUST_LOG=info timeout 60 $C/rtdaq run --config configs/host-loopback-udp-gpu.toml \
        --report-json "$OUT/e2e.json" 2>&1 | tee "$OUT/e2e.log" | grep -v '^\s*[0-9.]* s '
    echo "rc=${PIPESTATUS[0]}"
    as_unit
}

# The shipped unit's privileges for a GPU build (issue #18): the same config as user nobody
# with exactly rtdaq.service's capabilities (its gpu.conf drop-in adds device access and
# MemoryDenyWriteExecute=no only), as rt-tuning/tests/test-service.sh runs the socket build.
as_unit() {
    echo "== as the unit: user nobody, exactly the unit's capabilities, configs/host-loopback-udp-gpu.toml (5 s)"
    stat -c '%A %U:%G %n' /dev/nvidia* 2>&1 | head -n 8
    local caps d rc
    caps=$(sed -n 's/^AmbientCapabilities=//p' rt-tuning/systemd/rtdaq.service | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd,)
    d=$(mktemp -d); chmod 0777 "$d"
    RUST_LOG=info timeout 60 setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups \
        --inh-caps="-all,$caps" --ambient-caps="-all,$caps" --bounding-set="-all,$caps" --no-new-privs \
        env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" $C/rtdaq run --config configs/host-loopback-udp-gpu.toml \
        --duration 5 --report-json "$d/report.json" >"$d/log" 2>&1
    rc=$?
    cp "$d/report.json" "$OUT/e2e-as-unit.json" 2>/dev/null
    grep -v '^\s*[0-9.]* s ' "$d/log" | tail -n 30
    echo "rc=$rc"
    # Privilege warnings as the unit beyond those the root run of the same config gave (a
    # container without a real-time cgroup budget refuses SCHED_FIFO to root too, and says so).
    local pat='CAP_|SCHED_FIFO|not locked|permission denied' extra
    extra=$(grep -iE "$pat" "$d/log" | sed 's/^\[[^]]*\] *//' |
        grep -vxF -f <(grep -iE "$pat" "$OUT/e2e.log" 2>/dev/null | sed 's/^\[[^]]*\] *//') || true)
    if [ $rc = 0 ] && grep -q '"lost": 0' "$d/report.json" && grep -q '"batches_completed": [1-9]' "$d/report.json" &&
        [ -z "$extra" ]; then
        echo "PASS as the unit ($caps): exit 0, lost 0, GPU batches completed, no privilege warning the root run did not also give"
    else
        echo "FAIL as the unit ($caps): exit $rc; warnings only as the unit: ${extra:-none}"
    fi
    rm -rf "$d"
}

# Socket-engine scaling (issue #20): see the header. Results: $OUT/runs/scale-*.json.
udp_errors() { # InErrors of /proc/net/snmp's Udp line (a full receive buffer counts there and
    # again in RcvbufErrors: the sum would count each dropped datagram twice)
    awk '/^Udp:/ { if (!h) { for (i = 2; i <= NF; i++) n[$i] = i; h = 1 } else { print $(n["InErrors"]); exit } }' /proc/net/snmp
}
scale_config() { # q file shared|own: one buffer region for all queues, or one per queue
    local q=$1 f=$2 regions=$3 k
    {
    printf 'name = "scale-%sq"\nplatform = "host"\n[engine]\nkind = "socket"\n[engine.socket]\nreuseport = true\nrcvbuf = 67108864\nrx_timestamps = "batch"\n' "$q"
    if [ "$regions" = shared ]; then
        printf '[[memory_regions]]\nname = "rx"\nkind = "host"\nbuf_size = 8192\nbuf_count = %s\n' $((q * 8192))
    else
        for k in $(seq 0 $((q - 1))); do
            printf '[[memory_regions]]\nname = "rx%s"\nkind = "host"\nbuf_size = 8192\nbuf_count = 8192\n' "$k"
        done
    fi
    printf '[[interfaces]]\nname = "sink"\naddress = "udp://127.0.0.1:5700"\nmax_message_size = 8000\n'
    for k in $(seq 0 $((q - 1))); do
        printf '[[interfaces.rx_queues]]\nid = %s\ncpu_core = %s\nbatch_size = 64\ntimeout_us = 1000\nring_depth = 8192\nmemory_regions = ["%s"]\nmode = "direct"\nbusy_poll = false\n' \
            "$k" $((1 + k)) "$([ "$regions" = shared ] && echo rx || echo "rx$k")"
    done
    printf '[run]\nduration_s = %s\ndrain_ms = 300\nloss_tolerance = 1000000000000\nvalidate = "sequence"\n[rt]\nrequired = false\n' "$SECS.5"
    } > "$f"
}
scale_senders() { # q: how many senders, the first one's core (never a receiver's), sources each
    local cpu0=${SCALE_TX_CPU0:-$(($1 + 1))} ncpu n
    ncpu=$(nproc)
    [ "$cpu0" -le "$1" ] && cpu0=$(($1 + 1))
    n=$((ncpu - cpu0))
    [ "$n" -gt "$SCALE_SENDERS" ] && n=$SCALE_SENDERS
    [ "$n" -lt 1 ] && n=1 cpu0=$((ncpu - 1))
    echo "$n $cpu0 $((SCALE_FLOWS / n))"
}
scale_perf() { # the perf to profile with, if any
    if [ -x $C/perf/perf ]; then echo "env LD_LIBRARY_PATH=$PWD/$C/perf $PWD/$C/perf/perf"
    elif command -v perf >/dev/null; then echo perf; fi
}
scale_run() { # sys q gbps rep [diag]
    local sys=$1 q=$2 g=$3 rep=$4 diag=${5:-} tag="scale-$1-q$2-g$3-r$4${5:+-diag}" e0 e1 k pids=() rpids=() per n cpu0
    local base=$OUT/runs/$tag perf src
    e0=$(udp_errors)
    if [ "$sys" = c ]; then
        for k in $(seq 0 $((q - 1))); do
            $C/recvmmsg_rx --port 5700 --cpu $((1 + k)) --seconds $((SECS + 1)) --bufsize 8192 \
                --rcvbuf 67108864 --reuseport 1 > "$base.rx$k.json" 2>/dev/null &
            rpids+=($!)
        done
        sleep 0.3
    else
        scale_config "$q" "$base.toml" "$([ "$sys" = rtdaq-shared ] && echo shared || echo own)"
        RUST_LOG=info $SCALE_RTDAQ run --config "$base.toml" --report-json "$base.json" > "$base.log" 2>&1 &
        rpids+=($!)
        for _ in $(seq 1 100); do grep -q 'queues running' "$base.log" 2>/dev/null && break; sleep 0.05; done
    fi
    read -r n cpu0 src < <(scale_senders "$q")
    per=$(awk -v g="$g" -v n="$n" 'BEGIN { printf "%.3f", g / n }')
    for k in $(seq 0 $((n - 1))); do
        $C/sendmmsg_tx --port 5700 --cpu $((cpu0 + k)) --size 8000 --sources "$src" --stream $((16 + src * k)) \
            --sport $((20000 + 1000 * rep + src * k)) \
            --rate-gbps "$per" --seconds "$SECS" > "$base.tx$k.json" 2>"$base.tx$k.err" &
        pids+=($!)
    done
    if [ -n "$diag" ]; then
        sleep 0.5
        { echo "# threads mid-run (tid, core, class, rt priority, command)"
          ps -L -o tid=,psr=,cls=,rtprio=,comm= -p "$(IFS=,; echo "${rpids[*]}")"
          echo "# senders"; ps -o pid=,psr=,comm= -p "$(IFS=,; echo "${pids[*]}")"; } > "$base.threads.txt" 2>&1
        perf=$(scale_perf)
        if [ -n "$perf" ]; then
            $perf record -q -e cpu-clock -C "1-$q" -o "$base.perf.data" -- sleep 1 >/dev/null 2>&1
            $perf report -i "$base.perf.data" --sort comm,dso,sym --stdio 2>/dev/null |
                grep -v '^#' | grep -v '^$' > "$base.syms.txt"
            head -n 80 "$base.syms.txt" > "$base.perf.txt"
            grep -v kernel.kallsyms "$base.syms.txt" | head -n 80 > "$base.user.txt"
            $perf report -i "$base.perf.data" --sort cpu,comm,dso --stdio 2>/dev/null |
                grep -v '^#' | grep -v '^$' | head -n 40 > "$base.percpu.txt"
            rm -f "$base.perf.data" "$base.syms.txt"
        fi
    fi
    wait "${pids[@]}" 2>/dev/null
    wait "${rpids[@]}" 2>/dev/null
    e1=$(udp_errors)
    python3 - "$OUT/runs" "$tag" "$sys" "$q" "$g" "$rep" $((e1 - e0)) <<'EOP'
import json, glob, os, sys
d, tag, system, q, g, rep, kerr = sys.argv[1:8]
base = os.path.join(d, tag)
sent = sum(json.load(open(f))["packets"] for f in glob.glob(base + ".tx*.json"))
offered = sum(json.load(open(f))["gbps"] for f in glob.glob(base + ".tx*.json"))
if system == "c":
    rx = [json.load(open(f)) for f in sorted(glob.glob(base + ".rx*.json"), key=lambda f: int(f.rsplit(".rx", 1)[1][:-5]))]
    got = sum(r["packets"] for r in rx); cpu = sum(r["cpu_s"] for r in rx)
    per_queue = [r["packets"] for r in rx]
    queue_drops = [r.get("kernel_drops", -1) for r in rx]
    queue_cpu = [r["cpu_s"] for r in rx]; queue_wakes = [r["calls"] for r in rx]
else:
    r = json.load(open(base + ".json")); got = r["rx"]["totals"]["packets"]
    cpu = sum((x.get("io_cpu_s") or 0) for x in r["rx"]["queues"])
    per_queue = [x["packets"] for x in r["rx"]["queues"]]
    queue_drops = [x["drops"].get("kernel", 0) for x in r["rx"]["queues"]]
    queue_cpu = [x.get("io_cpu_s") or 0 for x in r["rx"]["queues"]]
    queue_wakes = [(x.get("loop_turns_ns") or {}).get("count", 0) for x in r["rx"]["queues"]]
# The senders must offer what was asked: a run they could not feed is invalid, not loss-free.
valid = offered >= 0.97 * float(g)
ok = valid and int(kerr) == 0 and got == sent and sent > 0
spread = max(per_queue) / (sum(per_queue) / len(per_queue)) if per_queue and sum(per_queue) else 0
row = dict(system=system, q=int(q), target_gbps=float(g), rep=int(rep), sent=sent, received=got,
           kernel_errors=int(kerr), offered_gbps=round(offered, 3), valid=valid, lossfree=ok,
           rx_cpu_s=round(cpu, 3), per_queue=per_queue, spread=round(spread, 3),
           queue_drops=queue_drops, queue_cpu_s=queue_cpu, queue_wakeups=queue_wakes)
if not tag.endswith("-diag"):
    json.dump(row, open(base + ".row.json", "w"))
verdict = "INVALID (the senders offered less than 97 % of the rate)" if not valid else ("loss-free" if ok else "LOSS")
print(f"{tag}: offered {offered:.2f} Gb/s, sent {sent}, received {got}, kernel errors {kerr}, rx cpu {cpu:.2f} s, "
      f"busiest queue {spread:.2f}x the mean, per queue {per_queue}, kernel drops per queue {queue_drops}: {verdict}")
EOP
}
SCALE_QS=${SCALE_QS-"1 2 4 8 12"}         # queue counts (set but empty: no ladder, SCALE_DIAG alone)
SCALE_MULTS=${SCALE_MULTS:-"4 8 12 16 22"} # Gb/s per queue of the rate ladder
SCALE_SENDERS=${SCALE_SENDERS:-8}          # at most this many sendmmsg_tx processes, on cores
SCALE_TX_CPU0=${SCALE_TX_CPU0:-}           # SCALE_TX_CPU0.. (default: the cores above the receivers')
SCALE_FLOWS=${SCALE_FLOWS:-48}             # source ports over all senders (stream ids 16..63)
SCALE_LADDER=${SCALE_LADDER:-"1:25,30,35,40,45 2:50,60,70,80 4:72,80,88,96,104 8:80,96,112 12:32,40,48"}
SCALE_SYSTEMS=${SCALE_SYSTEMS:-"c rtdaq"}  # c; rtdaq (a buffer region per queue); rtdaq-shared (one for all)
SCALE_DIAG=${SCALE_DIAG:-}                # "Q:rate": one diagnostic run per system first
SCALE_RTDAQ=${SCALE_RTDAQ:-$C/rtdaq}      # the rtdaq binary (one with symbols names them in the profile)
scale_rates() { # q: the ladder's aggregate rates for q queues
    local e
    for e in $SCALE_LADDER; do
        [ "${e%%:*}" = "$1" ] && { echo "${e#*:}" | tr , ' '; return; }
    done
    for m in $SCALE_MULTS; do echo $((m * $1)); done
}
scaling() {
    local q g rep sys d
    for sys in $SCALE_SYSTEMS; do
        case $sys in c | rtdaq | rtdaq-shared) ;;
        *) echo "SCALE_SYSTEMS: unknown system '$sys' (known: c, rtdaq, rtdaq-shared)" >&2; return 2 ;;
        esac
    done
    if [ -n "$SCALE_DIAG" ] && ! [[ $SCALE_DIAG =~ ^[0-9]+:[0-9]+$ ]]; then
        echo "SCALE_DIAG='$SCALE_DIAG': want QUEUES:GBPS, e.g. SCALE_DIAG=4:88" >&2; return 2
    fi
    if [ "$SCALE_FLOWS" -lt "$SCALE_SENDERS" ] || [ "$SCALE_FLOWS" -gt 48 ]; then
        echo "SCALE_FLOWS=$SCALE_FLOWS: want SCALE_SENDERS ($SCALE_SENDERS) to 48 (stream ids 16..63, which recvmmsg_rx tells apart)" >&2; return 2
    fi
    echo "== socket scaling: Q SO_REUSEPORT queues vs Q C recvmmsg_rx, 8000 B, up to $SCALE_SENDERS paced senders (from core ${SCALE_TX_CPU0:-Q+1}, above the receivers; $SCALE_FLOWS source ports), ${SECS} s per run, $REPS repeats interleaved"
    if [ -n "$SCALE_DIAG" ]; then
        echo "-- diagnosis at ${SCALE_DIAG%%:*} queues, ${SCALE_DIAG#*:} Gb/s (perf: $(scale_perf || true))"
        for sys in $SCALE_SYSTEMS; do
            scale_run "$sys" "${SCALE_DIAG%%:*}" "${SCALE_DIAG#*:}" 1 diag
            d=$OUT/runs/scale-$sys-q${SCALE_DIAG%%:*}-g${SCALE_DIAG#*:}-r1-diag
            cat "$d.threads.txt"
            head -n 25 "$d.perf.txt" 2>/dev/null
            head -n 20 "$d.percpu.txt" 2>/dev/null
        done
    fi
    for q in $SCALE_QS; do
        for g in $(scale_rates "$q"); do
            for rep in $(seq 1 "$REPS"); do
                for sys in $SCALE_SYSTEMS; do scale_run "$sys" "$q" "$g" "$rep"; done
            done
        done
    done
    python3 - "$OUT/runs" <<'EOP'
import json, glob, os, sys, statistics as st
rows = [json.load(open(f)) for f in glob.glob(os.path.join(sys.argv[1], "scale-*.row.json"))]
best = {}
systems = ["c"] + sorted({r["system"] for r in rows} - {"c"})
for q in sorted({r["q"] for r in rows}):
    line = [f"{q} queue(s)"]
    for system in systems:
        by = {}
        for r in rows:
            if r["q"] == q and r["system"] == system:
                by.setdefault(r["target_gbps"], []).append(r)
        # Only rates every repeat of which the senders fed count; the rest are invalid.
        valid = {g: v for g, v in by.items() if all(x.get("valid", True) for x in v)}
        good = [g for g, v in valid.items() if all(x["lossfree"] for x in v)]
        lossy = sorted(g for g, v in valid.items() if not all(x["lossfree"] for x in v))
        invalid = sorted(g for g in by if g not in valid)
        top = max(good) if good else None
        rates = [x["offered_gbps"] for x in by.get(top, [])]
        spread = [x.get("spread", 0) for x in by.get(top, [])]
        best[(q, system)] = (top, rates)
        if rates:
            line.append(f"{system}: target {top} Gb/s loss-free, offered {min(rates):.2f}/{st.median(rates):.2f}/{max(rates):.2f}, busiest queue {st.median(spread):.2f}x the mean")
        else:
            line.append(f"{system}: none loss-free")
        line.append(f"lossy at {lossy or '-'}, invalid at {invalid or '-'}")
    for system in systems[1:]:
        c, r = best.get((q, "c"), (None, [])), best[(q, system)]
        if c[1] and r[1]:
            line.append(f"ratio {system}/C (median offered) {st.median(r[1]) / st.median(c[1]):.3f}")
    print(" | ".join(line))
    # Each rate: how many repeats lost (and were invalid) per system, and the CPU per
    # datagram of both (median over the repeats, ns).
    for g in sorted({r["target_gbps"] for r in rows if r["q"] == q}):
        cells = []
        for system in systems:
            v = [r for r in rows if r["q"] == q and r["system"] == system and r["target_gbps"] == g]
            lossy = sum(1 for x in v if x.get("valid", True) and not x["lossfree"])
            bad = sum(1 for x in v if not x.get("valid", True))
            ns = [x["rx_cpu_s"] / x["received"] * 1e9 for x in v if x["received"]]
            cells.append(f"{system} lost in {lossy}/{len(v)} (invalid {bad}), "
                         + (f"{st.median(ns):.0f} ns CPU/datagram" if ns else "nothing received"))
        print(f"    {g:g} Gb/s: " + "; ".join(cells))
    # Each queue's CPU = a + b x datagrams + c x wake-ups (least squares over every queue of
    # every run at this queue count): the cost per datagram apart from the wake-ups and the
    # fixed cost (recvmmsg_rx: its calls; rtdaq: its I/O thread's loop turns).
    for system in systems:
        pts = [(1.0, p / 1e6, w / 1e6, c) for r in rows if r["q"] == q and r["system"] == system
               for p, w, c in zip(r["per_queue"], r.get("queue_wakeups", []), r.get("queue_cpu_s", []))]
        if len(pts) < 3:
            continue
        m = [[sum(a[i] * a[j] for a in pts) for j in range(3)] + [sum(a[i] * a[3] for a in pts)] for i in range(3)]
        try:
            for i in range(3):  # Gauss-Jordan on the normal equations
                m[i] = [x / m[i][i] for x in m[i]]
                for k in range(3):
                    if k != i:
                        m[k] = [x - m[k][i] * y for x, y in zip(m[k], m[i])]
        except ZeroDivisionError:
            continue
        a, b, c = (row[3] for row in m)
        wakes = sum(x[2] for x in pts) / sum(x[1] for x in pts)
        print(f"    fit {system}: {b * 1e3:.0f} ns per datagram, {c:.2f} us per wake-up, "
              f"{a:.3f} s fixed per queue and run, {wakes:.3f} wake-ups per datagram ({len(pts)} queue-runs)")
EOP
}

# The shipped board configs with device regions on DPDK, on a host without their NIC.
boards() {
    local b rc log hp
    hp=$(cat /proc/sys/vm/nr_hugepages)
    echo 256 > /proc/sys/vm/nr_hugepages 2>/dev/null
    echo "== board DPDK GPUDirect configs as shipped (hugepages: $(cat /proc/sys/vm/nr_hugepages) x 2 MiB reserved, were $hp)"
    local d=$PWD/$C/dpdk f
    for b in igx-orin igx-thor; do
        log=$OUT/board-$b.log
        # As shipped, plus -d for the carried PCI bus and mempool plugins (a DPDK install
        # on the board has them in its plugin directory; this host has no DPDK), and
        # rt.required = false: this host's container grants no real-time budget, which
        # would stop the run before the engine opens (exit 2, "SCHED_FIFO ... denied").
        f=$OUT/runs/board-$b.toml
        sed -e "s|^eal_args = \[|eal_args = [\"-d\", \"$(echo "$d"/librte_mempool_ring.so.*)\", \"-d\", \"$(echo "$d"/librte_bus_pci.so.*)\", |" \
            -e 's|^required = true|required = false|' "configs/$b/dpdk-hds.toml" > "$f"
        LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH" RUST_LOG=info timeout 120 \
            $C/rtdaq-dpdk-gpu-$b run --config "$f" > "$log" 2>&1
        rc=$?
        echo "-- configs/$b/dpdk-hds.toml (the sealed binary of it, the plugins' -d added): exit $rc"
        grep -v '^\s*\[.*Gb/s' "$log" | tail -n 12
        if [ $rc = 2 ] && ! grep -qi 'not implemented' "$log"; then
            echo "PASS $b: exit 2 at the missing hardware, no 'not implemented'"
        else
            echo "FAIL $b: exit $rc"
        fi
    done
    echo "$hp" > /proc/sys/vm/nr_hugepages 2>/dev/null
    echo "hugepages back to $(cat /proc/sys/vm/nr_hugepages)"
}

# DPDK net_null into a `kind` region (device | host_pinned) -> GPU gather, from the shipped
# config with the plugins' -d options added; `check`: every frame must be accounted for.
dpdk_gpu() { # kind check|bench [name]
    local kind=$1 mode=$2 name=${3:-dpdk-$1} d=$PWD/$C/dpdk f rc mr nn
    f="$OUT/runs/$name.toml"
    mr=$(echo "$d"/librte_mempool_ring.so.*); nn=$(echo "$d"/librte_net_null.so.*)
    sed -e "s|^eal_args = \[|eal_args = [\"-d\", \"$mr\", \"-d\", \"$nn\", |" \
        -e "s|^kind = \"device\"|kind = \"$kind\"|" -e "s|^duration_s = .*|duration_s = $SECS|" \
        configs/vdev-dpdk-null-gpudirect.toml > "$f"
    [ "$mode" = check ] && echo "== DPDK net_null -> $kind region -> GPU gather ($f, $SECS s)"
    LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH" RUST_LOG=${RUST_LOG:-info} timeout $((SECS + 60)) \
        $C/rtdaq-dpdk-gpu run --config "$f" --report-json "$OUT/runs/$name.json" > "$OUT/runs/$name.log" 2>&1
    rc=$?
    if [ "$mode" = check ]; then
        grep -v '^\s*[0-9.]* s ' "$OUT/runs/$name.log" | grep -iv 'rx .* Gb/s .* Mpps' | tail -n 40
        echo "rc=$rc"
        python3 - "$OUT/runs/$name.json" "$kind" <<'EOP'
import json, sys
r = json.load(open(sys.argv[1])); kind = sys.argv[2]
q = r["rx"]["queues"][0]; g = q["gpu"]
print(f"rx packets {q['packets']} ({q['mpps']:.2f} Mpps), in_gpu_memory {q['in_gpu_memory']}, drops {q['drops']}")
print(f"gpu: packets {g['packets']} dropped {g['packets_dropped']} batches {g['batches_completed']}/{g['batches_submitted']} dropped {g['batches_dropped']} errors {g['errors']} not_in_region {g['not_in_region']} no_slot {g['no_slot']}; io allocations {r['io_thread_allocations']}")
ok = [("frames received", q["packets"] > 0),
      ("GPU batches completed", g["batches_completed"] > 0),
      ("every frame counted in GPU memory" if kind == "device" else "no frame counted in GPU memory",
       q["in_gpu_memory"] == (q["packets"] if kind == "device" else 0)),
      ("every frame went to the GPU or is counted gpu_busy", g["packets"] + g["packets_dropped"] == q["packets"]),
      ("gpu_busy drops = the stage's dropped packets", q["drops"]["gpu_busy"] == g["packets_dropped"]),
      ("no CUDA error, no address outside the region", g["errors"] == 0 and g["not_in_region"] == 0 and g["no_slot"] == 0),
      ("no I/O-thread allocation", r["io_thread_allocations"] == 0)]
for what, good in ok:
    print(("ok   " if good else "FAIL ") + what)
print("PASS" if all(good for _, good in ok) else "FAIL")
EOP
    fi
    return $rc
}

dpdk_bench() {
    echo "== DPDK net_null (8000 B frames) -> GPU gather (1024 per batch, depth 4): frames in GPU memory (device) vs pinned host memory (host_pinned), ${SECS} s per run, $REPS interleaved repeats"
    for rep in $(seq 1 "$REPS"); do
        for kind in device host_pinned; do
            RUST_LOG=warn dpdk_gpu $kind bench "d${rep}-$kind"
            echo "d${rep}-$kind rc=$?"
        done
    done
    python3 - "$OUT/runs" <<'EOP'
import json, glob, os, sys, statistics as st
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "d*-*.json"))):
    kind = os.path.basename(f)[:-5].split("-", 1)[1]
    r = json.load(open(f)); q = r["rx"]["queues"][0]; g = q["gpu"]; s = r["duration_s"]
    rx_mpps = q["packets"] / s / 1e6
    gpu_mpps = g["packets"] / s / 1e6
    rows.setdefault(kind, []).append((rx_mpps, gpu_mpps, gpu_mpps * 8000 * 8 / 1e3, g["errors"], r["io_thread_allocations"]))
    print(f"{os.path.basename(f)}: consumer {rx_mpps:.3f} Mpps, to GPU {gpu_mpps:.3f} Mpps = {gpu_mpps*64:.1f} Gb/s of frames, gpu_busy {q['drops']['gpu_busy']}, ring_full {q['drops']['ring_full']}, errors {g['errors']}")
print("\nregion | consumer Mpps min/median/max | to-GPU Mpps min/median/max | to-GPU Gb/s median (8000 B frames) | errors | io allocations")
for kind, v in rows.items():
    a = [x[0] for x in v]; b = [x[1] for x in v]
    print(f"{kind} | {min(a):.3f} / {st.median(a):.3f} / {max(a):.3f} (n={len(v)}) | {min(b):.3f} / {st.median(b):.3f} / {max(b):.3f} | {st.median(x[2] for x in v):.1f} | {max(x[3] for x in v)} | {max(x[4] for x in v)}")
EOP
}

# bench config: Q SO_REUSEPORT RX queues on port 5000, one GPU stage (one pipeline per queue)
bench_config() { # queues workload file
    local q=$1 w=$2 f=$3 k
    {
    cat <<EOC
name = "gpu-bench-${q}q-$w"
platform = "host"
[engine]
kind = "socket"
[engine.socket]
reuseport = true
rcvbuf = 67108864
rx_timestamps = "batch"
[[memory_regions]]
name = "rx_pinned"
kind = "host_pinned"
gpu = 0
buf_size = 8192
buf_count = $((q * 8192))
[[interfaces]]
name = "sink"
address = "udp://127.0.0.1:5000"
max_message_size = 8000
EOC
    for k in $(seq 0 $((q - 1))); do
    cat <<EOC
[[interfaces.rx_queues]]
id = $k
cpu_core = $((1 + k))
batch_size = 64
timeout_us = 20000
ring_depth = 16384
memory_regions = ["rx_pinned"]
consumer_core = $((5 + k))
gpu_stage = "stage"
EOC
    done
    cat <<EOC
[[gpu_stages]]
name = "stage"
gpu = 0
packets_per_batch = 1024
mode = "gather"
conversion = "none"
depth = 4
workload = "$w"
checksum = false
[run]
duration_s = $SECS
drain_ms = 200
loss_tolerance = 1000000000000
validate = "sequence"
[rt]
required = false
EOC
    } > "$f"
}

bench() {
    echo "== RX->GPU benchmark: 8000 B payloads, 4 sendmmsg_tx processes (cores 9-12, 4 sources each), ${SECS} s per run, $REPS repeats"
    for rep in $(seq 1 "$REPS"); do
      for q in 1 2 4; do
        for w in none fft gemm; do
            local name="r${rep}-q${q}-$w" f="$OUT/runs/r${rep}-q${q}-$w"
            bench_config "$q" "$w" "$f.toml"
            local pids=()
            for s in 0 1 2 3; do
                $C/sendmmsg_tx --port 5000 --cpu $((9 + s)) --size 8000 --sources 4 \
                    --stream $((100 + 10 * s)) --seconds $((SECS + 20)) > "$f.tx$s.json" 2>/dev/null &
                pids+=($!)
            done
            sleep 0.5
            RUST_LOG=warn timeout $((SECS + 25)) $C/rtdaq run --config "$f.toml" \
                --report-json "$f.json" > "$f.txt" 2>&1
            local rc=$?
            for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
            wait 2>/dev/null
            echo "$name rc=$rc $(grep -m1 -E '^RX|total' "$f.txt" | head -1 >/dev/null; grep -E '^ +total' "$f.txt" | head -1)"
        done
      done
    done
    echo "== pinned->device copy peak and kernels (gpu_bench)"
    timeout 240 $C/gpu_bench; echo "rc=$?"
}

# Paced offered load: the same shapes, each sender process paced to RATE_<q> / 4 Gb/s, so the
# question "does a workload lower the receive rate?" is asked below the socket path's ceiling
# (unpaced runs vary 5-25 % from run to run, more than the effect being measured).
paced() {
    local -A rate=([1]=${RATE_1:-20} [2]=${RATE_2:-32} [4]=${RATE_4:-40})
    # A same-run baseline: gpu-carry/rtdaq-base (an earlier commit's release gpu build), run
    # right after rtdaq in every shape of every repeat; its runs are named rNb-... .
    local bins=(rtdaq)
    [ -x $C/rtdaq-base ] && bins+=(rtdaq-base)
    echo "== RX->GPU at a paced offered load: 8000 B payloads, 4 sendmmsg_tx processes (cores 9-12, 4 sources each), offered Gb/s per queue count: 1q ${rate[1]}, 2q ${rate[2]}, 4q ${rate[4]}; ${SECS} s per run, $REPS repeats; binaries: ${bins[*]}"
    for rep in $(seq 1 "$REPS"); do
      for q in 1 2 4; do
        for w in none fft gemm; do
          for bin in "${bins[@]}"; do
            local tag=r${rep}
            [ "$bin" = rtdaq-base ] && tag=r${rep}b
            local name="$tag-q${q}-$w" f="$OUT/runs/$tag-q${q}-$w"
            bench_config "$q" "$w" "$f.toml"
            local pids=() per
            per=$(awk -v r="${rate[$q]}" 'BEGIN { printf "%.3f", r / 4 }')
            for s in 0 1 2 3; do
                $C/sendmmsg_tx --port 5000 --cpu $((9 + s)) --size 8000 --sources 4 --rate-gbps "$per" \
                    --stream $((100 + 10 * s)) --seconds $((SECS + 20)) > "$f.tx$s.json" 2>/dev/null &
                pids+=($!)
            done
            sleep 0.5
            RUST_LOG=warn timeout $((SECS + 25)) "$C/$bin" run --config "$f.toml" \
                --report-json "$f.json" > "$f.txt" 2>&1
            local rc=$?
            for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
            wait 2>/dev/null
            echo "$name rc=$rc offered=${rate[$q]} $(grep -E '^ +total' "$f.txt" | head -1)"
          done
        done
      done
    done
}

summary() {
    python3 - "$OUT/runs" <<'EOP'
import json, glob, os, sys, statistics as st
rows = {}
for f in sorted(g for g in glob.glob(os.path.join(sys.argv[1], "r*-q*-*.json")) if ".tx" not in g):
    b = os.path.basename(f)[:-5]
    rep, q, w = b.split("-")
    if rep.endswith("b"):  # the same-run baseline (gpu-carry/rtdaq-base)
        w = w + "-base"
    try:
        r = json.load(open(f))
    except Exception as e:
        print("bad", f, e); continue
    t = r["rx"]["totals"]
    qs = r["rx"]["queues"]
    gpu_pk = sum(x["gpu"]["packets"] for x in qs)
    done = sum(x["gpu"]["batches_completed"] for x in qs)
    drop_gpu = sum(x["gpu"]["packets_dropped"] for x in qs)
    err = sum(x["gpu"]["errors"] for x in qs)
    gpu_gbps = gpu_pk * 8000 * 8 / r["duration_s"] / 1e9
    rows.setdefault((int(q[1:]), w), []).append((t["gbps"], gpu_gbps, t["drops"].get("ring_full", 0), drop_gpu, done, err, r["io_thread_allocations"], r.get("lost", 0)))
    rows_lost = r.get("lost", 0)
    print(f"{b}: lost {rows_lost}, rx {t['gbps']:.2f} Gb/s, to GPU {gpu_gbps:.2f} Gb/s, batches {done}, ring_full {t['drops'].get('ring_full',0)}, gpu_busy {drop_gpu}, errors {err}, allocs {r['io_thread_allocations']}")
print("\nqueues workload | rx Gb/s min/median/max | to-GPU Gb/s median | rx vs none (median) | lost per run (max) | io allocations (max)")
base = {}
order = ["none", "fft", "gemm", "none-base", "fft-base", "gemm-base"]
for (q, w), v in sorted(rows.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
    rx = [x[0] for x in v]; g = [x[1] for x in v]
    med = st.median(rx)
    if w in ("none", "none-base"): base[q] = med
    ratio = med / base[q] if base.get(q) else float("nan")
    print(f"{q} {w:5} | {min(rx):.2f} / {med:.2f} / {max(rx):.2f} (n={len(rx)}) | {st.median(g):.2f} | {ratio:.4f} | {max(x[7] for x in v)} | {max(x[6] for x in v)}")
EOP
}

{
    host_facts
    case "$WHAT" in
        tests) tests ;;
        unit) # the shipped config as root, then as the unit (as at the end of tests)
            RUST_LOG=info timeout 60 $C/rtdaq run --config configs/host-loopback-udp-gpu.toml --duration 5 \
                --report-json "$OUT/e2e.json" >"$OUT/e2e.log" 2>&1
            as_unit ;;
        bench) bench; summary ;;
        paced) paced; summary ;;
        dpdk) dpdk_bench ;;
        boards) boards ;;
        scaling) scaling ;;
        watchdog) watchdog ;;
        egress) gpu_egress ;;
        *) tests; bench; summary ;;
    esac
} 2>&1 | tee "$LOG"
tar czf "$OUT/runs.tar.gz" -C "$OUT" runs 2>/dev/null && rm -rf "$OUT/runs"
