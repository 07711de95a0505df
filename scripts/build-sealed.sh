#!/usr/bin/env bash
# build-sealed.sh: builds the sealed rtdaq binary of one deployment for a board: release,
# one engine, the board's platform feature, the deployment config embedded (RTDAQ_CONFIG),
# stripped, with its `rtdaq version` identity written next to it.
#
# Usage: scripts/build-sealed.sh --board BOARD --engine ENGINE --config FILE [--out DIR]
#                                [--target TRIPLE]
#   BOARD   host | igx-orin | igx-thor | dgx-spark  (a `platform-BOARD` feature of app/Cargo.toml;
#           the boards are aarch64; host builds for this machine unless --target says otherwise)
#   ENGINE  socket | afpacket | afxdp | dpdk | ibverbs  (an `engine-ENGINE` feature of app/Cargo.toml)
#   FILE    the deployment config (its `platform` must be BOARD, its `engine.kind` ENGINE:
#           app/build.rs refuses a mismatch, see docs/architecture.md)
#   DIR     where the results go (default target/sealed):
#             DIR/rtdaq-BOARD-ENGINE           the stripped binary
#             DIR/rtdaq-BOARD-ENGINE.version   its `rtdaq version` output (config SHA-256 ...)
#             DIR/rtdaq-BOARD-ENGINE.sha256    sha256sum of the binary
# Cross builds (aarch64-unknown-linux-gnu) need: `rustup target add aarch64-unknown-linux-gnu`
# and the Debian packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross (linker, libc) and
# qemu-user (qemu-aarch64 runs the binary once for `rtdaq version`). --engine dpdk and
# --engine ibverbs are refused for a cross build: the arm64 DPDK / rdma-core libraries
# (libdpdk-dev:arm64, libibverbs-dev:arm64 librdmacm-dev:arm64) are not on this build host;
# build those natively on the board with this script. A config with GPU memory or a GPU stage
# is built with the `gpu` feature too (CUDA is loaded at run time: no CUDA needed to build).
# Cargo output goes to CARGO_TARGET_DIR (default target/<triple> for a cross build, target/sealed-host otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '5,6p' "$0" | sed 's/^# //' >&2
    exit 2
}
die() { echo "build-sealed.sh: $*" >&2; exit 2; }

board="" engine="" config="" out=target/sealed target=""
while [ $# -gt 0 ]; do
    case $1 in
    --board) board=${2-}; shift 2 || usage ;;
    --engine) engine=${2-}; shift 2 || usage ;;
    --config) config=${2-}; shift 2 || usage ;;
    --out) out=${2-}; shift 2 || usage ;;
    --target) target=${2-}; shift 2 || usage ;;
    -h | --help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
    esac
done
if [ -z "$board" ] || [ -z "$engine" ] || [ -z "$config" ]; then usage; fi
# The boards and engines are the app's features (one list: a new one is not added here).
features() { sed -n "s/^$1-\([a-z0-9-]*\) *=.*/\1/p" app/Cargo.toml | paste -sd, - | sed 's/,/, /g'; }
grep -q "^platform-$board *=" app/Cargo.toml || die "unknown board '$board' ($(features platform))"
grep -q "^engine-$engine *=" app/Cargo.toml || die "unknown engine '$engine' ($(features engine))"
[ -f "$config" ] || die "config file '$config' not found"
config=$(realpath "$config")

host_triple=$(rustc -vV | sed -n 's/^host: //p')
if [ -z "$target" ]; then
    if [ "$board" = host ]; then target=$host_triple; else target=aarch64-unknown-linux-gnu; fi
fi

platform=$board

runner=()
strip_tool="strip"
if [ "$target" != "$host_triple" ]; then
    case $target in
    aarch64-unknown-linux-gnu) ;;
    *) die "cross target '$target' is not set up here (aarch64-unknown-linux-gnu is)" ;;
    esac
    if [ "$engine" = ibverbs ]; then
        die "--engine ibverbs cannot be cross-built for $target here: it links rdma-core 44" \
            "(libibverbs, librdmacm) and needs their arm64 libraries and headers" \
            "(libibverbs-dev:arm64 librdmacm-dev:arm64), which this build host does not have." \
            "Build it on the board itself with this script and --board $board (a native build" \
            "there); see docs/deploy.md"
    fi
    if [ "$engine" = dpdk ]; then
        die "--engine dpdk cannot be cross-built for $target here: it links DPDK 22.11 through" \
            "pkg-config and needs the arm64 DPDK libraries and headers (libdpdk-dev:arm64)," \
            "which this build host does not have (no arm64 multiarch DPDK set up). Build a DPDK" \
            "binary on the board itself (or an arm64 build host) with this script and --board" \
            "$board (a native build there); see docs/deploy.md"
    fi
    command -v rustup >/dev/null || die "rustup not found (needed for the $target standard library)"
    rustup target list --installed | grep -qx "$target" || {
        echo "adding the rust target $target (rustup target add $target)"
        rustup target add "$target"
    }
    command -v aarch64-linux-gnu-gcc >/dev/null ||
        die "aarch64-linux-gnu-gcc not found: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
    export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
    strip_tool=aarch64-linux-gnu-strip
    command -v qemu-aarch64 >/dev/null ||
        die "qemu-aarch64 not found (it runs the binary once for its identity): apt-get install qemu-user"
    runner=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/$target}
else
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/sealed-host}
fi

features="engine-$engine,platform-$platform"
# GPU memory or a GPU stage in the config: the binary needs the `gpu` feature (app/build.rs
# refuses the config without it).
if python3 -c 'import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
gpu = bool(c.get("gpu_stages")) or any(r.get("kind") in ("host_pinned", "device") for r in c.get("memory_regions", []))
sys.exit(0 if gpu else 1)' "$config"; then
    features="$features,gpu"
fi
echo "building sealed rtdaq: board $board, target $target, features $features, config $config"
RTDAQ_CONFIG=$config cargo build --release -q -p rtdaq --target "$target" \
    --no-default-features --features "$features"

mkdir -p "$out"
name=rtdaq-$board-$engine
bin=$out/$name
cp "$CARGO_TARGET_DIR/$target/release/rtdaq" "$bin.tmp"
"$strip_tool" "$bin.tmp"
mv "$bin.tmp" "$bin"
"${runner[@]}" "$bin" version > "$bin.version"
(cd "$out" && sha256sum "$name" > "$name.sha256")
echo "sealed binary: $bin ($(du -h "$bin" | cut -f1), $(file -b "$bin" 2>/dev/null | cut -d, -f1-2 || echo "$target"))"
cat "$bin.version"
