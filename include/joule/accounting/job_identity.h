// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Who a process works for, as a cluster's accounting sees it: the Slurm job
// (and step) or Kubernetes pod that owns it, else the system service it runs
// in, and its Unix user. The job ledger rolls the GPU energy of a device's
// processes up to these (job_ledger.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace joule {

struct JobIdentity {
  // kSystemd: a system service's unit (system.slice), where no scheduler owns it.
  enum class Scheduler { kSlurm, kKubernetes, kSystemd, kNone };
  Scheduler scheduler = Scheduler::kNone;
  std::string job_id;  // Slurm's job id, the pod's uid, the unit's name; empty for kNone
  std::string user;    // the process's real user's name, or its uid when it has none
  // Slurm: the job step the process runs in ("0", "batch", "extern",
  // "interactive"); empty where not known or not Slurm.
  std::string step = {};

  // "slurm/12345", "kubernetes/<pod uid>", "systemd/ollama.service",
  // "user/alice": one label value (the step is not part of it).
  std::string job_label() const;
  bool operator==(const JobIdentity&) const = default;
};

const char* to_string(JobIdentity::Scheduler scheduler);

// Reads proc_root/PID (its cgroup, status and, where readable, environ).
// The job comes from the cgroup path (Slurm's job_N with its step_S, a
// kubepods pod<uid>), which every user may read; else from SLURM_JOB_ID (and
// SLURM_STEP_ID, or "batch" without one) in the environment, which only the
// process's own user and root may read; else from a system service's unit in the cgroup path
// (/system.slice/NAME.service); else there is none.
// nullopt when the process is gone.
std::optional<JobIdentity> identify_job(uint32_t pid, const std::filesystem::path& proc_root = "/proc");

}  // namespace joule
