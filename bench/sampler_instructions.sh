#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The sampler's own work per tick, in instructions (callgrind counts are
# repeatable whatever else the machine does): the same 3 s run at 100 Hz with
# 0 and with 8 simulated GPUs; the difference divided by the ticks is the
# cost of sampling 8 GPUs once. Usage: bench/sampler_instructions.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for gpus in 0 8; do
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg$gpus" "$build/bin/joule_bench_sampler_cost" \
    --backend sim --gpus $gpus --hz 100 --seconds 3 >"$tmp/out$gpus" 2>"$tmp/err$gpus"
done
ir() { grep -o 'refs: *[0-9,]*' "$tmp/err$1" | tr -dc '0-9'; }
ticks=$(grep -o 'ticks=[0-9]*' "$tmp/out8" | cut -d= -f2)
echo "instructions, 0 GPUs: $(ir 0); 8 GPUs: $(ir 8); ticks: $ticks"
echo "per tick for 8 GPUs: $(( ($(ir 8) - $(ir 0)) / ticks )) instructions"
