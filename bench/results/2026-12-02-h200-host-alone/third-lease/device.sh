#!/usr/bin/env bash
# The third lease (read-only), from the repository's root: GPT depth-2 splits with the slowest
# queued run and the interpreter's collections per kind; the host-only probe with the collector off.
set -uo pipefail
out=/tmp/host-alone-3; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/host-alone-3.tgz" -C /tmp host-alone-3' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
nproc >"$out/host.txt"; lscpu | grep -i "model name\|mhz" >>"$out/host.txt"; uptime >>"$out/host.txt"
timeout 300 $py bench/probes/hook_parts.py --model gpt --depth 2 --split --blocks 12 --block 5 --rounds 3 \
  --kinds "plain;hooks + one node pre-hook;joule, phases" 2>&1 | tee "$out/gpt-depth2-batch8-split.txt"
timeout 200 $py bench/probes/hook_host_cpu.py --events cuda --blocks 30 --block 20 --gc \
  --kinds "empty hooks;joule, phases;plain (gc off);joule, phases (gc off)" 2>&1 | tee "$out/cpu-gpt-cuda-gc.txt"
uptime >>"$out/host.txt"
