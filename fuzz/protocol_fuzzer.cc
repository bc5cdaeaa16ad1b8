// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for jouled's request parser and its replies: any bytes
// must give either a Request or a ProtocolError, never a crash, hang or
// other exception. The reply the daemon sends either way must be one line of
// JSON in valid UTF-8, and a refusal's text, which the daemon also logs, must
// be printable: no client byte that is not UTF-8, no control character (a
// newline in it would forge a log line).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "joule/common/utf8.h"
#include "joule/daemon/protocol.h"

namespace {

void check_reply(const std::string& reply) {
  if (reply.empty() || reply.back() != '\n' || reply.find('\n') != reply.size() - 1) __builtin_trap();
  if (!joule::is_valid_utf8(reply)) __builtin_trap();
  if (nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false).is_discarded()) __builtin_trap();
}

}  // namespace

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
    check_reply(joule::daemon::ok_response(request.id, {{"op", joule::daemon::to_string(request.op)}}));
  } catch (const joule::daemon::ProtocolError& e) {
    const std::string what = e.what();
    // As logged: UTF-8 without control characters.
    if (!joule::is_valid_utf8(what)) __builtin_trap();
    for (const char c : what) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) __builtin_trap();
    }
    check_reply(joule::daemon::error_response(std::nullopt, "invalid", what));
  }
  return 0;
}
