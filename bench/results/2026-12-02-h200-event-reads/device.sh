#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# GpuEdgeClock reading its events with one call each (after) against a query and a call (before):
# dist/before holds 07be76c's wheel, dist this change's; each in its own venv, runs interleaved.
set -uo pipefail
out=/tmp/event-reads; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/event-reads.tgz" -C /tmp event-reads' EXIT
for side in before after; do
  dist=dist; [[ $side == before ]] && dist=dist/before
  JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh "$dist" "/tmp/venv-$side" \
    >"$out/install-$side.log" 2>&1 || { tail "$out/install-$side.log"; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
for round in 1 2; do
  for side in before after; do
    echo "== $side, round $round"
    timeout 60 "/tmp/venv-$side/bin/python" bench/probes/edge_cost.py --n 50000 2>&1 | grep -i "edge\|runtime"
  done
done 2>&1 | tee "$out/edge-cost.txt"
for side in before after; do
  echo "== $side"
  timeout 75 "/tmp/venv-$side/bin/python" bench/probes/hook_parts.py --model gpt --depth 2 --split --blocks 6 \
    --block 5 --kinds "plain;joule, phases" 2>&1
done 2>&1 | tee "$out/gpt-depth2-split.txt"
