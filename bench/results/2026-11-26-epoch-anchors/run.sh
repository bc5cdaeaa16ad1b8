#!/bin/sh
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Side by side: before (7608bc7, /tmp/wt-before/build) and after (f350c4c, /work/main/build), alternated twice.
OUT=/work/main/bench/results/2026-11-26-epoch-anchors
for round in ${ROUNDS:-1 2}; do
  for side in before after; do
    if [ $side = before ]; then B=/tmp/wt-before/build/bin; else B=/work/main/build/bin; fi
    f=$OUT/round$round-$side.txt
    { echo "# $side ($B), round $round, $(date -u +%H:%M:%S), load: $(cut -d' ' -f1-3 /proc/loadavg)"
      echo "## joule_bench_monitor --benchmark_filter=BM_MonitorWindow --benchmark_repetitions=3"
      $B/joule_bench_monitor --benchmark_filter=BM_MonitorWindow --benchmark_repetitions=3 2>&1
      echo "## joule_bench_window_cost --windows 1000000 --paced-s 0"
      $B/joule_bench_window_cost --windows 1000000 --paced-s 0 2>&1
      echo "## joule_bench_window_cost --windows 1000000 --paced-s 0 --backend fake-rocm"
      $B/joule_bench_window_cost --windows 1000000 --paced-s 0 --backend fake-rocm 2>&1
    } > $f
  done
done
# fake-rocm-alternated.txt: the third command alone, before and after alternated 10 times
