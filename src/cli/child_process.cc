#include "cli/child_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "joule/error.h"

namespace joule::cli {

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

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("no command to run");
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  // posix_spawnp rather than fork: safe while the sampler thread runs, and
  // glibc reports a failed exec (not found, not executable) as its result.
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
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

}  // namespace joule::cli
