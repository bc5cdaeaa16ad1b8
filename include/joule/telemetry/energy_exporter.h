// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What `joule exporter` serves to Prometheus: every GPU's readings under the
// names and labels dcgm-exporter uses, and what only joule has: energy since
// the exporter started per GPU and CPU zone, and each GPU's energy per job.
//
// A scrape reads what the sampler and the accounting step already hold, so
// it costs no driver call and any scrape interval works. The accounting step
// (once a second by default) adds each GPU's energy since the last step, as
// the sampler integrated it (not the driver's counter, so a counter reset or
// wrap-around changes nothing), and splits it equally over the processes the
// driver listed on that GPU at the step's start or end, rolled up to their
// jobs (identify_job). A GPU with no process accrues "unattributed" energy.
// It also asks jouled, when given its socket, who holds each GPU's limit.
//
// It never invents a reading: a GPU whose energy cannot be read is served as
// down (joule_gpu_up 0, joule_gpu_down_info with why), its counters frozen at
// what was read and no job billed for it; where it got its GPUs from, and
// whether NVML and ROCm SMI are up, is served too (joule_exporter_backend_info,
// joule_nvml_up, joule_rocm_smi_up, joule_gpu_library_info). AMD GPUs are
// served under dcgm-exporter's names and under AMD's exporter's as well.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <condition_variable>
#include <vector>

#include "joule/clock.h"
#include "joule/daemon/lease_watcher.h"
#include "joule/device/cpu_energy.h"
#include "joule/device/gpu.h"
#include "joule/carbon/carbon.h"
#include "joule/measure/sampler.h"
#include "joule/accounting/cpu_time.h"
#include "joule/accounting/job_ledger.h"
#include "joule/accounting/kubernetes_pod.h"
#include "joule/accounting/ledger_file.h"

namespace joule {

struct ExporterOptions {
  double accounting_interval_s = 1.0;
  std::string hostname;        // the Hostname label; this machine's name when empty
  // The DCGM_FI_DRIVER_VERSION label of NVIDIA (and simulated) GPUs: NVML's
  // driver version. AMD GPUs carry no such label (ROCm SMI's library version
  // is not the amdgpu driver's); joule_gpu_library_info says it.
  std::string driver_version;
  // Each GPU's index among its own vendor's GPUs, by joule's index: what
  // the `device` label (nvidiaN, amdN) and AMD's gpu_id carry. A GPU not
  // listed uses its joule index (right where one vendor's GPUs are alone, or
  // come first, as NVIDIA's do on a mixed node).
  std::map<unsigned, unsigned> vendor_index;
  std::filesystem::path proc_root = "/proc";
  // Where the jobs' cgroups are (cgroup v2), for their CPU time: each CPU
  // zone's energy is split among the jobs by it (accounting/cpu_time.h).
  std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  // jouled's socket, asked for lease holders at each accounting step; empty:
  // jouled is not asked (no joule_jouled_up, no lease series).
  std::string jouled_socket;
  // Utilisation, SM clock, temperature and memory are always sampled.
  SamplerOptions sampler;
  // Where the GPUs come from (discover_hardware's Devices::gpu_backend:
  // "nvml", "sim" or "none") and why, in words: joule_exporter_backend_info.
  std::string gpu_backend = "nvml";
  std::string gpu_backend_reason;
  // joule_nvml_up: whether NVML was loaded; nullopt where it was not tried
  // (simulated GPUs asked for), and the series is not served.
  std::optional<bool> nvml_up;
  // joule_rocm_smi_up: the same for ROCm SMI (AMD GPUs).
  std::optional<bool> rocm_smi_up;
  // joule_gpu_library_info: each GPU library that was tried, with the
  // version it reported and why it gave no GPU.
  struct GpuLibrary {
    std::string name;     // "nvml", "rocm_smi"
    std::string path;     // what was (or would have been) loaded
    std::string version;  // NVML: the driver's; ROCm SMI: the library's own; empty when not loaded
    std::string problem;  // why it gave no GPU; empty when it gave some
  };
  std::vector<GpuLibrary> gpu_libraries;
  // AMD GPUs are also served under the AMD Device Metrics Exporter's names
  // (gpu_power_usage, gpu_energy_consumed, ...; docs/telemetry.md).
  bool amd_metric_names = true;
  // Told, once each, when a GPU goes down (or comes back), with why: the log.
  std::function<void(const std::string&)> log;
  // With an intensity (joule exporter --carbon-region/--carbon-intensity,
  // --pue): joule_job_gpu_co2e_grams_total beside the per-job energy, and
  // joule_carbon_intensity_grams_per_kwh saying what it was computed with.
  std::optional<carbon::Basis> carbon;
  // The job ledger's file (joule exporter --ledger): read at start, so that
  // every total goes on from where it was, and rewritten after each step.
  // Empty: totals start at zero with the exporter.
  std::filesystem::path ledger_path;
  // A job (or container) charged nothing for this long is forgotten: its
  // series are no longer served nor kept in the ledger (joule exporter
  // --keep-jobs-days). <= 0: every job is kept.
  double job_keep_s = 7 * 86400.0;
  // Which Kubernetes containers hold each GPU (joule exporter
  // --kubelet-socket: the kubelet's PodResources, scheduler/pod_resources.h),
  // asked at each step; it throws Error when the kubelet cannot say. A GPU's
  // series then carry its container's namespace, pod and container labels
  // (dcgm-exporter's), its energy is billed to the container
  // (joule_pod_gpu_energy_joules_total), and a Kubernetes job's series carry
  // the labels of the container its processes ran in. Empty: not asked.
  std::function<DeviceHolders()> list_gpu_holders;
  std::string kubelet_socket;  // joule_kubelet_up's label
};

class EnergyExporter {
 public:
  EnergyExporter(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
                 std::shared_ptr<const Clock> clock, ExporterOptions options = {});
  ~EnergyExporter();
  EnergyExporter(const EnergyExporter&) = delete;
  EnergyExporter& operator=(const EnergyExporter&) = delete;

  // Starts the sampler and, with options.sampler.background_thread, a thread
  // that runs account_now() every accounting_interval_s.
  void start();
  void stop();  // idempotent
  // One accounting step: energy up to what the sampler has data for. Steps
  // run one at a time, whichever thread asks.
  void account_now();
  // GET /jobs: the ledger's entries per job, step and GPU (and per job and
  // CPU zone) as JSON, after a step of its own unless one began in the last
  // 0.2 s (a job that just ended is charged up to now); only job's when job
  // (a JobIdentity::job_label()) is not empty. What `joule slurm-epilog`
  // reads from each of a job's nodes.
  std::string jobs_json(const std::string& job);
  // The Prometheus text format (version 0.0.4) of the latest readings and
  // every total accounted so far.
  std::string metrics_text() const;
  Sampler& sampler() { return sampler_; }

 private:
  struct GpuState {
    bool up = true;
    std::optional<uint32_t> limit_mw;
    std::optional<uint32_t> memory_clock_mhz;
    std::optional<uint32_t> default_limit_mw;
    std::optional<std::string> problem;
    struct Lease {
      std::string user, job;
      double power_limit_w = 0.0;
    };
    std::optional<Lease> lease;  // held through jouled, as of the last step
    std::vector<KubernetesPod> holders;  // the kubelet's, as of the last step; none when it could not say
  };

  std::string gpu_labels(std::size_t gpu) const;
  // A per-job series' labels: the job, its user, the GPU and, for a
  // Kubernetes job whose container is known, its namespace, pod and container.
  std::string job_labels(const JobEnergyKey& key) const;
  // joule_pod_gpu_energy_joules_total and the kubelet's health (pod_metrics.cc). Under mutex_.
  void render_pod_metrics(std::string& out) const;
  // Asks the kubelet which containers hold the GPUs, unless it failed less
  // than ten accounting steps ago; outside mutex_. nullopt: not asked, or failed
  // (problem set).
  std::optional<DeviceHolders> ask_kubelet(std::optional<std::string>& problem);
  // Each job's share of the CPU time used since the last step, for the jobs
  // of the processes listed on the GPUs (pids), by their identities.
  // Outside mutex_.
  std::vector<CpuShare> job_cpu_shares(const std::vector<uint32_t>& pids, const JobIdentities& known,
                                       const JobIdentities& looked_up);
  // GPU i's index among its vendor's GPUs (options.vendor_index).
  unsigned vendor_index(std::size_t gpu) const;
  // The AMD GPUs' readings under AMD's exporter's names and labels
  // (amd_metric_names.cc). Under mutex_.
  void render_amd_metric_names(std::string& out, const std::vector<std::optional<TimelineSample>>& latest) const;
  // Records whether GPU i is up after this step (problem: why not); returns
  // what to log when that changed. Under mutex_.
  std::optional<std::string> note_up_or_down(std::size_t i, const std::optional<std::string>& problem);
  void account_loop();
  void account_step();  // under step_mutex_
  // At a start with a ledger file: its totals restored, and the energy the
  // driver's counter saw while no exporter ran charged as one step.
  void restore_ledger();
  // After a step: one GPU's counter marked (round robin: a read costs ~4 ms
  // on an H100), and the ledger written. Outside mutex_.
  void save_ledger();

  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones_;
  std::shared_ptr<const Clock> clock_;
  ExporterOptions options_;
  Sampler sampler_;
  std::mutex step_mutex_;     // held through a step: two steps would charge one interval twice
  double last_step_started_s_ = -1e300;  // under step_mutex_
  mutable std::mutex mutex_;  // what follows
  double accounted_until_s_ = 0.0;
  std::vector<GpuState> gpu_states_;
  JobLedger ledger_;
  std::vector<std::optional<CounterMark>> counter_marks_;  // per GPU, for the ledger file
  std::unique_ptr<LedgerFile> ledger_file_;  // null: no --ledger
  std::size_t next_mark_gpu_ = 0;  // the accounting thread's
  std::string ledger_problem_;     // the last save's error, said once
  uint64_t accounting_steps_ = 0;
  std::unique_ptr<daemon::LeaseWatcher> leases_;  // only the accounting step uses it
  bool jouled_up_ = false;
  bool kubelet_asked_ = false;                  // once a step has asked it
  std::optional<std::string> kubelet_problem_;  // why it did not answer the last time
  double next_kubelet_ask_s_ = 0.0;             // the accounting step's (under step_mutex_)
  std::vector<uint64_t> utilization_seen_us_;   // per GPU, the newest utilisation sample read (step_mutex_)
  JobCpuMeter cpu_meter_;                       // the jobs' CPU time between steps (step_mutex_)
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace joule
