// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Cost of a measurement window (begin_window + end_window) on 8 GPUs, next to
// the naive alternative that reads every GPU's energy counter synchronously
// at both edges. Run:
//   build/bin/joule_bench_monitor --benchmark_repetitions=10
//       (add --benchmark_report_aggregates_only=true for medians only)
// Set JOULE_BENCH_NVML=1 to add the real GPUs (read-only).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "bench_support.h"
#include "joule/measure/monitor.h"
#include "joule/measure/sample_response.h"

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

// One window edge split through an H200's response (sample_response.h): what
// settling a window adds per edge and GPU where a response is in use.
void BM_StepSplitThroughResponse(benchmark::State& state) {
  const joule::PowerSampleResponse response = *joule::builtin_sample_response("NVIDIA H200", "580.159.04");
  std::vector<joule::StampedPower> samples;
  for (int k = 0; k < 500; ++k) {
    const double t_s = 0.02 * k;
    samples.push_back({t_s, (k / 7) % 2 == 0 ? 600.0 : 120.0});  // on/off every 140 ms
  }
  double edge_s = 2.0;
  for (auto _ : state) {
    const joule::CounterStep step{std::floor(edge_s * 10.0) / 10.0, std::floor(edge_s * 10.0) / 10.0 + 0.1, 36.0};
    benchmark::DoNotOptimize(joule::step_share_before(samples, response, step, edge_s));
    edge_s = edge_s > 8.0 ? 2.0 : edge_s + 0.0137;  // edges anywhere in their steps
  }
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
  benchmark::RegisterBenchmark("BM_StepSplitThroughResponse", BM_StepSplitThroughResponse);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
