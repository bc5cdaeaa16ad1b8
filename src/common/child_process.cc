// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>

#include "joule/error.h"

extern char** environ;

namespace joule {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
// How long SIGKILLed processes get to vanish before joule gives up on them
// (a process stuck in the kernel, e.g. in a driver call, dies only when the
// call returns).
constexpr double kAfterSigkillS = 5.0;
// How often the rest of a stopped workload's group is looked at once its
// first process is gone (a group cannot be waited on, only polled).
constexpr int kGroupPollMs = 10;

bool is_stop_signal(int signal_number) {
  return signal_number == SIGINT || signal_number == SIGTERM || signal_number == SIGHUP;
}

// What the signal handler reads and writes: lock-free atomics, safe in a
// handler on any thread.
std::atomic<pid_t> g_target{0};          // kill() target: -group, or the pid in joule's terminal group; 0: none yet
std::atomic<bool> g_own_group{false};    // the workload has a group of its own
std::atomic<int> g_stop_signal{0};       // the first stop signal; 0: none
std::atomic<bool> g_stop_forwarded{false};
std::atomic<int> g_wake_fd{-1};          // the write end of the waiter's pipe
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

// Set up by spawn(), put back by stop_forwarding().
bool g_active = false;
int g_wake_read_fd = -1;
int g_previous_subreaper = 0;
struct sigaction g_previous_actions[std::size(kForwardedSignals)];

void forward_signal(int signal_number, siginfo_t* info, void*) {
  const int saved_errno = errno;
  if (is_stop_signal(signal_number)) {
    int none = 0;
    g_stop_signal.compare_exchange_strong(none, signal_number);
  }
  // In joule's terminal group a signal from the terminal (Ctrl-C) reached
  // the workload too: not sent twice.
  const bool from_terminal = info != nullptr && info->si_code == SI_KERNEL;
  const pid_t target = g_target.load();
  if (target != 0 && (g_own_group.load() || !from_terminal)) {
    kill(target, signal_number);
    if (is_stop_signal(signal_number)) g_stop_forwarded = true;
  } else if (target != 0 && is_stop_signal(signal_number)) {
    g_stop_forwarded = true;  // the terminal delivered it
  }
  if (const int fd = g_wake_fd.load(); fd >= 0) {
    const char byte = 0;
    [[maybe_unused]] const ssize_t written = write(fd, &byte, 1);  // a full pipe is awake already
  }
  errno = saved_errno;
}

// Whether joule is in the foreground group of its controlling terminal
// (none under Slurm, systemd, nohup with setsid, CI; a background job `&`
// is not in the foreground).
bool in_terminal_foreground() {
  const int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return false;
  const bool foreground = tcgetpgrp(tty) == getpgrp();
  close(tty);
  return foreground;
}

void install_forwarding() {
  struct sigaction action {};
  action.sa_sigaction = forward_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i) {
    sigaction(kForwardedSignals[i], &action, &g_previous_actions[i]);
  }
}

// Whether any process of the group is left (EPERM: one that joule may not
// signal, a set-uid program, is there all the same).
bool group_alive(pid_t group) { return kill(-group, 0) == 0 || errno == EPERM; }

// The workload's environment: this process's, extra_env overriding.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& extra_env) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const bool overridden = std::any_of(extra_env.begin(), extra_env.end(), [&](const auto& kv) {
      return entry.rfind(kv.first + "=", 0) == 0;
    });
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : extra_env) env_strings.push_back(key + "=" + value);
  return env_strings;
}

}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv,
                                 const std::vector<std::pair<std::string, std::string>>& extra_env) {
  if (argv.empty()) throw UsageError("no command to run");
  if (g_active) throw Error("a workload is running already: joule runs one at a time");
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings = environment_with(extra_env);
  std::vector<char*> env;
  for (auto& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);

  const bool own_group = !in_terminal_foreground();
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&attributes, &no_signals);  // whatever this thread blocks
  short flags = POSIX_SPAWN_SETSIGMASK;
  if (own_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own, numbered by its pid
  }
  posix_spawnattr_setflags(&attributes, flags);

  // The handlers go in before the workload starts: a signal in between is
  // noted and passed on below, not the end of joule with the workload left.
  g_stop_signal = 0;
  g_stop_forwarded = false;
  g_target = 0;
  g_own_group = own_group;
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    posix_spawnattr_destroy(&attributes);
    throw Error(fmt::format("cannot run '{}': pipe: {}", argv[0], std::strerror(errno)));
  }
  g_wake_read_fd = wake[0];
  g_wake_fd = wake[1];
  // Processes of the workload whose parent dies are joule's to reap (not
  // init's, which in a container may reap nothing), so a group whose
  // processes were killed is seen to be gone.
  prctl(PR_GET_CHILD_SUBREAPER, &g_previous_subreaper);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  install_forwarding();
  g_active = true;

  // posix_spawnp rather than fork: safe while the sampler thread runs, and
  // glibc reports a failed exec (not found, not executable) as its result.
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], nullptr, &attributes, args.data(), env.data());
  posix_spawnattr_destroy(&attributes);
  ChildProcess child(pid, own_group ? pid : getpgrp());
  if (error != 0) {
    child.stop_forwarding();
    throw SpawnError(fmt::format("cannot run '{}': {}", argv[0], std::strerror(error)), error == ENOENT ? 127 : 126);
  }
  g_target = own_group ? -pid : pid;
  if (const int pending = g_stop_signal.load(); pending != 0 && !g_stop_forwarded.exchange(true)) {
    kill(g_target, pending);  // arrived while the workload was starting
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      process_group_(other.process_group_),
      forwarding_(std::exchange(other.forwarding_, false)),
      stop_signal_(other.stop_signal_) {}

ChildProcess::~ChildProcess() {
  if (forwarding_) stop_forwarding();
}

void ChildProcess::stop_forwarding() {
  stop_signal_ = g_stop_signal.load();
  for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i) {
    sigaction(kForwardedSignals[i], &g_previous_actions[i], nullptr);
  }
  g_target = 0;
  const int wake_fd = g_wake_fd.exchange(-1);
  close(wake_fd);
  close(g_wake_read_fd);
  g_wake_read_fd = -1;
  prctl(PR_SET_CHILD_SUBREAPER, g_previous_subreaper);
  g_active = false;
  forwarding_ = false;
}

void ChildProcess::stop(int signal_number) {
  if (!forwarding_) return;
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal_number);
  g_stop_forwarded = true;
  kill(g_target.load(), signal_number);
}

void ChildProcess::reap_group(std::optional<int>& status) const {
  // Orphans of the group, adopted as subreaper: reaped, so that they do not
  // linger as zombies that keep the group alive. The first process may be
  // among them when it exits just now.
  int raw = 0;
  for (pid_t done; (done = waitpid(-process_group_, &raw, WNOHANG)) > 0;) {
    if (done == pid_) status = raw;
  }
}

int ChildProcess::stop_signal() const { return forwarding_ ? g_stop_signal.load() : stop_signal_; }

int ChildProcess::wait_forwarding_signals(double kill_grace_s) {
  if (!forwarding_) throw Error(fmt::format("process {} was waited for already", pid_));
  if (!(kill_grace_s >= 0 && kill_grace_s <= kMaxKillGraceS)) {
    throw UsageError(fmt::format("kill grace {} s is outside 0-{:g}", kill_grace_s, kMaxKillGraceS));
  }
  const std::chrono::duration<double> grace(kill_grace_s);
  const bool own_group = process_group_ == pid_;
  // A descriptor that becomes readable when the first process exits, so the
  // wait also wakes at once for it (Linux 5.3 on; else it polls).
  const int pid_fd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  std::optional<Clock::time_point> kill_at, killed_at;
  std::optional<int> status;
  bool gave_up = false;
  while (true) {
    if (!status) {
      int raw = 0;
      const pid_t done = waitpid(pid_, &raw, WNOHANG);
      if (done == pid_) status = raw;
      if (done < 0 && errno != EINTR) throw Error(fmt::format("waitpid {}: {}", pid_, std::strerror(errno)));
    }
    const bool stopping = g_stop_signal.load() != 0;
    if (own_group && stopping) reap_group(status);
    const bool group_left = own_group && stopping && group_alive(process_group_);
    if (status && !group_left) break;
    const auto now = Clock::now();
    if (stopping && !kill_at) kill_at = now + std::chrono::duration_cast<Clock::duration>(grace);
    if (kill_at && !killed_at && now >= *kill_at) {
      if (own_group) kill(-process_group_, SIGKILL);
      if (!status) kill(pid_, SIGKILL);  // also when it left its group
      killed_at = now;
    }
    if (killed_at && now - *killed_at > std::chrono::duration<double>(kAfterSigkillS)) {
      gave_up = true;
      break;
    }
    // Sleep until the first process exits, a signal comes, or the next
    // deadline (SIGKILL, or the next look at the rest of the group).
    int timeout_ms = -1;
    if (status || pid_fd < 0) timeout_ms = kGroupPollMs;
    if (kill_at && !killed_at) {
      const auto left_ms = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now).count();
      timeout_ms = timeout_ms < 0 ? static_cast<int>(left_ms) : std::min<int>(timeout_ms, static_cast<int>(left_ms));
    }
    if (killed_at) timeout_ms = kGroupPollMs;
    pollfd fds[2] = {{g_wake_read_fd, POLLIN, 0}, {status ? -1 : pid_fd, POLLIN, 0}};
    poll(fds, 2, timeout_ms);  // EINTR: a signal, looked at above
    char drained[64];
    while (read(g_wake_read_fd, drained, sizeof drained) > 0) {
    }
  }
  if (pid_fd >= 0) close(pid_fd);
  if (own_group) reap_group(status);  // what of it has ended by now
  if (gave_up) {
    std::cerr << fmt::format("joule: processes of the command (process group {}) are still there {:g} s after "
                             "SIGKILL; joule goes on without them\n",
                             process_group_, kAfterSigkillS);
  }
  stop_forwarding();
  if (!status) return 128 + SIGKILL;
  if (WIFEXITED(*status)) return WEXITSTATUS(*status);
  if (WIFSIGNALED(*status)) return 128 + WTERMSIG(*status);
  return 1;
}

}  // namespace joule
