#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# Where a recorded step's host time goes: by phase, with and without a sync each step, and by op.
set -uo pipefail
out=/tmp/host-split; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/host-split.tgz" -C /tmp host-split' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
nproc >"$out/host.txt"; lscpu | grep -i "model name\|mhz" >>"$out/host.txt"
K="plain;empty hooks;hooks + one node pre-hook;hooks + GPU edges;joule, forward only;joule, phases"
timeout 200 $py bench/probes/hook_parts.py --model resnet50 --depth 2 --split --blocks 12 --block 5 --rounds 2 \
  --kinds "$K" 2>&1 | tee "$out/resnet50-depth2-split.txt"
timeout 150 $py bench/probes/hook_parts.py --model gpt --depth 2 --split --blocks 12 --block 5 --rounds 2 \
  --kinds "plain;hooks + one node pre-hook;joule, phases" 2>&1 | tee "$out/gpt-depth2-split.txt"
timeout 90 $py bench/probes/hook_parts.py --model resnet50 --depth 2 --profile "hooks + one node pre-hook" \
  2>&1 | tee "$out/resnet50-depth2-profile-empty.txt"
timeout 90 $py bench/probes/hook_parts.py --model resnet50 --depth 2 --profile "joule, phases" \
  2>&1 | tee "$out/resnet50-depth2-profile-joule.txt"
