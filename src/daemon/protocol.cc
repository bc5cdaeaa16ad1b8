#include "joule/daemon/protocol.h"

#include <fmt/format.h>

#include <cmath>

namespace joule::daemon {

const char* to_string(Op op) {
  switch (op) {
    case Op::kState: return "state";
    case Op::kLease: return "lease";
    case Op::kSetPowerLimit: return "set_power_limit";
    case Op::kRestoreDefault: return "restore_default";
    case Op::kRestore: return "restore";
    case Op::kRelease: return "release";
  }
  return "?";
}

Request parse_request(std::string_view line) {
  if (line.size() > kMaxMessageBytes) {
    throw ProtocolError(fmt::format("message of {} bytes exceeds the {}-byte limit", line.size(), kMaxMessageBytes));
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
  } else if (name == "restore") {
    request.op = Op::kRestore;
  } else if (name == "release") {
    request.op = Op::kRelease;
  } else {
    throw ProtocolError(fmt::format("unknown op \"{}\" (state, lease, set_power_limit, restore_default, restore, release)", name));
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
  return request;
}

std::string ok_response(uint64_t id, nlohmann::json body) {
  body["v"] = kProtocolVersion;
  body["id"] = id;
  body["ok"] = true;
  return body.dump() + "\n";
}

std::string error_response(std::optional<uint64_t> id, const std::string& code, const std::string& reason) {
  nlohmann::json body = {{"v", kProtocolVersion}, {"ok", false}, {"code", code}, {"error", reason}};
  body["id"] = id ? nlohmann::json(*id) : nlohmann::json();
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace joule::daemon
