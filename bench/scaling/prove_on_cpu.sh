#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The scaling study's whole path without a GPU: the cpu variant (tiny ResNet-50 and GPT, 2 steps,
# 1 and 2 ranks as CPU processes with Gloo, 1 repeat) through run_scaling.sh, i.e. joule sweep
# (measuring two simulated GPUs: --backend sim), joule analyze and joule report.
#   bash bench/scaling/prove_on_cpu.sh [OUT_DIR]      # ~1 min on 2 cores; default /tmp/joule-scaling-cpu
# Needs build/bin/joule and a Python with torch (python3, else Debian's /usr/bin/python3:
# python3-torch); with torchvision (python3-torchvision) ResNet-50 is torchvision's, else
# ddp_train.py's own. torchrun is bench/scaling/cpu_proof's stand-in, which takes the spellings
# joule sweep uses on any torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/joule-scaling-cpu}
python=
for candidate in python3 /usr/bin/python3 /usr/bin/python3.11; do
  if "$candidate" -c "import torch" 2>/dev/null; then python=$(command -v "$candidate"); break; fi
done
[[ -n $python ]] || { echo "prove_on_cpu.sh: no Python with torch" >&2; exit 2; }
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
ln -s "$python" "$shim/python3"
cp bench/scaling/cpu_proof/torchrun "$shim/torchrun"
# The sweep's commands say python3 and torchrun: these, first on PATH.
export PATH=$shim:$PATH OMP_NUM_THREADS=1
rm -rf "$out"
time bash bench/scaling/run_scaling.sh --variant cpu --gpus 1,2 --deadline-s 300 "$out" -- --backend sim --sim count=2
