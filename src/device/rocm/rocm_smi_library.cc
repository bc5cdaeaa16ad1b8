// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "device/rocm/rocm_smi_library.h"

#include <fmt/format.h>

namespace joule::rocm {

DeviceErrc errc_from_rsmi(rsmi_status_t status) {
  switch (status) {
    case RSMI_STATUS_NOT_SUPPORTED:
    case RSMI_STATUS_NOT_YET_IMPLEMENTED: return DeviceErrc::kNotSupported;
    case RSMI_STATUS_PERMISSION: return DeviceErrc::kNoPermission;
    case RSMI_STATUS_INVALID_ARGS:
    case RSMI_STATUS_INPUT_OUT_OF_BOUNDS: return DeviceErrc::kInvalidArgument;
    case RSMI_STATUS_NOT_FOUND: return DeviceErrc::kNotFound;
    case RSMI_STATUS_INIT_ERROR: return DeviceErrc::kDriver;
    default: return DeviceErrc::kUnknown;
  }
}

Library::Library(const std::string& path) : shared_library_("ROCm SMI", path, "is ROCm's SMI library installed?") {}

std::shared_ptr<Library> Library::open(const std::string& path) {
  std::shared_ptr<Library> lib(new Library(path));
  SharedLibrary& loaded = lib->shared_library_;
  FunctionTable& table = lib->table_;
#define JOULE_RSMI_RESOLVE_REQUIRED(name) loaded.resolve_required(table.name, #name);
  JOULE_RSMI_REQUIRED_FUNCTIONS(JOULE_RSMI_RESOLVE_REQUIRED)
#undef JOULE_RSMI_RESOLVE_REQUIRED
#define JOULE_RSMI_RESOLVE_OPTIONAL(name) loaded.resolve_optional(table.name, #name);
  JOULE_RSMI_OPTIONAL_FUNCTIONS(JOULE_RSMI_RESOLVE_OPTIONAL)
#undef JOULE_RSMI_RESOLVE_OPTIONAL

  // Flags 0: the GPUs amdgpu drives (RSMI_INIT_FLAG_ALL_GPUS would add
  // other vendors' cards, which NVML already covers).
  const rsmi_status_t status = lib->table_.rsmi_init(0);
  if (status != RSMI_STATUS_SUCCESS) {
    throw DeviceError(errc_from_rsmi(status) == DeviceErrc::kNoPermission ? DeviceErrc::kNoPermission
                                                                          : DeviceErrc::kDriver,
                      fmt::format("rsmi_init failed: {} (ROCm SMI status {}; is the amdgpu driver loaded?)",
                                  lib->status_string(status), static_cast<unsigned>(status)));
  }
  lib->initialised_ = true;
  return lib;
}

Library::~Library() {
  if (initialised_) table_.rsmi_shut_down();
}

std::string Library::version() const {
  rsmi_version_t version{};
  if (table_.rsmi_version_get == nullptr || table_.rsmi_version_get(&version) != RSMI_STATUS_SUCCESS) {
    return "unknown";
  }
  return fmt::format("{}.{}.{}", version.major, version.minor, version.patch);
}

std::string Library::status_string(rsmi_status_t status) const {
  const char* text = nullptr;
  if (table_.rsmi_status_string != nullptr && table_.rsmi_status_string(status, &text) == RSMI_STATUS_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return fmt::format("ROCm SMI status {}", static_cast<unsigned>(status));
}

}  // namespace joule::rocm
