// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/daemon/protocol.h"

#include <fmt/format.h>

#include <cmath>

#include "joule/common/utf8.h"

namespace joule::daemon {

const char* to_string(Op op) {
  switch (op) {
    case Op::kState: return "state";
    case Op::kLease: return "lease";
    case Op::kSetPowerLimit: return "set_power_limit";
    case Op::kRestoreDefault: return "restore_default";
    case Op::kLockClock: return "lock_clock";
    case Op::kResetClock: return "reset_clock";
    case Op::kRestore: return "restore";
    case Op::kRelease: return "release";
  }
  return "?";
}

Request parse_request(std::string_view line) {
  if (line.size() > kMaxMessageBytes) {
    throw ProtocolError(fmt::format("message of {} bytes exceeds the {}-byte limit", line.size(), kMaxMessageBytes));
  }
  // Named here rather than left to the parser: a client's bytes never reach
  // a reply or the log unless they are printable UTF-8.
  if (const auto at = first_invalid_utf8(line)) {
    throw ProtocolError(fmt::format("the request holds invalid UTF-8 at byte {}", *at));
  }
  const nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ProtocolError("not valid JSON");
  if (!j.is_object()) throw ProtocolError("a request must be a JSON object");
  const auto version = j.find("v");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != kProtocolVersion) {
    throw ProtocolError(fmt::format("unsupported protocol version (this daemon speaks \"v\": {})", kProtocolVersion));
  }
  Request request;
  const auto id = j.find("id");
  if (id == j.end() || !id->is_number_unsigned()) throw ProtocolError("\"id\" must be a non-negative integer");
  request.id = id->get<uint64_t>();
  const auto op = j.find("op");
  if (op == j.end() || !op->is_string()) throw ProtocolError("\"op\" must be a string");
  const std::string name = op->get<std::string>();
  if (name == "state") {
    request.op = Op::kState;
  } else if (name == "lease") {
    request.op = Op::kLease;
  } else if (name == "set_power_limit") {
    request.op = Op::kSetPowerLimit;
  } else if (name == "restore_default") {
    request.op = Op::kRestoreDefault;
  } else if (name == "lock_clock") {
    request.op = Op::kLockClock;
  } else if (name == "reset_clock") {
    request.op = Op::kResetClock;
  } else if (name == "restore") {
    request.op = Op::kRestore;
  } else if (name == "release") {
    request.op = Op::kRelease;
  } else {
    throw ProtocolError(fmt::format("unknown op \"{}\" (state, lease, set_power_limit, restore_default, lock_clock, "
                                    "reset_clock, restore, release)",
                                    printable(name)));
  }
  if (request.op != Op::kState) {
    const auto gpu = j.find("gpu");
    if (gpu == j.end() || !gpu->is_number_unsigned() || gpu->get<uint64_t>() > 1023) {
      throw ProtocolError("\"gpu\" must be a GPU index (0-1023)");
    }
    request.gpu = static_cast<unsigned>(gpu->get<uint64_t>());
  }
  if (request.op == Op::kSetPowerLimit) {
    const auto limit = j.find("limit_w");
    if (limit == j.end() || !limit->is_number() || !std::isfinite(limit->get<double>()) ||
        limit->get<double>() <= 0 || limit->get<double>() > 100000) {
      throw ProtocolError("\"limit_w\" must be a positive number of watts");
    }
    request.limit_w = limit->get<double>();
  }
  if (request.op == Op::kLockClock || request.op == Op::kResetClock) {
    const auto domain = j.find("domain");
    if (domain != j.end() && domain->is_string()) request.domain = clock_domain_from_string(domain->get<std::string>());
    if (!request.domain) throw ProtocolError("\"domain\" must be \"sm\" or \"memory\"");
  }
  if (request.op == Op::kLockClock) {
    request.clock_lock = clock_lock_from_json(j, "the lock_clock request");
    if (!request.clock_lock) throw ProtocolError("lock_clock needs \"min_mhz\" and \"max_mhz\"");
  }
  return request;
}

nlohmann::json clock_lock_json(const std::optional<ClockLock>& lock) {
  if (!lock) return nullptr;
  return {{"min_mhz", lock->min_mhz}, {"max_mhz", lock->max_mhz}};
}

std::optional<ClockLock> clock_lock_from_json(const nlohmann::json& value, const char* field) {
  if (value.is_null()) return std::nullopt;
  auto mhz = [&](const char* key) {
    const auto it = value.is_object() ? value.find(key) : value.end();
    if (it == value.end() || !it->is_number_unsigned() || it->get<uint64_t>() > 100000) {
      throw ProtocolError(fmt::format("{}: \"{}\" must be a clock in MHz (0-100000)", field, key));
    }
    return static_cast<uint32_t>(it->get<uint64_t>());
  };
  ClockLock lock{mhz("min_mhz"), mhz("max_mhz")};
  return lock;
}

std::string describe(const std::optional<ClockLock>& lock) {
  return lock ? fmt::format("{}-{} MHz", lock->min_mhz, lock->max_mhz) : "unlocked";
}

std::string ok_response(uint64_t id, nlohmann::json body) {
  body["v"] = kProtocolVersion;
  body["id"] = id;
  body["ok"] = true;
  // A GPU's name or a driver's error text is not ours to trust either.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string error_response(std::optional<uint64_t> id, const std::string& code, const std::string& reason) {
  nlohmann::json body = {{"v", kProtocolVersion}, {"ok", false}, {"code", code}, {"error", reason}};
  body["id"] = id ? nlohmann::json(*id) : nlohmann::json();
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace joule::daemon
