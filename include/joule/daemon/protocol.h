// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The jouled protocol: one JSON object per line over a Unix stream socket.
// docs/daemon-protocol.md describes it for client authors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "joule/device/gpu.h"
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
  kLockClock,      // lock a clock domain to a range, as a change under the lease
  kResetClock,     // let the driver choose a domain's clock again, as a change under the lease
  kRestore,        // put back the values the GPU had when the lease began, keep holding it
  kRelease,        // restore and let go
};

const char* to_string(Op op);

struct Request {
  uint64_t id = 0;
  Op op = Op::kState;
  std::optional<unsigned> gpu;
  std::optional<double> limit_w;
  std::optional<ClockDomain> domain;  // lock_clock, reset_clock
  std::optional<ClockLock> clock_lock;  // lock_clock
};

// {"min_mhz": .., "max_mhz": ..}, or null for no lock: how replies and the
// state file write a clock lock.
nlohmann::json clock_lock_json(const std::optional<ClockLock>& lock);
// The reverse; throws ProtocolError naming the field when it is neither.
std::optional<ClockLock> clock_lock_from_json(const nlohmann::json& value, const char* field);
// "210-1410 MHz" or "unlocked", for the audit log.
std::string describe(const std::optional<ClockLock>& lock);

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
// "invalid" (bad request or value), "device" (the GPU call failed),
// "internal" (the daemon's own failure answering this request).
std::string error_response(std::optional<uint64_t> id, const std::string& code, const std::string& reason);

}  // namespace joule::daemon
