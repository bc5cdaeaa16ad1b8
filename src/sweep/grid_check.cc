// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A sweep's grid checked against the GPUs before anything runs: every power
// limit and clock cap within what the GPUs its runs use support.
#include <fmt/format.h>

#include <algorithm>

#include "joule/analyze/sweep_analysis.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"
#include "sweep/run_parts.h"

namespace joule {

// "gpu0 (NVIDIA A40)", "gpu1 (Simulated GPU (H100-like), simulated)".
std::string gpu_words(Gpu& gpu) {
  return fmt::format("gpu{} ({}{})", gpu.index(), gpu.name(), gpu.simulated() ? ", simulated" : "");
}

namespace {

// The GPUs the sweep's runs use: the first N, N the largest grid.gpus.
std::size_t gpus_used(const SweepConfig& config, std::size_t available) {
  for (const auto& [name, values] : config.grid) {
    if (name != "gpus") continue;
    std::size_t most = 0;
    for (const auto& v : values) most = std::max<std::size_t>(most, std::stoul(v));  // checked at load
    return most;
  }
  return available;
}

void check_power_limits(const SweepConfig& config, const std::vector<std::string>& values, Gpu& gpu) {
  PowerLimitRange range{};
  try {
    range = gpu.power_limit_range_mw();
  } catch (const DeviceError& e) {
    throw UsageError(fmt::format("{}: grid.power_limit: the range of power limits of {} cannot be read: {}",
                                 config.where("power_limit", 0), gpu_words(gpu), e.what()));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double limit_w = std::stod(values[i]);  // checked at load
    const auto limit_mw = static_cast<long long>(std::llround(limit_w * 1000));
    if (limit_mw < range.min_mw || limit_mw > range.max_mw) {
      throw UsageError(fmt::format("{}: grid.power_limit: {} W is outside what {} supports: {}-{} W",
                                   config.where("power_limit", i), values[i], gpu_words(gpu), range.min_mw / 1000.0,
                                   range.max_mw / 1000.0));
    }
  }
}

void check_clock_caps(const SweepConfig& config, const std::string& key, const std::vector<std::string>& values,
                      Gpu& gpu) {
  const ClockDomain domain = key == "sm_clock_mhz" ? ClockDomain::kSm : ClockDomain::kMemory;
  std::vector<uint32_t> supported;
  try {
    supported = gpu.supported_clocks_mhz(domain);
  } catch (const DeviceError& e) {
    throw UsageError(fmt::format("{}: grid.{}: {} cannot list its supported {} clocks, so cannot cap them: {}",
                                 config.where(key, 0), key, gpu_words(gpu), to_string(domain), e.what()));
  }
  if (supported.empty()) {
    throw UsageError(fmt::format("{}: grid.{}: {} lists no supported {} clocks, so cannot cap them",
                                 config.where(key, 0), key, gpu_words(gpu), to_string(domain)));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double cap_mhz = std::stod(values[i]);  // checked at load
    if (cap_mhz < supported.front() || cap_mhz > supported.back()) {
      throw UsageError(fmt::format("{}: grid.{}: {} MHz is outside the {} clocks {} supports: {}-{} MHz",
                                   config.where(key, i), key, values[i], to_string(domain), gpu_words(gpu),
                                   supported.front(), supported.back()));
    }
  }
}

}  // namespace

void check_grid_on_gpus(const SweepConfig& config, const std::vector<std::shared_ptr<Gpu>>& gpus) {
  for (const auto& [name, values] : config.grid) {
    if (name != "gpus") continue;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::stoul(values[i]) > gpus.size()) {
        throw UsageError(fmt::format("{}: grid.gpus asks for {} GPUs; this machine has {}", config.where("gpus", i),
                                     values[i], gpus.size()));
      }
    }
  }
  const std::size_t used = std::min(gpus.size(), gpus_used(config, gpus.size()));
  for (const auto& [name, values] : config.grid) {
    if (!find_gpu_knob(name)) continue;
    for (std::size_t g = 0; g < used; ++g) {
      if (name == "power_limit") {
        check_power_limits(config, values, *gpus[g]);
      } else {
        check_clock_caps(config, name, values, *gpus[g]);
      }
    }
  }
}

}  // namespace joule
