#!/bin/sh
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Side by side: before (dd7a00a, /tmp/anch-base/build) and after (76ab83c's src, /work/main/build),
# alternated three rounds; each round also runs 10 s of windows paced at 1 kHz (sleeping and spinning).
OUT=/work/main/bench/results/2026-11-26-anchor-refresh
for round in ${ROUNDS:-1 2 3}; do
  for side in before after; do
    if [ $side = before ]; then B=/tmp/anch-base/build/bin; else B=/work/main/build/bin; fi
    f=$OUT/round$round-$side.txt
    { echo "# $side ($B), round $round, $(date -u +%H:%M:%S), load: $(cut -d' ' -f1-3 /proc/loadavg)"
      echo "## joule_bench_monitor --benchmark_filter=BM_MonitorWindow --benchmark_repetitions=3"
      $B/joule_bench_monitor --benchmark_filter=BM_MonitorWindow --benchmark_repetitions=3 2>&1
      echo "## joule_bench_window_cost --windows 1000000 --paced-s 10"
      $B/joule_bench_window_cost --windows 1000000 --paced-s 10 2>&1
    } > $f
  done
done
