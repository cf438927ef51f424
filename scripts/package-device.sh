#!/usr/bin/env bash
# Gathers what the device machine needs to run umlab's cuda backend into
# .device/: the umlab command, the GPU tests and tools, and the shared
# libraries they load that the device image may lack (Abseil, zstd, CUDA
# runtime and CUPTI). Binaries are stripped to keep the carried tree small.
#   scripts/package-device.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=.device
rm -rf "$out"
mkdir -p "$out/lib"
for binary in cli/umlab tests/cuda_backend_test backends/cuda/umlab_cuda_calibrate \
              backends/cuda/umlab_cuda_probe backends/cuda/umlab_remote_probe \
              backends/cuda/umlab_room_probe backends/cuda/umlab_call_overlap_probe \
              backends/cuda/umlab_cuda_cluster; do
  cp "$build/$binary" "$out/"
  strip "$out/$(basename "$binary")"
done
cp bench/cuda_matrix.sh bench/fidelity.sh "$out/"
# SnuRHAC on every GPU of the machine (docs/snurhac.md, "The cuda run").
cp bench/cuda_cluster.sh "$out/cluster.sh"
# The PyTorch launcher and its native library (PYTHONPATH=.device/python).
mkdir -p "$out/python"
cp -r "$build/python/umlab_torch" "$out/python/"
strip "$out/python/umlab_torch/libumlab_torch.so"
for binary in "$out"/umlab "$out"/cuda_backend_test "$out"/umlab_cuda_cluster \
              "$out/python/umlab_torch/libumlab_torch.so"; do
  ldd "$binary" | awk '/=> \// {print $3}' |
    grep -E 'libabsl|libzstd|liburing|libyaml-cpp|libcudart|libcupti' | xargs -r -I{} cp -L {} "$out/lib/"
done
# .gitignore ignores .device/, so it never shows as untracked.
du -sh "$out"
