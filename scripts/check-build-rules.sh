#!/usr/bin/env bash
# Checks the build-time rules of the appliance binary (app/build.rs):
# exactly one engine and one platform feature, and the embedded config validated at build
# time with the same messages as `rtdaq config check`, and no test hook in a release build.
# Each case must fail with its message.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
fail=0
expect_build_error() { # name, expected substring, cargo args...
    local name=$1 want=$2; shift 2
    local out
    out=$("$@" 2>&1)
    local rc=$?
    if [ $rc -eq 0 ]; then
        echo "FAIL $name: build succeeded, expected an error containing: $want"; fail=1
    elif ! grep -qF -- "$want" <<<"$out"; then
        echo "FAIL $name: error does not mention: $want"; echo "$out" | tail -20; fail=1
    else
        echo "ok   $name"
    fi
}
CHECK=(cargo check -q -p rtdaq --target-dir target/build-rules)

expect_build_error "no engine" "no engine selected" \
    "${CHECK[@]}" --no-default-features --features platform-host
expect_build_error "two engines" "more than one engine selected" \
    "${CHECK[@]}" --no-default-features --features engine-socket,engine-dpdk,platform-host
expect_build_error "no platform" "no platform selected" \
    "${CHECK[@]}" --no-default-features --features engine-socket
expect_build_error "engine differs from the config" 'engine.kind = "socket" but this binary is built with engine-dpdk' \
    "${CHECK[@]}" --no-default-features --features engine-dpdk,platform-host
expect_build_error "missing config file" "cannot read" \
    env RTDAQ_CONFIG=configs/does-not-exist.toml "${CHECK[@]}"
expect_build_error "GPU config without the gpu feature" "built without \`--features gpu\`" \
    env RTDAQ_CONFIG=configs/host-loopback-udp-gpu.toml "${CHECK[@]}"
expect_build_error "UCX egress config without the ucx feature" "built without \`--features ucx\`" \
    env RTDAQ_CONFIG=configs/host-udp-egress-ucx.toml "${CHECK[@]}"
expect_build_error "PSRDADA ring config without the dada feature" "built without \`--features dada\`" \
    env RTDAQ_CONFIG=configs/host-udp-dada-ring.toml "${CHECK[@]}"
# The tests' fault hooks never go into a release build (app/runtime/src/test_hooks.rs); a
# test build takes them.
expect_build_error "test hooks in a release build" "the \`test-hooks\` feature is for test builds only" \
    "${CHECK[@]}" --release --features test-hooks
if "${CHECK[@]}" --features test-hooks >/dev/null 2>&1; then
    echo "ok   test hooks in a test build"
else
    echo "FAIL test hooks in a test build: cargo check --features test-hooks failed"; fail=1
fi

# Every invalid fixture fails the build with the same key path `rtdaq config check` reports.
for f in tests/fixtures/config-invalid/*.toml; do
    want=$(sed -n 's/^# expect-path: //p' "$f" | head -1)
    expect_build_error "invalid config $(basename "$f")" "$want" \
        env RTDAQ_CONFIG="$f" "${CHECK[@]}"
done

# Every shipped config builds into a binary of the engine/platform it names: configs/*.toml
# and the board examples configs/<board>/*.toml (built with platform-<board>). A config with
# GPU memory or a GPU stage is built with the `gpu` feature too, one with a UCX egress sink
# with the `ucx` feature, one with a PSRDADA ring with the `dada` feature.
for f in configs/*.toml configs/*/*.toml; do
    [ -f "$(dirname "$f")/Cargo.toml" ] && continue # configs/schema: the config crate
    read -r kind plat gpu < <(python3 -c 'import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
gpu = bool(c.get("gpu_stages")) or any(r.get("kind") in ("host_pinned", "device") for r in c.get("memory_regions", []))
ucx = any(e.get("protocol") == "ucx" for e in c.get("egress", []))
dada = bool(c.get("dada_rings"))
print(c["engine"]["kind"], c["platform"], ("",",gpu")[gpu] + ("",",ucx")[ucx] + ("",",dada")[dada])' "$f")
    name=${f#configs/}
    if [[ $name == */* && ${name%%/*} != "$plat" ]]; then
        echo "FAIL $name: a config under configs/${name%%/*}/ must say platform = \"${name%%/*}\""; fail=1
        continue
    fi
    if ! grep -q "^platform-$plat *=" app/Cargo.toml; then
        echo "skip $name: platform-$plat is not a feature of this tree"
        continue
    fi
    if RTDAQ_CONFIG="$f" "${CHECK[@]}" --no-default-features \
        --features "engine-$kind,platform-$plat$gpu" >/dev/null 2>&1; then
        echo "ok   $name builds with engine-$kind,platform-$plat$gpu"
    else
        echo "FAIL $name does not build with engine-$kind,platform-$plat$gpu"; fail=1
    fi
done
exit $fail
