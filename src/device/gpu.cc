// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/gpu.h"

#include <fmt/format.h>

#include <algorithm>

#include "joule/error.h"

namespace joule {

const char* to_string(GpuCapability capability) {
  switch (capability) {
    case GpuCapability::kEnergyCounter: return "energy_counter";
    case GpuCapability::kPowerUsage: return "power_usage";
    case GpuCapability::kInstantPower: return "instant_power";
    case GpuCapability::kPowerSamples: return "power_samples";
    case GpuCapability::kPowerLimit: return "power_limit";
    case GpuCapability::kLimitConstraints: return "limit_constraints";
    case GpuCapability::kDefaultLimit: return "default_limit";
    case GpuCapability::kUtilization: return "utilization";
    case GpuCapability::kSmClock: return "sm_clock";
    case GpuCapability::kMemoryClock: return "memory_clock";
    case GpuCapability::kTemperature: return "temperature";
    case GpuCapability::kMemoryUsed: return "memory_used";
    case GpuCapability::kRunningProcesses: return "running_processes";
    case GpuCapability::kSetPowerLimit: return "set_power_limit";
    case GpuCapability::kSupportedClocks: return "supported_clocks";
    case GpuCapability::kLockSmClock: return "lock_sm_clock";
    case GpuCapability::kLockMemoryClock: return "lock_memory_clock";
  }
  return "unknown";
}

std::optional<ClockDomain> clock_domain_from_string(std::string_view name) {
  for (const ClockDomain domain : kAllClockDomains) {
    if (name == to_string(domain)) return domain;
  }
  return std::nullopt;
}

const char* to_string(ClockDomain domain) {
  switch (domain) {
    case ClockDomain::kSm: return "sm";
    case ClockDomain::kMemory: return "memory";
  }
  return "unknown";
}

std::string Gpu::label() const {
  return fmt::format("gpu{} {}{}", index(), name(), simulated() ? " [SIMULATED]" : "");
}

void Gpu::read_power_samples(std::vector<PowerSample>& /*out*/) {
  throw DeviceError(DeviceErrc::kNotSupported, fmt::format("gpu{}: no buffered power samples", index()));
}

uint32_t Gpu::memory_clock_mhz() {
  throw DeviceError(DeviceErrc::kNotSupported, fmt::format("gpu{}: this backend cannot read the memory clock", index()));
}

std::vector<GpuProcess> Gpu::running_processes() {
  throw DeviceError(DeviceErrc::kNotSupported, fmt::format("gpu{}: this backend cannot list processes", index()));
}

std::vector<uint32_t> Gpu::supported_clocks_mhz(ClockDomain domain) {
  throw DeviceError(DeviceErrc::kNotSupported,
                    fmt::format("gpu{}: this backend cannot list the supported {} clocks", index(), to_string(domain)));
}

std::optional<ClockLock> Gpu::clock_lock_mhz(ClockDomain /*domain*/) { return std::nullopt; }

void Gpu::lock_clock_mhz(ClockDomain domain, ClockLock /*lock*/) {
  throw DeviceError(DeviceErrc::kNotSupported,
                    fmt::format("gpu{}: this backend cannot lock the {} clock", index(), to_string(domain)));
}

void Gpu::reset_clock_lock(ClockDomain domain) {
  throw DeviceError(DeviceErrc::kNotSupported,
                    fmt::format("gpu{}: this backend cannot reset the {} clock", index(), to_string(domain)));
}

void check_clock_lock_in_range(const Gpu& gpu, ClockDomain domain, ClockLock lock,
                               const std::vector<uint32_t>& supported_mhz) {
  if (supported_mhz.empty()) {
    throw DeviceError(DeviceErrc::kNotSupported,
                      fmt::format("gpu{}: the driver lists no supported {} clocks", gpu.index(), to_string(domain)));
  }
  if (lock.min_mhz > lock.max_mhz) {
    throw DeviceError(DeviceErrc::kInvalidArgument,
                      fmt::format("gpu{}: {} clock lock {}-{} MHz is empty (its minimum exceeds its maximum)",
                                  gpu.index(), to_string(domain), lock.min_mhz, lock.max_mhz));
  }
  const uint32_t lowest = supported_mhz.front(), highest = supported_mhz.back();
  if (lock.min_mhz < lowest || lock.max_mhz > highest) {
    throw DeviceError(DeviceErrc::kInvalidArgument,
                      fmt::format("gpu{}: {} clock lock {}-{} MHz is outside the supported clocks {}-{} MHz",
                                  gpu.index(), to_string(domain), lock.min_mhz, lock.max_mhz, lowest, highest));
  }
}

ClockLock clock_cap_lock(Gpu& gpu, ClockDomain domain, uint32_t cap_mhz) {
  const auto supported = gpu.supported_clocks_mhz(domain);
  const ClockLock lock{supported.empty() ? 0 : std::min(supported.front(), cap_mhz), cap_mhz};
  check_clock_lock_in_range(gpu, domain, lock, supported);
  return lock;
}

void check_power_limit_in_range(const Gpu& gpu, uint32_t limit_mw, PowerLimitRange range) {
  if (limit_mw < range.min_mw || limit_mw > range.max_mw) {
    throw DeviceError(DeviceErrc::kInvalidArgument,
                      fmt::format("gpu{}: power limit {:.1f} W is outside the allowed range {:.1f}-{:.1f} W",
                                  gpu.index(), limit_mw / 1000.0, range.min_mw / 1000.0,
                                  range.max_mw / 1000.0));
  }
}

}  // namespace joule
