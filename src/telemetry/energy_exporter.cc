// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/telemetry/energy_exporter.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <set>

#include <nlohmann/json.hpp>

#include "joule/error.h"
#include "telemetry/prometheus_text.h"

namespace joule {
namespace {

using prometheus_text::escaped;
using prometheus_text::Family;
using prometheus_text::pod_labels;

// Steps between two writes of the ledger file: a crash in between loses
// nothing the counter mark does not bridge, to the processes listed then.
constexpr uint64_t kLedgerSaveEverySteps = 10;
// After the kubelet failed to answer, it is asked again this many accounting
// steps later (10 s by default): a hung one costs a step its timeout at most
// this often.
constexpr double kKubeletRetrySteps = 10.0;
// GET /jobs charges up to its request with a step of its own, unless a step
// began this recently.
constexpr double kFreshStepS = 0.2;
// More than any GPU draws: a counter that advanced faster while no exporter
// ran is not this GPU's (or the clock jumped).
constexpr double kMaxPowerPerGpuW = 5000.0;

// The pids of the processes the driver lists on gpu; none where it cannot.
std::optional<std::vector<uint32_t>> listed_pids(Gpu& gpu) {
  const std::optional<std::vector<GpuProcess>> processes = try_read([&] { return gpu.running_processes(); });
  if (!processes) return std::nullopt;
  std::vector<uint32_t> pids;
  for (const GpuProcess& p : *processes) pids.push_back(p.pid);
  return pids;
}

// Each process's SM utilisation samples since seen_us, summed (seen_us moved
// on to the newest): how a shared GPU's step is split. None where the driver
// cannot sample them, or sampled nothing.
std::map<uint32_t, double> sm_weights(Gpu& gpu, uint64_t& seen_us) {
  std::map<uint32_t, double> weights;
  const std::optional<ProcessUtilizationSamples> samples = try_read([&] { return gpu.process_utilization(seen_us); });
  if (!samples) return weights;
  for (const ProcessUtilization& p : samples->processes) weights[p.pid] = p.sm_percent_sum;
  seen_us = std::max(seen_us, samples->newest_unix_us);
  return weights;
}

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace

EnergyExporter::EnergyExporter(std::vector<std::shared_ptr<Gpu>> gpus,
                               std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
                               std::shared_ptr<const Clock> clock, ExporterOptions options)
    : gpus_(std::move(gpus)),
      cpu_zones_(std::move(cpu_zones)),
      clock_(std::move(clock)),
      options_([&] {
        options.sampler.fields = {true, true, true, true};
        if (options.hostname.empty()) options.hostname = this_hostname();
        if (!(options.accounting_interval_s > 0)) throw UsageError("exporter: the accounting interval must be > 0");
        return options;
      }()),
      sampler_(gpus_, cpu_zones_, clock_, options_.sampler),
      gpu_states_(gpus_.size()),
      ledger_(gpus_.size(), cpu_zones_.size()),
      counter_marks_(gpus_.size()),
      utilization_seen_us_(gpus_.size(), 0),
      cpu_meter_(options_.proc_root, options_.cgroup_root) {
  if (!options_.jouled_socket.empty()) leases_ = std::make_unique<daemon::LeaseWatcher>(options_.jouled_socket);
  if (!options_.ledger_path.empty()) restore_ledger();
}

EnergyExporter::~EnergyExporter() { stop(); }

void EnergyExporter::start() {
  sampler_.start();
  {
    std::lock_guard lock(mutex_);
    accounted_until_s_ = clock_->now_s();
  }
  if (options_.sampler.background_thread) thread_ = std::thread([this] { account_loop(); });
}

void EnergyExporter::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  sampler_.stop();
  if (ledger_file_) save_ledger();
}

void EnergyExporter::account_loop() {
  std::unique_lock lock(mutex_);
  const auto interval = std::chrono::duration<double>(options_.accounting_interval_s);
  while (!wake_.wait_for(lock, interval, [&] { return stopping_; })) {
    lock.unlock();
    account_now();
    lock.lock();
  }
}

void EnergyExporter::account_now() {
  std::lock_guard step(step_mutex_);
  account_step();
}

void EnergyExporter::account_step() {
  last_step_started_s_ = clock_->now_s();
  double begin_s = 0.0;
  {
    std::lock_guard lock(mutex_);
    begin_s = accounted_until_s_;
  }
  // Only what the sampler has data for: a later step would not correct an
  // estimate carried forward past it.
  const double end_s = std::min(clock_->now_s(), sampler_.covered_until_s());
  std::vector<EnergyEstimate> gpu_energy, cpu_energy;
  if (end_s > begin_s) sampler_.energies(begin_s, end_s, gpu_energy, cpu_energy);

  // Driver calls and /proc reads, outside the lock: a scrape never waits on them.
  struct Listed {
    std::optional<std::vector<uint32_t>> pids;  // the processes listed; none: the driver did not list them
    std::map<uint32_t, double> sm_weights;      // their SM utilisation over the step, where sampled
    std::optional<uint32_t> limit_mw;
    std::optional<uint32_t> memory_clock_mhz;
    std::optional<uint32_t> default_limit_mw;
    std::optional<GpuState::Lease> lease;
  };
  std::vector<Listed> listed(gpus_.size());
  JobIdentities identities;  // looked up this step
  JobIdentities known;       // those the ledger holds
  std::vector<bool> down(gpus_.size());
  {
    std::lock_guard lock(mutex_);
    known = ledger_.known_identities();
    for (std::size_t i = 0; i < gpus_.size(); ++i) down[i] = !gpu_states_[i].up;
  }
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    // A GPU that is down is not asked again: a lost device's calls may be
    // slow to fail, and nothing it answered would be served.
    if (down[i]) continue;
    Gpu& gpu = *gpus_[i];
    listed[i].pids = listed_pids(gpu);
    // Their weights for a shared step: read every step a process is listed,
    // so that the samples read are the step's.
    if (listed[i].pids && !listed[i].pids->empty()) listed[i].sm_weights = sm_weights(gpu, utilization_seen_us_[i]);
    // Read once a step, not by the sampler: they change rarely.
    listed[i].limit_mw = try_read([&] { return gpu.power_limit_mw(); });
    listed[i].memory_clock_mhz = try_read([&] { return gpu.memory_clock_mhz(); });
    listed[i].default_limit_mw = try_read([&] { return gpu.default_power_limit_mw(); });
    if (listed[i].pids) look_up_new_processes(*listed[i].pids, known, identities, options_.proc_root);
  }

  // Who holds each GPU's limit through jouled, and the job that holder works for.
  bool jouled_up = false;
  if (leases_) {
    const std::map<std::string, daemon::GpuLease> leases = leases_->poll();
    jouled_up = leases_->reachable();
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      const auto held = leases.find(gpus_[i]->uuid());
      if (held == leases.end()) continue;
      GpuState::Lease lease{held->second.user, "", held->second.power_limit_w};
      if (held->second.pid) {
        if (const std::optional<JobIdentity> id = identify_job(*held->second.pid, options_.proc_root); id) {
          lease.job = id->job_label();
          if (lease.user.empty()) lease.user = id->user;
        }
      }
      listed[i].lease = std::move(lease);
    }
  }

  std::optional<std::string> kubelet_problem;
  const std::optional<DeviceHolders> holders = ask_kubelet(kubelet_problem);
  std::vector<uint32_t> on_gpus;  // every process listed this step
  for (const Listed& gpu : listed) {
    if (gpu.pids) on_gpus.insert(on_gpus.end(), gpu.pids->begin(), gpu.pids->end());
  }
  const std::vector<CpuShare> cpu_shares = cpu_zones_.empty() ? std::vector<CpuShare>{}
                                                              : job_cpu_shares(on_gpus, known, identities);

  std::vector<std::string> news;  // GPUs gone down or come back: logged once the lock is released
  std::size_t forgotten = 0;      // jobs idle past --keep-jobs-days
  {
    std::lock_guard lock(mutex_);
    ++accounting_steps_;
    jouled_up_ = jouled_up;
    if (holders || kubelet_problem) {
      kubelet_asked_ = true;
      kubelet_problem_ = kubelet_problem;
      // Not known while the kubelet cannot say: no container is billed meanwhile.
      for (std::size_t i = 0; i < gpus_.size(); ++i) {
        gpu_states_[i].holders = holders ? holders_of_gpu(*holders, gpus_[i]->uuid(), gpus_[i]->pci_bus_id())
                                         : std::vector<KubernetesPod>{};
      }
    }
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      GpuState& state = gpu_states_[i];
      state.limit_mw = listed[i].limit_mw;
      state.memory_clock_mhz = listed[i].memory_clock_mhz;
      state.default_limit_mw = listed[i].default_limit_mw;
      state.lease = std::move(listed[i].lease);
      if (gpu_energy.empty()) continue;
      const EnergyEstimate& e = gpu_energy[i];
      if (const std::optional<std::string> change = note_up_or_down(i, e.problem); change) news.push_back(*change);
      // A GPU that cannot be read adds nothing, to itself or to any job: its
      // counters stay at what was read, whatever the driver says next.
      if (!state.up) continue;
      ledger_.charge_gpu(i, e.energy_j, listed[i].pids, identities, listed[i].sm_weights);
      ledger_.charge_pods(i, e.energy_j, state.holders, identities);
    }
    ledger_.finish_step(identities);
    forgotten = ledger_.forget_idle(unix_now_s(), options_.job_keep_s);
    for (std::size_t z = 0; z < cpu_energy.size(); ++z) {
      if (cpu_energy[z].problem) continue;
      ledger_.charge_cpu(z, cpu_energy[z].energy_j);
      ledger_.charge_cpu_jobs(z, cpu_energy[z].energy_j, cpu_shares);
    }
    if (end_s > begin_s) accounted_until_s_ = end_s;
  }
  if (options_.log) {
    for (const std::string& line : news) options_.log(line);
    if (forgotten > 0) {
      options_.log(fmt::format("forgot {} job{} charged nothing for {:g} days", forgotten, forgotten == 1 ? "" : "s",
                               options_.job_keep_s / 86400.0));
    }
  }
  if (ledger_file_ && accounting_steps_ % kLedgerSaveEverySteps == 0) save_ledger();
}

std::vector<CpuShare> EnergyExporter::job_cpu_shares(const std::vector<uint32_t>& pids, const JobIdentities& known,
                                                     const JobIdentities& looked_up) {
  std::map<std::string, std::vector<uint32_t>> jobs;
  std::map<std::string, std::string> user_of;
  for (const uint32_t pid : pids) {
    const auto now = looked_up.find(pid);
    const auto before = known.find(pid);
    const std::optional<JobIdentity>* id = now != looked_up.end() ? &now->second : before != known.end() ? &before->second : nullptr;
    if (id == nullptr || !*id) continue;
    const std::string label = (*id)->job_label();
    jobs[label].push_back(pid);
    user_of[label] = (*id)->user;
  }
  std::vector<CpuShare> shares;
  for (const auto& [job, fraction] : cpu_meter_.shares(jobs)) shares.push_back({job, user_of[job], fraction});
  return shares;
}

std::optional<DeviceHolders> EnergyExporter::ask_kubelet(std::optional<std::string>& problem) {
  if (!options_.list_gpu_holders || clock_->now_s() < next_kubelet_ask_s_) return std::nullopt;
  try {
    return options_.list_gpu_holders();
  } catch (const Error& e) {
    problem = e.what();
    next_kubelet_ask_s_ = clock_->now_s() + kKubeletRetrySteps * options_.accounting_interval_s;
    return std::nullopt;
  }
}

std::string EnergyExporter::jobs_json(const std::string& job) {
  {
    // A step of its own, unless one began less than kFreshStepS ago: a
    // client asking in a loop cannot make the drivers be read more often.
    std::lock_guard step(step_mutex_);
    if (clock_->now_s() - last_step_started_s_ >= kFreshStepS) account_step();
  }
  nlohmann::json entries = nlohmann::json::array(), cpu_entries = nlohmann::json::array();
  double accounted_until_unix_s = 0.0;
  {
    std::lock_guard lock(mutex_);
    accounted_until_unix_s = unix_now_s() - (clock_->now_s() - accounted_until_s_);
    for (const auto& [key, energy_j] : ledger_.job_step_gpu_energy_j()) {
      if (!job.empty() && key.job.job != job) continue;
      const Gpu& gpu = *gpus_[key.job.gpu];
      entries.push_back({{"job", key.job.job},
                         {"user", key.job.user},
                         {"step", key.step},
                         {"gpu", gpu.index()},
                         {"uuid", gpu.uuid()},
                         {"energy_j", energy_j}});
    }
    for (const auto& [key, energy_j] : ledger_.job_cpu_energy_j()) {
      if (!job.empty() && key.job != job) continue;
      cpu_entries.push_back({{"job", key.job}, {"user", key.user}, {"zone", cpu_zones_[key.zone]->label()}, {"energy_j", energy_j}});
    }
  }
  const nlohmann::json reply = {{"joule_jobs", 1},
                                {"hostname", options_.hostname},
                                {"accounted_until_unix_s", accounted_until_unix_s},
                                {"jobs", entries},
                                {"cpu_zones", cpu_zones_.size()},
                                {"cpu", cpu_entries}};
  return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void EnergyExporter::restore_ledger() {
  std::vector<std::string> uuids, labels;
  for (const auto& gpu : gpus_) uuids.push_back(gpu->uuid());
  for (const auto& zone : cpu_zones_) labels.push_back(zone->label());
  ledger_file_ = std::make_unique<LedgerFile>(options_.ledger_path, std::move(uuids), std::move(labels));
  const LedgerFile::Restored restored = ledger_file_->load(ledger_);
  if (!restored.found) return;
  const double away_s = std::max(0.0, unix_now_s() - restored.saved_unix_s);
  const auto say = [&](const std::string& line) {
    if (options_.log) options_.log(line);
  };
  JobIdentities identities;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    Gpu& gpu = *gpus_[i];
    const std::optional<CounterMark>& mark = restored.marks[i];
    if (!mark) continue;
    const std::optional<uint64_t> counter_mj = try_read([&] { return gpu.total_energy_mj(); });
    if (!counter_mj) {
      say(fmt::format("gpu{} ({}): its energy counter cannot be read; what it drew while no exporter ran is not "
                      "known, and not charged", gpu.index(), gpu.uuid()));
      continue;
    }
    const double counter_j = static_cast<double>(*counter_mj) / 1000.0;
    // What the counter saw since the mark, less what was accounted after it.
    const double away_j = counter_j - mark->counter_j - (ledger_.gpu_energy_j(i) - mark->accounted_j);
    if (counter_j < mark->counter_j || !(away_j <= kMaxPowerPerGpuW * (away_s + kLedgerSaveEverySteps * options_.accounting_interval_s))) {
      say(fmt::format("gpu{} ({}): its energy counter went from {:.1f} J to {:.1f} J over {:.0f} s away (restarted, or a "
                      "different GPU); what it drew while no exporter ran is not known, and not charged",
                      gpu.index(), gpu.uuid(), mark->counter_j, counter_j, away_s));
      continue;
    }
    // A few joules below zero: calibration against the counter, not energy.
    if (away_j <= 0.0) continue;
    const std::optional<std::vector<uint32_t>> pids = listed_pids(gpu);
    if (pids) look_up_new_processes(*pids, ledger_.known_identities(), identities, options_.proc_root);
    ledger_.charge_gpu(i, away_j, pids, identities);
    counter_marks_[i] = CounterMark{counter_j, ledger_.gpu_energy_j(i)};
    say(fmt::format("gpu{} ({}): {:.1f} J drawn in the {:.0f} s no exporter ran, charged to the processes listed "
                    "before and after", gpu.index(), gpu.uuid(), away_j, away_s));
  }
  ledger_.finish_step(identities);
}

void EnergyExporter::save_ledger() {
  // One GPU's counter marked per save, round robin: a read costs ~4 ms of
  // CPU on an H100, and the mark only bridges a restart.
  if (!gpus_.empty()) {
    const std::size_t i = next_mark_gpu_++ % gpus_.size();
    bool up = false;
    {
      std::lock_guard lock(mutex_);
      up = gpu_states_[i].up;
    }
    if (up && gpus_[i]->has_energy_counter()) {
      if (const std::optional<uint64_t> counter_mj = try_read([&] { return gpus_[i]->total_energy_mj(); })) {
        std::lock_guard lock(mutex_);
        counter_marks_[i] = CounterMark{static_cast<double>(*counter_mj) / 1000.0, ledger_.gpu_energy_j(i)};
      }
    }
  }
  std::unique_lock lock(mutex_);
  const JobLedger ledger = ledger_;  // written from this copy, so scrapes do not wait on the file
  const std::vector<std::optional<CounterMark>> marks = counter_marks_;
  lock.unlock();
  try {
    ledger_file_->save(ledger, marks, unix_now_s());
    ledger_problem_.clear();
  } catch (const Error& e) {
    // Said once per problem; the totals are kept in memory and served.
    if (e.what() != ledger_problem_ && options_.log) options_.log(fmt::format("the job ledger is not saved: {}", e.what()));
    ledger_problem_ = e.what();
  }
}

std::optional<std::string> EnergyExporter::note_up_or_down(std::size_t i, const std::optional<std::string>& problem) {
  GpuState& state = gpu_states_[i];
  const bool was_up = state.up;
  state.up = !problem.has_value();
  state.problem = problem;
  if (was_up == state.up) return std::nullopt;
  const Gpu& gpu = *gpus_[i];
  if (!state.up) {
    return fmt::format("gpu{} ({}) is down: {}; its counters stay at {:.3f} J and no job is billed for it", gpu.index(),
                       gpu.uuid(), *problem, ledger_.gpu_energy_j(i));
  }
  return fmt::format("gpu{} ({}) is read again", gpu.index(), gpu.uuid());
}

unsigned EnergyExporter::vendor_index(std::size_t i) const {
  const unsigned index = gpus_[i]->index();
  const auto listed = options_.vendor_index.find(index);
  return listed != options_.vendor_index.end() ? listed->second : index;
}

// dcgm-exporter's labels. `device` names the GPU as its vendor's tools do:
// nvidiaN (dcgm-exporter's, after /dev/nvidiaN) and amdN for AMD GPUs, N
// the index among that vendor's GPUs (AMD's exporter's gpu_id). The driver
// version label is NVML's: AMD GPUs go without it (joule_gpu_library_info).
std::string EnergyExporter::gpu_labels(std::size_t i) const {
  const Gpu& gpu = *gpus_[i];
  const bool amd = gpu.backend() == "rocm";
  std::string labels = fmt::format(R"(gpu="{}",UUID="{}",pci_bus_id="{}",device="{}{}",modelName="{}",Hostname="{}")",
                                   gpu.index(), escaped(gpu.uuid()), escaped(gpu.pci_bus_id()), amd ? "amd" : "nvidia",
                                   vendor_index(i), escaped(gpu.name()), escaped(options_.hostname));
  if (!amd) labels += fmt::format(R"(,DCGM_FI_DRIVER_VERSION="{}")", escaped(options_.driver_version));
  // dcgm-exporter's pod labels, where one container holds the GPU.
  if (gpu_states_[i].holders.size() == 1) labels += pod_labels(gpu_states_[i].holders.front());
  return labels;
}

std::string EnergyExporter::job_labels(const JobEnergyKey& key) const {
  const Gpu& gpu = *gpus_[key.gpu];
  std::string labels = fmt::format(R"(joule_job="{}",user="{}",gpu="{}",UUID="{}",Hostname="{}")", escaped(key.job),
                                   escaped(key.user), gpu.index(), escaped(gpu.uuid()), escaped(options_.hostname));
  if (const auto pod = ledger_.job_pods().find(key.job); pod != ledger_.job_pods().end()) labels += pod_labels(pod->second);
  return labels;
}

std::string EnergyExporter::metrics_text() const {
  std::vector<std::optional<TimelineSample>> latest;
  for (std::size_t i = 0; i < gpus_.size(); ++i) latest.push_back(sampler_.timeline().latest(static_cast<uint32_t>(i)));
  std::lock_guard lock(mutex_);
  std::string out;
  // The readings, under dcgm-exporter's names and units.
  const auto gauge = [&](const char* name, const char* help, auto value_of) {
    Family family(out, name, "gauge", help);
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (!latest[i] || !gpu_states_[i].up) continue;
      if (const std::optional<double> v = value_of(*latest[i]); v) family.add(gpu_labels(i), *v);
    }
  };
  const auto known = [](auto v) { return v >= 0 ? std::optional<double>(static_cast<double>(v)) : std::nullopt; };
  gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
        [](const TimelineSample& s) { return std::optional<double>(s.power_w); });
  gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
        [&](const TimelineSample& s) { return known(s.gpu_util_percent); });
  gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
        [&](const TimelineSample& s) { return known(s.memory_util_percent); });
  gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).",
        [&](const TimelineSample& s) { return known(s.sm_clock_mhz); });
  gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
        [&](const TimelineSample& s) { return known(s.temperature_c); });
  gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", [&](const TimelineSample& s) {
    return s.memory_used_bytes >= 0 ? std::optional<double>(static_cast<double>(s.memory_used_bytes >> 20))
                                    : std::nullopt;
  });
  {
    Family family(out, "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).");
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (gpu_states_[i].memory_clock_mhz && gpu_states_[i].up) family.add(gpu_labels(i), *gpu_states_[i].memory_clock_mhz);
    }
  }
  {
    Family family(out, "DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).");
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (gpu_states_[i].limit_mw && gpu_states_[i].up) family.add(gpu_labels(i), *gpu_states_[i].limit_mw / 1000.0);
    }
  }
  {
    Family family(out, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
                  "Total energy consumption since the exporter started, or since its ledger began (--ledger) (in mJ).");
    for (std::size_t i = 0; i < gpus_.size(); ++i) family.add(gpu_labels(i), ledger_.gpu_energy_j(i) * 1000.0);
  }
  // What only joule has.
  {
    Family family(out, "joule_gpu_up", "gauge", "1 while the GPU's energy is read, 0 once it fails (lost GPU).");
    for (std::size_t i = 0; i < gpus_.size(); ++i) family.add(gpu_labels(i), gpu_states_[i].up ? 1 : 0);
  }
  {
    // Why, apart from joule_gpu_up, so that the up series keeps one identity
    // whatever the reason (an _info series, as Prometheus names them).
    Family family(out, "joule_gpu_down_info", "gauge",
                  "1 for each GPU that is down, with why in `reason`: its counters are frozen and no job is billed for it.");
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (gpu_states_[i].up) continue;
      family.add(fmt::format(R"({},reason="{}")", gpu_labels(i), escaped(gpu_states_[i].problem.value_or("unknown"))), 1);
    }
  }
  {
    Family family(out, "joule_exporter_backend_info", "gauge",
                  "1, labelled with where the GPUs come from (backend: nvml, rocm, nvml+rocm, sim for simulated GPUs "
                  "asked for, none where neither NVML nor ROCm SMI gives a GPU) and why.");
    family.add(fmt::format(R"(backend="{}",reason="{}",Hostname="{}")", escaped(options_.gpu_backend),
                           escaped(options_.gpu_backend_reason), escaped(options_.hostname)),
               1);
  }
  {
    Family family(out, "joule_nvml_up", "gauge",
                  "1 when NVML was loaded, 0 when it could not be (no GPU is served; joule_exporter_backend_info says "
                  "why); absent with simulated GPUs.");
    if (options_.nvml_up) family.add(fmt::format(R"(Hostname="{}")", escaped(options_.hostname)), *options_.nvml_up ? 1 : 0);
  }
  {
    Family family(out, "joule_rocm_smi_up", "gauge",
                  "1 when ROCm SMI (AMD GPUs) was loaded, 0 when it could not be (joule_gpu_library_info says why); "
                  "absent with simulated GPUs.");
    if (options_.rocm_smi_up) {
      family.add(fmt::format(R"(Hostname="{}")", escaped(options_.hostname)), *options_.rocm_smi_up ? 1 : 0);
    }
  }
  {
    Family family(out, "joule_gpu_library_info", "gauge",
                  "1 for each GPU library tried (library: nvml, rocm_smi), with the file, the version it reported "
                  "(NVML: the driver's; ROCm SMI: its own) and why it gave no GPU.");
    for (const ExporterOptions::GpuLibrary& library : options_.gpu_libraries) {
      family.add(fmt::format(R"(library="{}",path="{}",version="{}",problem="{}",Hostname="{}")", escaped(library.name),
                             escaped(library.path), escaped(library.version), escaped(library.problem),
                             escaped(options_.hostname)),
                 1);
    }
  }
  if (options_.amd_metric_names) render_amd_metric_names(out, latest);
  render_pod_metrics(out);
  {
    Family family(out, "joule_gpu_energy_joules_total", "counter",
                  "GPU energy since the exporter started, or since its ledger began (--ledger), integrated by joule's sampler (J).");
    for (std::size_t i = 0; i < gpus_.size(); ++i) family.add(gpu_labels(i), ledger_.gpu_energy_j(i));
  }
  {
    Family family(out, "joule_gpu_energy_split_by_utilization", "gauge",
                  "1 when the last accounting step that several processes shared on the GPU split its energy by the "
                  "SM utilisation the driver sampled for each; 0 when equally (no samples), or none was shared yet.");
    for (std::size_t i = 0; i < gpus_.size(); ++i) family.add(gpu_labels(i), ledger_.split_by_utilization(i) ? 1 : 0);
  }
  {
    Family family(out, "joule_gpu_unattributed_energy_joules_total", "counter",
                  "GPU energy drawn while no process was listed on it, or by processes whose job was unknown (J).");
    for (std::size_t i = 0; i < gpus_.size(); ++i) family.add(gpu_labels(i), ledger_.unattributed_j(i));
  }
  {
    Family family(out, "joule_job_gpu_energy_joules_total", "counter",
                  "GPU energy per job (joule_job: slurm/ID, kubernetes/POD_UID, systemd/UNIT or user/NAME) and user: each "
                  "accounting step's GPU energy split over the processes listed at its start or end, by the SM "
                  "utilisation the driver sampled for each where it did, else equally (J).");
    for (const auto& [key, energy_j] : ledger_.job_gpu_energy_j()) family.add(job_labels(key), energy_j);
  }
  if (options_.carbon && options_.carbon->g_per_kwh) {
    const carbon::Basis& basis = *options_.carbon;
    {
      Family family(out, "joule_job_gpu_co2e_grams_total", "counter",
                    "Grams of CO2e of joule_job_gpu_energy_joules_total (same labels): energy in kWh x PUE x the "
                    "average grid intensity of joule_carbon_intensity_grams_per_kwh (g).");
      for (const auto& [key, energy_j] : ledger_.job_gpu_energy_j()) {
        family.add(job_labels(key), *carbon::footprint(basis, energy_j).co2e_g);
      }
    }
    {
      Family family(out, "joule_carbon_intensity_grams_per_kwh", "gauge",
                    "The average grid carbon intensity joule_job_gpu_co2e_grams_total uses (g CO2e/kWh), with its "
                    "region, source, year and the PUE.");
      family.add(fmt::format(R"(region="{}",source="{}",year="{}",pue="{}",Hostname="{}")", escaped(basis.region),
                             escaped(basis.source), basis.year ? std::to_string(*basis.year) : "",
                             fmt::format("{:g}", basis.pue), escaped(options_.hostname)),
                 *basis.g_per_kwh);
    }
  }
  {
    Family family(out, "joule_cpu_energy_joules_total", "counter", "CPU package and DRAM energy (RAPL) since the exporter started, or since its ledger began (--ledger) (J).");
    for (std::size_t z = 0; z < cpu_zones_.size(); ++z) {
      const CpuEnergyZone& zone = *cpu_zones_[z];
      family.add(fmt::format(R"(package="{}",domain="{}",Hostname="{}")", zone.package_index(),
                             to_string(zone.domain()), escaped(options_.hostname)),
                 ledger_.cpu_energy_j(z));
    }
  }
  {
    Family family(out, "joule_job_cpu_energy_joules_total", "counter",
                  "CPU package and DRAM energy (RAPL) per job: each step's zone energy split by the CPU time the job's "
                  "cgroup (else its processes on the GPUs) used, of all the node used (J).");
    for (const auto& [key, energy_j] : ledger_.job_cpu_energy_j()) {
      const CpuEnergyZone& zone = *cpu_zones_[key.zone];
      family.add(fmt::format(R"(joule_job="{}",user="{}",package="{}",domain="{}",Hostname="{}")", escaped(key.job),
                             escaped(key.user), zone.package_index(), to_string(zone.domain()), escaped(options_.hostname)),
                 energy_j);
    }
  }
  {
    Family family(out, "joule_gpu_default_power_limit_watts", "gauge",
                  "The power limit the GPU boots with (W): a POWER_MGMT_LIMIT below it is a cap someone set.");
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (gpu_states_[i].default_limit_mw && gpu_states_[i].up) {
        family.add(gpu_labels(i), *gpu_states_[i].default_limit_mw / 1000.0);
      }
    }
  }
  if (leases_) {
    Family up(out, "joule_jouled_up", "gauge", "1 when jouled answered the last accounting step's lease query.");
    up.add(fmt::format(R"(Hostname="{}")", escaped(options_.hostname)), jouled_up_ ? 1 : 0);
    Family family(out, "joule_gpu_lease_power_limit_watts", "gauge",
                  "The power limit in force under a jouled lease (W), labelled by its holder's user and job; "
                  "absent while no lease is held.");
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      const std::optional<GpuState::Lease>& lease = gpu_states_[i].lease;
      if (!lease) continue;
      family.add(fmt::format(R"({},holder_user="{}",holder_job="{}")", gpu_labels(i), escaped(lease->user),
                             escaped(lease->job)),
                 lease->power_limit_w);
    }
  }
  {
    Family family(out, "joule_exporter_accounting_steps_total", "counter", "Accounting steps taken.");
    family.add(fmt::format(R"(Hostname="{}")", escaped(options_.hostname)), static_cast<double>(accounting_steps_));
  }
  {
    // A counter's value is the energy up to this moment, not up to the
    // scrape: what lines a rate up with another clock to the millisecond.
    Family family(out, "joule_exporter_accounted_until_seconds", "gauge",
                  "Unix time up to which the energy counters are accounted (the last accounting step's end).");
    family.add(fmt::format(R"(Hostname="{}")", escaped(options_.hostname)),
               accounted_until_s_ - clock_->from_realtime_us(0));
  }
  return out;
}

}  // namespace joule
