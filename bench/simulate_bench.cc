// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Simulator speed: the full evaluation of the Zeus paper's V100 setting (six
// workloads x ten seeds x three policies), single-workload recurrences per
// second, and the cluster replay of a generated 120,000-job trace (three
// policies; reading and mapping included). Run:
//   build/bin/joule_bench_simulate --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Traces are read from $JOULE_TRACES, else the bundled data/zeus-nsdi23 of the
// source tree.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "joule/simulate/cluster.h"
#include "joule/simulate/simulator.h"

namespace {

std::vector<joule::WorkloadTrace>& traces() {
  static std::vector<joule::WorkloadTrace> loaded = [] {
    const char* env = std::getenv("JOULE_TRACES");
    const std::string dir = env ? env : std::string(JOULE_SOURCE_DIR) + "/data/zeus-nsdi23";
    std::vector<joule::WorkloadTrace> list;
    for (const auto& spec : joule::zeus_workloads()) {
      list.push_back(joule::load_workload(dir + "/summary_train.csv", dir + "/summary_power_v100.csv", spec));
    }
    return list;
  }();
  return loaded;
}

void BM_FullEvaluation(benchmark::State& state) {
  const auto& all = traces();
  int64_t recurrences = 0;
  for (auto _ : state) {
    for (const auto& trace : all) {
      for (uint64_t seed = 1; seed <= 10; ++seed) {
        joule::SimulationOptions options;
        options.seed = seed;
        for (auto policy : {joule::Policy::kZeus, joule::Policy::kGridSearch, joule::Policy::kDefault}) {
          const auto result = joule::simulate(trace, policy, options);
          recurrences += static_cast<int64_t>(result.recurrences.size());
          benchmark::DoNotOptimize(result.cumulative_regret());
        }
      }
    }
  }
  state.counters["recurrences_per_s"] = benchmark::Counter(static_cast<double>(recurrences), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FullEvaluation)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ZeusPolicy(benchmark::State& state) {
  const auto& trace = traces()[static_cast<std::size_t>(state.range(0))];
  int64_t recurrences = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    joule::SimulationOptions options;
    options.seed = seed++;
    const auto result = joule::simulate(trace, joule::Policy::kZeus, options);
    recurrences += static_cast<int64_t>(result.recurrences.size());
  }
  state.SetLabel(trace.spec.name);
  state.counters["recurrences_per_s"] = benchmark::Counter(static_cast<double>(recurrences), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ZeusPolicy)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A raw trace of `jobs` jobs in 2000 groups over 60 days, written once.
std::string generated_trace(std::size_t jobs) {
  const auto path = std::filesystem::temp_directory_path() / fmt::format("joule_bench_cluster_{}.csv", jobs);
  if (!std::filesystem::exists(path)) {
    joule::ClusterTraceShape shape;
    shape.jobs = jobs;
    shape.groups = 2000;
    std::ofstream out(path);
    joule::generate_cluster_trace(shape, out);
  }
  return path.string();
}

void BM_ClusterReplay(benchmark::State& state) {
  const auto& all = traces();
  std::vector<joule::ClusterWorkload> workloads;
  for (const auto& t : all) workloads.push_back(joule::cluster_workload(t));
  const std::string path = generated_trace(static_cast<std::size_t>(state.range(0)));
  int64_t recurrences = 0;
  for (auto _ : state) {
    joule::ClusterTraceReader reader(path, workloads);
    const auto report = joule::replay_cluster(reader, all, {});
    recurrences += static_cast<int64_t>(report.attempts);
  }
  state.counters["recurrences_per_s"] = benchmark::Counter(static_cast<double>(recurrences), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ClusterReplay)->Arg(120000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
