// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// CPU-side energy: one zone per CPU package and per DRAM domain, each a
// cumulative counter in microjoules that wraps at max_energy_range_uj().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace joule {

enum class CpuDomain { kPackage, kDram };

const char* to_string(CpuDomain domain);

class CpuEnergyZone {
 public:
  virtual ~CpuEnergyZone() = default;
  virtual std::string name() const = 0;  // "package-0", "dram"
  virtual CpuDomain domain() const = 0;
  virtual unsigned package_index() const = 0;
  // Raw counter; throws DeviceError (kNoPermission explains the fix).
  virtual uint64_t energy_uj() = 0;
  // The counter wraps to 0 after this value.
  virtual uint64_t max_energy_range_uj() const = 0;
  // "cpu0 package-0" / "cpu0 dram", used in reports.
  std::string label() const;
};

// Energy between two raw readings of a counter that wraps after max_range_uj,
// assuming at most one wrap in between (the sampler reads far more often).
uint64_t counter_delta_uj(uint64_t previous_uj, uint64_t current_uj, uint64_t max_range_uj);

}  // namespace joule
