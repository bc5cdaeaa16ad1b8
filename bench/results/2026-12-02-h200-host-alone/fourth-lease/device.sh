#!/usr/bin/env bash
# The fourth lease (read-only), from the repository's root: the overhead bench that read +3.53% for
# GPT depth 2 queued (section 16p), beside a split of the same lease that reports the host's time.
set -uo pipefail
out=/tmp/host-alone-4; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/host-alone-4.tgz" -C /tmp host-alone-4' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
timeout 200 $py bench/probes/hook_parts.py --model gpt --depth 2 --split --blocks 12 --block 5 --rounds 2 \
  --kinds "plain;joule, phases" 2>&1 | tee "$out/gpt-depth2-batch8-split.txt"
timeout 300 $py bench/gpu_attribution_models.py --skip-attribution --models gpt --overhead-depths 2 \
  --repeats 8 --block 10 --out-dir "$out/run" 2>&1 | tee "$out/overhead.log"
