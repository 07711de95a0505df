#!/usr/bin/env bash
# Runs the carried rtdaq-gpu test binaries and the benchmark on the GPU host (no Rust
# toolchain there). Build them here first:
#   CARGO_TARGET_DIR=target/h-gpu cargo test -p rtdaq-gpu --release --no-run
#   CARGO_TARGET_DIR=target/h-gpu cargo build -p rtdaq-gpu --release --example gpu_bench
#   hal/gpu/collect-gpu-carry.sh          # copies them into gpu-carry/ (git-ignored)
# then, from the repository root on the GPU host (the `run` tool with carry ["gpu-carry"]):
#   bash hal/gpu/run-on-gpu-host.sh       # log in $OUT/log
set -u
OUT=${OUT:-/tmp/rtdaq-gpu-out}
mkdir -p "$OUT"
{
  echo "== host"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  uname -r
  libs=$( (ldconfig -p 2>/dev/null | awk '/lib(cuda|nvrtc|cufft|cublas)\.so/ {print $NF}'
           find /usr /opt /lib /lib64 -xdev \( -name 'libcuda.so*' -o -name 'libnvrtc*.so*' \
             -o -name 'libcufft.so*' -o -name 'libcublas.so*' \) 2>/dev/null) | sort -u)
  echo "$libs"
  dirs=$(echo "$libs" | xargs -r -n1 dirname | sort -u | tr '\n' ':')
  export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:-}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for t in unit gpu; do
    echo "== test binary $t"
    timeout 300 "gpu-carry/$t" --test-threads=1 --nocapture
    echo "rc=$?"
  done
  echo "== gpu_bench"
  timeout 240 gpu-carry/gpu_bench
  echo "rc=$?"
} 2>&1 | tee "$OUT/log"
