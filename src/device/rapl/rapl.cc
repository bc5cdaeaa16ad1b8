// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/rapl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "joule/error.h"

namespace fs = std::filesystem;

namespace joule {

const char* to_string(CpuDomain domain) { return domain == CpuDomain::kPackage ? "package" : "dram"; }

std::string CpuEnergyZone::label() const { return fmt::format("cpu{} {}", package_index(), name()); }

uint64_t counter_delta_uj(uint64_t previous_uj, uint64_t current_uj, uint64_t max_range_uj) {
  if (current_uj >= previous_uj) return current_uj - previous_uj;
  return (max_range_uj - previous_uj) + current_uj + 1;  // wrapped past max_range back to 0
}

namespace {

// Reads one unsigned integer from a sysfs file. Throws DeviceError that says
// what to do when the kernel refuses (energy_uj is root-only since Linux 5.10).
uint64_t read_counter_file(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) {
    const int error = errno;
    if (error == EACCES || error == EPERM) {
      throw DeviceError(DeviceErrc::kNoPermission,
                        fmt::format("cannot read {}: permission denied (the kernel lets only root read RAPL "
                                    "energy counters; run as root, or grant read access with "
                                    "'sudo chmod a+r /sys/class/powercap/*/energy_uj "
                                    "/sys/class/powercap/*/*/energy_uj' or an equivalent udev rule)",
                                    path));
    }
    throw DeviceError(error == ENOENT ? DeviceErrc::kNotFound : DeviceErrc::kUnknown,
                      fmt::format("cannot read {}: {}", path, std::strerror(error)));
  }
  unsigned long long value = 0;
  const int matched = std::fscanf(file, "%llu", &value);
  std::fclose(file);
  if (matched != 1) {
    throw DeviceError(DeviceErrc::kUnknown, fmt::format("cannot read {}: not an unsigned integer", path));
  }
  return value;
}

std::string read_name_file(const fs::path& path) {
  std::ifstream in(path);
  std::string name;
  std::getline(in, name);
  return name;
}

bool is_zone_directory(const std::string& entry) {
  return entry.rfind("intel-rapl:", 0) == 0 || entry.rfind("amd-rapl:", 0) == 0;
}

// "intel-rapl:1" -> 1; "intel-rapl:1:0" -> 1.
unsigned package_of(const std::string& entry) {
  const auto colon = entry.find(':');
  return static_cast<unsigned>(std::strtoul(entry.c_str() + colon + 1, nullptr, 10));
}

void scan_zone(const fs::path& directory, RaplScan& scan) {
  const std::string entry = directory.filename().string();
  const std::string name = read_name_file(directory / "name");
  CpuDomain domain;
  if (name.rfind("package", 0) == 0) {
    domain = CpuDomain::kPackage;
  } else if (name == "dram") {
    domain = CpuDomain::kDram;
  } else {
    return;  // core, uncore, psys: inside or overlapping a package zone
  }
  try {
    const uint64_t max_range = read_counter_file((directory / "max_energy_range_uj").string());
    auto zone = std::make_shared<RaplZone>(directory.string(), name, domain, package_of(entry), max_range);
    zone->energy_uj();  // fail now, with the reason, rather than in the sampler
    scan.zones.push_back(std::move(zone));
  } catch (const DeviceError& e) {
    scan.problems.push_back(e.what());
  }
}

}  // namespace

RaplZone::RaplZone(std::string directory, std::string name, CpuDomain domain, unsigned package_index,
                   uint64_t max_energy_range_uj)
    : directory_(std::move(directory)),
      name_(std::move(name)),
      domain_(domain),
      package_index_(package_index),
      max_energy_range_uj_(max_energy_range_uj) {}

uint64_t RaplZone::energy_uj() { return read_counter_file(directory_ + "/energy_uj"); }

RaplScan scan_rapl(const std::string& root) {
  RaplScan scan;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    scan.problems.push_back(fmt::format("no RAPL: {} does not exist (no powercap driver on this machine)", root));
    return scan;
  }
  // sysfs lists sub-zones twice: nested in their package ("intel-rapl:0/intel-rapl:0:2")
  // and as links at the top ("intel-rapl:0:2"). Keep each zone name once.
  std::map<std::string, fs::path> zones;
  for (const auto& item : fs::directory_iterator(root, ec)) {
    const std::string entry = item.path().filename().string();
    if (!is_zone_directory(entry)) continue;
    zones.emplace(entry, item.path());
    std::error_code nested_ec;
    for (const auto& nested : fs::directory_iterator(item.path(), nested_ec)) {
      const std::string nested_entry = nested.path().filename().string();
      if (is_zone_directory(nested_entry)) zones.emplace(nested_entry, nested.path());
    }
  }
  for (const auto& [entry, path] : zones) scan_zone(path, scan);
  if (scan.zones.empty() && scan.problems.empty()) {
    scan.problems.push_back(fmt::format("no RAPL: {} holds no package or dram zone", root));
  }
  return scan;
}

}  // namespace joule
