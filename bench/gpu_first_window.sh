#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The first window after a monitor is made, against the energy counters, on
# a GPU machine, read-only (no GPU setting changes). bench/carry.sh first, here.
#   bench/gpu_first_window.sh CARRY_DIR OUT_DIR [REPEATS [SOURCE_DIR]]
# NCCL with one rank per GPU, Gloo with two ranks per GPU, and one process
# with a plain joule.Monitor over every GPU; REPEATS (default 2) of each.
set -uo pipefail
carry=$(cd "$1" && pwd)
out=$2
repeats=${3:-2}
src=${4:-.}  # where libjoule.a's sources are (build_python_module_on_device.sh)
mkdir -p "$out"
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent
bench/build_python_module_on_device.sh "$carry" /tmp/pkg/joule "$src" > "$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/pkg
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
quiet() { grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*"; }
for r in $(seq "$repeats"); do
  echo "== NCCL, $gpus rank(s), run $r"
  torchrun --standalone --nproc-per-node "$gpus" bench/gpu_first_window.py --backend nccl --out "$out/nccl-$r.json" 2>&1 | quiet
  echo "== Gloo, $((2 * gpus)) ranks, run $r"
  torchrun --standalone --nproc-per-node $((2 * gpus)) bench/gpu_first_window.py --backend gloo --out "$out/gloo-$r.json" 2>&1 | quiet
  echo "== NCCL, $gpus rank(s), the leader primes its monitor, run $r"
  torchrun --standalone --nproc-per-node "$gpus" bench/gpu_first_window.py --backend nccl --prime --out "$out/nccl-prime-$r.json" 2>&1 | quiet
  echo "== one process, joule.Monitor over $gpus GPU(s), run $r"
  python3 bench/gpu_first_window.py --single --out "$out/single-$r.json" 2>&1 | quiet
done
