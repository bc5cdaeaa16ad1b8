// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Workloads that leave processes behind when only their first process is
// stopped, and what the tests of `joule sweep` and `joule measure` need to
// see whether any of them survives joule: each workload script appends the
// PID of every process it starts (beyond short-lived helpers) to a file.
// Shared by the sweep and measure stop tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.h"

namespace joule::testing {

// A workload: a script run as `sh SCRIPT PIDS LOG`, which appends its
// processes' PIDs to PIDS (expected_pids of them once it is going) and,
// where it cleans up, copies LOG (the fake driver's set-call log) to
// PIDS.seen as its last act.
struct StopWorkload {
  std::string name;
  std::string script;
  int expected_pids = 0;
  bool cleans_up = false;       // writes PIDS.seen when stopped
  bool needs_sigkill = false;   // ignores the stop signals: only SIGKILL after the grace period ends it
};

inline const std::vector<StopWorkload>& stop_workloads() {
  static const std::vector<StopWorkload> workloads = {
      // A shell and a background child: the child is orphaned when only the
      // shell gets the signal (issue 47's `sleep 60; ...`).
      {"ShellAndChild", "echo $$ >> \"$1\"\nsleep 60 &\necho $! >> \"$1\"\nwait\n", 2, false, false},
      // Ignores every stop signal, and so does its child (an ignored signal
      // stays ignored across exec).
      {"IgnoresStopSignals", "trap '' INT TERM HUP\necho $$ >> \"$1\"\nsleep 60 &\necho $! >> \"$1\"\nwait\n", 2,
       false, true},
      // Its child outlives it by a cleanup of 0.3 s (a training script
      // saving a checkpoint), then copies the set-call log: the GPU
      // settings must not be restored before it is gone.
      {"ChildCleansUp",
       "echo $$ >> \"$1\"\nsh -c 'trap \"sleep 0.3; cat \\\"\\$2\\\" > \\\"\\$1.seen\\\"; exit 0\" INT TERM HUP; "
       "echo $$ >> \"$1\"; while :; do sleep 0.1; done' cleanup \"$1\" \"$2\"\n",
       2, true, false},
  };
  return workloads;
}

// Starts argv like start_process, but in a session of its own: joule has no
// controlling terminal (as under Slurm, systemd or CI), whatever terminal
// the tests run in, and a process group that the test can clean up.
inline pid_t start_in_own_session(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                  const std::string& out_path, const std::string& err_path) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setsid();
    for (const auto& [key, value] : env) {
      if (value.empty()) {
        unsetenv(key.c_str());
      } else {
        setenv(key.c_str(), value.c_str(), 1);
      }
    }
    const int in = open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, STDIN_FILENO) < 0) _exit(125);
    if (std::freopen(out_path.c_str(), "w", stdout) == nullptr || std::freopen(err_path.c_str(), "w", stderr) == nullptr) {
      _exit(125);
    }
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// The shell-style exit code of pid, or nullopt when it is still running
// after timeout_s (it is left running); -1 when it was waited for already.
inline std::optional<int> wait_at_most(pid_t pid, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done < 0) return -1;
    if (done == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

inline std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// Waits up to timeout_s for the workload to have written `count` PIDs.
inline bool wait_for_pids(const std::string& path, int count, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (static_cast<int>(read_pids(path).size()) >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Whether pid is a live process (a zombie, dead but not yet reaped by
// whoever adopted it, is not).
inline bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// The PIDs of the workload that are still alive, after a short wait (a
// process SIGKILLed just now needs a moment to be reaped by init).
inline std::vector<pid_t> surviving_pids(const std::string& pids_path) {
  std::vector<pid_t> alive;
  for (int attempt = 0; attempt < 20; ++attempt) {
    alive.clear();
    for (const pid_t pid : read_pids(pids_path)) {
      if (process_alive(pid)) alive.push_back(pid);
    }
    if (alive.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return alive;
}

// Ends what a failed test left: the session joule ran in (its process
// group) and the workload's recorded processes.
inline void kill_leftovers(pid_t joule_pid, const std::string& pids_path) {
  kill(-joule_pid, SIGKILL);
  for (const pid_t pid : read_pids(pids_path)) {
    if (process_alive(pid)) kill(pid, SIGKILL);
  }
  wait_at_most(joule_pid, 5);
}

inline std::string signal_name(int signal_number) { return std::string("SIG") + sigabbrev_np(signal_number); }

}  // namespace joule::testing
