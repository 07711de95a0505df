#!/usr/bin/env bash
# build-engines.sh: builds one rtdaq binary per packet engine (the engine is a compile-time
# feature), each with a shipped config of that engine embedded, into target/engines/:
#   target/engines/rtdaq-socket    (configs/host-loopback-udp.toml, the default)
#   target/engines/rtdaq-afpacket  (configs/veth-afpacket-rx.toml)
#   target/engines/rtdaq-afxdp     (configs/veth-afxdp-rx.toml)
#   target/engines/rtdaq-dpdk      (configs/vdev-dpdk-ring.toml)
#   target/engines/rtdaq-ibverbs   (configs/vm-roce-server.toml; needs libibverbs-dev, librdmacm-dev)
# They share one target directory (cargo keeps every feature set's artifacts apart), so only
# the rtdaq crate and the engine crate build again per engine.
# Usage: scripts/build-engines.sh [--release] [ENGINE...]     (default: all five, debug)
# Honours CARGO_TARGET_DIR (the binaries still go to target/engines/).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=debug
args=()
engines=()
for a in "$@"; do
    case $a in
    --release) profile=release; args+=(--release) ;;
    socket | afpacket | afxdp | dpdk | ibverbs) engines+=("$a") ;;
    *) echo "usage: $0 [--release] [socket|afpacket|afxdp|dpdk|ibverbs ...]" >&2; exit 2 ;;
    esac
done
[ ${#engines[@]} -gt 0 ] || engines=(socket afpacket afxdp dpdk ibverbs)
mkdir -p target/engines
for e in "${engines[@]}"; do
    case $e in
    socket) cfg=configs/host-loopback-udp.toml ;;
    afpacket) cfg=configs/veth-afpacket-rx.toml ;;
    afxdp) cfg=configs/veth-afxdp-rx.toml ;;
    dpdk) cfg=configs/vdev-dpdk-ring.toml ;;
    ibverbs) cfg=configs/vm-roce-server.toml ;;
    esac
    echo "building rtdaq with engine-$e ($profile, embedded $cfg)"
    RTDAQ_CONFIG=$cfg cargo build -q -p rtdaq "${args[@]}" --no-default-features \
        --features "engine-$e,platform-host"
    cp "${CARGO_TARGET_DIR:-target}/$profile/rtdaq" "target/engines/rtdaq-$e"
    "target/engines/rtdaq-$e" version | sed -n '1,3p'
done
# Leave target/$profile/rtdaq as the default build (engine-socket) for everything else.
if [ "${engines[*]}" != socket ]; then
    cargo build -q -p rtdaq "${args[@]}"
fi
