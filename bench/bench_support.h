// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Device sets the benchmarks run on: simulated GPUs, the fake NVML library
// modelled on an H100 (energy call ~4 ms, counter steps of 100 ms, power
// usage a trailing 1 s mean, power samples every 20 ms, a load switching
// between 100 W and 700 W at random), or the real driver (read-only).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "joule/device/gpu.h"

namespace joule::bench {

// backend: "sim" | "fake" (NVML) | "fake-rocm" | "nvml". count is ignored for "nvml" (all GPUs).
// Throws Error when the backend cannot be opened.
std::vector<std::shared_ptr<Gpu>> open_bench_gpus(const std::string& backend, unsigned count);

// Median of a sample (copied, not modified).
double median(std::vector<double> values);

// CPU time of the whole process (user + system), seconds.
double process_cpu_s();

}  // namespace joule::bench
