// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/gpu.h"

#include <fmt/format.h>

#include <algorithm>

#include "device/gpu_backend.h"
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

bool Gpu::at_power_cap() {
  throw DeviceError(DeviceErrc::kNotSupported,
                    fmt::format("gpu{}: this backend cannot tell whether the power cap holds the clocks", index()));
}

std::vector<GpuProcess> Gpu::running_processes() {
  throw DeviceError(DeviceErrc::kNotSupported, fmt::format("gpu{}: this backend cannot list processes", index()));
}

ProcessUtilizationSamples Gpu::process_utilization(uint64_t /*since_unix_us*/) {
  throw DeviceError(DeviceErrc::kNotSupported,
                    fmt::format("gpu{}: this backend cannot sample each process's utilisation", index()));
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

CapabilityStatus probe_capability(GpuCapability capability, const std::function<void()>& read) {
  CapabilityStatus status{capability, true, {}};
  try {
    read();
  } catch (const DeviceError& e) {
    status.available = false;
    status.reason = fmt::format("{}: {}", to_string(e.code()), e.what());
  }
  return status;
}

CapabilityStatus exported_capability(GpuCapability capability, std::string_view library_kind,
                                     ExportedFunctions functions) {
  for (const auto& [exported, function] : functions) {
    if (!exported) {
      return {capability, false,
              fmt::format("not supported: the {} library does not export {}", library_kind, function)};
    }
  }
  return {capability, true, {}};
}

std::vector<CapabilityStatus> probe_gpu_capabilities(Gpu& gpu, const BackendProbes& backend) {
  using C = GpuCapability;
  std::vector<CapabilityStatus> result;
  result.push_back(probe_capability(C::kEnergyCounter, [&] { gpu.total_energy_mj(); }));
  result.push_back(probe_capability(C::kPowerUsage, backend.read_power_usage));
  result.push_back(probe_capability(C::kInstantPower, backend.read_instant_power));
  result.push_back(probe_capability(C::kPowerSamples, backend.read_power_samples));
  result.push_back(probe_capability(C::kPowerLimit, [&] { gpu.power_limit_mw(); }));
  result.push_back(probe_capability(C::kLimitConstraints, [&] { gpu.power_limit_range_mw(); }));
  result.push_back(probe_capability(C::kDefaultLimit, [&] { gpu.default_power_limit_mw(); }));
  result.push_back(probe_capability(C::kUtilization, [&] { gpu.utilization(); }));
  result.push_back(probe_capability(C::kSmClock, [&] { gpu.sm_clock_mhz(); }));
  result.push_back(probe_capability(C::kMemoryClock, [&] { gpu.memory_clock_mhz(); }));
  result.push_back(probe_capability(C::kTemperature, [&] { gpu.temperature_c(); }));
  result.push_back(probe_capability(C::kMemoryUsed, [&] { gpu.memory_used_bytes(); }));
  result.push_back(probe_capability(C::kRunningProcesses, [&] { gpu.running_processes(); }));
  result.push_back(backend.set_power_limit);
  result.push_back(probe_capability(C::kSupportedClocks, [&] { gpu.supported_clocks_mhz(ClockDomain::kSm); }));
  result.push_back(backend.lock_sm_clock);
  result.push_back(backend.lock_memory_clock);
  return result;
}

std::vector<uint32_t> ascending_unique_mhz(std::vector<uint32_t> clocks_mhz) {
  std::sort(clocks_mhz.begin(), clocks_mhz.end());
  clocks_mhz.erase(std::unique(clocks_mhz.begin(), clocks_mhz.end()), clocks_mhz.end());
  return clocks_mhz;
}

std::optional<ClockLock> AppliedClockLocks::get(ClockDomain domain) const {
  std::lock_guard guard(mutex_);
  return domain == ClockDomain::kSm ? sm_ : memory_;
}

void AppliedClockLocks::set(ClockDomain domain, ClockLock lock) {
  std::lock_guard guard(mutex_);
  (domain == ClockDomain::kSm ? sm_ : memory_) = lock;
}

std::optional<ClockLock> AppliedClockLocks::forget(ClockDomain domain) {
  std::lock_guard guard(mutex_);
  (domain == ClockDomain::kSm ? sm_ : memory_).reset();
  return domain == ClockDomain::kSm ? memory_ : sm_;
}

}  // namespace joule
