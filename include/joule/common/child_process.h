// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Runs the command a user measures (a workload): spawned in a process group
// of its own, signals forwarded to the whole group, stopped for good after a
// grace period, exit status carried back.
#pragma once

#include <sys/types.h>

#include <optional>
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

// How long a stopped workload has to end before joule sends SIGKILL.
inline constexpr double kDefaultKillGraceS = 10.0;
inline constexpr double kMaxKillGraceS = 3600.0;

// One workload at a time: the signal handlers it installs are the process's.
//
// Process groups. A workload runs in a process group of its own, so that a
// stop signal reaches every process it started (a shell's children, a
// launcher's workers), not only the first. The exception is a joule in the
// foreground of a terminal: there the workload stays in joule's group, the
// terminal's foreground, so that it can read the terminal and Ctrl-C and
// Ctrl-Z act on the whole job as the shell arranged (a workload in a group
// of its own would be stopped by SIGTTIN at its first read, and a Ctrl-Z
// would stop joule but not the workload). Handing the terminal to the
// workload's group instead (tcsetpgrp) would keep Ctrl-C from joule, which
// then could not tell a stopped sweep from a failed run.
class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with argv, and extra_env added to the
  // environment. Throws SpawnError naming the command when it cannot start.
  static ChildProcess spawn(const std::vector<std::string>& argv,
                            const std::vector<std::pair<std::string, std::string>>& extra_env = {});

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // Waits for the workload. Meanwhile SIGINT, SIGTERM, SIGHUP, SIGQUIT,
  // SIGUSR1 and SIGUSR2 sent to joule are passed on to the workload's group
  // (in joule's terminal group: to the workload's first process, and not at
  // all when the terminal sent them, as it sent them to every process of the
  // group already). After a stop signal (SIGINT, SIGTERM, SIGHUP, or stop())
  // the workload has kill_grace_s to end; then whatever is left of its group
  // gets SIGKILL, and this returns only once every process of the group is
  // gone (in joule's terminal group: the first process). A workload that
  // exits by itself may leave processes running in the background, as a
  // shell would. Returns the exit code a shell would report: the first
  // process's status, or 128 + signal number when a signal ended it. The
  // handlers joule had before spawn() are back when this returns.
  int wait_forwarding_signals(double kill_grace_s = kDefaultKillGraceS);

  // Stops the workload as if joule had received signal_number (a caller that
  // caught a stop signal before the workload started).
  void stop(int signal_number);

  // The stop signal that reached joule (or stop()) while the workload ran; 0:
  // none.
  int stop_signal() const;

  pid_t pid() const { return pid_; }
  // The workload's process group: pid() when it has its own.
  pid_t process_group() const { return process_group_; }

 private:
  ChildProcess(pid_t pid, pid_t process_group) : pid_(pid), process_group_(process_group) {}
  // Puts back the handlers, the wake-up pipe and the subreaper setting
  // spawn() changed.
  void stop_forwarding();
  // Reaps what of the workload's group has ended (status: the first
  // process's, if it is among them).
  void reap_group(std::optional<int>& status) const;

  pid_t pid_;
  pid_t process_group_;
  bool forwarding_ = true;  // its signal handlers are installed
  int stop_signal_ = 0;     // kept from the wait
};

}  // namespace joule
