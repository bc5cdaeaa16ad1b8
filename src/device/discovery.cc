// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/discovery.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>

#include "joule/device/nvml.h"
#include "joule/device/rapl.h"
#include "joule/device/sim.h"
#include "joule/error.h"

namespace joule {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : fallback;
}

void open_simulated(Devices& devices, const DiscoveryOptions& options, const std::string& why) {
  const std::string spec_text = options.sim_spec.empty() ? env_or("JOULE_SIM", "") : options.sim_spec;
  const SimSpec spec = parse_sim_spec(spec_text);
  const std::shared_ptr<const Clock> clock = options.clock ? options.clock : SteadyClock::instance();
  for (unsigned i = 0; i < spec.count; ++i) {
    auto gpu = std::make_shared<SimGpu>(i, spec.model, clock);
    gpu->set_load(spec.load);
    devices.gpus.push_back(std::move(gpu));
  }
  devices.gpu_backend = "sim";
  devices.gpu_backend_reason =
      fmt::format("{}; using {} SIMULATED GPU{} (load {:.2f})", why, spec.count, spec.count == 1 ? "" : "s", spec.load);
}

// kAuto without a usable NVML: simulated GPUs, or none, as the caller chose.
void fall_back(Devices& devices, const DiscoveryOptions& options) {
  if (options.auto_fallback == AutoFallback::kSimulated) {
    open_simulated(devices, options, devices.nvml_problem);
    return;
  }
  devices.gpu_backend = "none";
  devices.gpu_backend_reason =
      fmt::format("{}; no GPU used (simulated ones only with --backend sim)", devices.nvml_problem);
}

}  // namespace

GpuBackend parse_gpu_backend(const std::string& text) {
  if (text == "auto") return GpuBackend::kAuto;
  if (text == "nvml") return GpuBackend::kNvml;
  if (text == "sim") return GpuBackend::kSim;
  throw UsageError(fmt::format("unknown GPU backend '{}' (expected auto, nvml or sim)", text));
}

Devices discover_hardware(const DiscoveryOptions& options) {
  Devices devices;
  devices.nvml_library = options.nvml_library.empty() ? nvml_library_path() : options.nvml_library;

  if (options.backend == GpuBackend::kSim) {
    open_simulated(devices, options, "simulated GPUs requested");
  } else {
    try {
      NvmlDevices nvml = open_nvml_gpus(devices.nvml_library);
      devices.nvml_loaded = true;
      devices.driver_version = nvml.driver_version;
      devices.nvml_missing_functions = nvml.missing_functions;
      if (nvml.gpus.empty()) {
        devices.nvml_problem = fmt::format("NVML ({}) reports no GPU", devices.nvml_library);
        if (options.backend == GpuBackend::kNvml) throw DeviceError(DeviceErrc::kNotFound, devices.nvml_problem);
        fall_back(devices, options);
      } else {
        devices.gpus = std::move(nvml.gpus);
        devices.gpu_backend = "nvml";
        devices.gpu_backend_reason =
            fmt::format("NVML from {} (driver {})", devices.nvml_library, devices.driver_version);
      }
    } catch (const DeviceError& e) {
      if (options.backend == GpuBackend::kNvml) throw;
      devices.nvml_problem = fmt::format("no NVIDIA GPU usable: {}", e.what());
      fall_back(devices, options);
    }
  }

  const std::string root = options.powercap_root.empty() ? env_or("JOULE_POWERCAP_ROOT", kDefaultPowercapRoot)
                                                         : options.powercap_root;
  RaplScan rapl = scan_rapl(root);
  devices.cpu_zones = std::move(rapl.zones);
  devices.cpu_problems = std::move(rapl.problems);
  return devices;
}

void select_gpus(Devices& devices, const std::vector<unsigned>& indices) {
  std::vector<std::shared_ptr<Gpu>> selected;
  for (unsigned index : indices) {
    if (index >= devices.gpus.size()) {
      if (devices.gpus.empty()) throw UsageError(fmt::format("GPU index {} does not exist (no GPU found)", index));
      throw UsageError(fmt::format("GPU index {} does not exist (this machine has {} GPU{}: 0-{})", index,
                                   devices.gpus.size(), devices.gpus.size() == 1 ? "" : "s",
                                   devices.gpus.size() - 1));
    }
    for (const auto& already : selected) {
      if (already->index() == index) throw UsageError(fmt::format("GPU index {} is listed twice", index));
    }
    selected.push_back(devices.gpus[index]);
  }
  devices.gpus = std::move(selected);
}

}  // namespace joule
