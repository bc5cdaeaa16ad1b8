// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "device/nvml/nvml_library.h"

#include <fmt/format.h>

namespace joule::nvml {

DeviceErrc errc_from_nvml(nvmlReturn_t code) {
  switch (code) {
    case kErrorNotSupported: return DeviceErrc::kNotSupported;
    case kErrorNoPermission: return DeviceErrc::kNoPermission;
    case kErrorGpuIsLost:
    case kErrorResetRequired: return DeviceErrc::kDeviceLost;
    case kErrorNotFound:
    case kErrorFunctionNotFound: return DeviceErrc::kNotFound;
    case kErrorInvalidArgument: return DeviceErrc::kInvalidArgument;
    case kErrorUninitialized:
    case kErrorDriverNotLoaded:
    case kErrorLibraryNotFound:
    case kErrorLibRmVersionMismatch: return DeviceErrc::kDriver;
    default: return DeviceErrc::kUnknown;
  }
}

Library::Library(const std::string& path) : shared_library_("NVML", path, "is the NVIDIA driver installed?") {}

std::shared_ptr<Library> Library::open(const std::string& path) {
  std::shared_ptr<Library> lib(new Library(path));
  SharedLibrary& loaded = lib->shared_library_;
  FunctionTable& table = lib->table_;
#define JOULE_NVML_RESOLVE_REQUIRED(name) loaded.resolve_required(table.name, #name);
  JOULE_NVML_REQUIRED_FUNCTIONS(JOULE_NVML_RESOLVE_REQUIRED)
#undef JOULE_NVML_RESOLVE_REQUIRED
#define JOULE_NVML_RESOLVE_OPTIONAL(name) loaded.resolve_optional(table.name, #name);
  JOULE_NVML_OPTIONAL_FUNCTIONS(JOULE_NVML_RESOLVE_OPTIONAL)
#undef JOULE_NVML_RESOLVE_OPTIONAL

  const nvmlReturn_t rc = lib->table_.nvmlInit_v2();
  if (rc != kSuccess) {
    throw DeviceError(errc_from_nvml(rc) == DeviceErrc::kNoPermission ? DeviceErrc::kNoPermission
                                                                     : DeviceErrc::kDriver,
                      fmt::format("nvmlInit failed: {} (NVML error {})", lib->error_string(rc), rc));
  }
  lib->initialised_ = true;
  return lib;
}

Library::~Library() {
  if (initialised_) table_.nvmlShutdown();
}

std::string Library::driver_version() const {
  if (table_.nvmlSystemGetDriverVersion == nullptr) return "unknown";
  char buffer[kDriverVersionBufferSize] = {};
  if (table_.nvmlSystemGetDriverVersion(buffer, sizeof buffer) != kSuccess) return "unknown";
  return buffer;
}

std::string Library::error_string(nvmlReturn_t code) const {
  const char* text = table_.nvmlErrorString ? table_.nvmlErrorString(code) : nullptr;
  return text ? text : fmt::format("NVML error {}", code);
}

}  // namespace joule::nvml
