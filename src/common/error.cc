// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/error.h"

namespace joule {

const char* to_string(DeviceErrc code) {
  switch (code) {
    case DeviceErrc::kNotSupported: return "not supported";
    case DeviceErrc::kNoPermission: return "no permission";
    case DeviceErrc::kDeviceLost: return "device lost";
    case DeviceErrc::kNotFound: return "not found";
    case DeviceErrc::kInvalidArgument: return "invalid argument";
    case DeviceErrc::kDriver: return "driver problem";
    case DeviceErrc::kUnknown: return "unknown error";
  }
  return "unknown error";
}

}  // namespace joule
