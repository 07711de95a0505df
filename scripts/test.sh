#!/usr/bin/env bash
# Runs every rtdaq test, installing what the tests need first (apt packages, rust components).
# Usage: scripts/test.sh            (as root on Debian/Ubuntu; CI calls exactly this)
# Env:   RTDAQ_TEST_SKIP_INSTALL=1  skip the apt/rustup step
#        RTDAQ_TEST_QUICK=1         skip the loom model and the feature-matrix build checks
set -euo pipefail
cd "$(dirname "$0")/.."


step() { printf '\n==== %s\n' "$*"; }
fail=0
failed_steps=()
passed_steps=0
run() {
    local name=$1; shift
    step "$name"
    if "$@"; then passed_steps=$((passed_steps + 1)); else fail=1; failed_steps+=("$name"); fi
}

# ---- 1. what the tests need -------------------------------------------------------------
# Debian packages: util-linux (setpriv: privilege-drop tests), iproute2 (namespaces), procps,
# iperf3 + nftables + jq (the iperf3 interop test: a real external sender), iputils-ping (test
# bed), shellcheck (scripts), clang llvm m4 libelf-dev zlib1g-dev pkg-config (the AF_XDP
# engine: libbpf/libxdp and its XDP program), tcpreplay (a real raw-frame sender), dpdk dpdk-dev
# libdpdk-dev libclang-dev (rtdaq-dpdk-sys: DPDK 22.11 headers/libraries/PMDs and bindgen).
APT_PACKAGES=(util-linux iproute2 procps git ca-certificates iperf3 nftables jq iputils-ping shellcheck
    clang llvm m4 libelf-dev zlib1g-dev pkg-config tcpreplay dpdk dpdk-dev libdpdk-dev libclang-dev)
install_deps() {
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "missing packages: ${missing[*]} (run as root, or install them: apt-get install ${missing[*]})" >&2
            return 1
        fi
        apt-get update -o DPkg::Lock::Timeout=600
        DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 "${missing[@]}"
    fi
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
}
if [ "${RTDAQ_TEST_SKIP_INSTALL:-0}" != 1 ]; then
    step "install test dependencies"
    install_deps
fi

# ---- 2. static checks ---------------------------------------------------------------------
run "cargo fmt --check" cargo fmt --all -- --check
run "cargo clippy (workspace, all targets, default features)" \
    cargo clippy --workspace --all-targets -- -D warnings

# ---- 3. the tests -------------------------------------------------------------------------
run "cargo test (workspace)" cargo test --workspace
run "rtdaq-core builds as no_std" cargo build -p rtdaq-core --no-default-features
run "rtdaq-core builds with alloc only" cargo build -p rtdaq-core --no-default-features --features alloc

if [ "${RTDAQ_TEST_QUICK:-0}" != 1 ]; then
    run "loom models of the SPSC rings and the pool" env RUSTFLAGS="--cfg loom" \
        cargo test -p rtdaq-core --test ring_loom --test slot_ring_loom --release --target-dir target/loom
    run "feature matrix and build-time config validation" scripts/check-build-rules.sh
fi

# ---- 4. the release binary ------------------------------------------------------------------
release_checks() {
    cargo build --release -p rtdaq
    local bin=target/release/rtdaq
    "$bin" version
    for f in configs/*.toml; do
        "$bin" config check "$f" >/dev/null || { echo "config check failed on $f" >&2; return 1; }
    done
    "$bin" config check
}
run "release build + rtdaq version + config check on configs/" release_checks

# The raw engines end to end: one binary per engine, generator and appliance in two private
# network namespaces (app/tests/raw.rs; needs root).
run "engine binaries (scripts/build-engines.sh)" scripts/build-engines.sh
run "raw engines end to end in namespaces (cargo test --test raw -- --ignored)" \
    cargo test -p rtdaq --test raw -- --ignored --test-threads 1
run "DPDK end to end: ring PMD, testpmd peer, AF_PACKET interop (cargo test --test dpdk -- --ignored)" \
    cargo test -p rtdaq --test dpdk -- --ignored --test-threads 1
run "shellcheck scripts/*.sh" shellcheck scripts/*.sh
# Every test that made a namespace (rtdaq-testbed pairs, the iperf3 script) removed it again.
no_namespace_left() {
    local left
    left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rtdaq-([0-9]+-|iperf3)' || true)
    [ -z "$left" ] || { echo "namespaces left behind by tests: $left" >&2; return 1; }
    echo "no test namespace left"
}
run "no test namespace left behind" no_namespace_left

# The README's main job, exactly: the embedded default, 10 s, must end with zero loss (exit 0).
run "main job: cargo run --release (embedded default, 10 s, zero loss)" cargo run --release -q
run "docs build without warnings" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

# ---- summary --------------------------------------------------------------------------------
echo
if [ $fail -ne 0 ]; then
    echo "FAILED steps: ${failed_steps[*]}"
    echo "steps: ${passed_steps} passed, ${#failed_steps[@]} failed"
    exit 1
fi
echo "steps: ${passed_steps} passed, 0 failed"
