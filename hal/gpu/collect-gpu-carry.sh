#!/usr/bin/env bash
# Copies the release test binaries and gpu_bench of rtdaq-gpu into gpu-carry/ (repo root,
# git-ignored through .git/info/exclude) for hal/gpu/run-on-gpu-host.sh.
set -eu
cd "$(git rev-parse --show-toplevel)"
T=target/h-gpu/release
mkdir -p gpu-carry
grep -qx '/gpu-carry/' .git/info/exclude 2>/dev/null || echo '/gpu-carry/' >> .git/info/exclude
newest() { ls -t $1 2>/dev/null | grep -v '\.d$' | head -1; }
cp "$(newest "$T/deps/rtdaq_gpu-*")" gpu-carry/unit
cp "$(newest "$T/deps/gpu-*")" gpu-carry/gpu
cp "$T/examples/gpu_bench" gpu-carry/gpu_bench
ls -la gpu-carry
