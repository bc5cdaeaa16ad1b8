// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Linux RAPL through the powercap sysfs tree (intel-rapl, also used for AMD
// processors, and amd-rapl where present).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "joule/device/cpu_energy.h"

namespace joule {

inline constexpr const char* kDefaultPowercapRoot = "/sys/class/powercap";

class RaplZone final : public CpuEnergyZone {
 public:
  RaplZone(std::string directory, std::string name, CpuDomain domain, unsigned package_index,
           uint64_t max_energy_range_uj);
  std::string name() const override { return name_; }
  CpuDomain domain() const override { return domain_; }
  unsigned package_index() const override { return package_index_; }
  uint64_t energy_uj() override;
  uint64_t max_energy_range_uj() const override { return max_energy_range_uj_; }
  const std::string& directory() const { return directory_; }

 private:
  std::string directory_;
  std::string name_;
  CpuDomain domain_;
  unsigned package_index_;
  uint64_t max_energy_range_uj_;
};

struct RaplScan {
  std::vector<std::shared_ptr<CpuEnergyZone>> zones;  // readable package and DRAM zones
  std::vector<std::string> problems;                  // why something was skipped or is unreadable
};

// Finds package and DRAM zones under root (core, uncore and psys zones are
// skipped: they overlap the package). Never throws for a missing tree; says
// why in problems.
RaplScan scan_rapl(const std::string& root = kDefaultPowercapRoot);

}  // namespace joule
