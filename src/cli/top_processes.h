// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule top`'s per-process rows: the device layer's process listing of each
// GPU, with each process's user and job from the telemetry module's
// identify_job() and its command line from /proc.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/top_view.h"
#include "joule/device/gpu.h"

namespace joule::cli {

struct GpuProcessList {
  std::vector<TopProcessRow> rows;     // by pid
  std::optional<std::string> problem;  // the backend cannot tell: why
  // The backend will never tell (not supported, no permission, no such
  // call): not worth asking again. Other failures may pass.
  bool problem_is_lasting = false;
};

// The processes using gpu now, its rows named gpu_id. A process already gone
// from proc_root keeps its pid and memory, with "-" for the rest.
GpuProcessList list_gpu_processes(Gpu& gpu, const std::string& gpu_id,
                                  const std::filesystem::path& proc_root = "/proc");

// proc_root/PID/cmdline with spaces for its NULs, else proc_root/PID/comm in
// brackets (kernel threads, zombies); nullopt when neither can be read.
std::optional<std::string> process_command(uint32_t pid, const std::filesystem::path& proc_root = "/proc");

}  // namespace joule::cli
