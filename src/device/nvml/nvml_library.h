// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The NVML shared library, loaded at run time with dlopen and resolved into one
// function table. Private to the nvml backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device/nvml/nvml_abi.h"
#include "common/shared_library.h"
#include "joule/error.h"

namespace joule::nvml {

// Every NVML function joule calls. Required ones must resolve for the load to
// succeed; a missing optional one only disables what needs it.
#define JOULE_NVML_REQUIRED_FUNCTIONS(X) \
  X(nvmlInit_v2)                         \
  X(nvmlShutdown)                        \
  X(nvmlErrorString)                     \
  X(nvmlDeviceGetCount_v2)               \
  X(nvmlDeviceGetHandleByIndex_v2)

#define JOULE_NVML_OPTIONAL_FUNCTIONS(X)          \
  X(nvmlSystemGetDriverVersion)                   \
  X(nvmlDeviceGetName)                            \
  X(nvmlDeviceGetUUID)                            \
  X(nvmlDeviceGetPciInfo_v3)                      \
  X(nvmlDeviceGetArchitecture)                    \
  X(nvmlDeviceGetTotalEnergyConsumption)          \
  X(nvmlDeviceGetPowerUsage)                      \
  X(nvmlDeviceGetFieldValues)                     \
  X(nvmlDeviceGetSamples)                         \
  X(nvmlDeviceGetPowerManagementLimit)            \
  X(nvmlDeviceGetPowerManagementLimitConstraints) \
  X(nvmlDeviceGetPowerManagementDefaultLimit)     \
  X(nvmlDeviceGetUtilizationRates)                \
  X(nvmlDeviceGetClockInfo)                       \
  X(nvmlDeviceGetTemperature)                     \
  X(nvmlDeviceGetCurrentClocksEventReasons)       \
  X(nvmlDeviceGetCurrentClocksThrottleReasons)    \
  X(nvmlDeviceGetMemoryInfo)                      \
  X(nvmlDeviceGetComputeRunningProcesses_v3)      \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3)     \
  X(nvmlDeviceGetProcessUtilization)              \
  X(nvmlDeviceSetPowerManagementLimit)           \
  X(nvmlDeviceGetSupportedMemoryClocks)          \
  X(nvmlDeviceGetSupportedGraphicsClocks)        \
  X(nvmlDeviceSetGpuLockedClocks)                \
  X(nvmlDeviceResetGpuLockedClocks)              \
  X(nvmlDeviceSetMemoryLockedClocks)             \
  X(nvmlDeviceResetMemoryLockedClocks)           \
  X(nvmlDeviceSetApplicationsClocks)             \
  X(nvmlDeviceResetApplicationsClocks)

struct FunctionTable {
#define JOULE_NVML_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  JOULE_NVML_REQUIRED_FUNCTIONS(JOULE_NVML_DECLARE_POINTER)
  JOULE_NVML_OPTIONAL_FUNCTIONS(JOULE_NVML_DECLARE_POINTER)
#undef JOULE_NVML_DECLARE_POINTER
};

// Maps an NVML return code onto joule's backend-neutral error kinds.
DeviceErrc errc_from_nvml(nvmlReturn_t code);

class Library {
 public:
  // dlopen()s path, resolves the table and calls nvmlInit_v2. Throws
  // DeviceError(kDriver) naming the path and the loader's or NVML's reason.
  static std::shared_ptr<Library> open(const std::string& path);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const FunctionTable& fn() const { return table_; }
  const std::string& path() const { return shared_library_.path(); }
  const std::vector<std::string>& missing_functions() const { return shared_library_.missing_functions(); }
  std::string driver_version() const;
  // NVML's own text for a return code ("Insufficient Permissions", ...).
  std::string error_string(nvmlReturn_t code) const;

 private:
  explicit Library(const std::string& path);
  SharedLibrary shared_library_;  // dlclose()d after ~Library's shutdown call
  bool initialised_ = false;
  FunctionTable table_;
};

}  // namespace joule::nvml
