// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Job accounting: a node's energy split among the jobs that ran on it, the
// way an operator bills them. (Region attribution, src/attribution/, is the
// other sense: one job's step split among its layers.)
//
// The ledger is fed in steps (the exporter's, once a second): each GPU's
// energy over the step, as the sampler integrated it, is split over the
// processes the driver listed on that GPU at the step's start or end (in
// proportion to the SM utilisation the driver sampled for each over the
// step, where it sampled any; else equally),
// and rolled up to their jobs (identify_job). A job that ends within a step
// is charged for it, not the next one to start; a GPU with one job loses
// none of its energy to the edges. A step with no process, or a process
// whose job is unknown (it ended between the list and /proc), leaves its
// share unattributed. CPU zones are totalled, and split among jobs by the
// CPU time their processes used (cpu_time.h; RAPL counts a package, not a
// process).
//
// It keeps the identities of the processes the next step may charge, and no
// others (pids are reused). ledger_file.h keeps it across restarts.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "joule/accounting/job_identity.h"
#include "joule/accounting/kubernetes_pod.h"

namespace joule {

// Processes by pid and the job each works for (nullopt: it had gone when
// looked up, so its share stays unattributed).
using JobIdentities = std::map<uint32_t, std::optional<JobIdentity>>;

// A job's energy on one GPU: one per-job series of the exporter.
struct JobEnergyKey {
  std::string job;  // JobIdentity::job_label()
  std::string user;
  std::size_t gpu = 0;
  auto operator<=>(const JobEnergyKey&) const = default;
};

// The same, one Slurm step of it ("0", "batch"; empty where the process's
// step is not known or its job is no Slurm job's): what sacct shows per step.
struct JobStepEnergyKey {
  JobEnergyKey job;
  std::string step;
  auto operator<=>(const JobStepEnergyKey&) const = default;
};

// A Kubernetes container's energy on one GPU it held (the kubelet's
// PodResources, scheduler/pod_resources.h): what dcgm-exporter's pod labels
// would bill it.
struct PodEnergyKey {
  KubernetesPod pod;
  std::size_t gpu = 0;
  auto operator<=>(const PodEnergyKey&) const = default;
};

// A job's CPU package or DRAM energy in one RAPL zone (cpu_time.h says how
// it is split).
struct JobCpuEnergyKey {
  std::string job;  // JobIdentity::job_label()
  std::string user;
  std::size_t zone = 0;
  auto operator<=>(const JobCpuEnergyKey&) const = default;
};

// A job's fraction of a step's CPU energy (JobCpuMeter::shares).
struct CpuShare {
  std::string job, user;
  double fraction = 0.0;
};

// Adds to looked_up the identity of each of pids that neither it nor known
// (JobLedger::known_identities) holds, read from proc_root: the /proc reads
// of a step, made outside any lock.
void look_up_new_processes(const std::vector<uint32_t>& pids, const JobIdentities& known, JobIdentities& looked_up,
                           const std::filesystem::path& proc_root = "/proc");

class JobLedger {
 public:
  JobLedger(std::size_t gpus, std::size_t cpu_zones);

  // The identities of the processes listed at the end of every GPU's last
  // charged step: a step looks up in /proc only the processes not here.
  const JobIdentities& known_identities() const { return identities_; }

  // One step of GPU `gpu`: energy_j (finite, >= 0; else a UsageError and
  // nothing charged) over the processes listed at its start and at its end
  // (`listed`; nullopt: the driver did not list them this step, and the
  // last list stands for the next step too). `looked_up` holds the
  // identities found this step; known_identities() the others.
  // sm_weights: what the driver sampled of each process's SM utilisation
  // over the step (the sum of its samples' percentages): where the
  // processes sharing the step have any, each gets energy in proportion to
  // its weight (none: nothing), else all get equal shares.
  void charge_gpu(std::size_t gpu, double energy_j, const std::optional<std::vector<uint32_t>>& listed,
                  const JobIdentities& looked_up, const std::map<uint32_t, double>& sm_weights = {});
  // Whether the last step of `gpu` that more than one process shared was
  // split by their utilisation (else equally, or no step was shared yet).
  bool split_by_utilization(std::size_t gpu) const { return gpus_.at(gpu).split_by_utilization; }
  // The same step's energy_j of GPU `gpu` (checked as charge_gpu does) to
  // the containers the kubelet says hold it, in equal shares (several only
  // where the device plugin time-slices the GPU). Where one container holds
  // it, the Kubernetes jobs (kubernetes/<pod uid>) of the processes the
  // last step listed on it are named after that container.
  void charge_pods(std::size_t gpu, double energy_j, const std::vector<KubernetesPod>& holders,
                   const JobIdentities& looked_up);
  void charge_cpu(std::size_t zone, double energy_j);
  // The same step's energy_j of CPU zone `zone` (checked as charge_cpu
  // does) to the jobs by their fractions (each finite, in [0, 1], summing to
  // 1 at most; else a UsageError and nothing charged); the rest is no job's.
  void charge_cpu_jobs(std::size_t zone, double energy_j, const std::vector<CpuShare>& shares);
  // Ends a step: keeps the identities of the processes the next one may charge.
  void finish_step(const JobIdentities& looked_up);
  // Forgets every job and container charged nothing for keep_s (their
  // totals, steps, CPU energy and container), so that what a node keeps and
  // serves stays the size of its recent jobs, not of all it ever ran; the
  // GPU, unattributed and zone totals keep them. Those charged since the
  // last call are stamped now_unix_s; one never stamped (restored from a
  // file) is stamped now. keep_s <= 0: nothing is forgotten. Returns how
  // many jobs were forgotten.
  std::size_t forget_idle(double now_unix_s, double keep_s);
  // When each job (label) and container ("pod:NAMESPACE/POD/CONTAINER") was
  // last charged, as of the last forget_idle: kept in the ledger file.
  const std::map<std::string, double>& last_charged_unix_s() const { return last_charged_unix_s_; }
  void restore_last_charged(const std::string& key, double unix_s) { last_charged_unix_s_[key] = unix_s; }

  double gpu_energy_j(std::size_t gpu) const { return gpus_.at(gpu).energy_j; }
  double unattributed_j(std::size_t gpu) const { return gpus_.at(gpu).unattributed_j; }
  double cpu_energy_j(std::size_t zone) const { return cpu_energy_j_.at(zone); }
  const std::map<JobEnergyKey, double>& job_gpu_energy_j() const { return jobs_; }
  // The same per step: its sums over steps are job_gpu_energy_j().
  const std::map<JobStepEnergyKey, double>& job_step_gpu_energy_j() const { return steps_; }
  const std::map<PodEnergyKey, double>& pod_gpu_energy_j() const { return pods_; }
  const std::map<JobCpuEnergyKey, double>& job_cpu_energy_j() const { return job_cpu_; }
  // The container each Kubernetes job was found in, by job label.
  const std::map<std::string, KubernetesPod>& job_pods() const { return job_pods_; }
  // The processes listed at the end of the last step that charged gpu.
  const std::vector<uint32_t>& listed_pids(std::size_t gpu) const { return gpus_.at(gpu).listed_pids; }
  std::size_t gpus() const { return gpus_.size(); }
  std::size_t cpu_zones() const { return cpu_energy_j_.size(); }

  // Totals as they were before a restart (ledger_file.h): each a
  // non-negative finite number, checked by the caller's reader.
  void restore_gpu(std::size_t gpu, double energy_j, double unattributed_j, std::vector<uint32_t> listed_pids);
  void restore_cpu(std::size_t zone, double energy_j);
  void restore_job(const JobStepEnergyKey& key, double energy_j);
  void restore_identity(uint32_t pid, std::optional<JobIdentity> identity);
  void restore_pod(const PodEnergyKey& key, double energy_j);
  void restore_job_cpu(const JobCpuEnergyKey& key, double energy_j);
  void restore_job_pod(const std::string& job, KubernetesPod pod);

 private:
  struct GpuAccount {
    double energy_j = 0.0;
    double unattributed_j = 0.0;
    std::vector<uint32_t> listed_pids;
    bool split_by_utilization = false;
  };
  const std::optional<JobIdentity>& identity_of(uint32_t pid, const JobIdentities& looked_up) const;

  std::vector<GpuAccount> gpus_;
  std::vector<double> cpu_energy_j_;
  std::map<JobEnergyKey, double> jobs_;
  std::map<JobStepEnergyKey, double> steps_;
  std::map<PodEnergyKey, double> pods_;
  std::map<JobCpuEnergyKey, double> job_cpu_;
  std::map<std::string, KubernetesPod> job_pods_;
  std::set<std::string> charged_since_stamp_;            // job labels and containers ("pod:ns/pod/container")
  std::map<std::string, double> last_charged_unix_s_;    // the same, when last charged
  JobIdentities identities_;
};

}  // namespace joule
