// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A driver's shared library loaded at run time with dlopen, for the backends
// that never link against their driver (nvml, rocm) and for attribution's
// events over the CUDA runtime a process has loaded: the load, and its
// functions resolved by name into the backend's function table, each either
// required (the load fails, naming the function and the library) or optional
// (left null and listed as missing: it only disables what needs it). Header
// only and private to joule's sources (src/).
#pragma once

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "joule/error.h"

namespace joule {

class SharedLibrary {
 public:
  // dlopen()s path. kind names the library in errors ("NVML"); install_hint
  // is what a failed load suggests ("is the NVIDIA driver installed?").
  // Throws DeviceError(kDriver) with the loader's reason.
  SharedLibrary(std::string kind, std::string path, std::string_view install_hint)
      : kind_(std::move(kind)), path_(std::move(path)) {
    dlerror();  // clears a stale error, so the one read below is this load's
    handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = dlerror();
      throw DeviceError(DeviceErrc::kDriver, fmt::format("cannot load {} library '{}': {} ({})", kind_, path_,
                                                         why ? why : "unknown reason", install_hint));
    }
  }
  ~SharedLibrary() { dlclose(handle_); }
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // Sets function to the symbol name; throws DeviceError(kDriver) where the
  // library lacks it.
  template <typename Fn>
  void resolve_required(Fn*& function, const char* name) const {
    function = reinterpret_cast<Fn*>(dlsym(handle_, name));
    if (function == nullptr) {
      throw DeviceError(DeviceErrc::kDriver,
                        fmt::format("{} library '{}' lacks the required function {}", kind_, path_, name));
    }
  }

  // Sets function to the symbol name, or to null (then name is listed in
  // missing_functions()).
  template <typename Fn>
  void resolve_optional(Fn*& function, const char* name) {
    function = reinterpret_cast<Fn*>(dlsym(handle_, name));
    if (function == nullptr) missing_.emplace_back(name);
  }

  const std::string& path() const { return path_; }
  const std::vector<std::string>& missing_functions() const { return missing_; }

 private:
  std::string kind_;
  std::string path_;
  void* handle_ = nullptr;
  std::vector<std::string> missing_;
};

}  // namespace joule
