// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/accounting/job_ledger.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "joule/error.h"

namespace joule {

namespace {

void check_energy(double energy_j, const char* what) {
  if (!(std::isfinite(energy_j) && energy_j >= 0.0)) {
    throw UsageError(fmt::format("job ledger: {} energy {} J is not a finite, non-negative number", what, energy_j));
  }
}

// A container's key among the stamps (jobs' labels never begin so).
std::string pod_stamp_key(const KubernetesPod& pod) {
  return "pod:" + pod.namespace_name + "/" + pod.pod + "/" + pod.container;
}

}  // namespace

void look_up_new_processes(const std::vector<uint32_t>& pids, const JobIdentities& known, JobIdentities& looked_up,
                           const std::filesystem::path& proc_root) {
  for (const uint32_t pid : pids) {
    if (known.count(pid) || looked_up.count(pid)) continue;
    looked_up[pid] = identify_job(pid, proc_root);
  }
}

JobLedger::JobLedger(std::size_t gpus, std::size_t cpu_zones) : gpus_(gpus), cpu_energy_j_(cpu_zones, 0.0) {}

const std::optional<JobIdentity>& JobLedger::identity_of(uint32_t pid, const JobIdentities& looked_up) const {
  static const std::optional<JobIdentity> kUnknown;
  if (const auto now = looked_up.find(pid); now != looked_up.end()) return now->second;
  const auto known = identities_.find(pid);
  return known != identities_.end() ? known->second : kUnknown;
}

void JobLedger::charge_gpu(std::size_t gpu, double energy_j, const std::optional<std::vector<uint32_t>>& listed,
                           const JobIdentities& looked_up, const std::map<uint32_t, double>& sm_weights) {
  check_energy(energy_j, "a GPU step's");
  GpuAccount& account = gpus_.at(gpu);
  account.energy_j += energy_j;
  std::set<uint32_t> sharing(account.listed_pids.begin(), account.listed_pids.end());
  if (listed) {
    sharing.insert(listed->begin(), listed->end());
    account.listed_pids = *listed;
  }
  if (sharing.empty()) {
    account.unattributed_j += energy_j;
    return;
  }
  // By the driver's utilisation samples where the sharing processes have
  // any; a weight that is not a finite number >= 0 counts as none.
  const auto weight_of = [&](uint32_t pid) {
    const auto found = sm_weights.find(pid);
    return found != sm_weights.end() && std::isfinite(found->second) && found->second > 0 ? found->second : 0.0;
  };
  double total_weight = 0.0;
  for (const uint32_t pid : sharing) total_weight += weight_of(pid);
  if (sharing.size() > 1) account.split_by_utilization = total_weight > 0;
  for (const uint32_t pid : sharing) {
    const double share_j = total_weight > 0 ? energy_j * weight_of(pid) / total_weight
                                            : energy_j / static_cast<double>(sharing.size());
    const std::optional<JobIdentity>& id = identity_of(pid, looked_up);
    if (!id) {
      account.unattributed_j += share_j;
      continue;
    }
    JobStepEnergyKey key{{id->job_label(), id->user, gpu}, id->step};
    jobs_[key.job] += share_j;
    charged_since_stamp_.insert(key.job.job);
    steps_[std::move(key)] += share_j;
  }
}

void JobLedger::charge_pods(std::size_t gpu, double energy_j, const std::vector<KubernetesPod>& holders,
                            const JobIdentities& looked_up) {
  check_energy(energy_j, "a GPU step's");
  if (gpu >= gpus_.size()) throw UsageError(fmt::format("job ledger: GPU {} does not exist", gpu));
  if (holders.empty()) return;
  const double share_j = energy_j / static_cast<double>(holders.size());
  for (const KubernetesPod& pod : holders) {
    pods_[{pod, gpu}] += share_j;
    charged_since_stamp_.insert(pod_stamp_key(pod));
  }
  if (holders.size() != 1) return;  // time-sliced: whose process is whose is not known
  for (const uint32_t pid : gpus_[gpu].listed_pids) {
    const std::optional<JobIdentity>& id = identity_of(pid, looked_up);
    if (id && id->scheduler == JobIdentity::Scheduler::kKubernetes) job_pods_[id->job_label()] = holders.front();
  }
}

void JobLedger::charge_cpu(std::size_t zone, double energy_j) {
  check_energy(energy_j, "a CPU zone step's");
  cpu_energy_j_.at(zone) += energy_j;
}

void JobLedger::charge_cpu_jobs(std::size_t zone, double energy_j, const std::vector<CpuShare>& shares) {
  check_energy(energy_j, "a CPU zone step's");
  if (zone >= cpu_energy_j_.size()) throw UsageError(fmt::format("job ledger: CPU zone {} does not exist", zone));
  double total = 0.0;
  for (const CpuShare& share : shares) {
    if (!(std::isfinite(share.fraction) && share.fraction >= 0.0 && share.fraction <= 1.0)) {
      throw UsageError(fmt::format("job ledger: job {}'s CPU share {} is not a fraction", share.job, share.fraction));
    }
    total += share.fraction;
  }
  if (total > 1.0 + 1e-9) throw UsageError(fmt::format("job ledger: the jobs' CPU shares sum to {}, more than 1", total));
  for (const CpuShare& share : shares) {
    job_cpu_[{share.job, share.user, zone}] += energy_j * share.fraction;
    charged_since_stamp_.insert(share.job);
  }
}

std::size_t JobLedger::forget_idle(double now_unix_s, double keep_s) {
  for (const std::string& key : charged_since_stamp_) last_charged_unix_s_[key] = now_unix_s;
  charged_since_stamp_.clear();
  // Everything held gets a stamp, the restored included.
  const auto stamp = [&](const std::string& key) { return last_charged_unix_s_.try_emplace(key, now_unix_s).first->second; };
  std::set<std::string> idle;
  for (const auto& [key, energy_j] : steps_) {
    if (stamp(key.job.job) < now_unix_s - keep_s) idle.insert(key.job.job);
  }
  for (const auto& [key, energy_j] : job_cpu_) {
    if (stamp(key.job) < now_unix_s - keep_s) idle.insert(key.job);
  }
  for (const auto& [key, energy_j] : pods_) {
    if (stamp(pod_stamp_key(key.pod)) < now_unix_s - keep_s) idle.insert(pod_stamp_key(key.pod));
  }
  if (keep_s <= 0 || idle.empty()) return 0;
  std::erase_if(jobs_, [&](const auto& entry) { return idle.count(entry.first.job) > 0; });
  std::erase_if(steps_, [&](const auto& entry) { return idle.count(entry.first.job.job) > 0; });
  std::erase_if(job_cpu_, [&](const auto& entry) { return idle.count(entry.first.job) > 0; });
  std::erase_if(job_pods_, [&](const auto& entry) { return idle.count(entry.first) > 0; });
  std::erase_if(pods_, [&](const auto& entry) { return idle.count(pod_stamp_key(entry.first.pod)) > 0; });
  std::size_t jobs = 0;
  for (const std::string& key : idle) {
    last_charged_unix_s_.erase(key);
    jobs += key.rfind("pod:", 0) != 0;
  }
  return jobs;
}

void JobLedger::finish_step(const JobIdentities& looked_up) {
  JobIdentities kept;
  for (const GpuAccount& account : gpus_) {
    for (const uint32_t pid : account.listed_pids) kept[pid] = identity_of(pid, looked_up);
  }
  identities_ = std::move(kept);
}

void JobLedger::restore_gpu(std::size_t gpu, double energy_j, double unattributed_j, std::vector<uint32_t> listed_pids) {
  check_energy(energy_j, "a restored GPU's");
  check_energy(unattributed_j, "a restored GPU's unattributed");
  GpuAccount& account = gpus_.at(gpu);
  account.energy_j = energy_j;
  account.unattributed_j = unattributed_j;
  account.listed_pids = std::move(listed_pids);
}

void JobLedger::restore_cpu(std::size_t zone, double energy_j) {
  check_energy(energy_j, "a restored CPU zone's");
  cpu_energy_j_.at(zone) = energy_j;
}

void JobLedger::restore_job(const JobStepEnergyKey& key, double energy_j) {
  check_energy(energy_j, "a restored job's");
  if (key.job.gpu >= gpus_.size()) throw UsageError(fmt::format("job ledger: GPU {} does not exist", key.job.gpu));
  double& step_j = steps_[key];
  jobs_[key.job] += energy_j - step_j;
  step_j = energy_j;
}

void JobLedger::restore_pod(const PodEnergyKey& key, double energy_j) {
  check_energy(energy_j, "a restored pod's");
  if (key.gpu >= gpus_.size()) throw UsageError(fmt::format("job ledger: GPU {} does not exist", key.gpu));
  pods_[key] = energy_j;
}

void JobLedger::restore_job_cpu(const JobCpuEnergyKey& key, double energy_j) {
  check_energy(energy_j, "a restored job's CPU");
  if (key.zone >= cpu_energy_j_.size()) throw UsageError(fmt::format("job ledger: CPU zone {} does not exist", key.zone));
  job_cpu_[key] = energy_j;
}

void JobLedger::restore_job_pod(const std::string& job, KubernetesPod pod) { job_pods_[job] = std::move(pod); }

void JobLedger::restore_identity(uint32_t pid, std::optional<JobIdentity> identity) {
  identities_[pid] = std::move(identity);
}

}  // namespace joule
