#!/usr/bin/env bash
# Builds the protocol fuzzer with clang's libFuzzer and runs it for a bounded
# time (default 30 s). Usage: fuzz/run.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=${2:-build/fuzz}
mkdir -p "$out/corpus"
cp -n fuzz/corpus/* "$out/corpus/" 2>/dev/null || true
"${FUZZ_CXX:-clang++-14}" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude \
  fuzz/protocol_fuzzer.cc src/daemon/protocol.cc -lfmt -o "$out/protocol_fuzzer"
"$out/protocol_fuzzer" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" 2>&1 | tail -n 12
