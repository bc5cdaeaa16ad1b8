// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The ROCm SMI shared library (librocm_smi64.so.1), loaded at run time with
// dlopen and resolved into one function table. Its types come from ROCm
// SMI 5.2's own header (Debian's librocm-smi-dev), so the table is checked
// against the real ABI; nothing links against the library. Private to the
// rocm backend.
#pragma once

#include <rocm_smi/rocm_smi.h>

#include <memory>
#include <string>
#include <vector>

#include "common/shared_library.h"
#include "joule/error.h"

// ROCm 6 added the current (not averaged) socket power; ROCm SMI 5.2's header
// lacks it, so its prototype is declared here, only for decltype(): the
// loader resolves it with dlsym where the library exports it.
extern "C" rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t dv_ind, uint64_t* socket_power_uw);

namespace joule::rocm {

// Every ROCm SMI function joule calls. Required ones must resolve for the
// load to succeed; a missing optional one only disables what needs it.
#define JOULE_RSMI_REQUIRED_FUNCTIONS(X) \
  X(rsmi_init)                           \
  X(rsmi_shut_down)                      \
  X(rsmi_status_string)                  \
  X(rsmi_num_monitor_devices)

#define JOULE_RSMI_OPTIONAL_FUNCTIONS(X)  \
  X(rsmi_version_get)                     \
  X(rsmi_dev_name_get)                    \
  X(rsmi_dev_unique_id_get)               \
  X(rsmi_dev_pci_id_get)                  \
  X(rsmi_dev_energy_count_get)            \
  X(rsmi_dev_power_ave_get)               \
  X(rsmi_dev_current_socket_power_get)    \
  X(rsmi_dev_power_cap_get)               \
  X(rsmi_dev_power_cap_default_get)       \
  X(rsmi_dev_power_cap_range_get)         \
  X(rsmi_dev_power_cap_set)               \
  X(rsmi_dev_busy_percent_get)            \
  X(rsmi_dev_memory_busy_percent_get)     \
  X(rsmi_dev_gpu_clk_freq_get)            \
  X(rsmi_dev_gpu_clk_freq_set)            \
  X(rsmi_dev_perf_level_set)              \
  X(rsmi_dev_temp_metric_get)             \
  X(rsmi_dev_memory_usage_get)            \
  X(rsmi_compute_process_info_get)        \
  X(rsmi_compute_process_gpus_get)

struct FunctionTable {
#define JOULE_RSMI_DECLARE_POINTER(name) decltype(&::name) name = nullptr;
  JOULE_RSMI_REQUIRED_FUNCTIONS(JOULE_RSMI_DECLARE_POINTER)
  JOULE_RSMI_OPTIONAL_FUNCTIONS(JOULE_RSMI_DECLARE_POINTER)
#undef JOULE_RSMI_DECLARE_POINTER
};

// Maps a ROCm SMI status onto joule's backend-neutral error kinds.
DeviceErrc errc_from_rsmi(rsmi_status_t status);

class Library {
 public:
  // dlopen()s path, resolves the table and calls rsmi_init(0). Throws
  // DeviceError(kDriver) naming the path and the loader's or ROCm SMI's reason.
  static std::shared_ptr<Library> open(const std::string& path);
  ~Library();  // rsmi_shut_down, then dlclose
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const FunctionTable& fn() const { return table_; }
  const std::string& path() const { return shared_library_.path(); }
  const std::vector<std::string>& missing_functions() const { return shared_library_.missing_functions(); }
  // The ROCm SMI library's own version ("5.2.3"), or "unknown".
  std::string version() const;
  // ROCm SMI's own text for a status ("RSMI_STATUS_PERMISSION: ...").
  std::string status_string(rsmi_status_t status) const;

 private:
  explicit Library(const std::string& path);
  SharedLibrary shared_library_;  // dlclose()d after ~Library's shutdown call
  bool initialised_ = false;
  FunctionTable table_;
};

}  // namespace joule::rocm
