// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Running a sweep: its plan, one run on this machine with its GPU knobs put
// on and back, the loop over the grid (resumable, stoppable), the exports.
// The grid's check is in grid_check.cc, runs across nodes in cluster_run.cc,
// what a run's record holds besides its energy in run_record.cc.
#include "joule/sweep/sweep.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <numeric>

#include "joule/analyze/sweep_analysis.h"
#include "joule/cluster/node_report.h"
#include "joule/common/child_process.h"
#include "joule/control/devices.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"
#include "sweep/run_parts.h"
#include "sweep/store.h"

namespace joule {

std::string absolute_path(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

bool sweep_simulates(const SweepOptions& options) { return options.discovery.backend == GpuBackend::kSim; }

namespace {

// One store holds measurements or simulations, never both: its analysis and
// report would pass the one off as the other.
void refuse_mixed_store(sweep::Store& store, const std::string& store_path, bool simulated) {
  for (const std::string& backend : store.finished_backends()) {
    if ((backend == "sim") == simulated) continue;
    throw UsageError(fmt::format(
        "{}: its runs were measured on {}, but this sweep's GPUs are {}: a store holds measurements or simulations, "
        "never both (give this sweep a store of its own: --store PATH)",
        store_path, simulated ? fmt::format("real GPUs ({})", backend) : "SIMULATED GPUs",
        simulated ? "SIMULATED" : "real"));
  }
}





}  // namespace



std::string rough_duration(double seconds) {
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 90 * 60) return fmt::format("{:.0f} min", seconds / 60);
  if (seconds < 48 * 3600) return fmt::format("{:.1f} h", seconds / 3600);
  return fmt::format("{:.1f} days", seconds / 86400);
}

SweepPlan plan_sweep(const SweepConfig& config, const std::string& store_path, bool retry_failed) {
  SweepPlan plan;
  const std::vector<SweepPoint> points = expand_grid(config);
  plan.total = static_cast<int>(points.size());
  plan.configurations = plan.total / std::max(1, config.repeats);
  std::error_code ec;
  if (!std::filesystem::exists(store_path, ec)) {
    plan.to_run = points;
    return plan;
  }
  sweep::Store store(store_path, sweep::Store::ReadOnly{});  // a plan changes nothing, an older store's schema included
  for (const auto& point : points) {
    const bool failed = store.failed(point.config_key(), point.repeat);
    if (store.finished(point.config_key(), point.repeat, retry_failed)) {
      ++plan.finished;
      plan.failed_kept += failed;
    } else {
      plan.to_run.push_back(point);
      plan.failed_retried += failed;
    }
  }
  plan.mean_run_s = store.mean_finished_elapsed_s();
  return plan;
}

std::string SweepPlan::describe(const std::string& store_path) const {
  std::string text = fmt::format("{} runs ({} configurations x {} repeats), {} already in {}", total, configurations,
                                 configurations ? total / configurations : 0, finished, store_path);
  if (failed_kept > 0) {
    text += fmt::format(" ({} of them failed: kept as they are; --retry-failed runs them again)", failed_kept);
  }
  text += fmt::format(", {} to run", to_run.size());
  if (failed_retried > 0) text += fmt::format(" ({} failed before, run again)", failed_retried);
  if (to_run.empty()) return text;
  if (mean_run_s > 0) {
    return text + fmt::format(": about {} at the {} per run so far", rough_duration(mean_run_s * to_run.size()),
                              rough_duration(mean_run_s));
  }
  // No run measured yet: no guess (a guess read as an estimate; the count
  // alone says how big the grid is).
  return text + " (how long: said after the first run)";
}

namespace {

// Stopping a sweep (Ctrl-C, kill, a closed terminal): between runs the
// handler only notes the signal; during a run ChildProcess's handler takes
// over, passes the signal to the run's process group and, after the grace
// period, kills what is left of it. The sweep then records the run as
// interrupted, restores the GPU settings (the run's processes all gone) and
// starts no further run. Dying on the signal instead would leave the run
// 'running' in the store and the GPUs at the run's limits.
volatile sig_atomic_t g_stop_signal = 0;
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_stop_signal(int signal_number) {
  if (g_stop_signal == 0) g_stop_signal = signal_number;
}

// Installs on_stop_signal for the sweep's lifetime and puts the process's
// own handlers back after it.
class StopSignals {
 public:
  explicit StopSignals(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &action, &previous_[i]);
  }
  ~StopSignals() {
    if (!enabled_) return;
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &previous_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  struct sigaction previous_[std::size(kStopSignals)] {};
};

const StopSignals* g_stop_signals = nullptr;  // the running sweep's, if it handles signals

}  // namespace

int stop_signal() { return g_stop_signal; }

// Waits for a run's command and every process of its group a stop signal
// reached (ChildProcess). With the sweep handling signals, one that came
// while the run was starting stops it at once, and one that came during the
// run stops the sweep. The exit code a shell would report.
int wait_for_run(ChildProcess& child, double kill_grace_s) {
  if (g_stop_signals != nullptr && g_stop_signal != 0) child.stop(g_stop_signal);
  const int exit_code = child.wait_forwarding_signals(kill_grace_s);
  if (g_stop_signals != nullptr && g_stop_signal == 0) g_stop_signal = child.stop_signal();
  return exit_code;
}

// A run the sweep's stop signal cut short: interrupted, to be run again. A
// command that finished all the same (exit 0) keeps its result.
void note_stop(sweep::RunRecord& record) {
  const int signal_number = stop_signal();
  if (signal_number == 0 || record.status == "ok") return;
  record.status = "interrupted";
  const std::string what = fmt::format("the sweep was stopped by {} during this run{}; a resumed sweep runs it again",
                                       sigabbrev_np(signal_number) ? std::string("SIG") + sigabbrev_np(signal_number)
                                                                   : "signal " + std::to_string(signal_number),
                                       record.exit_code ? fmt::format(" (exit status {})", *record.exit_code) : "");
  record.error = record.error.empty() ? what : what + "; " + record.error;
}

namespace {

// A grid point's GPU knobs (power limit, clock caps) put on the run's GPUs,
// and what each GPU had before, to put back after the run whatever happened.
class RunSettings {
 public:
  explicit RunSettings(std::vector<std::shared_ptr<Gpu>> gpus) : gpus_(std::move(gpus)) {}

  // Throws DeviceError; what was applied before the failure is still undone by restore().
  void apply(const SweepPoint& point) {
    for (const GpuKnob& knob : kGpuKnobs) {
      if (!point.values.count(knob.key)) continue;
      const double value = std::stod(point.values.at(knob.key));  // checked at load
      for (std::size_t i = 0; i < gpus_.size(); ++i) apply(knob.key, i, value);
    }
  }

  // Puts back, in reverse order, what apply changed; a failure is logged and
  // the rest still restored.
  void restore(const std::function<void(const std::string&)>& log) {
    for (auto undo = undo_.rbegin(); undo != undo_.rend(); ++undo) {
      try {
        (*undo)();
      } catch (const DeviceError& e) {
        log(fmt::format("joule sweep: restoring a GPU setting failed: {}", e.what()));
      }
    }
    undo_.clear();
  }

 private:
  void apply(const std::string& key, std::size_t i, double value) {  // one knob on GPU i
    Gpu& gpu = *gpus_[i];
    if (key == "power_limit") {
      const uint32_t original_mw = gpu.power_limit_mw();
      gpu.set_power_limit_mw(static_cast<uint32_t>(std::lround(value * 1000)));
      undo_.push_back([&gpu, original_mw] { gpu.set_power_limit_mw(original_mw); });
      return;
    }
    const ClockDomain domain = key == "sm_clock_mhz" ? ClockDomain::kSm : ClockDomain::kMemory;
    const std::optional<ClockLock> original = gpu.clock_lock_mhz(domain);
    gpu.lock_clock_mhz(domain, clock_cap_lock(gpu, domain, static_cast<uint32_t>(value)));
    undo_.push_back([&gpu, domain, original] {
      if (original) {
        gpu.lock_clock_mhz(domain, *original);
      } else {
        gpu.reset_clock_lock(domain);
      }
    });
  }

  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<std::function<void()>> undo_;
};

}  // namespace

namespace {

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// "the command exited with status 3", "the command was killed by SIGKILL".
std::string exit_status_words(int exit_code) {
  if (exit_code > 128 && exit_code < 128 + 65 && sigabbrev_np(exit_code - 128) != nullptr) {
    return fmt::format("the command was ended by SIG{} (exit status {})", sigabbrev_np(exit_code - 128), exit_code);
  }
  return fmt::format("the command exited with status {}", exit_code);
}

}  // namespace

// The variables that give a run its GPUs, each vendor's runtime counting its
// own (vendor_index): CUDA_VISIBLE_DEVICES the run's NVIDIA GPUs and
// HIP_VISIBLE_DEVICES its AMD ones. Each is set only where the sweep's GPUs
// include that vendor's, so a run on AMD GPUs of a mixed node hides the NVIDIA
// ones (an empty list), while an AMD node's runs leave CUDA_VISIBLE_DEVICES
// (which HIP also honours) as the sweep found it.
std::vector<std::pair<std::string, std::string>> visible_devices_env(const Devices& sweep_devices,
                                                                     const std::vector<std::shared_ptr<Gpu>>& run_gpus) {
  const auto list = [&](bool amd) {
    std::string text;
    for (const auto& gpu : run_gpus) {
      if (is_amd_gpu(*gpu) == amd) text += (text.empty() ? "" : ",") + std::to_string(vendor_index(sweep_devices, *gpu));
    }
    return text;
  };
  const auto has = [&](bool amd) {
    return std::any_of(sweep_devices.gpus.begin(), sweep_devices.gpus.end(),
                       [&](const auto& gpu) { return is_amd_gpu(*gpu) == amd; });
  };
  std::vector<std::pair<std::string, std::string>> env;
  if (has(false) || !has(true)) env.emplace_back("CUDA_VISIBLE_DEVICES", list(false));
  if (has(true)) env.emplace_back("HIP_VISIBLE_DEVICES", list(true));
  return env;
}

namespace {

// One run on this machine: a Monitor window over the run's GPUs (the first
// N), its GPU knobs applied and restored.
sweep::RunRecord run_here(const SweepConfig& config, const SweepPoint& point, const Devices& devices,
                          const std::string& store_path, long long id, double kill_grace_s,
                          const std::function<void(const std::string&)>& log) {
  Devices run_devices = devices;
  if (point.values.count("gpus")) run_devices.gpus.resize(std::stoul(point.values.at("gpus")));  // checked before
  sweep::RunRecord record;
  RunSettings settings(run_devices.gpus);
  try {
    settings.apply(point);
    const std::string report_file = fmt::format("{}.run{}.counts", store_path, id);
    std::remove(report_file.c_str());
    MonitorOptions monitor_options;
    monitor_options.sampler.fields.utilization = true;
    Monitor monitor(run_devices, monitor_options);
    if (stop_signal() != 0) throw Error("not started");  // stopped while the run was being set up
    monitor.begin_window("run");
    auto run_env = visible_devices_env(devices, run_devices.gpus);
    run_env.emplace_back("JOULE_REPORT_FILE", report_file);
    ChildProcess child = ChildProcess::spawn({"/bin/sh", "-c", run_command(config, point)}, run_env);
    const int exit_code = wait_for_run(child, kill_grace_s);
    const Measurement m = monitor.end_window("run");
    monitor.stop();  // a last sample at the end of the run
    // A device that failed inside the run (a GPU lost) leaves its energy
    // short: partial, its warning the error, not used by the analysis and
    // run again on resume; a non-zero exit is failed whatever the devices did.
    record.status = exit_code != 0 ? "failed" : m.warnings.empty() ? "ok" : "partial";
    record.exit_code = exit_code;
    record.elapsed_s = m.elapsed_s;
    record.gpu_energy_j = m.gpu_total_energy_j();
    record.cpu_energy_j = std::accumulate(m.cpu_package_energy_j.begin(), m.cpu_package_energy_j.end(), 0.0);
    record.dram_energy_j = std::accumulate(m.dram_energy_j.begin(), m.dram_energy_j.end(), 0.0);
    record.avg_power_w = m.elapsed_s > 0 ? m.total_energy_j() / m.elapsed_s : 0;
    if (exit_code != 0) record.error = exit_status_words(exit_code) + "; ";
    for (const auto& w : m.warnings) record.error += w + "; ";
    if (record.error.size() >= 2) record.error.resize(record.error.size() - 2);
    record.backend = devices.gpu_backend;
    for (const auto& gpu : run_devices.gpus) record.devices += (record.devices.empty() ? "" : ", ") + gpu_words(*gpu);
    record.node_rows.push_back({cluster::node_name(), "", static_cast<int>(run_devices.gpus.size()), record.elapsed_s,
                                record.gpu_energy_j, record.cpu_energy_j, record.dram_energy_j,
                                joined(m.warnings, "; ")});
    summarize_timeline(monitor, m, record);
    read_counts(report_file, record);
    std::remove(report_file.c_str());
  } catch (const std::exception& e) {
    record.status = "failed";
    record.error = e.what();
  }
  note_stop(record);
  settings.restore(log);
  return record;
}



// What a run killed with its sweep may have left beside the store: its
// counts file, and across nodes its report and the nodes' timelines.
void remove_run_files(const std::string& store_path, long long id) {
  const std::string prefix = fmt::format("{}.run{}.", std::filesystem::path(store_path).filename().string(), id);
  const std::filesystem::path dir = std::filesystem::absolute(store_path).parent_path();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options) {
  auto log = options.log ? options.log : [](const std::string& text) { std::cerr << text << '\n'; };
  const double kill_grace_s = options.kill_grace_s.value_or(config.kill_grace_s);
  if (!(kill_grace_s >= 0 && kill_grace_s <= kMaxKillGraceS)) {
    throw UsageError(fmt::format("kill grace {} s is outside 0-{:g}", kill_grace_s, kMaxKillGraceS));
  }
  Devices devices;
  if (!config.across_nodes()) {
    // Runs on this machine: its GPUs, and control where the grid sets knobs.
    // (Across nodes the ranks measure their own nodes, and knobs are refused at load.)
    std::string knobs;
    for (const auto& [name, values] : config.grid) {
      if (find_gpu_knob(name)) knobs += (knobs.empty() ? "" : ", ") + name;
    }
    devices = discover_devices(options.discovery);
    const bool control_available = devices.control_path.rfind("none", 0) != 0;
    if (!knobs.empty() && (options.no_control || !control_available)) {
      throw UsageError(fmt::format(
          "{}: the grid sets {}, but GPU control is {} ({}); remove {} from [grid] or run where GPU settings may "
          "change",
          config.path, knobs, options.no_control ? "off (--no-control)" : "not available", devices.control_path,
          knobs));
    }
    // Before the store is opened: a grid these GPUs cannot run leaves nothing behind.
    check_grid_on_gpus(config, devices.gpus);
  }
  const std::string store_path = options.store_override.empty() ? config.store_path : options.store_override;
  sweep::Store store(store_path);
  store.claim_for_sweep();
  const bool simulated = config.across_nodes() ? sweep_simulates(options) : devices.simulated();
  refuse_mixed_store(store, store_path, simulated);
  if (const auto interrupted = store.mark_interrupted(); !interrupted.empty()) {
    log(fmt::format("joule sweep: {} run(s) interrupted last time are run again", interrupted.size()));
    for (const long long id : interrupted) remove_run_files(store_path, id);
  }
  const StopSignals stop_signals(options.handle_signals);
  g_stop_signals = stop_signals.enabled() ? &stop_signals : nullptr;
  struct Forget {
    ~Forget() { g_stop_signals = nullptr; }
  } forget;
  const auto runs = expand_grid(config);
  SweepSummary summary;
  summary.total = static_cast<int>(runs.size());
  summary.simulated = simulated;
  // The estimates count the runs this sweep will run, not the grid's points:
  // a resume (or --retry-failed) skips the finished ones.
  int to_run = 0;
  for (const auto& point : runs) to_run += !store.finished(point.config_key(), point.repeat, options.retry_failed);
  const auto clock = SteadyClock::instance();
  const double started_s = clock->now_s();
  if (simulated) log("joule sweep: the GPUs are SIMULATED: every energy stored is joule's model, not a measurement");
  int done = 0;
  for (const auto& point : runs) {
    if (stop_signal() != 0) break;
    ++done;
    const std::string key = point.config_key();
    if (store.finished(key, point.repeat, options.retry_failed)) {
      ++summary.skipped;
      if (store.failed(key, point.repeat)) ++summary.failed_kept;
      continue;
    }
    // Across nodes the command names the run's report file, by the run's id:
    // recorded again once the id is known.
    const long long id =
        store.begin(config.path, key, point.repeat, described_command(config, point, options, store_path, "{id}"));
    const sweep::RunRecord record = config.across_nodes()
                                        ? run_across_nodes(config, point, options, store_path, id, kill_grace_s)
                                        : run_here(config, point, devices, store_path, id, kill_grace_s, log);
    store.finish(id, record);
    ++summary.ran;
    if (record.status != "ok") ++summary.failed;
    if (record.status == "partial") log(fmt::format("joule sweep: run {} is partial: {}", id, record.error));
    if (record.status == "interrupted") {
      summary.stopped_by_signal = stop_signal();
      log(fmt::format("joule sweep: run {} interrupted: {}", id, record.error));
    }
    const int remaining_runs = to_run - summary.ran;
    if (summary.ran == 1 && remaining_runs > 0 && !options.progress) {
      const double first_s = clock->now_s() - started_s;
      log(fmt::format("joule sweep: the first run took {}; about {} for the {} left", rough_duration(first_s),
                      rough_duration(first_s * remaining_runs), remaining_runs));
    }
    if (options.progress) {
      const double elapsed = clock->now_s() - started_s;
      const double per_run = summary.ran ? elapsed / summary.ran : 0;
      std::cerr << fmt::format("\rjoule sweep: {}/{} runs{}, {:.0f} s elapsed, ~{:.0f} s remaining   ", done,
                               summary.total, simulated ? " on SIMULATED GPUs" : "", elapsed, per_run * remaining_runs)
                << std::flush;
    }
  }
  if (options.progress) std::cerr << '\n';
  if (stop_signal() != 0) summary.stopped_by_signal = stop_signal();
  return summary;
}

void export_sweep_csv(const std::string& store_path, const std::string& csv_path) {
  require_results_store_file(store_path);
  sweep::Store(store_path).export_csv(csv_path);
}

int export_sweep_nodes_csv(const std::string& store_path, const std::string& csv_path) {
  require_results_store_file(store_path);
  return sweep::Store(store_path).export_nodes_csv(csv_path);
}

}  // namespace joule
