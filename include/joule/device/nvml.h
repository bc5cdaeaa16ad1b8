// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// NVIDIA GPUs through NVML, loaded at run time (no build-time dependency on
// the NVIDIA driver or headers).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "joule/device/gpu.h"

namespace joule {

// The library to load: $JOULE_NVML_LIBRARY when set, else "libnvidia-ml.so.1".
std::string nvml_library_path();

struct NvmlDevices {
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::string library_path;
  std::string driver_version;
  // Optional NVML functions the loaded library does not export (older
  // drivers); each disables the capability that needs it.
  std::vector<std::string> missing_functions;
};

// Loads NVML from library_path and opens every GPU it reports. Throws
// DeviceError(kDriver) when the library cannot be loaded or initialised.
NvmlDevices open_nvml_gpus(const std::string& library_path);

}  // namespace joule
