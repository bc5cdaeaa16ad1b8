// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// AMD GPUs (Instinct MI200/MI300 and others amdgpu drives) through ROCm SMI,
// loaded at run time like NVML: no build-time dependency on ROCm being
// installed where joule runs. docs/devices.md says what each reading is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "joule/device/gpu.h"

namespace joule {

// The library to load: $JOULE_ROCM_SMI_LIBRARY when set, else "librocm_smi64.so.1".
std::string rocm_smi_library_path();

struct RocmDevices {
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::string library_path;
  std::string library_version;  // ROCm SMI's own ("5.2.3"), or "unknown"
  // Optional ROCm SMI functions the loaded library does not export (older
  // ROCm: rsmi_dev_current_socket_power_get came with ROCm 6); each disables
  // the capability that needs it.
  std::vector<std::string> missing_functions;
};

// Loads ROCm SMI from library_path and opens every GPU it reports, numbering
// them first_index, first_index + 1, ... (joule's indices are unique across
// backends on a node with NVIDIA and AMD GPUs). Throws DeviceError(kDriver)
// when the library cannot be loaded or initialised.
RocmDevices open_rocm_smi_gpus(const std::string& library_path, unsigned first_index = 0);

}  // namespace joule
