#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# The window cost of two builds side by side (bench/README.md section 1b):
# bench/window_cost_side_by_side.sh BEFORE_BUILD AFTER_BUILD ROUNDS OUT_DIR
# Each build needs --target fake_nvml joule_bench_monitor joule_bench_window_cost.
# Rounds alternate the builds, so that the machine's drift falls on both;
# each round's output is OUT_DIR/roundN-{before,after}.txt.
set -euo pipefail
before=${1:?before build dir}; after=${2:?after build dir}; rounds=${3:-3}; out=${4:?output dir}
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for side in before after; do
    dir=$before; [[ $side == after ]] && dir=$after
    {
      "$dir/bin/joule_bench_monitor" --benchmark_filter=BM_MonitorWindow --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true
      "$dir/bin/joule_bench_window_cost" --windows 1000000 --paced-s 0
      "$dir/bin/joule_bench_window_cost" --windows 1000000 --paced-s 0 --backend fake
    } > "$out/round$r-$side.txt" 2>&1
  done
done
