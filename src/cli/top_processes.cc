// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/top_processes.h"

#include <algorithm>

#include "joule/error.h"
#include "joule/accounting/job_identity.h"
#include "joule/common/input_file.h"

namespace joule::cli {

std::optional<std::string> process_command(uint32_t pid, const std::filesystem::path& proc_root) {
  const std::filesystem::path dir = proc_root / std::to_string(pid);
  if (auto cmdline = read_file_if_present(dir / "cmdline"); cmdline && !cmdline->empty()) {
    while (!cmdline->empty() && cmdline->back() == '\0') cmdline->pop_back();
    // One line whatever the arguments hold.
    std::replace_if(cmdline->begin(), cmdline->end(), [](char c) { return c == '\0' || c == '\n' || c == '\t'; }, ' ');
    return cmdline;
  }
  if (auto comm = read_file_if_present(dir / "comm"); comm && !comm->empty()) {
    while (!comm->empty() && comm->back() == '\n') comm->pop_back();
    return "[" + *comm + "]";
  }
  return std::nullopt;
}

GpuProcessList list_gpu_processes(Gpu& gpu, const std::string& gpu_id, const std::filesystem::path& proc_root) {
  GpuProcessList list;
  std::vector<GpuProcess> processes;
  try {
    processes = gpu.running_processes();
  } catch (const DeviceError& e) {
    list.problem = e.what();
    list.problem_is_lasting = e.code() == DeviceErrc::kNotSupported || e.code() == DeviceErrc::kNoPermission ||
                              e.code() == DeviceErrc::kNotFound;
    return list;
  }
  std::sort(processes.begin(), processes.end(), [](const GpuProcess& a, const GpuProcess& b) { return a.pid < b.pid; });
  for (const GpuProcess& p : processes) {
    TopProcessRow row;
    row.gpu_id = gpu_id;
    row.pid = p.pid;
    row.used_memory_bytes = p.used_memory_bytes;
    if (const std::optional<JobIdentity> id = identify_job(p.pid, proc_root)) {
      if (!id->user.empty()) row.user = id->user;
      if (id->scheduler != JobIdentity::Scheduler::kNone) row.job = id->job_label();
    }
    if (auto command = process_command(p.pid, proc_root)) row.command = *command;
    list.rows.push_back(std::move(row));
  }
  return list;
}

}  // namespace joule::cli
