#include "joule/control/devices.h"
#include "joule/sweep/sweep.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <toml++/toml.h>

#include "joule/common/child_process.h"
#include "joule/common/input_file.h"
#include "joule/analyze/analysis.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"
#include "sweep/store.h"

namespace joule {

namespace {

std::string value_text(const toml::node& node, const std::string& where) {
  if (auto v = node.value<int64_t>()) return std::to_string(*v);
  if (auto v = node.value<double>()) return fmt::format("{}", *v);
  if (auto v = node.value<std::string>()) return *v;
  throw UsageError(fmt::format("{}: grid values must be numbers or strings", where));
}

}  // namespace

SweepConfig SweepConfig::load(const std::string& path) {
  toml::table table;
  try {
    std::ifstream in = open_input_file(path, "sweep file");
    table = toml::parse(in, path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw UsageError(fmt::format("{}:{}:{}: {}", path, where.line, where.column, e.description()));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  SweepConfig config;
  config.path = path;
  auto fail = [&](const toml::node* node, const std::string& what) {
    const auto line = node ? node->source().begin.line : 1;
    return UsageError(fmt::format("{}:{}: {}", path, line, what));
  };
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (name == "command") {
      if (!node.is_string() || node.value<std::string>()->empty()) throw fail(&node, "\"command\" must be a string");
      config.command = *node.value<std::string>();
    } else if (name == "launcher") {
      config.launcher = node.value<std::string>().value_or("");
      if (config.launcher != "local" && config.launcher != "torchrun" && config.launcher != "mpirun" &&
          config.launcher != "srun") {
        throw fail(&node, "\"launcher\" must be local, torchrun, mpirun or srun");
      }
    } else if (name == "repeats") {
      const auto repeats = node.value<int64_t>();
      if (!repeats || *repeats < 1 || *repeats > 1000) throw fail(&node, "\"repeats\" must be a whole number from 1");
      config.repeats = static_cast<int>(*repeats);
    } else if (name == "store") {
      if (!node.is_string()) throw fail(&node, "\"store\" must be a path");
      config.store_path = *node.value<std::string>();
    } else if (name == "grid") {
      if (!node.is_table()) throw fail(&node, "[grid] must be a table");
      for (const auto& [gkey, gnode] : *node.as_table()) {
        const std::string where = fmt::format("{}:{}: grid.{}", path, gnode.source().begin.line, gkey.str());
        std::vector<std::string> values;
        if (const auto* array = gnode.as_array()) {
          for (const auto& element : *array) values.push_back(value_text(element, where));
        } else {
          values.push_back(value_text(gnode, where));
        }
        if (values.empty()) throw UsageError(where + ": no values");
        config.grid.emplace_back(std::string(gkey.str()), values);
      }
    } else {
      throw fail(&node, fmt::format("unknown key \"{}\" (command, launcher, repeats, store, grid)", name));
    }
  }
  if (config.command.empty()) throw fail(nullptr, "\"command\" is required");
  // TOML tables iterate in key order; keep the order stable for users.
  for (const auto& [name, values] : config.grid) {
    if (name == "gpus" || find_gpu_knob(name)) {
      for (const auto& v : values) {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (*end != '\0' || !(x > 0)) throw fail(nullptr, fmt::format("grid.{}: '{}' must be a positive number", name, v));
      }
    }
  }
  if (config.store_path.empty()) {
    config.store_path = (std::filesystem::path(path).parent_path() / std::filesystem::path(path).stem()).string() + ".sqlite";
  } else if (std::filesystem::path(config.store_path).is_relative()) {
    config.store_path = (std::filesystem::path(path).parent_path() / config.store_path).string();
  }
  return config;
}

std::string SweepPoint::config_key() const { return nlohmann::json(values).dump(); }

std::vector<SweepPoint> expand_grid(const SweepConfig& config) {
  std::vector<std::map<std::string, std::string>> points = {{}};
  for (const auto& [name, values] : config.grid) {
    std::vector<std::map<std::string, std::string>> next;
    for (const auto& point : points) {
      for (const auto& value : values) {
        auto extended = point;
        extended[name] = value;
        next.push_back(std::move(extended));
      }
    }
    points = std::move(next);
  }
  std::vector<SweepPoint> runs;
  for (const auto& point : points) {
    for (int r = 0; r < config.repeats; ++r) runs.push_back({point, r});
  }
  return runs;
}

std::string run_command(const SweepConfig& config, const SweepPoint& point) {
  std::string out;
  const std::string& t = config.command;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '{') {
      out += t[i];
      continue;
    }
    const auto close = t.find('}', i);
    if (close == std::string::npos) throw UsageError(fmt::format("{}: unclosed '{{' in the command", config.path));
    const std::string name = t.substr(i + 1, close - i - 1);
    if (name == "repeat") {
      out += std::to_string(point.repeat);
    } else if (auto it = point.values.find(name); it != point.values.end()) {
      out += it->second;
    } else {
      throw UsageError(fmt::format("{}: the command uses {{{}}}, which is not in [grid] (nor {{repeat}})", config.path, name));
    }
    i = close;
  }
  const auto gpus = point.values.count("gpus") ? point.values.at("gpus") : "1";
  // --no-python: the command is a full command line ("python3 train.py ..."), not a script path.
  if (config.launcher == "torchrun") return fmt::format("torchrun --nproc-per-node {} --no-python {}", gpus, out);
  if (config.launcher == "mpirun") return fmt::format("mpirun -np {} {}", gpus, out);
  if (config.launcher == "srun") return fmt::format("srun --ntasks {} --gpus {} {}", gpus, gpus, out);
  return out;
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
      if (key == "samples") record.samples = record.samples.value_or(0) + value;
      if (key == "steps") record.steps = record.steps.value_or(0) + value;
      if (key == "epochs") record.epochs = record.epochs.value_or(0) + value;
    }
  }
}

// Utilisation statistics and a decimated power timeline (at most ~200
// points per device) of one run.
void summarize_timeline(Monitor& monitor, const Measurement& m, sweep::RunRecord& record) {
  const auto samples = monitor.timeline().samples();
  const auto& names = monitor.timeline().device_names();
  std::vector<double> gpu_util, mem_util;
  std::map<uint32_t, std::vector<const TimelineSample*>> by_device;
  // The samples just before and after the run bound it (a short run may
  // hold no sample of its own).
  const double margin_s = monitor.sampler().options().interval_s;
  for (const auto& s : samples) {
    if (s.time_s < m.begin_s - margin_s || s.time_s > m.begin_s + m.elapsed_s + margin_s) continue;
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
      const double t = std::clamp(list[i]->time_s - m.begin_s, 0.0, m.elapsed_s);
      record.timeline.push_back({t, names.at(device), list[i]->power_w});
    }
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

SweepPlan plan_sweep(const SweepConfig& config, const std::string& store_path) {
  SweepPlan plan;
  const std::vector<SweepPoint> points = expand_grid(config);
  plan.total = static_cast<int>(points.size());
  plan.configurations = plan.total / std::max(1, config.repeats);
  std::error_code ec;
  if (!std::filesystem::exists(store_path, ec)) {
    plan.to_run = points;
    return plan;
  }
  sweep::Store store(store_path);
  for (const auto& point : points) {
    if (store.finished(point.config_key(), point.repeat)) {
      ++plan.finished;
    } else {
      plan.to_run.push_back(point);
    }
  }
  plan.mean_run_s = store.mean_finished_elapsed_s();
  return plan;
}

std::string SweepPlan::describe(const std::string& store_path) const {
  std::string text = fmt::format("{} runs ({} configurations x {} repeats), {} already in {}, {} to run", total,
                                 configurations, configurations ? total / configurations : 0, finished, store_path,
                                 to_run.size());
  if (to_run.empty()) return text;
  if (mean_run_s > 0) {
    return text + fmt::format(": about {} at the {} per run so far", rough_duration(mean_run_s * to_run.size()),
                              rough_duration(mean_run_s));
  }
  return text + " (how long: said after the first run)";
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

SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options) {
  auto log = options.log ? options.log : [](const std::string& text) { std::cerr << text << '\n'; };
  std::string knobs;
  for (const auto& [name, values] : config.grid) {
    if (find_gpu_knob(name)) knobs += (knobs.empty() ? "" : ", ") + name;
  }
  Devices devices = discover_devices(options.discovery);
  const bool control_available = devices.control_path.rfind("none", 0) != 0;
  if (!knobs.empty() && (options.no_control || !control_available)) {
    throw UsageError(fmt::format(
        "{}: the grid sets {}, but GPU control is {} ({}); remove {} from [grid] or run where GPU settings may "
        "change",
        config.path, knobs, options.no_control ? "off (--no-control)" : "not available", devices.control_path, knobs));
  }
  for (const auto& [name, values] : config.grid) {
    if (name != "gpus") continue;
    for (const auto& v : values) {
      if (std::stoul(v) > devices.gpus.size()) {
        throw UsageError(fmt::format("{}: grid.gpus asks for {} GPUs; this machine has {}", config.path, v,
                                     devices.gpus.size()));
      }
    }
  }
  const std::string store_path = options.store_override.empty() ? config.store_path : options.store_override;
  sweep::Store store(store_path);
  if (const int interrupted = store.mark_interrupted()) {
    log(fmt::format("joule sweep: {} run(s) interrupted last time are run again", interrupted));
  }
  const auto runs = expand_grid(config);
  SweepSummary summary;
  summary.total = static_cast<int>(runs.size());
  const auto clock = SteadyClock::instance();
  const double started_s = clock->now_s();
  int done = 0;
  for (const auto& point : runs) {
    ++done;
    const std::string key = point.config_key();
    if (store.finished(key, point.repeat)) {
      ++summary.skipped;
      continue;
    }
    const std::string command = run_command(config, point);
    const long long id = store.begin(config.path, key, point.repeat, command);
    Devices run_devices = devices;
    if (point.values.count("gpus")) run_devices.gpus.resize(std::stoul(point.values.at("gpus")));  // checked above
    sweep::RunRecord record;
    RunSettings settings(run_devices.gpus);
    try {
      settings.apply(point);
      const std::string report_file = fmt::format("{}.run{}.counts", store_path, id);
      std::remove(report_file.c_str());
      std::string visible;
      for (std::size_t i = 0; i < run_devices.gpus.size(); ++i) {
        visible += (i ? "," : "") + std::to_string(run_devices.gpus[i]->index());
      }
      MonitorOptions monitor_options;
      monitor_options.sampler.fields.utilization = true;
      Monitor monitor(run_devices, monitor_options);
      monitor.begin_window("run");
      ChildProcess child = ChildProcess::spawn({"/bin/sh", "-c", command},
                                               {{"JOULE_REPORT_FILE", report_file}, {"CUDA_VISIBLE_DEVICES", visible}});
      const int exit_code = child.wait_forwarding_signals();
      const Measurement m = monitor.end_window("run");
      monitor.stop();  // a last sample at the end of the run
      record.status = exit_code == 0 ? "ok" : "failed";
      record.exit_code = exit_code;
      record.elapsed_s = m.elapsed_s;
      record.gpu_energy_j = m.gpu_total_energy_j();
      record.cpu_energy_j = std::accumulate(m.cpu_package_energy_j.begin(), m.cpu_package_energy_j.end(), 0.0);
      record.dram_energy_j = std::accumulate(m.dram_energy_j.begin(), m.dram_energy_j.end(), 0.0);
      record.avg_power_w = m.elapsed_s > 0 ? m.total_energy_j() / m.elapsed_s : 0;
      for (const auto& w : m.warnings) record.error += w + "; ";
      summarize_timeline(monitor, m, record);
      read_counts(report_file, record);
      std::remove(report_file.c_str());
    } catch (const std::exception& e) {
      record.status = "failed";
      record.error = e.what();
    }
    settings.restore(log);
    store.finish(id, record);
    ++summary.ran;
    if (record.status != "ok") ++summary.failed;
    const int remaining_runs = summary.total - done;
    if (summary.ran == 1 && remaining_runs > 0 && !options.progress) {
      const double first_s = clock->now_s() - started_s;
      log(fmt::format("joule sweep: the first run took {}; about {} for the {} left", rough_duration(first_s),
                      rough_duration(first_s * remaining_runs), remaining_runs));
    }
    if (options.progress) {
      const double elapsed = clock->now_s() - started_s;
      const int remaining = summary.total - done;
      const double per_run = summary.ran ? elapsed / summary.ran : 0;
      std::cerr << fmt::format("\rjoule sweep: {}/{} runs, {:.0f} s elapsed, ~{:.0f} s remaining   ", done,
                               summary.total, elapsed, per_run * remaining)
                << std::flush;
    }
  }
  if (options.progress) std::cerr << '\n';
  return summary;
}

void export_sweep_csv(const std::string& store_path, const std::string& csv_path) {
  if (!std::filesystem::exists(store_path)) throw UsageError(fmt::format("no results store at '{}'", store_path));
  sweep::Store(store_path).export_csv(csv_path);
}

}  // namespace joule
