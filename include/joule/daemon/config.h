// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// jouled's configuration: where it listens, who may change which GPU.
//
//   {
//     "socket": "/run/joule/jouled.sock", "socket_mode": "0660", "socket_group": "joule",
//     "state_file": "/var/lib/joule/jouled.state",
//     "allow": [ {"user": "alice", "gpus": [0, 1]}, {"group": "ml", "gpus": "all"} ]
//   }
// root may always change every GPU; anybody else needs a matching rule.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace joule::daemon {

struct AllowRule {
  std::optional<std::string> user;
  std::optional<std::string> group;
  std::optional<std::vector<unsigned>> gpus;  // nullopt: all GPUs
};

struct DaemonConfig {
  std::string socket_path = "/run/joule/jouled.sock";
  unsigned socket_mode = 0660;
  std::optional<std::string> socket_group;
  std::string state_path = "/var/lib/joule/jouled.state";
  std::vector<AllowRule> allow;

  // Throws UsageError naming the file and the offending key or value
  // (unknown keys, wrong types, users or groups that do not exist).
  static DaemonConfig load(const std::string& path);

  // Whether uid (with its groups) may change gpu; says which rule matched or
  // why not in `why`.
  bool allows(uid_t uid, gid_t gid, unsigned gpu, std::string* why) const;
};

}  // namespace joule::daemon
