// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What the driver-backed Gpu backends (nvml, rocm) share around their vendor
// calls: the capability probe's shape and the clock locks they applied.
// Defined in gpu.cc; private to the device layer.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "joule/device/gpu.h"

namespace joule {

// One capability probed by a read that throws DeviceError where it fails:
// available, or not, with the error's kind and message as the reason.
CapabilityStatus probe_capability(GpuCapability capability, const std::function<void()>& read);

// A capability that cannot be probed without changing the GPU (control):
// available where the library exports every one of functions (each given
// with whether it is exported), else not, naming the first one missing.
using ExportedFunctions = std::initializer_list<std::pair<bool, const char*>>;
CapabilityStatus exported_capability(GpuCapability capability, std::string_view library_kind,
                                     ExportedFunctions functions);

// What only the backend knows of a GPU's capabilities: reads of its own
// power sources (each throwing DeviceError where it fails) and whether its
// library has the control calls.
struct BackendProbes {
  std::function<void()> read_power_usage;
  std::function<void()> read_instant_power;
  std::function<void()> read_power_samples;
  CapabilityStatus set_power_limit;
  CapabilityStatus lock_sm_clock;
  CapabilityStatus lock_memory_clock;
};

// Every capability of gpu, one status each in kAllGpuCapabilities' order:
// the readings through gpu's own interface, the rest from backend.
std::vector<CapabilityStatus> probe_gpu_capabilities(Gpu& gpu, const BackendProbes& backend);

// Clock lists as drivers give them, ascending and each once.
std::vector<uint32_t> ascending_unique_mhz(std::vector<uint32_t> clocks_mhz);

// The clock lock applied in each domain, for clock_lock_mhz(): neither NVML
// nor ROCm SMI reads back the range asked for. Safe across threads.
class AppliedClockLocks {
 public:
  std::optional<ClockLock> get(ClockDomain domain) const;
  void set(ClockDomain domain, ClockLock lock);
  // Forgets domain's lock; returns the lock still held in the other domain.
  std::optional<ClockLock> forget(ClockDomain domain);

 private:
  mutable std::mutex mutex_;
  std::optional<ClockLock> sm_, memory_;
};

}  // namespace joule
