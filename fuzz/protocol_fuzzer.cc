// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for jouled's request parser: any bytes must give either a
// Request or a ProtocolError, never a crash, hang or other exception.
#include <cstdint>
#include <string_view>

#include "joule/daemon/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  try {
    const joule::daemon::Request request = joule::daemon::parse_request(line);
    // A parsed request has what its op needs.
    if (request.op != joule::daemon::Op::kState && !request.gpu) __builtin_trap();
    if (request.op == joule::daemon::Op::kSetPowerLimit && !request.limit_w) __builtin_trap();
    const bool clock_op = request.op == joule::daemon::Op::kLockClock || request.op == joule::daemon::Op::kResetClock;
    if (clock_op && !request.domain) __builtin_trap();
    if (request.op == joule::daemon::Op::kLockClock && !request.clock_lock) __builtin_trap();
    if (request.clock_lock) (void)joule::daemon::describe(request.clock_lock);
    (void)joule::daemon::ok_response(request.id);
  } catch (const joule::daemon::ProtocolError& e) {
    (void)joule::daemon::error_response(std::nullopt, "invalid", e.what());
  }
  return 0;
}
