#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# On a GPU machine, read-only (issue 53, item 2): joule installed as a user
# does (bench/gpu_install.sh), a sample response measured and kept in one
# process, a training loop attributed in another (it uses the kept response),
# then the kept file moved to another driver's name, as a driver update
# leaves it: the next attribution does not use it and warns.
#   scripts/build-dist.sh --python PYTHON            # here
#   JOULE_PYTHON=/opt/torch/.venv/bin/python bench/gpu_kept_response.sh dist OUT   # there, carry=["dist"]
set -euo pipefail
dist=$1
out=$2
mkdir -p "$out"
JOULE_PYTHON=${JOULE_PYTHON:-python3} bash bench/gpu_install.sh "$dist" /tmp/joule-venv >"$out/install.txt" 2>&1 ||
  { tail -20 "$out/install.txt"; exit 1; }
python=/tmp/joule-venv/bin/python
export JOULE_SAMPLE_RESPONSE_DIR="$out/kept"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv | tee "$out/gpus.csv"
"$python" bench/gpu_kept_response.py measure --seconds 30 | tee "$out/measure.txt"
"$python" bench/gpu_kept_response.py attribute --seconds 15 | tee "$out/attribute-kept.txt"
kept=$(ls "$JOULE_SAMPLE_RESPONSE_DIR"/*.json)
cp "$kept" "$out/kept.json"
mv "$kept" "${kept%--*}--1.0.json"  # the same GPU model, as if kept under an older driver
"$python" bench/gpu_kept_response.py attribute --seconds 15 | tee "$out/attribute-other-driver.txt"
