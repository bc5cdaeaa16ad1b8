#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Assembles what a GPU machine needs from this build beyond the user's artifact:
# bench/carry.sh CARRY_DIR [BUILD_DIR]  (CARRY_DIR, e.g. .device-carry, is git-ignored)
#   bin/   the C++ bench programs (joule_bench_accuracy, joule_bench_monitor,
#          joule_bench_sampler_cost) and this build's own joule, with what the
#          prebuilt wheel leaves out (joule exporter's endpoint, joule measure
#          --mpi, the service): only for those (gpu_exporter.py,
#          gpu_distributed.sh's --mpi part)
#   lib/   their shared libraries (all but libc, libm, libstdc++, libgcc_s)
#   fake/  the fake libnvidia-ml.so.1 (side-by-side runs against the fake driver)
# joule itself (the Python module, the joule program, libjoule_c.so) is not
# here: GPU runs install it like a user, from dist/ (scripts/build-dist.sh
# here, bench/gpu_install.sh there; bench/README.md, "Running on GPU machines").
set -eu
carry=$1
build=${2:-build}
mkdir -p "$carry/bin" "$carry/lib" "$carry/fake"
# What the carry once held for compiling the Python module there (gone: it is installed now).
rm -rf "$carry/source" "$carry/include" "$carry/lib/libjoule.a"
cp "$build"/bin/{joule,joule_bench_accuracy,joule_bench_monitor,joule_bench_sampler_cost} "$carry/bin/"
cp "$build/tests/fake_nvml/libnvidia-ml.so.1" "$carry/fake/"
source "$(dirname "$0")/lib/shared_libs.sh"
copy_shared_libs "$carry/lib" "$carry"/bin/*
strip --strip-debug "$carry"/bin/* "$carry"/fake/*.so.1
du -sh "$carry"
