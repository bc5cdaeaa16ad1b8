// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/daemon/client.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "joule/daemon/protocol.h"
#include "joule/error.h"

namespace joule::daemon {

DaemonClient::DaemonClient(std::string socket_path, double reply_timeout_s)
    : socket_path_(std::move(socket_path)), reply_timeout_s_(reply_timeout_s) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof address.sun_path) {
    throw DeviceError(DeviceErrc::kDriver, fmt::format("jouled socket path '{}' is too long", socket_path_));
  }
  std::strcpy(address.sun_path, socket_path_.c_str());
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    // A socket that refuses, or is not there, is a jouled that is not
    // running (killed: its socket stays behind) or is starting again.
    const bool not_running = error == ECONNREFUSED || error == ENOENT;
    throw DeviceError(error == EACCES ? DeviceErrc::kNoPermission : DeviceErrc::kDriver,
                      fmt::format("cannot connect to jouled at '{}': {}{}", socket_path_, std::strerror(error),
                                  not_running ? " (jouled is not running, or is starting again; settings it had "
                                                "changed are restored when it starts)"
                                              : ""));
  }
  // A jouled that accepts and then never answers must not hang its client
  // (a training loop, joule top).
  timeval timeout{};
  timeout.tv_sec = static_cast<time_t>(reply_timeout_s_);
  timeout.tv_usec = static_cast<suseconds_t>((reply_timeout_s_ - static_cast<double>(timeout.tv_sec)) * 1e6);
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

DaemonClient::~DaemonClient() {
  if (fd_ >= 0) close(fd_);
}

nlohmann::json DaemonClient::call(nlohmann::json request) {
  std::lock_guard lock(mutex_);
  request["v"] = kProtocolVersion;
  request["id"] = next_id_++;
  const std::string line = request.dump() + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw DeviceError(DeviceErrc::kDriver, fmt::format("jouled at '{}': {}", socket_path_, std::strerror(errno)));
    sent += static_cast<std::size_t>(n);
  }
  std::size_t newline;
  while ((newline = buffer_.find('\n')) == std::string::npos) {
    char chunk[4096];
    const ssize_t n = read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      throw DeviceError(DeviceErrc::kDriver,
                        fmt::format("jouled at '{}' did not answer within {:g} s", socket_path_, reply_timeout_s_));
    }
    if (n <= 0) {
      throw DeviceError(DeviceErrc::kDriver,
                        fmt::format("jouled at '{}' closed the connection (it stopped or restarted: this connection's "
                                    "leases ended, and what they changed is restored)",
                                    socket_path_));
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
  const nlohmann::json reply = nlohmann::json::parse(buffer_.substr(0, newline), nullptr, false);
  buffer_.erase(0, newline + 1);
  if (reply.is_discarded() || !reply.is_object()) throw DeviceError(DeviceErrc::kDriver, "jouled sent a malformed reply");
  if (!reply.value("ok", false)) {
    const std::string code = reply.value("code", "");
    const DeviceErrc errc = code == "refused"   ? DeviceErrc::kNoPermission
                            : code == "invalid" ? DeviceErrc::kInvalidArgument
                                                : DeviceErrc::kUnknown;
    throw DeviceError(errc, fmt::format("jouled refused: {}", reply.value("error", "no reason given")));
  }
  return reply;
}

DaemonControlledGpu::DaemonControlledGpu(std::shared_ptr<Gpu> inner, std::shared_ptr<DaemonClient> client)
    : inner_(std::move(inner)), client_(std::move(client)) {}

std::vector<CapabilityStatus> DaemonControlledGpu::probe_capabilities() {
  auto statuses = inner_->probe_capabilities();
  for (auto& s : statuses) {
    if (s.capability == GpuCapability::kSetPowerLimit) {
      s.available = true;
      s.reason.clear();
    }
  }
  return statuses;
}

void DaemonControlledGpu::set_power_limit_mw(uint32_t limit_mw) {
  check_power_limit_in_range(*this, limit_mw, power_limit_range_mw());
  client_->call({{"op", "set_power_limit"}, {"gpu", index()}, {"limit_w", limit_mw / 1000.0}});
}

std::optional<ClockLock> DaemonControlledGpu::clock_lock_mhz(ClockDomain domain) {
  const nlohmann::json gpus = client_->call({{"op", "state"}}).value("gpus", nlohmann::json::array());
  for (const auto& gpu : gpus) {
    if (gpu.value("index", -1) != static_cast<int>(index())) continue;
    const auto clocks = gpu.value("clocks", nlohmann::json::object());
    const auto entry = clocks.find(to_string(domain));
    if (entry == clocks.end()) break;
    try {
      return clock_lock_from_json(entry->value("lock", nlohmann::json()), "jouled's state reply");
    } catch (const ProtocolError& e) {
      throw DeviceError(DeviceErrc::kDriver, e.what());
    }
  }
  throw DeviceError(DeviceErrc::kNotSupported,
                    fmt::format("jouled at '{}' reports no {} clock for gpu{}", client_->socket_path(),
                                to_string(domain), index()));
}

void DaemonControlledGpu::lock_clock_mhz(ClockDomain domain, ClockLock lock) {
  check_clock_lock_in_range(*this, domain, lock, supported_clocks_mhz(domain));
  client_->call({{"op", "lock_clock"}, {"gpu", index()}, {"domain", to_string(domain)},
                 {"min_mhz", lock.min_mhz}, {"max_mhz", lock.max_mhz}});
}

void DaemonControlledGpu::reset_clock_lock(ClockDomain domain) {
  client_->call({{"op", "reset_clock"}, {"gpu", index()}, {"domain", to_string(domain)}});
}

}  // namespace joule::daemon
