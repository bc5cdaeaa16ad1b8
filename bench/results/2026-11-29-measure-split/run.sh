#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Window cost before (0d994cd) and after the split of src/measure: BEFORE and
# AFTER are build directories; rounds alternate them. Output beside this script.
set -euo pipefail
before=${1:?before build dir}; after=${2:?after build dir}; rounds=${3:-2}
out=$(dirname "$0")
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
