#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# A recorded step's host time with no GPU in the way (the GPT on the CPU, real CUDA events on the
# idle GPU's stream), and the GPT's phases at batch 1 (host-bound) against batch 8 (GPU-bound).
set -uo pipefail
out=/tmp/host-alone; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/host-alone.tgz" -C /tmp host-alone' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
nproc >"$out/host.txt"; lscpu | grep -i "model name\|mhz" >>"$out/host.txt"
for events in cuda host; do
  timeout 150 $py bench/probes/hook_host_cpu.py --events $events --blocks 20 --block 20 2>&1 |
    tee "$out/cpu-gpt-$events.txt"
done
K="plain;empty hooks;hooks + one node pre-hook;hooks + GPU edges;joule, forward only;joule, phases"
for batch in 1 8; do
  timeout 150 $py bench/probes/hook_parts.py --model gpt --depth 2 --batch $batch --split --blocks 10 --block 5 \
    --rounds 2 --kinds "$K" 2>&1 | tee "$out/gpt-depth2-batch$batch-split.txt"
done
