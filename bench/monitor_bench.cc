// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Cost of a measurement window (begin_window + end_window) on 8 GPUs, next to
// the naive alternative that reads every GPU's energy counter synchronously
// at both edges. Run:
//   build/bin/joule_bench_monitor --benchmark_repetitions=10
//       (add --benchmark_report_aggregates_only=true for medians only)
// Set JOULE_BENCH_NVML=1 to add the real GPUs (read-only).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>

#include "bench_support.h"
#include "joule/measure/monitor.h"

namespace {

using joule::Gpu;

std::map<std::string, std::vector<std::shared_ptr<Gpu>>>& device_sets() {
  static std::map<std::string, std::vector<std::shared_ptr<Gpu>>> sets;
  return sets;
}

void BM_MonitorWindow(benchmark::State& state, const std::string& backend) {
  const auto& gpus = device_sets().at(backend);
  joule::Monitor monitor(gpus, {}, joule::SteadyClock::instance());
  for (auto _ : state) {
    monitor.begin_window("step");
    benchmark::DoNotOptimize(monitor.end_window("step"));
  }
  state.counters["gpus"] = static_cast<double>(gpus.size());
}

// What a monitor without a sampler does: two counter reads per GPU per window.
void BM_SynchronousCounterWindow(benchmark::State& state, const std::string& backend) {
  const auto& gpus = device_sets().at(backend);
  for (auto _ : state) {
    uint64_t begin_mj = 0, end_mj = 0;
    for (const auto& gpu : gpus) begin_mj += gpu->total_energy_mj();
    for (const auto& gpu : gpus) end_mj += gpu->total_energy_mj();
    benchmark::DoNotOptimize(end_mj - begin_mj);
  }
  state.counters["gpus"] = static_cast<double>(gpus.size());
}

void BM_PowerRead(benchmark::State& state, const std::string& backend) {
  Gpu& gpu = *device_sets().at(backend).front();
  for (auto _ : state) benchmark::DoNotOptimize(gpu.power_mw());
}

void BM_EnergyCounterRead(benchmark::State& state, const std::string& backend) {
  Gpu& gpu = *device_sets().at(backend).front();
  for (auto _ : state) benchmark::DoNotOptimize(gpu.total_energy_mj());
}

}  // namespace

int main(int argc, char** argv) {
  device_sets()["sim8"] = joule::bench::open_bench_gpus("sim", 8);
  device_sets()["fake_nvml8"] = joule::bench::open_bench_gpus("fake", 8);
  if (const char* real = std::getenv("JOULE_BENCH_NVML"); real && std::string(real) == "1") {
    device_sets()["nvml"] = joule::bench::open_bench_gpus("nvml", 0);
  }
  for (const auto& [name, gpus] : device_sets()) {
    benchmark::RegisterBenchmark(("BM_MonitorWindow/" + name).c_str(), BM_MonitorWindow, name)->UseRealTime();
    benchmark::RegisterBenchmark(("BM_SynchronousCounterWindow/" + name).c_str(), BM_SynchronousCounterWindow, name)
        ->UseRealTime()
        ->Iterations(20);
    if (name != "sim8") {
      benchmark::RegisterBenchmark(("BM_PowerRead/" + name).c_str(), BM_PowerRead, name)->UseRealTime();
      benchmark::RegisterBenchmark(("BM_EnergyCounterRead/" + name).c_str(), BM_EnergyCounterRead, name)
          ->UseRealTime()
          ->Iterations(100);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
