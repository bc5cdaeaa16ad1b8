#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
set -uo pipefail
out=/tmp/event-cost; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/event-cost.tgz" -C /tmp event-cost' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
timeout 200 $py bench/probes/event_gpu_cost.py 2>&1 | tee "$out/event-gpu-cost.txt"
