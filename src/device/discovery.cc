// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/discovery.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>

#include "joule/device/nvml.h"
#include "joule/device/rocm.h"
#include "joule/device/rapl.h"
#include "joule/device/sim.h"
#include "joule/error.h"

namespace joule {

namespace {

// Present wherever the amdgpu kernel driver is loaded (built in or a module).
constexpr const char* kAmdgpuModuleDir = "/sys/module/amdgpu";

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

// kAuto where no driver gave a GPU: simulated GPUs, or none, as the caller
// chose; why names every library looked for.
void fall_back(Devices& devices, const DiscoveryOptions& options) {
  const std::string why = fmt::format("{}; {}", devices.nvml_problem, devices.rocm_problem);
  if (options.auto_fallback == AutoFallback::kSimulated) {
    open_simulated(devices, options, why);
    return;
  }
  devices.gpu_backend = "none";
  devices.gpu_backend_reason = fmt::format("{}; no GPU used (simulated ones only with --backend sim)", why);
}

// NVIDIA GPUs: appended to devices.gpus, or nvml_problem says why none.
// Throws when NVML was asked for by name and gives no GPU.
void open_nvml(Devices& devices, const DiscoveryOptions& options) {
  try {
    NvmlDevices nvml = open_nvml_gpus(devices.nvml_library);
    devices.nvml_loaded = true;
    devices.driver_version = nvml.driver_version;
    devices.nvml_missing_functions = nvml.missing_functions;
    if (nvml.gpus.empty()) {
      devices.nvml_problem = fmt::format("NVML ({}) reports no GPU", devices.nvml_library);
      if (options.backend == GpuBackend::kNvml) throw DeviceError(DeviceErrc::kNotFound, devices.nvml_problem);
      return;
    }
    devices.gpus.insert(devices.gpus.end(), nvml.gpus.begin(), nvml.gpus.end());
  } catch (const DeviceError& e) {
    if (options.backend == GpuBackend::kNvml) throw;
    devices.nvml_problem = fmt::format("no NVIDIA GPU usable: {}", e.what());
  }
}

// Where ROCm SMI would be loaded from its default name and cannot work: the
// amdgpu kernel driver is absent (its init would fail, writing to stderr).
std::string amdgpu_driver_problem(const DiscoveryOptions& options) {
  if (!options.rocm_library.empty() || !env_or("JOULE_ROCM_SMI_LIBRARY", "").empty()) return {};
  if (access(kAmdgpuModuleDir, F_OK) == 0) return {};
  return fmt::format("ROCm SMI ('{}') not loaded: the amdgpu kernel driver is not loaded (no {})",
                     rocm_smi_library_path(), kAmdgpuModuleDir);
}

// AMD GPUs, numbered after the GPUs already found: appended to devices.gpus,
// or rocm_problem says why none. Throws when ROCm SMI was asked for by name
// and gives no GPU.
void open_rocm(Devices& devices, const DiscoveryOptions& options) {
  try {
    if (const std::string problem = amdgpu_driver_problem(options); !problem.empty()) {
      throw DeviceError(DeviceErrc::kDriver, problem);
    }
    const auto first_index = static_cast<unsigned>(devices.gpus.size());
    devices.first_amd_index = first_index;
    RocmDevices rocm = open_rocm_smi_gpus(devices.rocm_library, first_index);
    devices.rocm_loaded = true;
    devices.rocm_version = rocm.library_version;
    devices.rocm_missing_functions = rocm.missing_functions;
    if (rocm.gpus.empty()) {
      devices.rocm_problem = fmt::format("ROCm SMI ({}) reports no GPU", devices.rocm_library);
      if (options.backend == GpuBackend::kRocm) throw DeviceError(DeviceErrc::kNotFound, devices.rocm_problem);
      return;
    }
    devices.gpus.insert(devices.gpus.end(), rocm.gpus.begin(), rocm.gpus.end());
  } catch (const DeviceError& e) {
    if (options.backend == GpuBackend::kRocm) throw;
    devices.rocm_problem = fmt::format("no AMD GPU usable: {}", e.what());
  }
}

}  // namespace

GpuBackend parse_gpu_backend(const std::string& text) {
  if (text == "auto") return GpuBackend::kAuto;
  if (text == "nvml") return GpuBackend::kNvml;
  if (text == "rocm") return GpuBackend::kRocm;
  if (text == "sim") return GpuBackend::kSim;
  throw UsageError(fmt::format("unknown GPU backend '{}' (expected auto, nvml, rocm or sim)", text));
}

Devices discover_hardware(const DiscoveryOptions& options) {
  Devices devices;
  devices.nvml_library = options.nvml_library.empty() ? nvml_library_path() : options.nvml_library;
  devices.rocm_library = options.rocm_library.empty() ? rocm_smi_library_path() : options.rocm_library;

  if (options.backend == GpuBackend::kSim) {
    open_simulated(devices, options, "simulated GPUs requested");
  } else {
    if (options.backend != GpuBackend::kRocm) open_nvml(devices, options);
    const std::size_t nvidia = devices.gpus.size();
    if (options.backend != GpuBackend::kNvml) open_rocm(devices, options);
    const std::size_t amd = devices.gpus.size() - nvidia;
    std::vector<std::string> reasons;
    if (nvidia > 0) {
      reasons.push_back(fmt::format("NVML from {} (driver {})", devices.nvml_library, devices.driver_version));
    }
    if (amd > 0) {
      reasons.push_back(
          fmt::format("ROCm SMI {} from {}", devices.rocm_version, devices.rocm_library));
    }
    if (nvidia > 0 && amd > 0) {
      devices.gpu_backend = "nvml+rocm";
      devices.gpu_backend_reason = fmt::format("{} NVIDIA GPU{} through {}; {} AMD GPU{} through {}", nvidia,
                                               nvidia == 1 ? "" : "s", reasons[0], amd, amd == 1 ? "" : "s",
                                               reasons[1]);
    } else if (nvidia > 0 || amd > 0) {
      devices.gpu_backend = nvidia > 0 ? "nvml" : "rocm";
      devices.gpu_backend_reason = reasons[0];
    } else {
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

bool is_amd_gpu(const Gpu& gpu) { return gpu.backend() == "rocm"; }

unsigned vendor_index(const Devices& devices, const Gpu& gpu) {
  return is_amd_gpu(gpu) ? gpu.index() - devices.first_amd_index : gpu.index();
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
