#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# The attribution's power-cap note on a real GPU, and where the GPT's depth-2 host time goes.
set -uo pipefail
out=/tmp/cap-gpt; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/cap-gpt.tgz" -C /tmp cap-gpt' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
timeout 60 $py bench/probes/cap_note.py --seconds 8 --timeline "$out/cap-note-timeline.csv" 2>&1 |
  tee "$out/cap-note.txt"
K="plain;hooks + GPU edges;joule, forward only;joule, phases;joule, phases, host edges"
timeout 240 $py bench/probes/hook_parts.py --model gpt --depth 2 --split --blocks 10 --block 5 --rounds 2 \
  --kinds "$K" 2>&1 | tee "$out/gpt-depth2-split.txt"
timeout 120 $py bench/probes/hook_cost.py --depth 2 --blocks 3 --block 10 2>&1 | tee "$out/gpt-depth2-cprofile.txt"
