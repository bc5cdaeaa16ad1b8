// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/control/devices.h"
#include "joule/sweep/sweep.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <numeric>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

extern char** environ;

#include "joule/cluster/node_report.h"
#include "joule/common/child_process.h"
#include "joule/common/csv.h"
#include "joule/common/input_file.h"
#include "joule/common/utf8.h"
#include "joule/analyze/analysis.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"
#include "sweep/store.h"

namespace joule {

namespace {

// "0,1,...,count-1": the GPUs each node's ranks use (the first, as on one machine).
std::string first_gpus(int count) {
  std::string list;
  for (int i = 0; i < count; ++i) list += (i ? "," : "") + std::to_string(i);
  return list;
}

// "gpu0 (NVIDIA A40)", "gpu1 (Simulated GPU (H100-like), simulated)".
std::string gpu_words(Gpu& gpu) {
  return fmt::format("gpu{} ({}{})", gpu.index(), gpu.name(), gpu.simulated() ? ", simulated" : "");
}

// The GPUs the sweep's runs use: the first N, N the largest grid.gpus.
std::size_t gpus_used(const SweepConfig& config, std::size_t available) {
  for (const auto& [name, values] : config.grid) {
    if (name != "gpus") continue;
    std::size_t most = 0;
    for (const auto& v : values) most = std::max<std::size_t>(most, std::stoul(v));  // checked at load
    return most;
  }
  return available;
}

void check_power_limits(const SweepConfig& config, const std::vector<std::string>& values, Gpu& gpu) {
  PowerLimitRange range{};
  try {
    range = gpu.power_limit_range_mw();
  } catch (const DeviceError& e) {
    throw UsageError(fmt::format("{}: grid.power_limit: the range of power limits of {} cannot be read: {}",
                                 config.where("power_limit", 0), gpu_words(gpu), e.what()));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double limit_w = std::stod(values[i]);  // checked at load
    const auto limit_mw = static_cast<long long>(std::llround(limit_w * 1000));
    if (limit_mw < range.min_mw || limit_mw > range.max_mw) {
      throw UsageError(fmt::format("{}: grid.power_limit: {} W is outside what {} supports: {}-{} W",
                                   config.where("power_limit", i), values[i], gpu_words(gpu), range.min_mw / 1000.0,
                                   range.max_mw / 1000.0));
    }
  }
}

void check_clock_caps(const SweepConfig& config, const std::string& key, const std::vector<std::string>& values,
                      Gpu& gpu) {
  const ClockDomain domain = key == "sm_clock_mhz" ? ClockDomain::kSm : ClockDomain::kMemory;
  std::vector<uint32_t> supported;
  try {
    supported = gpu.supported_clocks_mhz(domain);
  } catch (const DeviceError& e) {
    throw UsageError(fmt::format("{}: grid.{}: {} cannot list its supported {} clocks, so cannot cap them: {}",
                                 config.where(key, 0), key, gpu_words(gpu), to_string(domain), e.what()));
  }
  if (supported.empty()) {
    throw UsageError(fmt::format("{}: grid.{}: {} lists no supported {} clocks, so cannot cap them",
                                 config.where(key, 0), key, gpu_words(gpu), to_string(domain)));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double cap_mhz = std::stod(values[i]);  // checked at load
    if (cap_mhz < supported.front() || cap_mhz > supported.back()) {
      throw UsageError(fmt::format("{}: grid.{}: {} MHz is outside the {} clocks {} supports: {}-{} MHz",
                                   config.where(key, i), key, values[i], to_string(domain), gpu_words(gpu),
                                   supported.front(), supported.back()));
    }
  }
}

}  // namespace

void check_grid_on_gpus(const SweepConfig& config, const std::vector<std::shared_ptr<Gpu>>& gpus) {
  for (const auto& [name, values] : config.grid) {
    if (name != "gpus") continue;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::stoul(values[i]) > gpus.size()) {
        throw UsageError(fmt::format("{}: grid.gpus asks for {} GPUs; this machine has {}", config.where("gpus", i),
                                     values[i], gpus.size()));
      }
    }
  }
  const std::size_t used = std::min(gpus.size(), gpus_used(config, gpus.size()));
  for (const auto& [name, values] : config.grid) {
    if (!find_gpu_knob(name)) continue;
    for (std::size_t g = 0; g < used; ++g) {
      if (name == "power_limit") {
        check_power_limits(config, values, *gpus[g]);
      } else {
        check_clock_caps(config, name, values, *gpus[g]);
      }
    }
  }
}

std::vector<std::string> cluster_run_argv(const SweepConfig& config, const SweepPoint& point,
                                          const ClusterLaunch& launch) {
  const NodeLayout layout = node_layout(config, point);
  std::vector<std::string> argv;
  if (config.launcher == "srun") {
    argv = {"srun", "--nodes", std::to_string(layout.nodes), "--ntasks", std::to_string(layout.gpus),
            "--ntasks-per-node", std::to_string(layout.ranks_per_node)};
  } else if (config.launcher == "mpirun") {
    argv = {"mpirun", "-np", std::to_string(layout.gpus), "--map-by",
            fmt::format("ppr:{}:node", layout.ranks_per_node)};
    if (launch.as_root) argv.push_back("--allow-run-as-root");
    std::vector<std::string> names = {"JOULE_REPORT_FILE", "CUDA_VISIBLE_DEVICES"};
    for (const auto& name : launch.forwarded_env) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const auto& name : names) {
      argv.push_back("-x");
      argv.push_back(name);
    }
  } else {
    throw UsageError(fmt::format("{}: runs across nodes need launcher mpirun or srun, not {}", config.path,
                                 config.launcher));
  }
  // The user's options last: Open MPI takes the last --map-by, so they may
  // replace joule's placement.
  argv.insert(argv.end(), config.launcher_options.begin(), config.launcher_options.end());
  argv.insert(argv.end(), {launch.joule_binary, "measure", "--mpi", "--json", "--output", launch.report_path,
                           "--timeline", launch.timeline_path, "--sample", "util"});
  if (config.launcher == "mpirun") argv.insert(argv.end(), {"--gpus", first_gpus(layout.ranks_per_node)});
  argv.insert(argv.end(), launch.measure_options.begin(), launch.measure_options.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", fill_command(config, point)});
  return argv;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& word : argv) {
    const bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                                "0123456789_-+=/.,:@%") == std::string::npos;
    std::string quoted = plain ? word : "'";
    if (!plain) {
      for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
    }
    out += (out.empty() ? "" : " ") + quoted;
  }
  return out;
}

namespace {

std::string absolute_path(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

// The device options `joule measure` gets on every node, from the sweep's own.
// Across nodes the sweep knows only what it asked the ranks for.
bool sweep_simulates(const SweepOptions& options) { return options.discovery.backend == GpuBackend::kSim; }

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

std::vector<std::string> measure_options_of(const DiscoveryOptions& discovery) {
  std::vector<std::string> out;
  if (discovery.backend == GpuBackend::kSim) out.insert(out.end(), {"--backend", "sim"});
  if (discovery.backend == GpuBackend::kNvml) out.insert(out.end(), {"--backend", "nvml"});
  if (discovery.backend == GpuBackend::kRocm) out.insert(out.end(), {"--backend", "rocm"});
  if (!discovery.sim_spec.empty()) out.insert(out.end(), {"--sim", discovery.sim_spec});
  return out;
}

// Defined below, beside the runs on one machine.
std::vector<std::pair<std::string, std::string>> visible_devices_env(const Devices& sweep_devices,
                                                                     const std::vector<std::shared_ptr<Gpu>>& run_gpus);

// The variables that give a node's ranks their GPUs (the first
// ranks_per_node, as --gpus 0,..,K-1 picks them), set as a run on one machine
// gets them (visible_devices_env): CUDA_VISIBLE_DEVICES for NVIDIA GPUs,
// HIP_VISIBLE_DEVICES for AMD ones, each numbered by its vendor's runtime.
// The nodes are taken to be like the one the sweep runs on, whose GPUs say
// which vendors' variables to set. Where this machine has too few GPUs to go
// by (a login node), one vendor's: HIP_VISIBLE_DEVICES where its GPUs (or the
// sweep's --backend) are AMD alone, else CUDA_VISIBLE_DEVICES.
std::vector<std::pair<std::string, std::string>> node_visible_env(const DiscoveryOptions& discovery,
                                                                  int ranks_per_node) {
  DiscoveryOptions here = discovery;
  here.auto_fallback = AutoFallback::kNoGpus;  // a login node: no GPU, not simulated ones
  Devices node;
  try {
    node = discover_devices(here);
  } catch (const std::exception&) {
    // No GPU here to go by (the backend's library missing on a login node).
  }
  const std::size_t used = static_cast<std::size_t>(std::max(1, ranks_per_node));
  if (node.gpus.size() >= used) {
    return visible_devices_env(node, {node.gpus.begin(), node.gpus.begin() + static_cast<std::ptrdiff_t>(used)});
  }
  const bool amd_only = node.gpus.empty() ? discovery.backend == GpuBackend::kRocm
                                          : std::all_of(node.gpus.begin(), node.gpus.end(),
                                                        [](const auto& gpu) { return is_amd_gpu(*gpu); });
  return {{amd_only ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES", first_gpus(ranks_per_node)}};
}

// What the sweep sets in the launcher's environment for a run across nodes
// (mpirun forwards each with -x; srun passes the whole environment on).
std::vector<std::pair<std::string, std::string>> launcher_env(const SweepOptions& options, const NodeLayout& layout,
                                                              const std::string& counts_file) {
  std::vector<std::pair<std::string, std::string>> env = {{"JOULE_REPORT_FILE", counts_file}};
  for (auto& variable : node_visible_env(options.discovery, layout.ranks_per_node)) env.push_back(std::move(variable));
  if (!options.discovery.nvml_library.empty()) env.emplace_back("JOULE_NVML_LIBRARY", options.discovery.nvml_library);
  if (!options.discovery.rocm_library.empty()) env.emplace_back("JOULE_ROCM_SMI_LIBRARY", options.discovery.rocm_library);
  if (!options.discovery.powercap_root.empty()) env.emplace_back("JOULE_POWERCAP_ROOT", options.discovery.powercap_root);
  return env;
}

}  // namespace

ClusterLaunch cluster_launch_of(const SweepOptions& options, const std::string& store_path, const std::string& run_id) {
  ClusterLaunch launch;
  launch.joule_binary = options.joule_binary;
  if (launch.joule_binary.empty()) {
    std::error_code ec;
    launch.joule_binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw Error(fmt::format("joule sweep: cannot find its own binary (/proc/self/exe): {}", ec.message()));
  }
  launch.report_path = fmt::format("{}.run{}.json", absolute_path(store_path), run_id);
  launch.timeline_path = fmt::format("{}.run{}.timeline.csv", absolute_path(store_path), run_id);
  launch.measure_options = measure_options_of(options.discovery);
  // joule's own settings (JOULE_SIM, JOULE_NVML_LIBRARY, JOULE_RANKS_PER_NODE, ...) reach every rank.
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (entry.rfind("JOULE_", 0) == 0 && eq != std::string::npos) launch.forwarded_env.push_back(entry.substr(0, eq));
  }
  for (const auto& [name, value] : launcher_env(options, NodeLayout{}, "")) launch.forwarded_env.push_back(name);
  std::sort(launch.forwarded_env.begin(), launch.forwarded_env.end());
  launch.forwarded_env.erase(std::unique(launch.forwarded_env.begin(), launch.forwarded_env.end()),
                             launch.forwarded_env.end());
  launch.as_root = geteuid() == 0;
  return launch;
}

std::string described_command(const SweepConfig& config, const SweepPoint& point, const SweepOptions& options,
                              const std::string& store_path, const std::string& run_id) {
  if (!config.across_nodes()) return run_command(config, point);
  return shell_join(cluster_run_argv(config, point, cluster_launch_of(options, store_path, run_id)));
}

namespace {

// Reads "samples=N steps=M epochs=K" lines the run appended to its report file.
void read_counts(const std::string& path, sweep::RunRecord& record) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = word.substr(0, eq);
      char* end = nullptr;
      const double value = std::strtod(word.c_str() + eq + 1, &end);
      if (*end != '\0') continue;
      // The workload writes this file: a count that is no finite number >= 0
      // (inf, -5, 1e400) is not stored, and the run says so.
      if ((key == "samples" || key == "steps" || key == "epochs") && !(std::isfinite(value) && value >= 0)) {
        record.error += fmt::format("{}$JOULE_REPORT_FILE: '{}' is not a count (a finite number >= 0): left out",
                                    record.error.empty() ? "" : "; ", printable(word));
        continue;
      }
      if (key == "samples") record.samples = record.samples.value_or(0) + value;
      if (key == "steps") record.steps = record.steps.value_or(0) + value;
      if (key == "epochs") record.epochs = record.epochs.value_or(0) + value;
    }
  }
}

// Utilisation statistics and a decimated power timeline (at most ~200
// points per device) of one run.
// One sample of a run, its time from the run's start.
struct RunSample {
  double time_s;
  std::string device;
  double power_w, gpu_util_percent, memory_util_percent;  // utilisation < 0: not sampled
};

// A run's utilisation (mean and variation over every sample) and its power
// timeline, decimated to about 200 points per device for the report.
void summarize_samples(const std::vector<RunSample>& samples, double elapsed_s, sweep::RunRecord& record) {
  std::vector<double> gpu_util, mem_util;
  std::map<std::string, std::vector<const RunSample*>> by_device;
  for (const auto& s : samples) {
    by_device[s.device].push_back(&s);
    if (s.gpu_util_percent >= 0) gpu_util.push_back(s.gpu_util_percent);
    if (s.memory_util_percent >= 0) mem_util.push_back(s.memory_util_percent);
  }
  if (!gpu_util.empty()) {
    const Summary g = summarize(gpu_util), mm = summarize(mem_util);
    record.gpu_util_mean = g.mean;
    record.gpu_util_cv = g.cv();
    record.mem_util_mean = mm.mean;
    record.mem_util_cv = mm.cv();
  }
  for (const auto& [device, list] : by_device) {
    const std::size_t step = std::max<std::size_t>(1, list.size() / 200);
    for (std::size_t i = 0; i < list.size(); i += step) {
      record.timeline.push_back({std::clamp(list[i]->time_s, 0.0, elapsed_s), device, list[i]->power_w});
    }
  }
}

void summarize_timeline(Monitor& monitor, const Measurement& m, sweep::RunRecord& record) {
  const auto& names = monitor.timeline().device_names();
  // The samples just before and after the run bound it (a short run may
  // hold no sample of its own).
  const double margin_s = monitor.sampler().options().interval_s;
  std::vector<RunSample> samples;
  for (const auto& s : monitor.timeline().samples()) {
    if (s.time_s < m.begin_s - margin_s || s.time_s > m.begin_s + m.elapsed_s + margin_s) continue;
    samples.push_back({s.time_s - m.begin_s, names.at(s.device), s.power_w, static_cast<double>(s.gpu_util_percent),
                       static_cast<double>(s.memory_util_percent)});
  }
  summarize_samples(samples, m.elapsed_s, record);
}

// A run across nodes: each node's timeline, written by its leader beside
// the store (node_file_path), as "<node> <device>". Its time counts from
// the node's first sample, taken when the leader's monitor started, a few
// milliseconds before the window began. A missing or unreadable file is a
// note in the run's error; the energy does not depend on it.
void read_node_timelines(const std::string& timeline_path, sweep::RunRecord& record) {
  std::vector<RunSample> samples;
  for (const auto& node : record.node_rows) {
    const std::string path = cluster::node_file_path(timeline_path, node.node);
    try {
      const CsvTable table = CsvTable::read(path);
      table.require_columns({"time_s", "device", "power_w", "gpu_util_percent", "memory_util_percent"});
      const double first_s = table.size() ? table.row(0).number("time_s") : 0.0;
      for (std::size_t i = 0; i < table.size(); ++i) {
        const auto row = table.row(i);
        const auto util = [&](const char* column) { return row.text(column).empty() ? -1.0 : row.number(column); };
        const double t = row.number("time_s") - first_s;
        if (t > node.elapsed_s + 1.0) continue;  // after the window: the leader settling
        samples.push_back({t, node.node + " " + row.text("device"), row.number("power_w"), util("gpu_util_percent"),
                           util("memory_util_percent")});
      }
    } catch (const Error& e) {
      record.error += (record.error.empty() ? "" : "; ") + fmt::format("no timeline of node {}: {}", node.node, e.what());
    }
    std::remove(path.c_str());
  }
  summarize_samples(samples, record.elapsed_s, record);
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

}  // namespace

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

// The job's report that `joule measure --mpi` wrote (rank 0), into the run's
// totals and its node rows. Status: ok only with every node measured and
// the command's exit status 0.
void read_cluster_report(const nlohmann::json& report, int exit_code, sweep::RunRecord& record,
                         const std::string& where) {
  if (!report.is_object() || !report.contains("nodes") || !report["nodes"].is_array() ||
      !report.contains("missing_nodes") || !report["missing_nodes"].is_array()) {
    throw Error(fmt::format("{}: not a report of joule measure --mpi (no 'nodes' and 'missing_nodes' lists)", where));
  }
  std::vector<std::string> notes, short_nodes;
  record.elapsed_s = 0;
  record.gpu_energy_j = record.cpu_energy_j = record.dram_energy_j = 0;
  for (const auto& json : report["nodes"]) {
    cluster::NodeReport node;
    try {
      node = cluster::node_report_from_json(json);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
    sweep::NodeRecord row;
    row.node = node.node;
    for (const int rank : node.ranks) row.ranks += (row.ranks.empty() ? "" : ",") + std::to_string(rank);
    row.elapsed_s = node.elapsed_s;
    row.gpu_energy_j = node.energy_j("gpu");
    row.cpu_energy_j = node.energy_j("cpu_package");
    row.dram_energy_j = node.energy_j("dram");
    row.gpus = static_cast<int>(
        std::count_if(node.devices.begin(), node.devices.end(), [](const auto& d) { return d.kind == "gpu"; }));
    row.warnings = joined(node.warnings, "; ");
    for (const auto& d : node.devices) {
      if (d.kind == "gpu") record.devices += fmt::format("{}{}: {}", record.devices.empty() ? "" : ", ", node.node, d.name);
    }
    for (const auto& w : node.warnings) notes.push_back(fmt::format("node {}: {}", row.node, w));
    if (node.devices_failed) short_nodes.push_back(row.node);
    record.elapsed_s = std::max(record.elapsed_s, row.elapsed_s);
    record.gpu_energy_j += row.gpu_energy_j;
    record.cpu_energy_j += row.cpu_energy_j;
    record.dram_energy_j += row.dram_energy_j;
    record.node_rows.push_back(std::move(row));
  }
  std::vector<std::string> missing;
  for (const auto& m : report["missing_nodes"]) {
    if (!m.is_string()) throw Error(fmt::format("{}: 'missing_nodes' holds a {}, not a text", where, m.type_name()));
    missing.push_back(m.get<std::string>());
  }
  const double total_j = record.gpu_energy_j + record.cpu_energy_j + record.dram_energy_j;
  record.avg_power_w = record.elapsed_s > 0 ? total_j / record.elapsed_s : 0;
  std::vector<std::string> problems;
  for (const auto& m : missing) problems.push_back("node missing: " + m);
  for (const auto& n : short_nodes) {
    problems.push_back(fmt::format("node {} lost a device inside the window: its energy stops there", n));
  }
  if (missing.empty() && static_cast<int>(record.node_rows.size()) != record.nodes) {
    notes.push_back(fmt::format("launched for {} node{}, the ranks ran on {}", record.nodes,
                                record.nodes == 1 ? "" : "s", record.node_rows.size()));
  }
  // A job that lost a node usually fails too (joule measure --mpi ends it
  // with MPI_Abort once a node is missing): failed wins over partial.
  record.status = exit_code != 0 ? "failed" : missing.empty() && short_nodes.empty() ? "ok" : "partial";
  if (!missing.empty()) {
    problems.push_back(fmt::format("the totals cover {} of {} nodes", record.node_rows.size(),
                                   record.node_rows.size() + missing.size()));
  }
  problems.insert(problems.end(), notes.begin(), notes.end());
  record.error = joined(problems, "; ");
}

// One run across nodes: the launcher starts `joule measure --mpi` on every
// rank; rank 0 writes the job's report beside the store.
sweep::RunRecord run_across_nodes(const SweepConfig& config, const SweepPoint& point, const SweepOptions& options,
                                  const std::string& store_path, long long id, double kill_grace_s) {
  sweep::RunRecord record;
  const NodeLayout layout = node_layout(config, point);
  record.nodes = layout.nodes;
  record.backend = sweep_simulates(options) ? "sim" : "nodes";  // the nodes' own, their report's device names
  try {
    const ClusterLaunch launch = cluster_launch_of(options, store_path, std::to_string(id));
    const std::vector<std::string> argv = cluster_run_argv(config, point, launch);
    record.command = shell_join(argv);
    const std::string counts_file = fmt::format("{}.run{}.counts", absolute_path(store_path), id);
    std::remove(counts_file.c_str());
    std::remove(launch.report_path.c_str());
    if (stop_signal() != 0) throw Error("not started");  // stopped while the run was being set up
    ChildProcess child = ChildProcess::spawn(argv, launcher_env(options, layout, counts_file));
    const int exit_code = wait_for_run(child, kill_grace_s);
    record.exit_code = exit_code;
    std::ifstream in(launch.report_path);
    if (!in) {
      record.status = "failed";
      record.error = fmt::format(
          "no report from the run's ranks at {} ({} exited with status {}; rank 0 writes it: is the store's "
          "directory on a filesystem every node shares?)",
          launch.report_path, config.launcher, exit_code);
    } else {
      nlohmann::json report;
      try {
        report = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("the run's report {} is not JSON: {}", launch.report_path, e.what()));
      }
      read_cluster_report(report, exit_code, record, fmt::format("the run's report {}", launch.report_path));
      std::remove(launch.report_path.c_str());
      read_node_timelines(launch.timeline_path, record);
    }
    read_counts(counts_file, record);
    std::remove(counts_file.c_str());
  } catch (const std::exception& e) {
    record.status = "failed";
    record.error = e.what();
  }
  note_stop(record);
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
