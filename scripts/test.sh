#!/usr/bin/env bash
# Runs every rtdaq test, installing what the tests need first (apt packages, rust components).
# Usage: scripts/test.sh            (as root on Debian/Ubuntu; CI calls exactly this)
# Env:   RTDAQ_TEST_SKIP_INSTALL=1  skip the apt/rustup step
#        RTDAQ_TEST_QUICK=1         skip the loom model and the feature-matrix build checks
# Every test whose peer or privilege is missing fails (RTDAQ_TEST_REQUIRE=1); the last line is
# `N passed, N failed, N skipped` (tests; a step without cargo tests counts as one), after the
# list of every skip with its reason (GPU tests off the GPU host, parts this kernel cannot do)
# and every step left out. Each step's output: target/test-logs/NN.log.
set -euo pipefail
cd "$(dirname "$0")/.."


step() { printf '\n==== %s\n' "$*"; }

# Required mode (tests/testbed/src/require.rs): a test whose peer or privilege is missing
# fails here instead of passing; every skip (the GPU tests off the GPU host, and parts of a
# test this host's kernel cannot do) is appended to the skip log, which the summary lists.
export RTDAQ_TEST_REQUIRE=1
LOGS=$PWD/target/test-logs
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log
export RTDAQ_TEST_SKIP_LOG=$LOGS/skips.log
: > "$RTDAQ_TEST_SKIP_LOG"

fail=0
failed_steps=()
passed_steps=0
left_out=()      # steps not run, each with why (RTDAQ_TEST_QUICK, RTDAQ_TEST_SKIP_INSTALL)
tests_passed=0
tests_failed=0
n_steps=0
# Runs one step, its output also kept in target/test-logs/NN.log. A step that runs cargo
# tests counts each test (its "test result:" lines); any other step counts as one test.
run() {
    local name=$1; shift
    step "$name"
    n_steps=$((n_steps + 1))
    local log ok=1 p f
    log=$(printf '%s/%02d.log' "$LOGS" "$n_steps")
    if "$@" 2>&1 | tee "$log"; then passed_steps=$((passed_steps + 1)); else ok=0; fail=1; failed_steps+=("$name"); fi
    read -r p f < <(awk '/^test result: /{ for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) pp += $i; if ($(i+1) ~ /^failed/) ff += $i } }
                        END { print pp + 0, ff + 0 }' "$log")
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        if [ $ok = 1 ]; then p=1; else f=1; fi
    elif [ $ok = 0 ] && [ "$f" -eq 0 ]; then
        f=1  # the step failed outside its tests (a build error after some passed)
    fi
    tests_passed=$((tests_passed + p))
    tests_failed=$((tests_failed + f))
}
# A step left out on purpose: named in the summary with why.
leave_out() { left_out+=("$1: $2"); echo "left out: $1 ($2)"; }

# ---- 1. what the tests need -------------------------------------------------------------
# Debian packages (the list and why each is needed: scripts/install-test-deps.sh), the
# Soft-RoCE guest's QEMU matched to the installed qemu-utils, rustfmt/clippy and the aarch64
# target. Never removes a package; needs nothing left by an earlier run.
if [ "${RTDAQ_TEST_SKIP_INSTALL:-0}" != 1 ]; then
    step "install test dependencies (scripts/install-test-deps.sh)"
    scripts/install-test-deps.sh
else
    leave_out "install test dependencies (scripts/install-test-deps.sh)" \
        "RTDAQ_TEST_SKIP_INSTALL=1: a missing package fails the test that needs it"
fi

# ---- 2. static checks ---------------------------------------------------------------------
run "cargo fmt --check" cargo fmt --all -- --check
run "cargo clippy (workspace, all targets, default features)" \
    cargo clippy --workspace --all-targets -- -D warnings

# ---- 3. the tests -------------------------------------------------------------------------
run "structure: no import circle across app/runtime/src, no non-test function over 150 lines in app/ (scripts/lib/structure.py)" \
    python3 scripts/lib/structure.py
run "cargo test (workspace)" cargo test --workspace
# The systemd watchdog stops its pings when any kind of thread that moves the data stalls:
# the stalls are injected by the test-hooks feature (never in a release build: build.rs).
run "watchdog: each kind of thread stalled in turn stops WATCHDOG=1 (cargo test --features test-hooks --test notify)" \
    cargo test -p rtdaq --features test-hooks --test notify
# The GPU data path (`gpu` feature): it builds without CUDA (cudarc loads it at run time), a
# gpu build runs CPU configs, a GPU config says "no CUDA driver found" (exit 2); the GPU-only
# tests print "skipped: no CUDA driver" here and run on the GPU host (docs/benchmarks/gpu.md).
run "ucx feature: clippy, runtime tests (cargo test -p rtdaq-runtime --features ucx)" \
    sh -c 'cargo clippy -p rtdaq-runtime -p rtdaq --features ucx --all-targets -- -D warnings &&
           cargo test -p rtdaq-runtime --features ucx egress'
run "gpu feature: clippy, runtime tests, app tests (cargo test --features gpu)" \
    sh -c 'cargo clippy -p rtdaq-runtime -p rtdaq --features gpu --all-targets -- -D warnings &&
           cargo test -p rtdaq-runtime --features gpu && cargo test -p rtdaq --features gpu --test gpu'
# GPU products downstream (`gpu,ucx`): builds and lints together; the end-to-end test needs a
# CUDA driver and runs on the GPU host (scripts/gpu-host.sh egress), here it skips, recorded.
run "gpu + ucx features: clippy, GPU products over UCX (cargo test --features gpu,ucx --test gpu_egress)" \
    sh -c 'cargo clippy -p rtdaq-runtime -p rtdaq --features gpu,ucx --all-targets -- -D warnings &&
           cargo test -p rtdaq --features gpu,ucx --test gpu_egress'
run "rtdaq-core builds as no_std" cargo build -p rtdaq-core --no-default-features
run "rtdaq-core builds with alloc only" cargo build -p rtdaq-core --no-default-features --features alloc

if [ "${RTDAQ_TEST_QUICK:-0}" != 1 ]; then
    run "loom models of the SPSC rings and the pool" env RUSTFLAGS="--cfg loom" \
        cargo test -p rtdaq-core --test ring_loom --test slot_ring_loom --release --target-dir target/loom
    run "feature matrix and build-time config validation" scripts/check-build-rules.sh
else
    leave_out "loom models of the SPSC rings and the pool" "RTDAQ_TEST_QUICK=1"
    leave_out "feature matrix and build-time config validation (scripts/check-build-rules.sh)" "RTDAQ_TEST_QUICK=1"
fi

# ---- 4. the release binary ------------------------------------------------------------------
release_checks() {
    cargo build --release -p rtdaq
    local bin=target/release/rtdaq
    "$bin" version
    local f out
    for f in configs/*.toml; do
        out=$("$bin" config check "$f" 2>&1) && continue
        # A GPU (UCX, PSRDADA ring) config needs a `--features gpu` (`ucx`, `dada`) binary:
        # this one must say so (exit 2); the feature build is checked by
        # check-build-rules.sh and its tests.
        if grep -qF 'built without' <<<"$out" && grep -qE 'features (gpu|ucx|dada)' <<<"$out"; then
            echo "$f: needs $(grep -oE 'features (gpu|ucx|dada)' <<<"$out" | head -1) (this binary says so)"
            continue
        fi
        echo "config check failed on $f: $out" >&2
        return 1
    done
    "$bin" config check
}
run "release build + rtdaq version + config check on configs/" release_checks

# The raw engines end to end: one binary per engine, generator and appliance in two private
# network namespaces (app/tests/raw.rs; needs root).
run "engine binaries (scripts/build-engines.sh)" scripts/build-engines.sh
# The main job on a busy host: one busy loop per CPU at normal priority; the default and the
# 4-queue deployment and the DPDK ring-PMD loopback (the engine binary above), 5 runs of 10 s
# each, every one with 0 lost (SCHED_FIFO queue threads; app/tests/busy_host.rs,
# docs/benchmarks/busy-host.md). Without root it prints why it skipped.
# The DPDK case runs the release engine binary (what a deployment runs; the debug build is too
# slow to leave its core a pause at this rate); the debug one is put back for the tests below.
busy_host() {
    local rc=0
    scripts/build-engines.sh --release dpdk || return 1
    cargo test --release -p rtdaq --test busy_host -- --ignored --test-threads 1 || rc=1
    scripts/build-engines.sh dpdk || rc=1
    return $rc
}
run "main job on a busy host: 0 lost in 5 x 10 s runs beside a busy loop per CPU, default, 4-queue and DPDK ring deployments (cargo test --release --test busy_host -- --ignored)" \
    busy_host
# Data out: pcap/DADA recordings read by tcpdump, tshark, capinfos and baseband, replayed
# through rtdaq, a tcpdump capture replayed, a full tmpfs, SIGKILL mid-recording
# (app/tests/record.rs; root for tmpfs and tcpdump capture).
run "recording and replay with real readers (cargo test --test record -- --ignored)" \
    cargo test -p rtdaq --test record -- --ignored --test-threads 1
# Instrument formats (issue #17): baseband-written VDIF into rtdaq with nftables dropping
# every 7th datagram (lost = nft's counter), rtdaq's VDIF generator recorded raw and read
# back by baseband, counter-at-offset and CODIF streams with every 11th / 13th datagram dropped, spead2's
# heaps into rtdaq whole and with every 7th datagram dropped, rtdaq's SPEAD heaps
# assembled by spead2, scapy's eCPRI frames replayed by tcpreplay into AF_PACKET
# (app/tests/formats.rs; root for namespaces and nftables).
run "instrument formats with real peers: baseband VDIF, spead2 both ways, scapy eCPRI, nft drops, VDIF recording (cargo test --test formats -- --ignored)" \
    cargo test -p rtdaq --test formats -- --ignored --test-threads 1
# Egress (issue #31): rtdaq's SPEAD egress assembled by spead2 in a namespace (every heap
# whole, the data = the payloads rtdaq received), nftables dropping every 7th egress datagram
# (each drop costs spead2 exactly one heap), two multicast groups round-robin, a second rtdaq
# receiving the stream as SPEAD, the
# receiver SIGKILLed mid-run (rtdaq's receive path stalls not, every payload accounted for)
# (app/tests/egress.rs; root); pacing = "txtime" to an interface without the fq qdisc stops
# the start naming it (app/tests/egress_pacing.rs; the pacing itself: the guest step below).
egress_tests() {
    cargo test -p rtdaq --test egress -- --ignored --test-threads 1 &&
        cargo test -p rtdaq --test egress_pacing -- --ignored --test-threads 1
}
run "egress: SPEAD heaps to spead2, nft drops, rtdaq to rtdaq, a receiver killed mid-run, txtime without etf or fq (cargo test --test egress --test egress_pacing -- --ignored)" \
    egress_tests
# UCX egress (issue #31): the socket binary with --features ucx sends over UCX (TCP on
# loopback) to a C receiver built against the system's UCX (scripts/peers/ucx_recv.c):
# every message in sequence and its data = the raw recording of the run; no listener =
# exit 2, connect_wait_ms waits for a late one; the receiver SIGKILLed and restarted
# (reconnection, the gap counted); a receiver too slow (egress_full, no stall); and
# ucx_perftest tag_bw over the same transport (app/tests/egress_ucx.rs); whole units
# (app/tests/egress_units.rs): spead2's heaps with every 13th packet left out forwarded as
# whole heaps, read back by spead2 (exactly the heaps that lost nothing), and baseband's VDIF
# time slots with every 41st frame left out (the original frame sets, byte for byte); the
# same over SPEAD: a relay of whole heaps to a spead2 UDP receiver, VDIF slots as SPEAD heaps.
build_socket_ucx() {
    RTDAQ_CONFIG=configs/host-udp-egress-ucx.toml cargo build -q -p rtdaq --no-default-features \
        --features engine-socket,platform-host,ucx || return 1
    mkdir -p target/engines && cp target/debug/rtdaq target/engines/rtdaq-socket-ucx || return 1
    # the default features again in target/debug for the steps after this one
    cargo build -q -p rtdaq
}
ucx_egress() {
    build_socket_ucx || return 1
    cargo test -p rtdaq --test egress_ucx -- --ignored --test-threads 1 &&
        cargo test -p rtdaq --test egress_units -- --ignored --test-threads 1
}
run "UCX egress: ucx_perftest, every message to a C UCX receiver, no listener, a receiver restarted, a slow receiver; whole SPEAD heaps and VDIF time slots over UCX and SPEAD (cargo test --test egress_ucx --test egress_units -- --ignored)" \
    ucx_egress
# PSRDADA rings (issue #32): the socket binary with --features dada writes the default job
# into a ring that a reader written against the psrdada C library (hal/dada/examples/
# dada_read.rs) reads in another process: every byte = the raw recording of the run; no
# reader: the queue never waits, the overflow is ring_reader_behind; a reader killed mid-run:
# the next one reads from its header's OBS_OFFSET on (= the raw recording from there); a
# missing ring: exit 2 (app/tests/dada_ring.rs). The crate's own tests (against the library's client calls) run
# with the workspace's.
build_socket_dada() {
    RTDAQ_CONFIG=configs/host-udp-dada-ring.toml cargo build -q -p rtdaq --no-default-features \
        --features engine-socket,platform-host,dada || return 1
    mkdir -p target/engines && cp target/debug/rtdaq target/engines/rtdaq-socket-dada
}
dada_ring() {
    build_socket_dada || return 1
    cargo build -q -p rtdaq-dada --example dada_read || return 1
    cargo build -q -p rtdaq || return 1
    cargo test -p rtdaq --test dada_ring -- --ignored --test-threads 1
}
run "PSRDADA ring: a library reader gets every byte (= the raw recording), no reader never stalls the queue, a killed reader's follower reads on from OBS_OFFSET, a missing ring is exit 2 (cargo test --test dada_ring -- --ignored)" \
    dada_ring
# Triggered dumps (issue #32, docs/dumps.md): an HTTP POST /trigger, a UDP trigger datagram
# and SIGUSR1 while receiving each write the packets of their window, exactly those of a
# continuous pcap recording of the same run, read by tshark (app/tests/dump.rs).
run "triggered dumps: HTTP, UDP and SIGUSR1 triggers give exactly the recording's packets of each window (cargo test --test dump -- --ignored)" \
    cargo test -p rtdaq --test dump -- --ignored --test-threads 1
# The Python package (issue #32, python/, docs/python.md): pip builds its wheel from
# python/pyproject.toml (maturin, as `pip install ./python` does) into target/wheels, which is
# installed into the test venv; pytest then reads what the release binary and the dada
# binary record and stream (python/tests). A skipped pytest test fails the step.
python_package() {
    local py=$PWD/target/pyenv/bin/python tmp=$PWD/target/pytest-tmp xml=$LOGS/pytest.xml
    [ -x target/engines/rtdaq-socket-dada ] || build_socket_dada || return 1
    [ -x target/release/rtdaq ] || cargo build -q --release -p rtdaq || return 1
    rm -rf target/wheels "$tmp" && mkdir -p "$tmp" || return 1
    "$py" -m pip wheel -q --disable-pip-version-check --no-deps -w target/wheels ./python || return 1
    "$py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
        target/wheels/rtdaq-*.whl || return 1
    ls -l target/wheels
    local rc=0
    RTDAQ_BIN=$PWD/target/release/rtdaq RTDAQ_DADA_BIN=$PWD/target/engines/rtdaq-socket-dada \
        "$py" -m pytest -p no:cacheprovider -q -rs --basetemp "$tmp/run" --junitxml "$xml" \
        python/tests || rc=1
    # One "test result:" line, as cargo prints, so that the summary counts every pytest test.
    "$py" - "$xml" <<'PY' || rc=1
import sys, xml.etree.ElementTree as ET
s = ET.parse(sys.argv[1]).getroot()
s = s if s.tag == "testsuite" else s.find("testsuite")
t, f, e, k = (int(s.get(a, 0)) for a in ("tests", "failures", "errors", "skipped"))
print(f"test result: pytest. {t - f - e - k} passed; {f + e + k} failed ({k} skipped: a skip fails here)")
sys.exit(1 if f + e + k else 0)
PY
    rm -rf "$tmp"
    return $rc
}
run "Python package: pip wheel ./python, installed; pytest reads rtdaq's pcap/raw/DADA recordings (= baseband), scapy's pcaps, files being written, the PSRDADA ring, /status (python/tests)" \
    python_package
run "IPv4 multicast in the namespace test bed: two receivers of one group, source-specific joins, an AF_PACKET receiver holding the membership, an AF_PACKET generator to a group (cargo test --test multicast -- --ignored)" \
    cargo test -p rtdaq --test multicast -- --ignored --test-threads 1
run "metrics endpoint with real peers: a Prometheus server scraping a 10 s run, promtool check metrics, 100 scrapes a second for 10 s with a fixed thread count, only queue threads on queue cores (cargo test --test metrics -- --ignored)" \
    cargo test -p rtdaq --test metrics -- --ignored --test-threads 1
# The clock check (issue #33, docs/time.md): linuxptp's ptp4l -S as master and slave over a
# veth pair; rtdaq asks the slave's ptp4l (management socket): refused start before it
# locks, rtdaq doctor's time.ptp, /metrics synchronised then lost when the master stops.
run "PTP: ptp4l -S master/slave on a veth pair; require_sync refuses an unsynchronised start, doctor time.ptp, /metrics and the report follow SLAVE and a lost master (cargo test --test ptp -- --ignored)" \
    cargo test -p rtdaq --test ptp -- --ignored --test-threads 1
# The jitter benchmark's script (docs/benchmarks/jitter.md) runs end to end, briefly: one 3 s
# sample per load beside cyclictest and stress-ng, and its tables come out (a benchmark:
# nothing here judges the figures).
jitter_smoke() {
    local out
    out=$(mktemp -d)
    BENCH_SECONDS=3 BENCH_REPEATS=1 BENCH_OUT="$out" scripts/bench-jitter.sh > "$out/stdout.txt" || return 1
    if ! grep -q '^| idle | rtdaq generator |' "$out/summary.md" ||
        ! grep -q '^| stress | cyclictest |' "$out/summary.md"; then
        cat "$out/summary.md"
        return 1
    fi
    rm -rf "$out"
}
run "jitter benchmark smoke: scripts/bench-jitter.sh, one 3 s sample per load beside cyclictest, its tables" jitter_smoke
run "raw engines end to end in namespaces (cargo test --test raw -- --ignored)" \
    cargo test -p rtdaq --test raw -- --ignored --test-threads 1
# This host has no RDMA: every ibverbs config must stop with exit 2 and the no-device message.
run "ibverbs on a host without RDMA: clear error, exit 2 (cargo test --test ibverbs -- --ignored)" \
    cargo test -p rtdaq --test ibverbs -- --ignored --test-threads 1
# DPDK end to end, first with no hugepages reserved (no_hugepages_is_a_clear_error needs none;
# every other test there runs with --no-huge), then the with_hugepages_* tests with 2 MiB
# hugepages reserved (and hugetlbfs mounted) only for them: dpdk_with_hugepages below.
run "DPDK end to end: ring PMD, testpmd peer over net_af_packet/net_af_xdp, AF_PACKET interop, rte_flow and EAL errors (cargo test --test dpdk -- --ignored --skip with_hugepages)" \
    cargo test -p rtdaq --test dpdk -- --ignored --test-threads 1 --skip with_hugepages

HP_NR=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
HP_WANT=${RTDAQ_TEST_HUGEPAGES_COUNT:-256}
HP_PREV=""
HP_MOUNTED=""
# Gives back what dpdk_with_hugepages took: the previous page count, and the hugetlbfs mount
# it made. Also the EXIT trap while it runs (a failed or interrupted test still releases).
hugepages_release() {
    if [ -n "$HP_MOUNTED" ]; then
        if umount "$HP_MOUNTED"; then
            rmdir "$HP_MOUNTED" 2>/dev/null || true
            echo "unmounted hugetlbfs at $HP_MOUNTED"
        fi
        HP_MOUNTED=""
    fi
    if [ -n "$HP_PREV" ]; then
        echo "$HP_PREV" > "$HP_NR" || true
        echo "2 MiB hugepages back to $HP_PREV (now $(cat "$HP_NR"))"
        HP_PREV=""
    fi
}
dpdk_with_hugepages() {
    [ -w "$HP_NR" ] || { echo "cannot write $HP_NR (not root, or no 2 MiB hugepage support)" >&2; return 1; }
    HP_PREV=$(cat "$HP_NR")
    trap hugepages_release EXIT
    trap 'exit 130' INT TERM
    local want=$HP_WANT rc=0
    [ "$HP_PREV" -gt "$want" ] && want=$HP_PREV
    echo "$want" > "$HP_NR"
    echo "2 MiB hugepages: $HP_PREV -> $(cat "$HP_NR") (asked $want)"
    if [ "$(cat "$HP_NR")" -lt 1 ]; then
        echo "the kernel reserved no hugepage (memory fragmented?)" >&2
        rc=1
    fi
    if [ $rc -eq 0 ] && ! awk '$3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts; then
        HP_MOUNTED=/dev/hugepages-rtdaq-test
        mkdir -p "$HP_MOUNTED"
        mount -t hugetlbfs -o pagesize=2M nodev "$HP_MOUNTED" || { HP_MOUNTED=""; rc=1; }
        [ -n "$HP_MOUNTED" ] && echo "mounted hugetlbfs at $HP_MOUNTED"
    fi
    if [ $rc -eq 0 ]; then
        RTDAQ_TEST_HUGEPAGES=1 cargo test -p rtdaq --test dpdk -- --ignored --test-threads 1 with_hugepages || rc=$?
    fi
    hugepages_release
    trap - EXIT INT TERM
    return $rc
}
run "DPDK end to end with 2 MiB hugepages reserved, then released (cargo test --test dpdk -- --ignored with_hugepages)" \
    dpdk_with_hugepages

# The Soft-RoCE guest (scripts/vm/, docs/testing.md): QEMU with Debian's stock and PREEMPT_RT
# kernels, rxe0/rxe1 on a veth pair inside it. Built once under target/vm (about 1 min), reused.
run "Soft-RoCE guest: build or reuse (scripts/vm/build-guest.sh, target/vm)" scripts/vm/build-guest.sh
run "Soft-RoCE guest harness self-test: rxe devices, rdma_server/rdma_client, PREEMPT_RT + SCHED_FIFO, exit codes (scripts/vm/selftest.sh)" \
    scripts/vm/selftest.sh
run "PREEMPT_RT guest: rtdaq run with SCHED_FIFO queue threads, rtdaq doctor passes kernel.preempt_rt (scripts/vm/rt-appliance.sh)" \
    scripts/vm/rt-appliance.sh target/release/rtdaq
# The shipped systemd unit under a real systemd (PID 1 in the guest): socket and AF_PACKET
# engines, every drop-in, the watchdog restart for each kind of thread (scripts/vm/README.md).
systemd_guest_tests() {
    cargo build -q --release -p rtdaq || return 1
    cp target/release/rtdaq target/vm-systemd-rtdaq-socket || return 1
    [ -x target/engines/rtdaq-afpacket ] || scripts/build-engines.sh afpacket || return 1
    cargo build -q -p rtdaq --features test-hooks || return 1
    cp target/debug/rtdaq target/vm-systemd-rtdaq-test-hooks || return 1
    # the default features again in target/debug for the steps after this one
    cargo build -q -p rtdaq || return 1
    scripts/vm/systemd-unit.sh target/vm-systemd-rtdaq-socket target/engines/rtdaq-afpacket \
        target/vm-systemd-rtdaq-test-hooks
}
run "systemd unit under a real systemd in the guest: Type=notify start, SCHED_FIFO as user rtdaq, capabilities, SIGTERM stop, AF_PACKET on a veth, every drop-in, dpdk.conf without '-' fails 226/NAMESPACE, the watchdog restarts the unit for a stalled io/consumer/generator/writer thread (scripts/vm/systemd-unit.sh)" \
    systemd_guest_tests
# The ibverbs engine's RoCE tests in the guest: scripts/vm/ibverbs-tests.sh (the engine's own)
# gets the engine-ibverbs binary and the engine crate's integration-test executables.
ibverbs_guest_tests() {
    [ -x target/engines/rtdaq-ibverbs ] || scripts/build-engines.sh ibverbs || return 1
    local json tests=()
    json=$(cargo test -q -p rtdaq-engine-ibverbs --tests --no-run --message-format=json-render-diagnostics) || return 1
    mapfile -t tests < <(jq -r 'select(.reason == "compiler-artifact" and .target.kind == ["test"]) | .executable // empty' <<< "$json")
    scripts/vm/ibverbs-tests.sh target/engines/rtdaq-ibverbs "${tests[@]}"
}
# UCX egress over RDMA: rtdaq (--features ucx) sends over UCX rc_verbs between the guest's
# two Soft-RoCE devices to the C receiver; ucx_info and ucx_perftest (UCT put_bw) prove
# the transport; no listener = exit 2 (scripts/vm/ucx-tests.sh).
ucx_guest_tests() {
    [ -x target/engines/rtdaq-socket-ucx ] || build_socket_ucx || return 1
    # shellcheck disable=SC2046 # pkg-config's flags are words
    cc -O2 -Wall -o target/ucx_recv-vm scripts/peers/ucx_recv.c $(pkg-config --cflags --libs ucx) || return 1
    scripts/vm/ucx-tests.sh target/engines/rtdaq-socket-ucx target/ucx_recv-vm
}
ibverbs_rt_guest_tests() {
    [ -x target/engines/rtdaq-ibverbs ] || scripts/build-engines.sh ibverbs || return 1
    RTDAQ_IB_KERNEL=rt scripts/vm/ibverbs-tests.sh target/engines/rtdaq-ibverbs
}
if [ -f scripts/vm/ibverbs-tests.sh ]; then
    run "ibverbs engine in the Soft-RoCE guest (scripts/vm/ibverbs-tests.sh)" ibverbs_guest_tests
    run "ibverbs engine on the PREEMPT_RT guest: SCHED_FIFO queue threads, doctor (RTDAQ_IB_KERNEL=rt scripts/vm/ibverbs-tests.sh)" \
        ibverbs_rt_guest_tests
fi
run "UCX egress over Soft-RoCE (rc_verbs) in the guest: ucx_info, ucx_perftest put_bw, rtdaq to the C receiver, no listener (scripts/vm/ucx-tests.sh)" \
    ucx_guest_tests
# SPEAD egress pacing = "txtime" (SO_TXTIME, the fq qdisc this host's kernel lacks) on a veth
# pair in the guest: each packet one packet time after the last on the wire, where the
# software pacer (same boot) sends a heap's packets back to back; the same on etf (CLOCK_TAI:
# no packet dropped by the qdisc, a lead under its delta refused); and the generator's launch
# times (pacing = "txtime", the etf qdisc): 10 000 packets all arrive, their send-time error
# against the schedule beside the software pacer's, for the generator, a replay at its recorded
# times and the AF_PACKET engine (scripts/vm/txtime-tests.sh, docs/time.md).
txtime_guest_tests() {
    [ -x target/engines/rtdaq-socket ] || scripts/build-engines.sh socket || return 1
    [ -x target/engines/rtdaq-afpacket ] || scripts/build-engines.sh afpacket || return 1
    scripts/vm/txtime-tests.sh target/engines/rtdaq-socket target/engines/rtdaq-afpacket
}
run "launch times in the guest: SPEAD egress txtime (SO_TXTIME + fq, + etf) spaces each packet, the software pacer sends bursts, etf drops none and refuses a lead under its delta; the generator's txtime (etf) keeps 10 000 packets' schedule beside the software pacer: socket engine, a replay at its recorded times, AF_PACKET engine (scripts/vm/txtime-tests.sh)" \
    txtime_guest_tests
run "shellcheck scripts/*.sh" shellcheck -x scripts/*.sh scripts/lib/*.sh
run "shellcheck scripts/vm/" shellcheck -x scripts/vm/*.sh scripts/vm/guest/*.sh
run "shellcheck rt-tuning/" shellcheck -x rt-tuning/*.sh rt-tuning/lib/*.sh rt-tuning/tests/*.sh

# ---- 5. deployment (docs/deploy.md): sealed aarch64 binary, host tuning, systemd unit ---------
# The sealed IGX Thor binary (socket engine): configs/igx-thor/*socket*.toml when the board
# ships one, else the default deployment with platform = "igx-thor".
sealed_igx_thor() {
    local cfg="" f
    for f in configs/igx-thor/*socket*.toml; do [ -f "$f" ] && { cfg=$f; break; }; done
    if [ -z "$cfg" ]; then
        cfg=target/sealed/igx-thor-loopback-udp.toml
        mkdir -p target/sealed
        sed -e 's/^platform = "host"/platform = "igx-thor"/' \
            -e 's/^name = "host-loopback-udp"/name = "igx-thor-loopback-udp"/' \
            configs/host-loopback-udp.toml > "$cfg"
    fi
    scripts/build-sealed.sh --board igx-thor --engine socket --config "$cfg"
}
run "sealed aarch64 binary (scripts/build-sealed.sh --board igx-thor --engine socket)" sealed_igx_thor
run "rtdaq-core and rtdaq-config tests for aarch64 under qemu-aarch64" \
    env CARGO_TARGET_DIR=target/aarch64-unknown-linux-gnu \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
    cargo test -p rtdaq-core -p rtdaq-config --target aarch64-unknown-linux-gnu
run "rt-tuning: tune.sh check/apply/idempotence/revert on a fake IGX Thor tree" rt-tuning/tests/test-tune.sh
# tune.sh apply on copies of doctor's fixture trees, then doctor: what tune.sh can fix passes,
# exactly the reboot/operator checks still fail (the tuned tree: apply does nothing).
doctor_roundtrips() {
    local rc=0
    rt-tuning/tests/test-doctor-roundtrip.sh target/release/rtdaq tests/fixtures/host-untuned || rc=1
    rt-tuning/tests/test-doctor-roundtrip.sh target/release/rtdaq tests/fixtures/igx-orin-half-tuned \
        configs/igx-orin/dpdk-hds.toml || rc=1
    rt-tuning/tests/test-doctor-roundtrip.sh target/release/rtdaq tests/fixtures/igx-thor-tuned \
        configs/igx-thor/dpdk-hds.toml || rc=1
    return $rc
}
run "rt-tuning: tune.sh apply --root on the doctor fixture trees, then rtdaq doctor --root" doctor_roundtrips
run "systemd unit: lint, systemd-analyze verify, unprivileged run with exactly its capabilities" \
    rt-tuning/tests/test-service.sh
# Every test that made a namespace (rtdaq-testbed pairs, the iperf3 script) removed it again.
no_namespace_left() {
    local left
    left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rtdaq-([0-9]+-|iperf3)' || true)
    [ -z "$left" ] || { echo "namespaces left behind by tests: $left" >&2; return 1; }
    echo "no test namespace left"
}
run "no test namespace left behind" no_namespace_left

# The README's two commands on a fresh machine: a clean Debian 12 root (mmdebstrap minbase +
# gcc + ca-certificates + the backported qemu-utils the project's machines come with), the
# host's toolchain and registry read-only, a fresh clone: `cargo run --release -- --duration 2`
# must pass, a build needing a C library must fail (the control), and the install step of this
# script must resolve without removing a package (apt-get -s).
run "fresh machine: README command 1 in a clean Debian root, the install step simulated (scripts/fresh-machine-check.sh)" \
    scripts/fresh-machine-check.sh
# The README's main job, exactly: the embedded default, 10 s, must end with zero loss (exit 0).
run "main job: cargo run --release (embedded default, 10 s, zero loss)" cargo run --release -q
run "docs build without warnings" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

# ---- summary --------------------------------------------------------------------------------
echo
skipped=0
if [ -s "$RTDAQ_TEST_SKIP_LOG" ]; then
    echo "skipped tests and parts (target/test-logs/skips.log):"
    sed 's/^/  /' "$RTDAQ_TEST_SKIP_LOG"
    # Whole tests skipped (counted by cargo as passed); a part not run is not a whole test.
    skipped=$(grep -vc '^PART NOT RUN' "$RTDAQ_TEST_SKIP_LOG" || true)
fi
for l in "${left_out[@]}"; do echo "left out: $l"; done
[ $fail -eq 0 ] || echo "FAILED steps: ${failed_steps[*]}"
echo "steps: ${passed_steps} passed, ${#failed_steps[@]} failed, ${#left_out[@]} left out (logs: target/test-logs/)"
echo "$((tests_passed - skipped)) passed, ${tests_failed} failed, $((skipped + ${#left_out[@]})) skipped"
[ $fail -eq 0 ]
