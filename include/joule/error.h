// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Error types thrown at joule's API edges. Every message names what failed
// and, where known, why and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace joule {

// Base of every exception joule throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user: a flag, a file, a configuration value.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Why a device reading or setting failed, independent of the backend.
enum class DeviceErrc {
  kNotSupported,     // the device or driver lacks this capability
  kNoPermission,     // the operation needs privileges the process lacks
  kDeviceLost,       // the device fell off the bus or stopped answering
  kNotFound,         // no such device, file or symbol
  kInvalidArgument,  // a value outside what the device accepts
  kDriver,           // the driver is missing, not loaded or mismatched
  kUnknown,
};

const char* to_string(DeviceErrc code);

// A device (GPU or CPU energy zone) could not be read or controlled.
class DeviceError : public Error {
 public:
  DeviceError(DeviceErrc code, const std::string& message) : Error(message), code_(code) {}
  DeviceErrc code() const { return code_; }

 private:
  DeviceErrc code_;
};

}  // namespace joule
