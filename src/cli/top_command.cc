// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule top`: a live view of every GPU's and RAPL zone's power and energy.
// The data comes from joule's own Sampler; top_view.cc lays it out and
// terminal.cc owns the terminal.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "cli/top_processes.h"
#include "cli/top_view.h"
#include "joule/daemon/client.h"
#include "joule/daemon/lease_watcher.h"
#include "joule/error.h"
#include "joule/measure/sampler.h"

namespace joule::cli {

namespace {

// Refreshes kept for the sparkline: wider than any terminal row needs.
constexpr std::size_t kHistoryLength = 256;

// A reading that stops being asked for once the driver refused it: a GPU
// without a temperature sensor should not cost a failing call per refresh.
template <typename T>
class Reading {
 public:
  template <typename Read>
  std::optional<T> get(Read read) {
    if (!works_) return std::nullopt;
    try {
      return static_cast<T>(read());
    } catch (const DeviceError&) {
      works_ = false;
      return std::nullopt;
    }
  }

 private:
  bool works_ = true;
};

struct GpuReadings {
  Reading<double> limit_w, max_limit_w;
  Reading<int> util_percent, sm_clock_mhz, temperature_c;
  Reading<uint64_t> memory_used_bytes;
  // Why the backend cannot list processes, once found lasting: not asked again.
  std::optional<std::string> processes_problem;
  std::deque<double> history_w;
};

// Energy since reset without holding history since then: every refresh moves
// what the sampler's data covers into a running sum, and only the uncovered
// end (the last power carried forward) is computed anew.
class EnergySinceReset {
 public:
  EnergySinceReset(const Sampler& sampler, double now_s)
      : sampler_(sampler),
        settled_j_(sampler.gpus().size() + sampler.cpu_zones().size(), 0.0),
        settled_until_s_(now_s),
        reset_at_s_(now_s) {}

  void reset(double now_s) {
    std::fill(settled_j_.begin(), settled_j_.end(), 0.0);
    settled_until_s_ = reset_at_s_ = now_s;
  }

  // Energy per device (GPUs, then zones) from the reset to now_s; the
  // estimates of [settled, now] carry each device's problem, if any.
  std::vector<double> at(double now_s, std::vector<EnergyEstimate>& gpus, std::vector<EnergyEstimate>& zones) {
    const double covered_s = std::min(now_s, sampler_.covered_until_s());
    if (covered_s > settled_until_s_) {
      sampler_.energies(settled_until_s_, covered_s, gpus, zones);
      add(gpus, zones, settled_j_);
      settled_until_s_ = covered_s;
    }
    std::vector<double> total_j = settled_j_;
    sampler_.energies(settled_until_s_, now_s, gpus, zones);
    if (now_s > settled_until_s_) add(gpus, zones, total_j);
    return total_j;
  }
  double reset_at_s() const { return reset_at_s_; }

 private:
  static void add(const std::vector<EnergyEstimate>& gpus, const std::vector<EnergyEstimate>& zones,
                  std::vector<double>& sums_j) {
    for (std::size_t i = 0; i < gpus.size(); ++i) sums_j[i] += gpus[i].energy_j;
    for (std::size_t i = 0; i < zones.size(); ++i) sums_j[gpus.size() + i] += zones[i].energy_j;
  }

  const Sampler& sampler_;
  std::vector<double> settled_j_;
  double settled_until_s_;
  double reset_at_s_;
};

// Everything one refresh shows, gathered from the sampler, the GPUs and jouled.
class TopModel {
 public:
  TopModel(const Devices& devices, double interval_s)
      : devices_(devices),
        interval_s_(interval_s),
        sampler_(devices.gpus, devices.cpu_zones, std::make_shared<SteadyClock>(), sampler_options(interval_s)),
        readings_(devices.gpus.size()) {
    sampler_.start();
    previous_s_ = sampler_.clock().now_s();
    energy_ = std::make_unique<EnergySinceReset>(sampler_, previous_s_);
  }
  ~TopModel() { sampler_.stop(); }

  void reset() { energy_->reset(sampler_.clock().now_s()); }

  TopSnapshot refresh() {
    const double now_s = sampler_.clock().now_s();
    std::vector<EnergyEstimate> gpu_estimates, zone_estimates;
    // Mean power since the previous refresh, from the same energy data.
    std::vector<EnergyEstimate> gpu_recent, zone_recent;
    sampler_.energies(previous_s_, now_s, gpu_recent, zone_recent);
    const double elapsed_s = now_s - previous_s_;
    previous_s_ = now_s;
    const std::vector<double> energy_j = energy_->at(now_s, gpu_estimates, zone_estimates);
    auto power_w = [&](const EnergyEstimate& e) -> std::optional<double> {
      if (elapsed_s <= 0 || e.problem) return std::nullopt;
      return e.energy_j / elapsed_s;
    };

    TopSnapshot snapshot;
    snapshot.backend = devices_.gpu_backend;
    snapshot.simulated = devices_.simulated();
    snapshot.since_reset_s = now_s - energy_->reset_at_s();
    snapshot.interval_s = interval_s_;
    const auto leases = leases_.poll();
    snapshot.daemon_status = leases_.status();
    for (std::size_t i = 0; i < devices_.gpus.size(); ++i) {
      TopGpuRow row = read_gpu(i, leases);
      row.power_w = power_w(gpu_recent[i]);
      row.energy_j = energy_j[i];
      row.problem = gpu_estimates[i].problem;
      auto& history = readings_[i].history_w;
      if (row.power_w) history.push_back(*row.power_w);
      if (history.size() > kHistoryLength) history.pop_front();
      row.power_history_w.assign(history.begin(), history.end());
      read_processes(i, row, snapshot.processes);
      snapshot.gpus.push_back(std::move(row));
    }
    for (std::size_t i = 0; i < devices_.cpu_zones.size(); ++i) {
      snapshot.zones.push_back({devices_.cpu_zones[i]->label(), power_w(zone_recent[i]),
                                energy_j[devices_.gpus.size() + i], zone_estimates[i].problem});
    }
    snapshot.zone_problems = devices_.cpu_problems;
    return snapshot;
  }

 private:
  static SamplerOptions sampler_options(double interval_s) {
    SamplerOptions options;
    // Ten samples per refresh at most every 100 ms: the mean power per refresh
    // is an integral, not one reading.
    options.interval_s = std::min(0.1, interval_s / 10.0);
    options.history_s = std::max(30.0, 3.0 * interval_s);  // the last refresh's start stays readable
    options.timeline_capacity = 1;                          // top keeps no timeline
    return options;
  }

  // The GPU's processes (the `p` view, plain lines) and their count (the GPU row).
  void read_processes(std::size_t i, TopGpuRow& row, std::vector<TopProcessRow>& out) {
    GpuReadings& r = readings_[i];
    if (r.processes_problem) {
      row.processes_problem = r.processes_problem;
      return;
    }
    GpuProcessList list = list_gpu_processes(*devices_.gpus[i], row.id);
    row.processes_problem = list.problem;  // a passing failure is shown this refresh only
    if (list.problem_is_lasting) r.processes_problem = list.problem;
    if (!list.problem) {
      row.process_count = list.rows.size();
      out.insert(out.end(), std::make_move_iterator(list.rows.begin()), std::make_move_iterator(list.rows.end()));
    }
  }

  TopGpuRow read_gpu(std::size_t i, const std::map<std::string, daemon::GpuLease>& leases) {
    Gpu& gpu = *devices_.gpus[i];
    GpuReadings& r = readings_[i];
    TopGpuRow row;
    row.id = fmt::format("gpu{}", gpu.index());
    row.name = gpu.name();
    row.power_limit_w = r.limit_w.get([&] { return gpu.power_limit_mw() / 1000.0; });
    row.max_power_limit_w = r.max_limit_w.get([&] { return gpu.power_limit_range_mw().max_mw / 1000.0; });
    row.gpu_util_percent = r.util_percent.get([&] { return gpu.utilization().gpu_percent; });
    row.sm_clock_mhz = r.sm_clock_mhz.get([&] { return gpu.sm_clock_mhz(); });
    row.temperature_c = r.temperature_c.get([&] { return gpu.temperature_c(); });
    row.memory_used_bytes = r.memory_used_bytes.get([&] { return gpu.memory_used_bytes(); });
    const auto lease = leases.find(gpu.uuid());
    if (lease != leases.end()) row.limit_holder = lease->second.holder;
    return row;
  }

  const Devices& devices_;
  double interval_s_;
  Sampler sampler_;
  std::vector<GpuReadings> readings_;
  std::unique_ptr<EnergySinceReset> energy_;
  daemon::LeaseWatcher leases_;  // who holds each GPU's limit, asked at every refresh
  double previous_s_ = 0.0;
};

using Deadline = std::chrono::steady_clock::time_point;

int milliseconds_until(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

bool is_quit_signal(int signal_number) {
  return signal_number == SIGINT || signal_number == SIGTERM || signal_number == SIGHUP;
}

// No terminal to draw on: one line per device per refresh, no escapes.
int run_plain(TopModel& model, const TopOptions& options, SignalEvents& signals) {
  const auto interval = std::chrono::duration<double, std::milli>(options.interval_ms);
  Deadline next = std::chrono::steady_clock::now();
  for (int frame = 0; options.iterations <= 0 || frame < options.iterations; ++frame) {
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
    while (milliseconds_until(next) > 0) {
      if (wait_readable(signals.fd(), -1, milliseconds_until(next)).a) {
        for (int s : signals.take()) {
          if (is_quit_signal(s)) return 0;
        }
      }
    }
    for (const auto& line : render_plain(model.refresh(), options.unit)) std::cout << line << '\n';
    std::cout.flush();
    if (!std::cout) return 1;  // the reader went away
  }
  return 0;
}

// What a reset shows until the next refresh (a refresh now would put a
// sliver of an interval into the power history).
void zero_energy(TopSnapshot& snapshot) {
  snapshot.since_reset_s = 0.0;
  for (auto& gpu : snapshot.gpus) gpu.energy_j = 0.0;
  for (auto& zone : snapshot.zones) zone.energy_j = 0.0;
}

// The full-screen view. Keys act at once; frames come every interval.
int run_interactive(TopModel& model, const TopOptions& options, SignalEvents& signals) {
  FullScreen screen;
  FrameLayout layout;
  layout.unit = options.unit;
  layout.unicode = !options.ascii && locale_is_utf8();
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(options.interval_ms));
  TopSnapshot snapshot = model.refresh();
  Deadline next = std::chrono::steady_clock::now() + interval;
  int frames = 0;
  for (;;) {
    const TerminalSize size = terminal_size(STDOUT_FILENO);
    layout.width_cols = size.width_cols;
    layout.height_rows = size.height_rows;
    screen.draw(render_frame(snapshot, layout));
    if (options.iterations > 0 && frames >= options.iterations) return 0;

    const Readable ready = wait_readable(STDIN_FILENO, signals.fd(), milliseconds_until(next));
    if (ready.a) {
      const std::string keys = screen.read_keys();
      if (keys.empty()) return 0;  // the terminal hung up
      for (char key : keys) {
        if (layout.show_help) {  // any key leaves the help page
          layout.show_help = false;
        } else if (key == 'q' || key == 'Q') {
          return 0;
        } else if (key == 'r' || key == 'R') {
          model.reset();
          zero_energy(snapshot);
        } else if (key == 'u' || key == 'U') {
          layout.unit = next_unit(layout.unit);
        } else if (key == 'p' || key == 'P') {
          layout.show_processes = !layout.show_processes;
        } else if (key == 'h' || key == 'H' || key == '?') {
          layout.show_help = true;
        }
      }
    }
    if (ready.b) {
      for (int s : signals.take()) {
        if (is_quit_signal(s)) return 0;
        if (s == SIGTSTP) screen.suspend_until_continued();
        // SIGWINCH and SIGCONT only need the redraw every pass does.
      }
    }
    if (milliseconds_until(next) == 0) {
      snapshot = model.refresh();
      ++frames;
      next += interval;
      if (milliseconds_until(next) == 0) next = std::chrono::steady_clock::now() + interval;  // fell behind
    }
  }
}

}  // namespace

int run_top(const CommonOptions& common, const TopOptions& options) {
  if (!(options.interval_ms >= 50 && options.interval_ms <= 3'600'000)) {
    throw UsageError(fmt::format("--interval-ms {} is outside 50-3600000", options.interval_ms));
  }
  if (options.iterations < 0) throw UsageError(fmt::format("--iterations {} is negative", options.iterations));
  const Devices devices = common.open_devices();
  SignalEvents signals;
  TopModel model(devices, options.interval_ms / 1000.0);
  // Keys need a terminal on stdin as much as the screen needs one on stdout.
  if (!is_terminal(STDOUT_FILENO) || !is_terminal(STDIN_FILENO)) {
    // The screen's header says so; plain lines would not: say it once, apart from them.
    if (devices.simulated()) fmt::print(stderr, "joule top: GPUs are SIMULATED ({})\n", devices.gpu_backend_reason);
    return run_plain(model, options, signals);
  }
  return run_interactive(model, options, signals);
}

}  // namespace joule::cli
