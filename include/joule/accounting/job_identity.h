// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Who a process works for, as a cluster's accounting sees it: the Slurm job
// or Kubernetes pod that owns it, and its Unix user. The exporter rolls the
// GPU energy of a device's processes up to these (issue 15).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace joule {

struct JobIdentity {
  enum class Scheduler { kSlurm, kKubernetes, kNone };
  Scheduler scheduler = Scheduler::kNone;
  std::string job_id;  // Slurm's job id, the pod's uid; empty for kNone
  std::string user;    // the process's real user's name, or its uid when it has none

  // "slurm/12345", "kubernetes/<pod uid>", "user/alice": one label value.
  std::string job_label() const;
  bool operator==(const JobIdentity&) const = default;
};

const char* to_string(JobIdentity::Scheduler scheduler);

// Reads proc_root/PID (its cgroup, status and, where readable, environ).
// The job comes from the cgroup path (Slurm's job_N, a kubepods pod<uid>),
// which every user may read; else from SLURM_JOB_ID in the environment,
// which only the process's own user and root may read; else there is none.
// nullopt when the process is gone.
std::optional<JobIdentity> identify_job(uint32_t pid, const std::filesystem::path& proc_root = "/proc");

}  // namespace joule
