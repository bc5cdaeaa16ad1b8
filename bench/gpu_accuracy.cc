// Window-energy accuracy of joule::Monitor on a real GPU, against references
// taken from the GPU's own energy counter. Read-only: it changes no setting.
//
// References:
//  * aligned windows (1 s and longer): the counter is polled until it steps,
//    the windows begin, the code sleeps D seconds, the counter is polled until
//    it steps again, and the windows end. The counter difference between the
//    two observed steps is the reference; its edge uncertainty is the polling
//    latency (one counter call, ~4 ms on an H100), reported below.
//  * short windows under steady load: the average power over the whole run of
//    short windows, from two aligned counter readings, times each window's
//    length.
// Several monitors (power source x sampling interval) measure the same
// windows side by side. Run with a steady GPU load beside it, e.g.:
//   python3 bench/gpu_load.py --mode steady --seconds 120 &
//   build/bin/joule_bench_accuracy --backend nvml
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "bench_support.h"
#include "joule/clock.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"

namespace {

using joule::Gpu;
using joule::Monitor;

struct Config {
  std::string label;
  std::unique_ptr<Monitor> monitor;
  std::vector<std::vector<double>> errors;  // per experiment, relative errors
};

struct CounterReading {
  double energy_j;
  double time_s;
};

// Polls the counter until it changes; returns the new value and when it was seen.
CounterReading wait_for_counter_step(Gpu& gpu, std::vector<double>& call_costs_s) {
  const auto& clock = *joule::SteadyClock::instance();
  double t0 = clock.now_s();
  const uint64_t start = gpu.total_energy_mj();
  call_costs_s.push_back(clock.now_s() - t0);
  while (true) {
    t0 = clock.now_s();
    const uint64_t now = gpu.total_energy_mj();
    const double t1 = clock.now_s();
    call_costs_s.push_back(t1 - t0);
    if (now != start) return {now / 1000.0, t1};
  }
}

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

void summarise(const std::string& what, const std::vector<double>& errors) {
  if (errors.empty()) return;
  double sum = 0, sum_abs = 0, max_abs = 0;
  for (double e : errors) {
    sum += e;
    sum_abs += std::fabs(e);
    max_abs = std::max(max_abs, std::fabs(e));
  }
  const double n = static_cast<double>(errors.size());
  fmt::print("| {} | {} | {:+.3f} | {:.3f} | {:.3f} |\n", what, errors.size(), 100 * sum / n, 100 * sum_abs / n,
             100 * max_abs);
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "nvml";
  unsigned gpu_index = 0;
  double warmup_s = 12;
  int repeats = 8, short_windows = 60;
  std::vector<double> lengths_s = {1.0, 2.0, 5.0};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--backend" && i + 1 < argc) backend = argv[++i];
    else if (arg == "--gpu" && i + 1 < argc) gpu_index = static_cast<unsigned>(std::stoul(argv[++i]));
    else if (arg == "--warmup-s" && i + 1 < argc) warmup_s = std::stod(argv[++i]);
    else if (arg == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else if (arg == "--short-windows" && i + 1 < argc) short_windows = std::stoi(argv[++i]);
    else if (arg == "--quick") lengths_s = {1.0};
    else {
      fmt::print(stderr, "usage: joule_bench_accuracy [--backend nvml|fake] [--gpu N] [--warmup-s S] "
                         "[--repeats N] [--short-windows N] [--quick]\n");
      return 2;
    }
  }

  // One Gpu object per power source, so monitors differ only in that.
  auto open = [&](const char* source) {
    setenv("JOULE_NVML_POWER_SOURCE", source, 1);
    auto gpus = joule::bench::open_bench_gpus(backend, 1);
    if (gpu_index >= gpus.size()) throw joule::Error("no such GPU");
    return gpus[gpu_index];
  };
  auto reference_gpu = open("average");
  std::vector<Config> configs;
  for (const char* source : {"instant", "average"}) {
    auto gpu = open(source);
    for (double interval_ms : {100.0, 10.0}) {
      joule::MonitorOptions options;
      options.sampler.interval_s = interval_ms / 1000.0;
      configs.push_back({fmt::format("{} power, {:.0f} ms", source, interval_ms),
                         std::make_unique<Monitor>(std::vector<std::shared_ptr<Gpu>>{gpu},
                                                   std::vector<std::shared_ptr<joule::CpuEnergyZone>>{},
                                                   joule::SteadyClock::instance(), options),
                         {}});
    }
  }
  fmt::print("GPU: {} ({}), backend {}\n", reference_gpu->name(), reference_gpu->architecture(), backend);
  sleep_s(warmup_s);  // lets every sampler gather counter history for its calibration

  std::vector<double> call_costs_s, step_gaps_s;
  std::vector<std::string> experiments;
  auto begin_all = [&] {
    for (auto& c : configs) c.monitor->begin_window("w");
  };
  auto end_all = [&] {
    std::vector<joule::Measurement> out;
    for (auto& c : configs) out.push_back(c.monitor->end_window("w"));
    return out;
  };

  for (double length_s : lengths_s) {
    experiments.push_back(fmt::format("{:.0f} s, aligned counter reference", length_s));
    for (auto& c : configs) c.errors.emplace_back();
    for (int r = 0; r < repeats; ++r) {
      const CounterReading a = wait_for_counter_step(*reference_gpu, call_costs_s);
      begin_all();
      sleep_s(length_s);
      const CounterReading b = wait_for_counter_step(*reference_gpu, call_costs_s);
      const auto measured = end_all();
      const double reference_j = b.energy_j - a.energy_j;
      for (std::size_t k = 0; k < configs.size(); ++k) {
        configs[k].errors.back().push_back(measured[k].gpu_energy_j[0] / reference_j - 1.0);
      }
    }
  }

  // Counter step period, from consecutive observed steps.
  CounterReading previous = wait_for_counter_step(*reference_gpu, call_costs_s);
  for (int i = 0; i < 20; ++i) {
    const CounterReading next = wait_for_counter_step(*reference_gpu, call_costs_s);
    step_gaps_s.push_back(next.time_s - previous.time_s);
    previous = next;
  }

  experiments.push_back("0.1 s, steady-power reference");
  for (auto& c : configs) c.errors.emplace_back();
  if (short_windows > 0) {
    std::vector<std::vector<joule::Measurement>> windows;
    const CounterReading a = wait_for_counter_step(*reference_gpu, call_costs_s);
    for (int i = 0; i < short_windows; ++i) {
      begin_all();
      sleep_s(0.1);
      windows.push_back(end_all());
    }
    const CounterReading b = wait_for_counter_step(*reference_gpu, call_costs_s);
    const double power_w = (b.energy_j - a.energy_j) / (b.time_s - a.time_s);
    fmt::print("steady power over the short-window run: {:.1f} W (from the counter)\n", power_w);
    for (const auto& measured : windows) {
      for (std::size_t k = 0; k < configs.size(); ++k) {
        configs[k].errors.back().push_back(measured[k].gpu_energy_j[0] / (power_w * measured[k].elapsed_s) - 1.0);
      }
    }
  }

  fmt::print("counter call: median {:.2f} ms, max {:.2f} ms (= reference edge uncertainty)\n",
             1e3 * joule::bench::median(call_costs_s),
             1e3 * *std::max_element(call_costs_s.begin(), call_costs_s.end()));
  fmt::print("counter step period: median {:.1f} ms\n\n", 1e3 * joule::bench::median(step_gaps_s));
  fmt::print("| monitor / window | n | mean error % | mean abs error % | max abs error % |\n|---|---|---|---|---|\n");
  for (auto& c : configs) {
    for (std::size_t e = 0; e < experiments.size(); ++e) {
      summarise(c.label + " / " + experiments[e], c.errors[e]);
    }
    fmt::print("| {} calibration scale | | {:.4f} | | |\n", c.label, c.monitor->sampler().gpu_scale(0));
  }
  return 0;
}
