// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Finds the devices joule measures: NVIDIA GPUs through NVML when a driver is
// present; otherwise, as the caller chose, simulated GPUs (labelled as such,
// for demos: joule info, measure, top) or none at all (long-running services:
// joule exporter); and RAPL zones. Only
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

enum class GpuBackend { kAuto, kNvml, kSim };

// What kAuto does where NVML cannot be loaded or lists no GPU. A service
// that runs unattended must not turn a broken driver into made-up readings
// (its numbers feed dashboards and per-job accounting); a command a person
// runs may show simulated GPUs, labelled SIMULATED, to try joule anywhere.
enum class AutoFallback {
  kSimulated,  // simulated GPUs (joule info, measure, top, the Python module)
  kNoGpus,     // no GPU, and why (joule exporter)
};

// "auto" | "nvml" | "sim"; throws UsageError otherwise.
GpuBackend parse_gpu_backend(const std::string& text);

struct DiscoveryOptions {
  GpuBackend backend = GpuBackend::kAuto;
  std::string nvml_library;                  // empty: nvml_library_path()
  std::string powercap_root;                 // empty: $JOULE_POWERCAP_ROOT or /sys/class/powercap
  std::string sim_spec;                      // empty: $JOULE_SIM or two idle GPUs
  AutoFallback auto_fallback = AutoFallback::kSimulated;  // kAuto without a usable NVML
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
  std::vector<std::shared_ptr<Gpu>> gpus;
  // "nvml", "sim", or "none" (kAuto with AutoFallback::kNoGpus and no
  // usable NVML: no GPU at all).
  std::string gpu_backend;
  std::string gpu_backend_reason;  // why that backend, in words
  // Why NVML gave no GPU (it could not be loaded or initialised, or listed
  // none); empty when it gave GPUs or was not tried (backend kSim).
  std::string nvml_problem;
  bool nvml_loaded = false;  // NVML was loaded and initialised (it may still list no GPU)
  std::string nvml_library;        // what was (or would have been) loaded
  std::string driver_version;
  std::vector<std::string> nvml_missing_functions;
  std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones;
  std::vector<std::string> cpu_problems;  // why RAPL zones are missing or unreadable
  std::string control_path;               // how power limits would be changed, and why (control layer)

  bool simulated() const { return gpu_backend == "sim"; }
};

// The hardware alone (control_path left empty). Throws DeviceError when
// backend is kNvml and NVML cannot be used, and UsageError for a bad
// simulated-GPU spec. In kAuto, a missing driver or a machine with no NVIDIA
// GPU selects the simulated GPUs or none, as options.auto_fallback says.
Devices discover_hardware(const DiscoveryOptions& options = {});

// Keeps only the GPUs whose indices are listed (in that order). Throws
// UsageError naming an index that does not exist.
void select_gpus(Devices& devices, const std::vector<unsigned>& indices);

}  // namespace joule
