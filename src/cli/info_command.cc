// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "joule/version.h"
#include "joule/device/power_limit_facts.h"
#include "joule/error.h"
#include "joule/measure/sampler.h"
#include "joule/accounting/job_identity.h"

namespace joule::cli {

namespace {

// A process on a GPU and whom it works for (none when it ended meanwhile).
struct ProcessInfo {
  GpuProcess process;
  std::optional<JobIdentity> job;
};

// One clock domain as far as it can be read: the clock now, the clocks the
// driver accepts, and the lock in force as this process knows it.
struct ClockInfo {
  ClockDomain domain;
  std::optional<uint32_t> current_mhz;
  std::optional<std::vector<uint32_t>> supported_mhz;
  std::optional<ClockLock> lock;
};

ClockInfo read_clock(Gpu& gpu, ClockDomain domain) {
  ClockInfo info{domain, {}, {}, {}};
  info.current_mhz = try_read([&] { return domain == ClockDomain::kSm ? gpu.sm_clock_mhz() : gpu.memory_clock_mhz(); });
  info.supported_mhz = try_read([&] { return gpu.supported_clocks_mhz(domain); });
  if (info.supported_mhz && info.supported_mhz->empty()) info.supported_mhz.reset();
  info.lock = try_read([&] { return gpu.clock_lock_mhz(domain); }).value_or(std::nullopt);
  return info;
}

nlohmann::json to_json(const ClockInfo& c) {
  auto optional = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"current_mhz", optional(c.current_mhz)},
          {"supported_min_mhz", c.supported_mhz ? nlohmann::json(c.supported_mhz->front()) : nlohmann::json()},
          {"supported_max_mhz", c.supported_mhz ? nlohmann::json(c.supported_mhz->back()) : nlohmann::json()},
          {"supported_count", c.supported_mhz ? nlohmann::json(c.supported_mhz->size()) : nlohmann::json()},
          {"lock", c.lock ? nlohmann::json{{"min_mhz", c.lock->min_mhz}, {"max_mhz", c.lock->max_mhz}}
                          : nlohmann::json()}};
}

// "SM 1980 MHz (supported 210-1980 MHz, 119 clocks; locked 210-1200 MHz)".
std::string to_text(const ClockInfo& c) {
  const std::string name = c.domain == ClockDomain::kSm ? "SM" : "memory";
  const std::string now = c.current_mhz ? fmt::format("{} MHz", *c.current_mhz) : "unreadable";
  const std::string supported =
      c.supported_mhz ? fmt::format("supported {}-{} MHz, {} clocks", c.supported_mhz->front(),
                                    c.supported_mhz->back(), c.supported_mhz->size())
                      : "supported clocks unreadable";
  const std::string lock = c.lock ? fmt::format("locked {}-{} MHz", c.lock->min_mhz, c.lock->max_mhz)
                                  : "no lock set through joule";
  return fmt::format("{} {} ({}; {})", name, now, supported, lock);
}

struct GpuInfo {
  std::shared_ptr<Gpu> gpu;
  std::vector<CapabilityStatus> capabilities;
  PowerLimitFacts limits;
  std::vector<ClockInfo> clocks;
  std::optional<std::vector<ProcessInfo>> processes;  // none when the driver will not list them
};

std::string watts(const std::optional<double>& w) { return w ? fmt::format("{:.1f} W", *w) : std::string("unreadable"); }

// "NVML: libnvidia-ml.so.1, loaded (driver 580.95.05)" or, where it gave no
// GPU, "... not used: <why>", so a node without a driver says what was looked
// for and why each library failed.
std::string library_line(const std::string& name, const std::string& path, bool loaded, const std::string& version,
                         const std::string& problem) {
  if (!loaded && problem.empty()) return fmt::format("{}: {}, not tried\n", name, path);
  const std::string state = loaded ? fmt::format("loaded ({})", version) : "not loaded";
  return fmt::format("{}: {}, {}{}\n", name, path, state, problem.empty() ? "" : "; " + problem);
}

}  // namespace

int run_info(const CommonOptions& common, const InfoOptions& options) {
  const Devices devices = common.open_devices();
  std::vector<GpuInfo> infos;
  for (const auto& gpu : devices.gpus) {
    GpuInfo info{gpu, gpu->probe_capabilities(), read_power_limit_facts(*gpu), {}, {}};
    for (ClockDomain domain : kAllClockDomains) info.clocks.push_back(read_clock(*gpu, domain));
    if (auto processes = try_read([&] { return gpu->running_processes(); })) {
      info.processes.emplace();
      for (const GpuProcess& p : *processes) info.processes->push_back({p, identify_job(p.pid)});
    }
    infos.push_back(std::move(info));
  }

  if (options.json) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& info : infos) {
      nlohmann::json capabilities = nlohmann::json::object();
      for (const auto& c : info.capabilities) {
        capabilities[to_string(c.capability)] = {{"available", c.available}, {"reason", c.reason}};
      }
      nlohmann::json processes;  // null: not listed
      if (info.processes) {
        processes = nlohmann::json::array();
        for (const ProcessInfo& p : *info.processes) {
          const auto& used = p.process.used_memory_bytes;
          processes.push_back({{"pid", p.process.pid},
                               {"used_memory_bytes", used ? nlohmann::json(*used) : nlohmann::json()},
                               {"job", p.job ? nlohmann::json(p.job->job_label()) : nlohmann::json()},
                               {"scheduler", p.job ? nlohmann::json(to_string(p.job->scheduler)) : nlohmann::json()},
                               {"job_id", p.job ? nlohmann::json(p.job->job_id) : nlohmann::json()},
                               {"job_step", p.job && !p.job->step.empty() ? nlohmann::json(p.job->step) : nlohmann::json()},
                               {"user", p.job ? nlohmann::json(p.job->user) : nlohmann::json()}});
        }
      }
      gpus.push_back({{"index", info.gpu->index()},
                      {"name", info.gpu->name()},
                      {"uuid", info.gpu->uuid()},
                      {"pci_bus_id", info.gpu->pci_bus_id().empty() ? nlohmann::json() : nlohmann::json(info.gpu->pci_bus_id())},
                      {"architecture", info.gpu->architecture()},
                      {"backend", info.gpu->backend()},
                      {"simulated", info.gpu->simulated()},
                      {"clocks", {{"sm", to_json(info.clocks[0])}, {"memory", to_json(info.clocks[1])}}},
                      {"energy_method", to_string(energy_method_for(*info.gpu, SamplerOptions{}))},
                      {"energy_method_detail", explain_energy_method(*info.gpu, SamplerOptions{})},
                      {"capabilities", capabilities},
                      {"processes", processes}});
      add_power_limit_fields(gpus.back(), info.limits);
    }
    nlohmann::json zones = nlohmann::json::array();
    for (const auto& zone : devices.cpu_zones) {
      zones.push_back({{"package", zone->package_index()},
                       {"name", zone->name()},
                       {"domain", to_string(zone->domain())},
                       {"backend", "rapl"}});
    }
    const nlohmann::json out = {{"joule_version", version()},
                                {"gpu_backend", devices.gpu_backend},
                                {"gpu_backend_reason", devices.gpu_backend_reason},
                                {"simulated", devices.simulated()},
                                {"nvml_library", devices.nvml_library},
                                {"nvml_loaded", devices.nvml_loaded},
                                {"nvml_problem", devices.nvml_problem},
                                {"driver_version", devices.driver_version},
                                {"nvml_missing_functions", devices.nvml_missing_functions},
                                {"rocm_library", devices.rocm_library},
                                {"rocm_loaded", devices.rocm_loaded},
                                {"rocm_problem", devices.rocm_problem},
                                {"rocm_version", devices.rocm_version},
                                {"rocm_missing_functions", devices.rocm_missing_functions},
                                {"control_path", devices.control_path},
                                {"gpus", gpus},
                                {"cpu_zones", zones},
                                {"cpu_problems", devices.cpu_problems}};
    std::cout << out.dump(2) << '\n';
    return 0;
  }

  std::cout << fmt::format("GPU backend: {} ({})\n", devices.gpu_backend, devices.gpu_backend_reason);
  if (!devices.simulated() || !devices.nvml_problem.empty() || !devices.rocm_problem.empty()) {
    std::cout << library_line("NVML", devices.nvml_library, devices.nvml_loaded,
                              fmt::format("driver {}", devices.driver_version), devices.nvml_problem);
    std::cout << library_line("ROCm SMI", devices.rocm_library, devices.rocm_loaded,
                              fmt::format("version {}", devices.rocm_version), devices.rocm_problem);
  }
  if (!devices.nvml_missing_functions.empty()) {
    std::cout << fmt::format("NVML functions this driver lacks: {}\n", fmt::join(devices.nvml_missing_functions, ", "));
  }
  if (!devices.rocm_missing_functions.empty()) {
    std::cout << fmt::format("ROCm SMI functions this library lacks: {}\n",
                             fmt::join(devices.rocm_missing_functions, ", "));
  }
  for (const auto& info : infos) {
    const Gpu& gpu = *info.gpu;
    std::cout << fmt::format("\n{}\n  uuid {}, PCI {}, architecture {}, backend {}\n", gpu.label(), gpu.uuid(),
                             gpu.pci_bus_id().empty() ? "unknown" : gpu.pci_bus_id(), gpu.architecture(), gpu.backend());
    const PowerLimitFacts& limits = info.limits;
    std::cout << fmt::format("  power limit {} (default {}, range {})\n", watts(limits.limit_w), watts(limits.default_w),
                             limits.min_w ? fmt::format("{:.1f}-{:.1f} W", *limits.min_w, *limits.max_w)
                                          : std::string("unreadable"));
    if (!limits.errors.empty()) std::cout << fmt::format("  power limit unreadable: {}\n", limits.error_text());
    for (const ClockInfo& clock : info.clocks) std::cout << fmt::format("  clock {}\n", to_text(clock));
    std::cout << fmt::format("  energy: {}\n", explain_energy_method(gpu, SamplerOptions{}));
    if (!info.processes) {
      std::cout << "  processes: not listed by the driver\n";
    } else if (info.processes->empty()) {
      std::cout << "  processes: none\n";
    }
    for (const ProcessInfo& p : info.processes.value_or(std::vector<ProcessInfo>{})) {
      const auto& used = p.process.used_memory_bytes;
      std::cout << fmt::format("  process {:<8} {:<24} user {:<12} {}\n", p.process.pid,
                               p.job ? p.job->job_label() : "(ended)", p.job ? p.job->user : "-",
                               used ? fmt::format("{} MiB", *used >> 20) : "memory not shown");
    }
    for (const auto& c : info.capabilities) {
      std::cout << fmt::format("  {:<18} {}{}\n", to_string(c.capability), c.available ? "yes" : "no",
                               c.available ? "" : "  (" + c.reason + ")");
    }
  }
  std::cout << "\nCPU energy (RAPL):\n";
  for (const auto& zone : devices.cpu_zones) std::cout << fmt::format("  {}  readable\n", zone->label());
  for (const auto& problem : devices.cpu_problems) std::cout << fmt::format("  {}\n", problem);
  std::cout << fmt::format("\nPower-limit control: {}\n", devices.control_path);
  return 0;
}

}  // namespace joule::cli
