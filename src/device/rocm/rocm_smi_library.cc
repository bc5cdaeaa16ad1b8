// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "device/rocm/rocm_smi_library.h"

#include <dlfcn.h>
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

std::shared_ptr<Library> Library::open(const std::string& path) {
  std::shared_ptr<Library> lib(new Library());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    throw DeviceError(DeviceErrc::kDriver,
                      fmt::format("cannot load ROCm SMI library '{}': {} (is ROCm's SMI library installed?)", path,
                                  why ? why : "unknown reason"));
  }
  auto resolve = [&](const char* name) { return dlsym(lib->handle_, name); };

#define JOULE_RSMI_RESOLVE_REQUIRED(name)                                                                  \
  lib->table_.name = reinterpret_cast<decltype(lib->table_.name)>(resolve(#name));                        \
  if (lib->table_.name == nullptr) {                                                                      \
    throw DeviceError(DeviceErrc::kDriver,                                                                \
                      fmt::format("ROCm SMI library '{}' lacks the required function {}", path, #name));  \
  }
  JOULE_RSMI_REQUIRED_FUNCTIONS(JOULE_RSMI_RESOLVE_REQUIRED)
#undef JOULE_RSMI_RESOLVE_REQUIRED

#define JOULE_RSMI_RESOLVE_OPTIONAL(name)                                           \
  lib->table_.name = reinterpret_cast<decltype(lib->table_.name)>(resolve(#name)); \
  if (lib->table_.name == nullptr) lib->missing_.emplace_back(#name);
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
  if (handle_ != nullptr) dlclose(handle_);
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
