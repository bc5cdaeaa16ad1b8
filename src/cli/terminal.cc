// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/terminal.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <langinfo.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstring>
#include <string_view>

#include "joule/error.h"

namespace joule::cli {

namespace {

// The write end of SignalEvents' pipe, for the handlers (-1: none).
volatile sig_atomic_t signal_write_fd = -1;

void on_signal(int signal_number) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal_number);
  if (signal_write_fd >= 0) [[maybe_unused]] auto n = ::write(signal_write_fd, &byte, 1);
  errno = saved_errno;
}

constexpr int kWatchedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP, SIGCONT};

// Alternate screen on, cursor hidden; and the reverse.
constexpr std::string_view kEnterScreen = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
constexpr std::string_view kLeaveScreen = "\x1b[?25h\x1b[?1049l";

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal went away; nothing left to restore on it
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

bool is_terminal(int fd) { return isatty(fd) == 1; }

TerminalSize terminal_size(int fd) {
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0 || size.ws_row == 0) return {};
  return {size.ws_col, size.ws_row};
}

bool locale_is_utf8() {
  // Only LC_CTYPE: it decides how bytes on the terminal are characters.
  const char* previous = std::setlocale(LC_CTYPE, nullptr);
  const std::string restore = previous ? previous : "C";
  const char* chosen = std::setlocale(LC_CTYPE, "");
  const bool utf8 = chosen != nullptr && std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
  std::setlocale(LC_CTYPE, restore.c_str());
  return utf8;
}

SignalEvents::SignalEvents() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
  read_fd_ = fds[0];
  signal_write_fd = fds[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal_number : kWatchedSignals) {
    struct sigaction old {};
    sigaction(signal_number, &action, &old);
    previous_.emplace_back(signal_number, old);
  }
}

SignalEvents::~SignalEvents() {
  for (const auto& [signal_number, old] : previous_) sigaction(signal_number, &old, nullptr);
  const int write_fd = signal_write_fd;
  signal_write_fd = -1;
  close(write_fd);
  close(read_fd_);
}

std::vector<int> SignalEvents::take() {
  std::vector<int> signals;
  unsigned char bytes[64];
  ssize_t n;
  while ((n = ::read(read_fd_, bytes, sizeof bytes)) > 0) signals.insert(signals.end(), bytes, bytes + n);
  return signals;
}

FullScreen::FullScreen() {
  if (!is_terminal(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) {
    throw Error("a full-screen view needs a terminal on stdin");
  }
  enter();
}

FullScreen::~FullScreen() { leave(); }

void FullScreen::enter() {
  termios raw = saved_;
  // Keys one at a time, unechoed; ISIG stays so Ctrl-C and Ctrl-Z still signal.
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) {
    throw Error(fmt::format("cannot set the terminal's mode: {}", std::strerror(errno)));
  }
  write_all(STDOUT_FILENO, kEnterScreen);
  active_ = true;
}

void FullScreen::leave() {
  if (!active_) return;
  active_ = false;
  write_all(STDOUT_FILENO, kLeaveScreen);
  tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
}

void FullScreen::draw(const std::vector<std::string>& lines) {
  std::string frame = "\x1b[H";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    frame += lines[i];
    frame += "\x1b[K";
    // No newline after the last row: on the bottom row it would scroll.
    if (i + 1 < lines.size()) frame += "\r\n";
  }
  frame += "\x1b[J";
  write_all(STDOUT_FILENO, frame);
}

void FullScreen::suspend_until_continued() {
  leave();
  raise(SIGSTOP);  // SIGTSTP is handled (to get here), SIGSTOP cannot be
  enter();
}

std::string FullScreen::read_keys() {
  std::string keys;
  char buffer[64];
  ssize_t n;
  while ((n = ::read(STDIN_FILENO, buffer, sizeof buffer)) > 0) keys.append(buffer, static_cast<std::size_t>(n));
  return keys;
}

Readable wait_readable(int fd_a, int fd_b, int timeout_ms) {
  pollfd fds[2] = {{fd_a, POLLIN, 0}, {fd_b, POLLIN, 0}};
  int ready;
  while ((ready = poll(fds, 2, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready <= 0) return {};
  // A hung-up terminal counts as readable: the read then sees the end.
  const short seen = POLLIN | POLLHUP | POLLERR;
  return {fd_a >= 0 && (fds[0].revents & seen) != 0, fd_b >= 0 && (fds[1].revents & seen) != 0};
}

}  // namespace joule::cli
