#include "joule/device/gpu.h"

#include <fmt/format.h>

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

void check_power_limit_in_range(const Gpu& gpu, uint32_t limit_mw, PowerLimitRange range) {
  if (limit_mw < range.min_mw || limit_mw > range.max_mw) {
    throw DeviceError(DeviceErrc::kInvalidArgument,
                      fmt::format("gpu{}: power limit {:.1f} W is outside the allowed range {:.1f}-{:.1f} W",
                                  gpu.index(), limit_mw / 1000.0, range.min_mw / 1000.0,
                                  range.max_mw / 1000.0));
  }
}

}  // namespace joule
