#!/usr/bin/env bash
# What ran on the lent H200 (read-only), from the repository's root; outputs under $OUT.
# GPT training (batch 64) against its leave-one-out truths, each run's GPU cap state read by the session.
set -uo pipefail
out=/tmp/gpt-train-cap; mkdir -p "$out"
trap 'tar czf "${OUT:-/tmp}/gpt-train-cap.tgz" -C /tmp gpt-train-cap' EXIT
JOULE_PYTHON=/opt/torch/.venv/bin/python bash bench/gpu_install.sh dist /tmp/joule-venv >"$out/install.log" 2>&1 ||
  { tail "$out/install.log"; exit 1; }
py=/tmp/joule-venv/bin/python
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv >"$out/gpu.csv"
timeout 480 $py bench/gpu_attribution_real_truths.py --models gpt --train --runs 2 --seconds 30 --loo-seconds 2.5 \
  --gpt-batch 64 --loo-together --response bench/results/2026-12-01-h200-uncapped/responses/elementwise.json \
  --out-dir "$out/gpt-train" 2>&1 | tail -60 | tee "$out/run.log"
for r in "$out"/gpt-train/gpt-run?/result.json; do
  $py - "$r" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "power_capped_share":
                print(sys.argv[1].split("/")[-2], path, k, v)
            elif k == "notes" and isinstance(v, list):
                for n in v:
                    if "power cap" in n:
                        print(sys.argv[1].split("/")[-2], path, "note:", n[:90])
            else:
                walk(v, path + "/" + k)
    elif isinstance(x, list):
        for i, v in enumerate(x[:8]):
            walk(v, path + f"[{i}]")
walk(d)
PY
done 2>&1 | sort -u | head -20 | tee "$out/cap.txt"
