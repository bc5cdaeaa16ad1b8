#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The framework examples (examples/hf_trainer, lightning, accelerate) on a GPU
# machine, read-only (observer: no power limit or clock is changed): energy
# against `joule measure` around the same run, overhead per step with and
# without joule's integration (interleaved runs), what each logged.
#   bench/carry.sh .device-carry                          # here, after building
#   bash bench/gpu_frameworks.sh .device-carry OUT_DIR    # on the GPU machine (~7 min on one H100)
# Extra arguments go to bench/gpu_frameworks.py (e.g. --examples lightning
# --measure-seconds 20). Needs the machine's PyTorch, transformers, Lightning,
# Accelerate and TensorBoard (no downloads: configs only, random data).
# Writes OUT_DIR/frameworks.json and OUT_DIR/summary.md; exits nonzero only
# when a run crashed (missed targets are in the summary).
set -uo pipefail
carry=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
shift 2
export PYTHONUNBUFFERED=1 JOULE_POWERCAP_ROOT=/nonexistent TOKENIZERS_PARALLELISM=false
# The bundled tables (carbon intensity) from this checkout: nothing is installed there.
export JOULE_DATA_DIR=$PWD/data
# No internet there: nothing may try the Hugging Face Hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
# The module from the sources the carried libjoule.a was built from (carry.sh keeps them).
source_dir=.
[[ -d "$carry/source" ]] && source_dir="$carry/source"
bench/build_python_module_on_device.sh "$carry" /tmp/pkg/joule "$source_dir" > "$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/pkg${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=index,name,power.limit,driver_version --format=csv | tee "$out/gpus.csv"
python3 -c "import joule, joule.hf, joule.lightning; print('joule from', joule.__file__)" || exit 1
# The carried lib/ goes on LD_LIBRARY_PATH for the joule binary alone (gpu_frameworks.py --lib).
python3 bench/gpu_frameworks.py --joule "$carry/bin/joule" --lib "$carry/lib" --out-dir "$out" "$@"
