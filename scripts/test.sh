#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Builds joule and runs the whole test suite (C++ unit, fake-NVML, RAPL
# fixture and CLI end-to-end tests). Needs scripts/install-deps.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${JOULE_BUILD_DIR:-build}
jobs=${JOULE_JOBS:-2}
# Compiles go through ccache where it is installed: a clean clone then reuses
# what an earlier run on this machine compiled (the build is half the run).
# Paths under the clone are made relative, so clones in other places share it.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# Debian's python3 (with python3-torch), whatever else is first on PATH.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=/usr/bin/python3 "${launcher[@]}"
cmake --build "$build_dir" -j "$jobs"
# Here the real PostgreSQL and Prometheus must start: a test that cannot
# start one fails instead of skipping.
JOULE_TESTS_REQUIRE_SERVERS=${JOULE_TESTS_REQUIRE_SERVERS:-1} ctest --test-dir "$build_dir" -j "$jobs" --output-on-failure
# The Debian package: built, lintian-checked, installed, used and purged.
scripts/package-test.sh "$build_dir"
# The pip artifacts: the sdist made here, then built and installed offline on
# a minimal bookworm that has only a compiler, CMake and Python (docs/install.md).
scripts/build-dist.sh --sdist-only --out "$build_dir/dist"
scripts/dist-test.sh "$build_dir/dist"
# Every fuzzer (fuzz/README.md) under libFuzzer, for a bounded time each.
fuzz/run.sh "${JOULE_FUZZ_SECONDS:-20}" "$build_dir/fuzz"
