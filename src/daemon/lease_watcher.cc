// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/daemon/lease_watcher.h"

#include <fmt/format.h>

#include <cstdlib>

#include "joule/daemon/protocol.h"

namespace joule::daemon {

std::string configured_socket_path() {
  const char* configured = std::getenv("JOULE_DAEMON_SOCKET");
  return configured != nullptr ? configured : kDefaultSocketPath;
}

LeaseWatcher::LeaseWatcher() : LeaseWatcher(configured_socket_path()) {}

LeaseWatcher::LeaseWatcher(std::string socket_path) : socket_path_(std::move(socket_path)) {}

std::map<std::string, GpuLease> LeaseWatcher::poll() {
  reachable_ = false;
  if (socket_path_.empty()) {
    status_ = "disabled ($JOULE_DAEMON_SOCKET is empty)";
    return {};
  }
  try {
    // A short timeout: a wedged daemon must not stall a refresh or a scrape.
    if (!client_) client_ = std::make_unique<DaemonClient>(socket_path_, 2.0);
    const nlohmann::json reply = client_->call({{"op", "state"}});
    std::map<std::string, GpuLease> leases;
    for (const auto& gpu : reply.value("gpus", nlohmann::json::array())) {
      const auto held_by = gpu.find("held_by");
      if (held_by == gpu.end() || !held_by->is_string()) continue;
      GpuLease lease;
      lease.holder = held_by->get<std::string>();
      lease.power_limit_w = gpu.value("power_limit_w", 0.0);
      if (const auto holder = gpu.find("holder"); holder != gpu.end() && holder->is_object()) {
        lease.user = holder->value("user", "");
        if (holder->contains("pid") && (*holder)["pid"].is_number_unsigned()) {
          lease.pid = (*holder)["pid"].get<uint32_t>();
        }
      }
      leases[gpu.value("uuid", "")] = std::move(lease);
    }
    reachable_ = true;
    status_ = fmt::format("{}, {} lease{}", socket_path_, leases.size(), leases.size() == 1 ? "" : "s");
    return leases;
  } catch (const std::exception& e) {
    client_.reset();
    status_ = fmt::format("not reachable ({})", e.what());
    return {};
  }
}

}  // namespace joule::daemon
