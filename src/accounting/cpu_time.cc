// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/accounting/cpu_time.h"

#include <unistd.h>

#include <cmath>
#include <sstream>

#include "joule/common/input_file.h"

namespace joule {
namespace {

double ticks_per_s() {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ticks > 0 ? ticks : 100.0;
}

// The directory of path up to and including its first component for which
// is_job holds; nullopt when none does.
template <typename Predicate>
std::optional<std::string> prefix_through(const std::string& path, Predicate is_job) {
  std::size_t begin = 1;
  while (begin < path.size()) {
    const std::size_t end = std::min(path.find('/', begin), path.size());
    if (is_job(std::string_view(path).substr(begin, end - begin))) return path.substr(0, end);
    begin = end + 1;
  }
  return std::nullopt;
}

bool is_slurm_job_dir(std::string_view name) {
  return name.size() > 4 && name.substr(0, 4) == "job_" &&
         name.substr(4).find_first_not_of("0123456789") == std::string_view::npos;
}

bool is_pod_dir(std::string_view name) {
  return name.find("pod") != std::string_view::npos && name.find("kubepods") != std::string_view::npos &&
         name.size() > 36;
}

}  // namespace

std::optional<double> node_busy_cpu_s(const std::filesystem::path& proc_root) {
  const std::optional<std::string> stat = read_file_if_present(proc_root / "stat");
  if (!stat) return std::nullopt;
  std::istringstream line(stat->substr(0, stat->find('\n')));
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(line >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return std::nullopt;
  line >> steal;  // absent on old kernels
  const double busy = user + nice + system + irq + softirq + steal;
  return std::isfinite(busy) && busy >= 0 ? std::optional<double>(busy / ticks_per_s()) : std::nullopt;
}

std::optional<std::string> job_cgroup_of(uint32_t pid, const std::filesystem::path& proc_root) {
  const std::optional<std::string> cgroups = read_file_if_present(proc_root / std::to_string(pid) / "cgroup");
  if (!cgroups) return std::nullopt;
  std::istringstream lines(*cgroups);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::/", 0) != 0) continue;  // the unified hierarchy only
    const std::string path = line.substr(3);
    if (auto dir = prefix_through(path, is_slurm_job_dir)) return dir;
    if (auto dir = prefix_through(path, is_pod_dir)) return dir;
  }
  return std::nullopt;
}

std::optional<double> cgroup_cpu_s(const std::string& cgroup, const std::filesystem::path& cgroup_root) {
  if (cgroup.find("..") != std::string::npos) return std::nullopt;
  const std::optional<std::string> stat = read_file_if_present(cgroup_root / cgroup.substr(1) / "cpu.stat");
  if (!stat) return std::nullopt;
  std::istringstream lines(*stat);
  std::string key;
  double usec = 0;
  while (lines >> key >> usec) {
    if (key == "usage_usec") return std::isfinite(usec) && usec >= 0 ? std::optional<double>(usec / 1e6) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> process_cpu_s(uint32_t pid, const std::filesystem::path& proc_root) {
  const std::optional<std::string> stat = read_file_if_present(proc_root / std::to_string(pid) / "stat");
  if (!stat) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  const std::size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat->substr(close + 1));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 13; ++i) fields >> field;  // state .. cmajflt
  if (!(fields >> utime >> stime) || utime < 0 || stime < 0) return std::nullopt;
  return (utime + stime) / ticks_per_s();
}

JobCpuMeter::JobCpuMeter(std::filesystem::path proc_root, std::filesystem::path cgroup_root)
    : proc_root_(std::move(proc_root)), cgroup_root_(std::move(cgroup_root)) {}

double JobCpuMeter::advance(const std::string& key, double now_s, std::map<std::string, double>& seen) {
  seen[key] = now_s;
  const auto before = seen_.find(key);
  if (before == seen_.end() || now_s < before->second) return 0.0;
  return now_s - before->second;
}

std::map<std::string, double> JobCpuMeter::shares(const std::map<std::string, std::vector<uint32_t>>& jobs) {
  std::map<std::string, double> seen;
  std::map<std::string, double> used_s;
  for (const auto& [job, pids] : jobs) {
    // The job's cgroup where its first process that has one names it.
    std::optional<std::string> cgroup;
    for (const uint32_t pid : pids) {
      if ((cgroup = job_cgroup_of(pid, proc_root_))) break;
    }
    if (cgroup) {
      if (const std::optional<double> cpu_s = cgroup_cpu_s(*cgroup, cgroup_root_); cpu_s) {
        used_s[job] += advance("cgroup:" + *cgroup, *cpu_s, seen);
        continue;
      }
    }
    for (const uint32_t pid : pids) {
      if (const std::optional<double> cpu_s = process_cpu_s(pid, proc_root_); cpu_s) {
        used_s[job] += advance("pid:" + std::to_string(pid), *cpu_s, seen);
      }
    }
  }
  seen_ = std::move(seen);
  const std::optional<double> node_s = node_busy_cpu_s(proc_root_);
  const std::optional<double> node_before_s = node_busy_s_;
  node_busy_s_ = node_s;
  std::map<std::string, double> fractions;
  if (!node_s || !node_before_s || !(*node_s > *node_before_s)) return fractions;
  const double node_used_s = *node_s - *node_before_s;
  double total_s = 0.0;
  for (const auto& [job, s] : used_s) total_s += s;
  // The counters are read apart: never more than the node used.
  const double scale = total_s > node_used_s ? node_used_s / total_s : 1.0;
  for (const auto& [job, s] : used_s) {
    if (s > 0) fractions[job] = s * scale / node_used_s;
  }
  return fractions;
}

}  // namespace joule
