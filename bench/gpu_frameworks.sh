#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The framework examples (examples/hf_trainer, lightning, accelerate) on a GPU
# machine, read-only (observer: no power limit or clock is changed): energy
# against `joule measure` around the same run, overhead per step with and
# without joule's integration (interleaved runs), what each logged.
#   scripts/build-dist.sh --python ~/.pyenv/versions/3.12.1/bin/python3   # here: dist/, with a wheel for
#                                                  # the GPU machine's Python (3.12 there)
#   bash bench/gpu_frameworks.sh dist OUT_DIR     # on the GPU machine, carry=["dist"] (~7 min on one H100)
# joule is installed the way a user installs it, by bench/gpu_install.sh
# DIST_DIR /tmp/joule-venv (the wheel, else the sdist built there; a venv
# seeing the machine's PyTorch); the examples and `joule measure` run from that
# venv (joule/bin/joule itself, not the venv's `joule` script, whose Python
# start-up would shift the timeline against the examples' clock). Extra arguments go to bench/gpu_frameworks.py (e.g. --examples
# lightning --measure-seconds 20). Needs the machine's PyTorch, transformers,
# Lightning, Accelerate and TensorBoard (no downloads: configs only, random
# data). Writes OUT_DIR/install.txt, OUT_DIR/frameworks.json and
# OUT_DIR/summary.md; exits nonzero only when the install or a run crashed
# (missed targets are in the summary).
set -uo pipefail
dist=$1
mkdir -p "$2"
out=$(cd "$2" && pwd)
shift 2
venv=/tmp/joule-venv
bench/gpu_install.sh "$dist" "$venv" 2>&1 | tee "$out/install.txt" || exit 1
export PATH=$venv/bin:$PATH
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent TOKENIZERS_PARALLELISM=false
# No internet there: nothing may try the Hugging Face Hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
"$venv/bin/python" -c "import joule, joule.hf, joule.lightning; print('joule from', joule.__file__)" || exit 1
# joule measure: the program the installed package carries (gpu_frameworks.py's default --joule).
"$venv/bin/python" bench/gpu_frameworks.py --out-dir "$out" "$@"
