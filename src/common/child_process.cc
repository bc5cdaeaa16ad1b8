// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/child_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "joule/error.h"

namespace joule {

namespace {

volatile sig_atomic_t g_child_pid = 0;

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void forward_signal(int signal_number, siginfo_t* info, void*) {
  // A signal the terminal sent to the foreground group (Ctrl-C) reached the
  // child too; only signals addressed to joule itself are passed on.
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  if (g_child_pid > 0) kill(g_child_pid, signal_number);
}

}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv,
                                 const std::vector<std::pair<std::string, std::string>>& extra_env) {
  if (argv.empty()) throw UsageError("no command to run");
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  // posix_spawnp rather than fork: safe while the sampler thread runs, and
  // glibc reports a failed exec (not found, not executable) as its result.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const bool overridden = std::any_of(extra_env.begin(), extra_env.end(), [&](const auto& kv) {
      return entry.rfind(kv.first + "=", 0) == 0;
    });
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : extra_env) env_strings.push_back(key + "=" + value);
  std::vector<char*> env;
  for (auto& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), env.data());
  if (error != 0) {
    throw SpawnError(fmt::format("cannot run '{}': {}", argv[0], std::strerror(error)), error == ENOENT ? 127 : 126);
  }

  g_child_pid = pid;
  struct sigaction action {};
  action.sa_sigaction = forward_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal_number : kForwardedSignals) sigaction(signal_number, &action, nullptr);
  return ChildProcess(pid);
}

int ChildProcess::wait_forwarding_signals() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("waitpid: {}", std::strerror(errno)));
  }
  g_child_pid = 0;
  struct sigaction restore {};
  restore.sa_handler = SIG_DFL;
  sigemptyset(&restore.sa_mask);
  for (int signal_number : kForwardedSignals) sigaction(signal_number, &restore, nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace joule
