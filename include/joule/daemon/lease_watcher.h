// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Who holds each GPU's limit through jouled, asked with the daemon's "state"
// request. jouled is optional: when its socket is absent or it fails, poll()
// says so in status() and tries again on the next call. Used by `joule top`
// and `joule exporter`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "joule/daemon/client.h"

namespace joule::daemon {

struct GpuLease {
  std::string holder;          // "alice (uid 1000, pid 42)", as jouled's log names it
  std::string user;            // the holder's user name ("" from an older jouled)
  std::optional<uint32_t> pid; // the holder's pid (none from an older jouled)
  double power_limit_w = 0.0;  // the limit in force under the lease
};

// The socket named by $JOULE_DAEMON_SOCKET, else jouled's default ("" when
// the variable is set empty: jouled is not to be asked).
std::string configured_socket_path();

class LeaseWatcher {
 public:
  LeaseWatcher();  // configured_socket_path()
  explicit LeaseWatcher(std::string socket_path);  // "": disabled

  // The leases held now, by GPU uuid; empty when jouled cannot be asked.
  std::map<std::string, GpuLease> poll();
  // Whether the last poll() reached jouled.
  bool reachable() const { return reachable_; }
  // The socket and lease count, or why jouled could not be asked.
  const std::string& status() const { return status_; }
  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  std::unique_ptr<DaemonClient> client_;
  bool reachable_ = false;
  std::string status_;
};

}  // namespace joule::daemon
