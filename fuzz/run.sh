#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Builds the fuzzers (jouled's protocol, the batch-size service's requests)
# with clang's libFuzzer and runs them for a bounded time (default 30 s in all). Usage: fuzz/run.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=${2:-build/fuzz}
mkdir -p "$out"
cxx=("${FUZZ_CXX:-clang++-14}" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
     -Iinclude -Isrc)
"${cxx[@]}" fuzz/protocol_fuzzer.cc src/daemon/protocol.cc src/device/gpu.cc src/common/error.cc -lfmt -o "$out/protocol_fuzzer"
"${cxx[@]}" fuzz/service_fuzzer.cc src/service/batch_size_service.cc src/service/sqlite_job_store.cc src/common/sqlite.cc \
  src/common/error.cc src/optimize/batch_size_optimizer.cc src/optimize/gaussian_ts.cc src/optimize/pruning.cc \
  src/service/postgres_job_store.cc src/optimize/cost.cc src/optimize/objective.cc -lfmt -lsqlite3 \
  $(pkg-config --cflags --libs libpqxx) -o "$out/service_fuzzer"
# Each fuzzer gets half the time.
for fuzzer in protocol_fuzzer service_fuzzer; do
  mkdir -p "$out/corpus_$fuzzer"
  [[ -d fuzz/corpus_$fuzzer ]] && cp -n fuzz/corpus_$fuzzer/* "$out/corpus_$fuzzer/" 2>/dev/null || true
  echo "== $fuzzer"
  "$out/$fuzzer" -max_total_time="$(((seconds + 1) / 2))" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 \
    "$out/corpus_$fuzzer" 2>&1 | tail -n 12
done
