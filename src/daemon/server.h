// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// jouled's server: a poll() loop over a Unix socket. Each connection's
// changes form leases that end, with the old values restored, when the
// connection closes for any reason. Private to the daemon.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/daemon/config.h"
#include "joule/daemon/protocol.h"
#include "joule/device/gpu.h"

namespace joule::daemon {

// What a lease puts back on one GPU when it ends: the power limit it found,
// and the lock each clock domain changed under it had (none: unlocked).
struct Lease {
  uint32_t original_limit_mw = 0;
  std::map<ClockDomain, std::optional<ClockLock>> original_clocks;
};

class Server {
 public:
  using Log = std::function<void(const std::string&)>;
  Server(DaemonConfig config, std::vector<std::shared_ptr<Gpu>> gpus, Log log);
  ~Server();

  // Puts back every setting a previous instance recorded in the state file
  // (it died without restoring), then empties the file.
  void recover();
  // Creates the socket (mode and group from the config).
  void listen();
  // Serves until stop becomes true, then restores every lease.
  void run(const std::atomic<bool>& stop);

 private:
  struct Client {
    int fd = -1;
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string user;                    // "alice"; the uid where it has no name
    std::string who;                     // "alice (uid 1000, pid 42)"
    std::string buffer;
    std::map<unsigned, Lease> leases;    // by gpu
  };

  void accept_client();
  // Reads what is available; false when the client is gone or misbehaved.
  bool read_client(Client& client);
  std::string handle(Client& client, const Request& request);
  std::string state_reply(const Request& request) const;
  // Starts the client's lease on gpu unless it holds one: records what to
  // put back (in the state file, before anything changes).
  Lease& hold(Client& client, unsigned gpu, const std::string& rule);
  // Records the domain's lock in the lease before its first change.
  void remember_clock(Client& client, Lease& lease, unsigned gpu, ClockDomain domain);
  void end_lease(Client& client, unsigned gpu, const std::string& why);
  void drop(int fd, const std::string& why);
  void write_state();
  void log(const std::string& text) const { log_(text); }

  DaemonConfig config_;
  std::vector<std::shared_ptr<Gpu>> gpus_;
  Log log_;
  int listen_fd_ = -1;
  std::map<int, Client> clients_;
  std::map<unsigned, int> holders_;  // gpu -> client fd
  nlohmann::json unrestored_ = nlohmann::json::array();  // leases whose restore failed: kept for the next start
};

}  // namespace joule::daemon
