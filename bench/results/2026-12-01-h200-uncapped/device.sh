#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# Usage: [BATCHES=64,...] bench/results/2026-12-01-h200-uncapped/device.sh [BATCH] [SEED] [ROUNDS]
# (no BATCH: the cap per batch, the two responses, then the largest batch under the cap)
set -uo pipefail
export CUDA_DEVICE_ORDER=PCI_BUS_ID
out=/tmp/uncapped; mkdir -p "$out"
# $OUT takes few files and shallow folders: everything goes back as one archive.
trap 'tar czf "${OUT:-/tmp}/uncapped.tgz" -C /tmp uncapped' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit,temperature.gpu --format=csv >"$out/gpu.csv"
batch=${1:-}
if [[ -z $batch ]]; then
  timeout 120 $py bench/probes/cap_by_batch.py --batches "${BATCHES:-64,128,256,512,1024}" \
    --out "$out/cap-by-batch.json" 2>&1 | tee "$out/cap-by-batch.log"
  timeout 120 $py bench/probes/capped_response.py --seconds 30 --out-dir "$out/responses" 2>&1 |
    tee "$out/capped-response.log"
  batch=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["largest_uncapped_batch"])' \
    "$out/cap-by-batch.json")
fi
echo "batch $batch"
[[ $batch =~ ^[0-9]+$ ]] || exit 1
response=()  # measured by the harness unless the probe measured it
[[ -f $out/responses/elementwise.json ]] && response=(--response "$out/responses/elementwise.json")
timeout 420 $py bench/gpu_attribution_real_truths.py --models resnet50 --resnet-batch "$batch" --runs 1 \
  --first-run "${2:-1}" --seconds 30 --loo-seconds 3 --loo-repeats "${3:-4}" --loo-together \
  "${response[@]}" --out-dir "$out/resnet-inference-b$batch" 2>&1 | tee "$out/run-b$batch-s${2:-1}.log"
