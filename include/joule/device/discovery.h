// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Finds the devices joule measures: NVIDIA GPUs through NVML and AMD GPUs
// through ROCm SMI, whichever drivers are present (both on a mixed node);
// where neither gives a GPU, as the caller chose, simulated GPUs (labelled as
// such, for demos: joule info, measure, top) or none at all (long-running
// services: joule exporter); and RAPL zones. Only
// hardware and its fakes: how settings are changed (directly or through
// jouled) is decided one floor up, in joule/control/devices.h, whose
// discover_devices() is what programs call.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/clock.h"
#include "joule/device/cpu_energy.h"
#include "joule/device/gpu.h"

namespace joule {

// kAuto: NVML and ROCm SMI both, keeping every GPU either lists; kNvml or
// kRocm: that one alone, failing when it gives no GPU.
enum class GpuBackend { kAuto, kNvml, kRocm, kSim };

// What kAuto does where neither NVML nor ROCm SMI gives a GPU. A service
// that runs unattended must not turn a broken driver into made-up readings
// (its numbers feed dashboards and per-job accounting); a command a person
// runs may show simulated GPUs, labelled SIMULATED, to try joule anywhere.
enum class AutoFallback {
  kSimulated,  // simulated GPUs (joule info, measure, top, the Python module)
  kNoGpus,     // no GPU, and why (joule exporter)
};

// "auto" | "nvml" | "rocm" | "sim"; throws UsageError otherwise.
GpuBackend parse_gpu_backend(const std::string& text);

struct DiscoveryOptions {
  GpuBackend backend = GpuBackend::kAuto;
  std::string nvml_library;                  // empty: nvml_library_path()
  // Empty: rocm_smi_library_path(). The default library is loaded only where
  // the amdgpu kernel driver is (/sys/module/amdgpu): without it ROCm SMI's
  // init fails anyway, after writing its own complaints to stderr.
  std::string rocm_library;
  std::string powercap_root;                 // empty: $JOULE_POWERCAP_ROOT or /sys/class/powercap
  std::string sim_spec;                      // empty: $JOULE_SIM or two idle GPUs
  AutoFallback auto_fallback = AutoFallback::kSimulated;  // kAuto where no driver gives a GPU
  std::shared_ptr<const Clock> clock;        // for simulated GPUs; empty: SteadyClock
  // Read by the control layer (joule/control/devices.h), not here. Where
  // power-limit changes go for NVML GPUs: "auto" (jouled when its socket
  // exists and the process is not root, else direct), "daemon", "direct".
  // Empty: $JOULE_CONTROL or "auto".
  std::string control;
  // jouled's socket; nullopt: $JOULE_DAEMON_SOCKET or /run/joule/jouled.sock.
  std::optional<std::string> daemon_socket;
};

struct Devices {
  // NVIDIA GPUs first, then AMD ones; index() is each one's place here.
  std::vector<std::shared_ptr<Gpu>> gpus;
  // "nvml", "rocm", "nvml+rocm" (a node with both), "sim", or "none" (kAuto
  // with AutoFallback::kNoGpus where neither driver gives a GPU).
  std::string gpu_backend;
  std::string gpu_backend_reason;  // why that backend, in words
  // Why NVML gave no GPU (it could not be loaded or initialised, or listed
  // none); empty when it gave GPUs or was not tried (backend kSim).
  std::string nvml_problem;
  bool nvml_loaded = false;  // NVML was loaded and initialised (it may still list no GPU)
  std::string nvml_library;        // what was (or would have been) loaded
  std::string driver_version;
  std::vector<std::string> nvml_missing_functions;
  // The same for ROCm SMI (AMD GPUs); rocm_problem is empty when it gave GPUs
  // or was not tried (backends kNvml, kSim).
  std::string rocm_problem;
  bool rocm_loaded = false;
  std::string rocm_library;
  std::string rocm_version;  // the ROCm SMI library's own ("5.2.3")
  std::vector<std::string> rocm_missing_functions;
  // index() of the node's first AMD GPU (the count of GPUs before it): an AMD
  // GPU's number among AMD GPUs is its index() less this (vendor_index()).
  unsigned first_amd_index = 0;
  std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones;
  std::vector<std::string> cpu_problems;  // why RAPL zones are missing or unreadable
  std::string control_path;               // how power limits would be changed, and why (control layer)

  bool simulated() const { return gpu_backend == "sim"; }
};

// The hardware alone (control_path left empty). Throws DeviceError when
// backend is kNvml or kRocm and that library gives no GPU, and UsageError for
// a bad simulated-GPU spec. In kAuto, a machine where neither NVML nor ROCm
// SMI gives a GPU gets the simulated GPUs or none, as options.auto_fallback
// says, and the reason names both libraries and why each failed.
Devices discover_hardware(const DiscoveryOptions& options = {});

// Whether gpu is an AMD one (backend "rocm"); every other GPU, simulated ones
// included, is numbered as NVIDIA's are.
bool is_amd_gpu(const Gpu& gpu);
// gpu's number among the node's GPUs of its own vendor, as the runtimes'
// visible-device variables count them (CUDA_VISIBLE_DEVICES for NVIDIA GPUs,
// HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES for AMD ones): index() for an
// NVIDIA GPU, index() - first_amd_index for an AMD one. Unchanged by
// select_gpus. On a mixed node gpu3 may thus be AMD GPU 0.
unsigned vendor_index(const Devices& devices, const Gpu& gpu);

// Keeps only the GPUs whose indices are listed (in that order). Throws
// UsageError naming an index that does not exist.
void select_gpus(Devices& devices, const std::vector<unsigned>& indices);

}  // namespace joule
