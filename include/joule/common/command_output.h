// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Runs a short helper program (scontrol, sacctmgr) and captures what it
// says: its output and errors together, its exit status, within a bounded
// time. Not for workloads, which child_process.h runs.
#pragma once

#include <string>
#include <vector>

namespace joule {

struct CommandOutput {
  // The shell's exit status: 127 when it could not be started, 128 + N when
  // signal N ended it (SIGKILL when it ran past the time allowed).
  int exit_status = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved as written (at most 1 MiB kept)
};

// Starts argv[0] (searched in PATH) with its stdin on /dev/null, and kills it
// after timeout_s.
CommandOutput run_command(const std::vector<std::string>& argv, double timeout_s);

}  // namespace joule
