#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# examples/libtorch/attribute.cc built on a GPU machine against the installed
# PyTorch's LibTorch (CUDA) and run there, read-only: its region edges as
# CUDA events on the GPU's clock (GpuEdgeClock with LibTorchCudaEvents), then
# the same loop with a sync at every edge, for their cost (issue 53, item 3).
#   scripts/build-dist.sh --python PYTHON      # here: dist/ (its sdist's third_party/ builds joule offline)
#   bench/gpu_libtorch_events.sh DIST_DIR OUT_DIR [SECONDS [WIDTHS]]   # there, carry=["dist"]
# WIDTHS (default "256 4096"): the example's hidden width; 256 is its own
# small step (~0.7 ms, host-bound), 4096 a step that keeps the GPU busy.
# Needs a Python with torch (JOULE_PYTHON, default python3), CMake >= 3.25,
# g++ >= 10 and the CUDA toolkit LibTorch's CMake files ask for (nvcc).
set -euo pipefail
dist=$1
out=$2
seconds=${3:-10}
widths=${4:-256 4096}
python=${JOULE_PYTHON:-python3}
mkdir -p "$out"
# The dependencies joule bundles for an offline build, from the sdist.
unpacked=$(mktemp -d)
tar xzf "$dist"/joule-*.tar.gz -C "$unpacked"
rm -rf third_party && cp -r "$unpacked"/joule-*/third_party third_party
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
build=${JOULE_BUILD_DIR:-/tmp/joule-libtorch-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DJOULE_BUNDLED_DEPS=ON -DJOULE_BUILD_TESTS=OFF \
  -DJOULE_BUILD_BENCH=OFF -DJOULE_BUILD_PYTHON=OFF -DJOULE_BUILD_PACKAGE=OFF -DJOULE_BUILD_EXAMPLES=ON \
  -DCMAKE_PREFIX_PATH="$torch_cmake" >"$out/configure.txt" 2>&1 || { tail -30 "$out/configure.txt"; exit 1; }
started=$EPOCHREALTIME
cmake --build "$build" -j "$(nproc)" --target joule_example_libtorch_attribute >"$out/build.txt" 2>&1 ||
  { grep -B2 -A8 "error" "$out/build.txt" | head -60; exit 1; }
echo "built in $(python3 -c "print(round($EPOCHREALTIME - $started))") s"
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
export JOULE_POWERCAP_ROOT=/nonexistent
for width in $widths; do
  for round in 1 2; do
    for mode in events sync; do
      echo "== width $width, $mode, round $round"
      "$build/bin/joule_example_libtorch_attribute" "$seconds" "$out/w$width-$mode-$round.json" "$mode" "$width" |
        tee "$out/w$width-$mode-$round.txt"
    done
  done
done
