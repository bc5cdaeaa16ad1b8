#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Builds the fuzzers with clang's libFuzzer (ASan and UBSan on; an exception
# that escapes a target aborts it, which libFuzzer reports as a crash) and
# runs each for a bounded time. fuzz/README.md says what each one drives and
# what it has found.
# Usage: fuzz/run.sh [SECONDS_PER_FUZZER] [BUILD_DIR] [FUZZER...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
out=${2:-build/fuzz}
shift $(($# < 2 ? $# : 2))
mkdir -p "$out"
compiler=("${FUZZ_CXX:-clang++-14}")
# Through ccache where it is installed (scripts/test.sh: a clean clone reuses
# an earlier run's compiles; it links straight through).
command -v ccache >/dev/null && compiler=(ccache "${compiler[@]}")
cxx=("${compiler[@]}" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
     -Iinclude -Isrc)

# Writes one line per source of fuzzer NAME: the command that compiles it
# into $out/obj/NAME/; words after NAME are its sources (*.cc), link flags
# (-l, -L) and compile flags (the rest).
compile_commands() {
  local name=$1 word
  shift
  local sources=("fuzz/$name.cc") flags=()
  for word in "$@"; do
    case $word in
      *.cc) sources+=("$word") ;;
      -l* | -L*) ;;
      *) flags+=("$word") ;;
    esac
  done
  mkdir -p "$out/obj/$name"
  for word in "${sources[@]}"; do
    printf '%q ' "${cxx[@]}" "${flags[@]}" -c "$word" -o "$out/obj/$name/${word//\//_}.o"
    printf '\n'
  done
}

link_fuzzer() {
  local name=$1 word
  shift
  local links=()
  for word in "$@"; do
    case $word in
      -l* | -L*) links+=("$word") ;;
    esac
  done
  "${cxx[@]}" "$out/obj/$name"/*.o "${links[@]}" -o "$out/$name"
}

# One line per fuzzer: its name (fuzz/NAME.cc, seeds in fuzz/corpus_NAME),
# then the sources and libraries it links.
declare -A fuzzer_sources=(
  [protocol_fuzzer]="src/daemon/protocol.cc src/device/gpu.cc src/common/error.cc src/common/utf8.cc -lfmt"
  [service_fuzzer]="src/service/request_router.cc src/service/http_request.cc src/service/tokens.cc
    src/service/batch_size_service.cc src/service/request_input.cc src/service/sqlite_job_store.cc src/common/sqlite.cc src/common/utf8.cc
    src/common/version.cc -DJOULE_VERSION=\"fuzz\"
    src/common/error.cc src/optimize/batch_size_optimizer.cc src/optimize/gaussian_ts.cc src/optimize/pruning.cc
    src/service/postgres_job_store.cc src/optimize/cost.cc src/optimize/objective.cc -lfmt -lsqlite3 -lcrypto
    $(pkg-config --cflags --libs libpqxx)"
  [trace_fuzzer]="src/simulate/trace.cc src/simulate/cluster_trace.cc src/common/csv.cc src/common/input_file.cc
    src/common/utf8.cc src/common/error.cc -lfmt"
  [cli_fuzzer]="src/cli/app.cc src/cli/number_options.cc src/cli/carbon_options.cc src/analyze/units_format.cc
    src/simulate/cluster_trace.cc src/device/sim/sim_gpu.cc src/device/gpu.cc src/common/csv.cc src/common/input_file.cc src/common/utf8.cc
    src/common/error.cc src/common/version.cc -DJOULE_VERSION=\"fuzz\" -lfmt"
  [sweep_file_fuzzer]="src/sweep/sweep_file.cc src/analyze/sweep_analysis.cc src/analyze/analysis.cc
    src/optimize/cost.cc src/optimize/objective.cc src/common/input_file.cc src/common/utf8.cc src/common/error.cc
    -lfmt -lsqlite3"
)
fuzzers=(protocol_fuzzer service_fuzzer trace_fuzzer sweep_file_fuzzer cli_fuzzer)
(($# > 0)) && fuzzers=("$@")

# Every source of every fuzzer compiled side by side, as many at a time as
# there are cores (one clang process per fuzzer left cores idle for minutes);
# then each fuzzer linked.
rm -rf "$out/obj"
for fuzzer in "${fuzzers[@]}"; do
  # shellcheck disable=SC2086  # the sources are words
  compile_commands "$fuzzer" ${fuzzer_sources[$fuzzer]}
done > "$out/compile_commands.sh"
xargs -P "$(nproc)" -d '\n' -I{} bash -c {} < "$out/compile_commands.sh"
for fuzzer in "${fuzzers[@]}"; do
  # shellcheck disable=SC2086
  link_fuzzer "$fuzzer" ${fuzzer_sources[$fuzzer]}
done
for fuzzer in "${fuzzers[@]}"; do
  mkdir -p "$out/corpus_$fuzzer"
  [[ -d fuzz/corpus_$fuzzer ]] && cp -n fuzz/corpus_$fuzzer/* "$out/corpus_$fuzzer/" 2>/dev/null || true
  echo "== $fuzzer"
  dict=()  # words the fuzzer should try (fuzz/NAME.dict), where it has some
  [[ -f fuzz/$fuzzer.dict ]] && dict=(-dict="fuzz/$fuzzer.dict")
  "$out/$fuzzer" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
    "$out/corpus_$fuzzer" 2>&1 | tail -n 12
done
