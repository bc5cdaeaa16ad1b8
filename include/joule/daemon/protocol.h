// The jouled protocol: one JSON object per line over a Unix stream socket.
// docs/daemon-protocol.md describes it for client authors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "joule/error.h"

namespace joule::daemon {

inline constexpr int kProtocolVersion = 1;
inline constexpr std::size_t kMaxMessageBytes = 4096;  // a longer line is refused and the connection closed
inline constexpr const char* kDefaultSocketPath = "/run/joule/jouled.sock";

enum class Op {
  kState,          // read every GPU's limits and who holds it
  kLease,          // hold a GPU without changing it yet
  kSetPowerLimit,  // change a held (or free) GPU's limit; the lease starts or continues
  kRestoreDefault, // set the GPU's default limit, as a change under the lease
  kRestore,        // put back the value the GPU had when the lease began, keep holding it
  kRelease,        // restore and let go
};

const char* to_string(Op op);

struct Request {
  uint64_t id = 0;
  Op op = Op::kState;
  std::optional<unsigned> gpu;
  std::optional<double> limit_w;
};

class ProtocolError : public Error {
 public:
  using Error::Error;
};

// Parses one line (without its newline). Throws ProtocolError saying what is
// wrong: not JSON, not an object, wrong version, unknown op, missing or
// ill-typed fields, values out of range.
Request parse_request(std::string_view line);

std::string ok_response(uint64_t id, nlohmann::json body = nlohmann::json::object());
// code: "refused" (not authorised), "busy" (held by another client),
// "invalid" (bad request or value), "device" (the GPU call failed).
std::string error_response(std::optional<uint64_t> id, const std::string& code, const std::string& reason);

}  // namespace joule::daemon
