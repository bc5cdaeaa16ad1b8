#!/usr/bin/env bash
# The second lease (read-only), from the repository's root: the host-only probe with a C++ node
# pre-hook and with the collector off, and GPT depth-2 steps queued, plain against joule, 3 rounds.
set -uo pipefail
out=/tmp/host-alone-2; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/host-alone-2.tgz" -C /tmp host-alone-2' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
timeout 240 $py bench/probes/hook_host_cpu.py --events cuda --blocks 30 --block 20 --cpp-prehook --gc 2>&1 |
  tee "$out/cpu-gpt-cuda.txt"
timeout 200 $py bench/probes/hook_parts.py --model gpt --depth 2 --split --blocks 20 --block 5 --rounds 3 \
  --kinds "plain;joule, phases" 2>&1 | tee "$out/gpt-depth2-batch8-split.txt"
