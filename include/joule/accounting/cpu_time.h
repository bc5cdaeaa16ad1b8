// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// CPU time as the kernel counts it, to split a node's CPU package and DRAM
// energy (RAPL counts a package, not a process) among its jobs: each job
// is charged a step's zone energy in proportion to the CPU time its
// processes used over the step, of all the CPU time used on the node; the
// rest (the kernel, daemons, idle power) is no job's.
//
// A job's CPU time is its cgroup's (cgroup v2 cpu.stat usage_usec: every
// process of the job, the data loaders too) where its processes' cgroup
// names a Slurm job (job_N) or a Kubernetes pod; else the sum over the
// processes the ledger knows of it (those on its GPUs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace joule {

// Seconds all CPUs spent busy since boot (/proc/stat: user, nice, system,
// irq, softirq, steal); nullopt when unreadable.
std::optional<double> node_busy_cpu_s(const std::filesystem::path& proc_root = "/proc");

// The cgroup v2 directory (relative to the cgroup root, "/system.slice/
// slurmstepd.scope/job_7") of the job that process pid's cgroup names;
// nullopt when it names none, or is not cgroup v2.
std::optional<std::string> job_cgroup_of(uint32_t pid, const std::filesystem::path& proc_root = "/proc");

// Cumulative CPU seconds of a cgroup v2 directory (cpu.stat usage_usec), or
// of a process (utime + stime); nullopt when gone or unreadable.
std::optional<double> cgroup_cpu_s(const std::string& cgroup, const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");
std::optional<double> process_cpu_s(uint32_t pid, const std::filesystem::path& proc_root = "/proc");

// The CPU time each job used between two calls of shares() (the first call
// sees none): what a step's CPU energy is split by.
class JobCpuMeter {
 public:
  JobCpuMeter(std::filesystem::path proc_root, std::filesystem::path cgroup_root);

  // job label -> its processes now (the ledger's, by pid). Returns each
  // job's fraction of the node's busy CPU time since the last call (the
  // fractions sum to 1 at most); empty on the first call or when the
  // node's counter cannot be read.
  std::map<std::string, double> shares(const std::map<std::string, std::vector<uint32_t>>& jobs);

 private:
  // A counter's advance since it was last read (0 the first time, or when it went back).
  double advance(const std::string& key, double now_s, std::map<std::string, double>& seen);

  std::filesystem::path proc_root_, cgroup_root_;
  std::optional<double> node_busy_s_;
  std::map<std::string, double> seen_;  // "cgroup:PATH" or "pid:N" -> cumulative seconds at the last call
};

}  // namespace joule
