// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/accounting/job_identity.h"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/types.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

#include "joule/common/input_file.h"

namespace joule {
namespace {

// Slurm puts a job's processes under .../job_<id>/step_<n>/... (cgroup v1:
// /slurm/uid_U/job_N; v2: /system.slice/slurmstepd.scope/job_N): the job,
// and the step where the path names one.
std::optional<std::pair<std::string, std::string>> slurm_job_of_cgroup(const std::string& cgroups) {
  static const std::regex job(R"(/job_([0-9]+)(/step_([0-9]+|batch|extern|interactive)(/|$)|/|$))");
  std::smatch m;
  std::istringstream lines(cgroups);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, job)) return std::make_pair(m[1].str(), m[3].str());
  }
  return std::nullopt;
}

// A system service's unit: /system.slice/NAME.service in the unified
// hierarchy (0::) or systemd's own (name=systemd), with the characters
// systemd allows in a unit name (the path's own bytes become a label).
std::optional<std::string> systemd_unit_of_cgroup(const std::string& cgroups) {
  static const std::regex unit(R"(^[0-9]+:(name=systemd)?:/system\.slice/([A-Za-z0-9:_.\\@-]{1,200}\.service)(/|$))");
  std::smatch m;
  std::istringstream lines(cgroups);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, unit)) return m[2].str();
  }
  return std::nullopt;
}

// The kubelet names a pod's cgroup after its uid: pod<uid> (cgroupfs driver)
// or ...-pod<uid with '_' for '-'>.slice (systemd driver).
std::optional<std::string> kubernetes_pod_of_cgroup(const std::string& cgroups) {
  static const std::regex pod(
      R"(kubepods.*pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}))");
  std::smatch m;
  std::istringstream lines(cgroups);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, pod)) {
      std::string uid = m[1].str();
      std::replace(uid.begin(), uid.end(), '_', '-');
      return uid;
    }
  }
  return std::nullopt;
}

// A process sets its own environment: only a Slurm job id (digits) is taken
// from it, so its bytes never become a job label as they are.
bool is_slurm_job_id(std::string_view id) {
  return !id.empty() && id.size() <= 20 && std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The value of `key` (e.g. "SLURM_JOB_ID=") in a NUL-separated environment,
// where it is a Slurm number.
std::optional<std::string> slurm_number_of_environment(const std::string& environ, std::string_view key) {
  std::size_t start = 0;
  while (start < environ.size()) {
    const std::size_t end = std::min(environ.find('\0', start), environ.size());
    const std::string_view entry(environ.data() + start, end - start);
    if (entry.substr(0, key.size()) == key && is_slurm_job_id(entry.substr(key.size()))) {
      return std::string(entry.substr(key.size()));
    }
    start = end + 1;
  }
  return std::nullopt;
}

// The real uid from status's "Uid:" line, by name where it has one.
std::optional<std::string> user_of_status(const std::string& status) {
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Uid:", 0) != 0) continue;
    uid_t uid = 0;
    if (!(std::istringstream(line.substr(4)) >> uid)) return std::nullopt;
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(4096);
    if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) return found->pw_name;
    return std::to_string(uid);
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(JobIdentity::Scheduler scheduler) {
  switch (scheduler) {
    case JobIdentity::Scheduler::kSlurm: return "slurm";
    case JobIdentity::Scheduler::kKubernetes: return "kubernetes";
    case JobIdentity::Scheduler::kSystemd: return "systemd";
    case JobIdentity::Scheduler::kNone: return "none";
  }
  return "none";
}

std::string JobIdentity::job_label() const {
  if (scheduler == Scheduler::kNone) return "user/" + user;
  return fmt::format("{}/{}", to_string(scheduler), job_id);
}

std::optional<JobIdentity> identify_job(uint32_t pid, const std::filesystem::path& proc_root) {
  const std::filesystem::path dir = proc_root / std::to_string(pid);
  const std::optional<std::string> status = read_file_if_present(dir / "status");
  if (!status) return std::nullopt;  // gone (or never was)
  JobIdentity id;
  id.user = user_of_status(*status).value_or("unknown");
  const std::string cgroups = read_file_if_present(dir / "cgroup").value_or("");
  if (auto job = slurm_job_of_cgroup(cgroups)) {
    id.scheduler = JobIdentity::Scheduler::kSlurm;
    id.job_id = job->first;
    id.step = job->second;
    return id;
  }
  if (auto pod = kubernetes_pod_of_cgroup(cgroups)) {
    id.scheduler = JobIdentity::Scheduler::kKubernetes;
    id.job_id = *pod;
    return id;
  }
  const std::string environ = read_file_if_present(dir / "environ").value_or("");
  if (auto env_job = slurm_number_of_environment(environ, "SLURM_JOB_ID=")) {
    id.scheduler = JobIdentity::Scheduler::kSlurm;
    id.job_id = *env_job;
    // srun gives every step's tasks their step's number; a job's batch
    // script alone runs with the job's id and none.
    id.step = slurm_number_of_environment(environ, "SLURM_STEP_ID=").value_or("batch");
    return id;
  }
  if (auto unit = systemd_unit_of_cgroup(cgroups)) {
    id.scheduler = JobIdentity::Scheduler::kSystemd;
    id.job_id = *unit;
  }
  return id;
}

}  // namespace joule
