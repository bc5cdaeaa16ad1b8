#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Loaded and idle windows of a young monitor against a continuous counter
# reference (issue 54), on a GPU machine, read-only (no GPU setting changes).
#   scripts/build-dist.sh --python PYTHON            # here: dist/ (PYTHON of the GPU machine's version)
#   bench/gpu_window_bias.sh DIST_DIR OUT_DIR [REPEATS [CASES]]   # there, carry=["dist"]
#   python3 bench/window_bias_analysis.py OUT_DIR/*.json          # anywhere
# Installs joule from DIST_DIR into /tmp/joule-venv (bench/gpu_install.sh, as
# a user does), then per repeat the CASES (default "nccl gloo single single1"):
# NCCL and Gloo with one rank per GPU (joule.distributed), one process with a
# joule.Monitor over every GPU, and one process with a Monitor over GPU 0
# alone; each writes OUT_DIR/CASE-R.json (bench/gpu_window_bias.py).
set -uo pipefail
dist=$1
out=$2
repeats=${3:-1}
cases=${4:-nccl gloo single single1}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent
bench/gpu_install.sh "$dist" /tmp/joule-venv 2>&1 | tee "$out/install.txt" || exit 1
py=/tmp/joule-venv/bin/python
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
quiet() { grep -v "^W\|OMP_NUM_THREADS\|^\*\*\*\*"; }
for r in $(seq "$repeats"); do
  for c in $cases; do
    echo "== $c, run $r"
    case $c in
      nccl | gloo) "$py" -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/gpu_window_bias.py \
                     --backend "$c" --out "$out/$c-$r.json" 2>&1 | quiet ;;
      single) "$py" bench/gpu_window_bias.py --single --out "$out/single-$r.json" 2>&1 | quiet ;;
      single1) "$py" bench/gpu_window_bias.py --single --gpus 0 --out "$out/single1-$r.json" 2>&1 | quiet ;;
    esac
  done
done
