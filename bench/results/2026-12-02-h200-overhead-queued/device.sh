#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# The overhead bench with its steps timed alone and queued, depths 1 and 2, both models.
set -uo pipefail
out=/tmp/overhead-queued; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/overhead-queued.tgz" -C /tmp overhead-queued' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
timeout 400 $py bench/gpu_attribution_models.py --skip-attribution --models gpt,resnet50 --overhead-depths 1,2 \
  --repeats 8 --block 10 --out-dir "$out/run" 2>&1 | tee "$out/overhead.log"
