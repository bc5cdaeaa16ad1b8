// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Runs the command a user measures: fork/exec, signals forwarded, exit status
// carried back.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "joule/error.h"

namespace joule {

// The command could not be started; exit_status() is what a shell would
// return (127: not found, 126: found but not executable).
class SpawnError : public Error {
 public:
  SpawnError(const std::string& message, int exit_status) : Error(message), exit_status_(exit_status) {}
  int exit_status() const { return exit_status_; }

 private:
  int exit_status_;
};

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with argv, and extra_env added to the
  // environment. Throws SpawnError naming the command when it cannot start.
  static ChildProcess spawn(const std::vector<std::string>& argv,
                            const std::vector<std::pair<std::string, std::string>>& extra_env = {});

  // Waits for the child. Meanwhile SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
  // and SIGUSR2 sent to joule are passed on to the child (signals the
  // terminal sends to the whole foreground group already reach it and are
  // not sent twice). Returns the exit code a shell would report: the child's
  // status, or 128 + signal number when a signal ended it.
  int wait_forwarding_signals();

  pid_t pid() const { return pid_; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

}  // namespace joule
