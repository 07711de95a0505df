#!/usr/bin/env bash
# build-engines.sh: builds one rtdaq binary per packet engine (the engine is a compile-time
# feature), each with a shipped config of that engine embedded, into target/engines/:
#   target/engines/rtdaq-<engine>    (e.g. rtdaq-socket, rtdaq-dpdk, rtdaq-ibverbs)
# The engines are discovered, not listed here: each engine crate's Cargo.toml names its
# engine (the `engine-<engine>` feature of rtdaq) and the config to embed:
#   [package.metadata.rtdaq]
#   engine = "socket"
#   build-config = "configs/host-loopback-udp.toml"
# (`cargo metadata --no-deps` reads them; needs jq. The ibverbs engine needs libibverbs-dev
# and librdmacm-dev, dpdk needs DPDK, afxdp libelf.)
# They share one target directory (cargo keeps every feature set's artifacts apart), so only
# the rtdaq crate and the engine crate build again per engine.
# Usage: scripts/build-engines.sh [--release] [ENGINE...]     (default: every engine, debug)
# Honours CARGO_TARGET_DIR (the binaries still go to target/engines/).
set -euo pipefail
cd "$(dirname "$0")/.."

# engine -> config to embed, from the engine crates' [package.metadata.rtdaq].
declare -A config=()
known=()
while read -r engine cfg; do
    if [ -z "$engine" ] || [ -z "$cfg" ] || [ ! -f "$cfg" ]; then
        echo "$0: bad [package.metadata.rtdaq] (engine \"$engine\", build-config \"$cfg\": not a file)" >&2
        exit 1
    fi
    config[$engine]=$cfg
    known+=("$engine")
done < <(cargo metadata --no-deps --format-version 1 |
    jq -r '.packages[] | .metadata.rtdaq // empty
        | "\(.engine // "") \(.["build-config"] // "")"')
if [ ${#known[@]} -eq 0 ]; then
    echo "$0: no engine crate has [package.metadata.rtdaq] (engine, build-config)" >&2
    exit 1
fi

profile=debug
args=()
engines=()
for a in "$@"; do
    if [ "$a" = --release ]; then
        profile=release
        args+=(--release)
    elif [ -n "$a" ] && [ -n "${config[$a]+set}" ]; then
        engines+=("$a")
    else
        (IFS='|'; echo "usage: $0 [--release] [${known[*]} ...]" >&2)
        exit 2
    fi
done
[ ${#engines[@]} -gt 0 ] || engines=("${known[@]}")
mkdir -p target/engines
for e in "${engines[@]}"; do
    cfg=${config[$e]}
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
