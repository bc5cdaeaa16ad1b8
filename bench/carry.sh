#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Assembles what bench/run_gpu.sh needs on a GPU machine from this build:
# bench/carry.sh CARRY_DIR [BUILD_DIR]  (CARRY_DIR, e.g. .device-carry, is git-ignored)
set -eu
carry=$1
build=${2:-build}
mkdir -p "$carry/bin" "$carry/lib" "$carry/fake"
cp "$build"/bin/{joule,joule_bench_accuracy,joule_bench_monitor,joule_bench_sampler_cost} "$carry/bin/"
cp "$build/tests/fake_nvml/libnvidia-ml.so.1" "$carry/fake/"
for lib in $(ldd "$carry"/bin/* | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
    *) cp -L "$lib" "$carry/lib/" ;;
  esac
done
# What build_python_module_on_device.sh compiles the Python module against.
cp "$build/src/libjoule.a" "$carry/lib/"
# ... and the sources it was built from (public headers, bindings, the
# package's Python), so the module compiled there matches the library even
# when this checkout has moved on since.
rm -rf "$carry/source" && mkdir -p "$carry/source/src"
cp -r include "$carry/source/" && cp -r src/python "$carry/source/src/"
mkdir -p "$carry/source/python" && cp -r python/joule "$carry/source/python/"
mkdir -p "$carry/include"
cp -r /usr/include/fmt /usr/include/nlohmann /usr/include/pcg*.hpp "$carry/include/"
strip --strip-debug "$carry"/bin/* "$carry"/fake/*.so.1 "$carry/lib/libjoule.a"
du -sh "$carry"
