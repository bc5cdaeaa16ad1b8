// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The only place joule talks to a terminal directly: raw key input, the
// alternate screen, drawing whole frames with ANSI sequences, and signals
// turned into events. Whatever happens, the terminal is left as it was found.
#pragma once

#include <signal.h>
#include <termios.h>

#include <string>
#include <vector>

namespace joule::cli {

struct TerminalSize {
  int width_cols = 80;
  int height_rows = 24;
};

// Whether fd is a terminal, and its size (80x24 when it cannot be read).
bool is_terminal(int fd);
TerminalSize terminal_size(int fd);
// Whether the locale (LC_ALL, LC_CTYPE, LANG) asks for UTF-8 output.
bool locale_is_utf8();

// Signals as events: SIGINT, SIGTERM, SIGHUP (quit), SIGWINCH (resize),
// SIGTSTP (suspend) and SIGCONT (resumed). Handlers write the signal number
// to a pipe that a poll loop watches; the previous handlers come back at
// destruction. One instance at a time.
class SignalEvents {
 public:
  SignalEvents();
  ~SignalEvents();
  SignalEvents(const SignalEvents&) = delete;
  SignalEvents& operator=(const SignalEvents&) = delete;

  int fd() const { return read_fd_; }
  // The signals that arrived since the last call, oldest first; never blocks.
  std::vector<int> take();

 private:
  int read_fd_ = -1;
  std::vector<std::pair<int, struct sigaction>> previous_;
};

// A full-screen session on stdin/stdout: keys arrive unbuffered and unechoed
// (Ctrl-C still signals), output goes to the alternate screen with the
// cursor hidden. The destructor restores all of it, also while an exception
// unwinds; suspend() does the same before the process stops on Ctrl-Z.
class FullScreen {
 public:
  // Throws Error when stdin is not a terminal or its mode cannot be set.
  FullScreen();
  ~FullScreen();
  FullScreen(const FullScreen&) = delete;
  FullScreen& operator=(const FullScreen&) = delete;

  // Replaces the screen with these lines (each must fit the width; no more
  // lines than rows): cursor home, each line with the rest of its row
  // cleared, then everything below cleared. One write per frame.
  void draw(const std::vector<std::string>& lines);
  // Restores the terminal and stops the process (SIGSTOP); when it is
  // continued, enters the full-screen mode again.
  void suspend_until_continued();
  // Reads the keys waiting on stdin; never blocks.
  std::string read_keys();

 private:
  void enter();
  void leave();

  termios saved_{};  // the mode found at construction
  bool active_ = false;
};

// Waits until fd_a or fd_b (-1: none) is readable or timeout_ms passes;
// restarts after EINTR. Returns which were readable.
struct Readable {
  bool a = false;
  bool b = false;
};
Readable wait_readable(int fd_a, int fd_b, int timeout_ms);

}  // namespace joule::cli
