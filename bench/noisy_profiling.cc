// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// How often the power-limit optimizer's choice is right when training steps
// are as noisy as on a real H100 (issue 16, proof (a)): for each seed, a
// simulated H100-like GPU trains with stalls before each step's GPU work
// (TrainingNoise, which spreads 2 s windows as the H100's observer-mode loop
// did); the optimizer profiles with its defaults (1 s warm-up, 2 s measured
// per visit, rounds); the chosen limit's true cost, from the noiseless model
// with the stalls' mean, is compared with the best candidate's. For
// max-slowdown, a choice also fails when its true time exceeds the bound by
// more than the tolerance (1%): noise cannot tell limits closer to it apart.
//
//   joule_bench_noisy_profiling [--seeds N] [--stall-ms M] [--step-ms S] [--screening-rounds R]
//                               [--confirming-rounds C] [--profile-data DIR] [--dump FILE]
//
// With --profile-data, each table of ../shared/profile_data (windows per
// limit, measured on A40 and V100 GPUs) is replayed as the GPUs' behaviour
// instead (proof (c)).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "joule/common/csv.h"
#include "joule/optimize/power_limit_optimizer.h"
#include "joule/simulate/training_loop.h"

namespace {

using namespace joule;

double cost_of(const LimitMeasurement& m, const Objective& objective, double price_w) {
  switch (objective.kind) {
    case Objective::Kind::kTime: return m.time_s;
    case Objective::Kind::kEnergy:
    case Objective::Kind::kMaxSlowdown: return m.energy_j;
    case Objective::Kind::kCost: return objective.eta * m.energy_j + (1.0 - objective.eta) * price_w * m.time_s;
  }
  return 0.0;
}

// One workload: the optimizer on `models` (one per GPU) for `seeds` seeds,
// per objective; prints a line each.
int g_screening_rounds = PowerLimitOptimizerOptions{}.screening_rounds;
int g_confirming_rounds = PowerLimitOptimizerOptions{}.confirming_rounds;
// --dump FILE: every candidate visited in each of --screening-rounds rounds
// (no confirming), and each stretch written as CSV (seed, objective, setting,
// visit, time, energy, fast steps, the candidate's true cost) for studying
// decision rules offline.
std::FILE* g_dump = nullptr;

void evaluate(const std::string& name, const std::vector<SimGpuModel>& models, double base_s, double stall_s,
              double step_w, int seeds) {
  const double price_w = models.front().max_limit_mw / 1000.0 * static_cast<double>(models.size());
  for (const Objective& objective : {Objective::cost(0.5), Objective::energy(), Objective::slowdown(1.1)}) {
    PowerLimitOptimizerOptions options;
    options.objective = objective;
    options.step_w = step_w;
    options.screening_rounds = g_screening_rounds;
    options.confirming_rounds = g_dump ? 0 : g_confirming_rounds;
    options.restore_on_signals = false;
    options.log = [](const std::string&) {};
    int within_1pct = 0, moved = 0, decided = 0, too_slow_runs = 0;
    double worst = 0.0, profiling_s = 0.0, max_profiling_s = 0.0;
    for (int seed = 1; seed <= seeds; ++seed) {
      TrainingNoise noise;
      noise.stall_mean_s = stall_s;
      noise.seed = static_cast<uint64_t>(seed);
      SimulatedTraining training(models, base_s, 0.005, noise);
      PowerLimitOptimizer optimizer(training.monitor(), options);
      for (int e = 0; e < 1000 && optimizer.state() == PowerLimitOptimizer::State::kProfiling; ++e) {
        training.epoch(optimizer, 500);
      }
      if (optimizer.state() != PowerLimitOptimizer::State::kDecided) continue;
      ++decided;
      // Each candidate's true cost per step, all GPUs: the stall's mean at
      // the idle load, then the GPU work at the slowest GPU's speed.
      std::vector<LimitMeasurement> truth;
      for (const double w : optimizer.candidate_limits_w()) {
        // The slowest GPU's speed (a measured table's may exceed 1: its noise, replayed as measured).
        double speed = INFINITY;
        for (const auto& m : models) speed = std::min(speed, m.relative_speed(1.0, w));
        const double busy_s = base_s / speed;
        double energy_j = 0.0;
        for (const auto& m : models) energy_j += m.power_w(noise.idle_load, w) * stall_s + m.power_w(1.0, w) * busy_s;
        truth.push_back({w, stall_s + busy_s, energy_j});
      }
      const double best = cost_of(truth[choose_power_limit(truth, objective, price_w)], objective, price_w);
      double fastest_s = truth.front().time_s;
      for (const auto& m : truth) fastest_s = std::min(fastest_s, m.time_s);
      if (g_dump) {
        const auto samples = optimizer.samples();
        for (std::size_t c = 0; c < samples.size(); ++c) {
          for (const StretchSample& s : samples[c].stretches) {
            fmt::print(g_dump, "\"{}\",{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", name, objective.describe(), seed,
                       samples[c].setting, s.visit, s.time_per_step_s, s.energy_per_step_j, s.fast_time_per_step_s,
                       cost_of(truth[c], objective, price_w) / best, truth[c].time_s);
          }
        }
      }
      const auto chosen = std::find_if(truth.begin(), truth.end(),
                                       [&](const auto& m) { return m.power_limit_w == *optimizer.chosen_limit_w(); });
      const bool too_slow = objective.kind == Objective::Kind::kMaxSlowdown &&
                            chosen->time_s > objective.max_slowdown * fastest_s * (1.0 + options.tolerance);
      too_slow_runs += too_slow ? 1 : 0;
      const double excess = too_slow ? INFINITY : cost_of(*chosen, objective, price_w) / best - 1.0;
      if (!too_slow) worst = std::max(worst, excess);
      within_1pct += excess <= 0.01 ? 1 : 0;  // false for a too slow choice (infinite)
      moved += *optimizer.chosen_limit_w() != truth.front().power_limit_w ? 1 : 0;
      profiling_s += optimizer.profiling_s();
      max_profiling_s = std::max(max_profiling_s, optimizer.profiling_s());
    }
    fmt::print("{:<34} {:<20} within 1% of the optimum: {:>3}/{}; moved: {:>3}; worst {:+6.2f}%{}; profiling {:.0f} s "
               "mean, {:.0f} s max\n",
               name, objective.describe(), within_1pct, decided, moved, 100.0 * worst,
               too_slow_runs ? fmt::format(" ({} too slow)", too_slow_runs) : "", decided ? profiling_s / decided : 0.0,
               max_profiling_s);
  }
}

// The GPUs of a ../shared/profile_data table (windows per limit: elapsed
// time and energy per GPU), replayed as measured models; the step grid.
std::vector<SimGpuModel> models_from_table(const std::string& path, double& step_w) {
  const CsvTable table = CsvTable::read(path);
  int gpus = 0;
  while (table.has_column(fmt::format("gpu{}_energy", gpus))) ++gpus;
  std::vector<SimGpuModel> models(static_cast<std::size_t>(gpus));
  std::vector<double> limits_w, elapsed_s;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::string& window = table.row(i).text("window_name");
    limits_w.push_back(std::stod(window.substr(window.rfind('_') + 1)));
    elapsed_s.push_back(table.row(i).number("elapsed_time"));
  }
  const auto top = std::max_element(limits_w.begin(), limits_w.end()) - limits_w.begin();
  step_w = limits_w.size() > 1 ? std::fabs(limits_w[1] - limits_w[0]) : 25.0;
  for (int g = 0; g < gpus; ++g) {
    SimGpuModel& m = models[static_cast<std::size_t>(g)];
    for (std::size_t i = 0; i < table.size(); ++i) {
      m.measured[static_cast<uint32_t>(limits_w[i] * 1000)] = {
          table.row(i).number(fmt::format("gpu{}_energy", g)) / elapsed_s[i], elapsed_s[top] / elapsed_s[i]};
    }
    m.name = std::filesystem::path(path).filename().string();
    m.min_limit_mw = static_cast<uint32_t>(*std::min_element(limits_w.begin(), limits_w.end()) * 1000);
    m.max_limit_mw = m.default_limit_mw = static_cast<uint32_t>(limits_w[top] * 1000);
    m.idle_power_w = 0.0;
  }
  return models;
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 100;
  double stall_ms = 2.0, step_ms = 11.0;
  std::string profile_data;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seeds")) seeds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--stall-ms")) stall_ms = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--step-ms")) step_ms = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--profile-data")) profile_data = argv[i + 1];
    else if (!std::strcmp(argv[i], "--screening-rounds")) g_screening_rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--confirming-rounds")) g_confirming_rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dump")) {
      g_dump = std::fopen(argv[i + 1], "w");
      if (!g_dump) {
        fmt::print(stderr, "cannot write {}\n", argv[i + 1]);
        return 2;
      }
      fmt::print(g_dump, "workload,objective,seed,setting,visit,time_s,energy_j,fast_s,true_cost_vs_best,true_time_s\n");
    }
    else {
      fmt::print(stderr, "unknown option {}\n", argv[i]);
      return 2;
    }
  }
  fmt::print("{} seeds, {:.1f} ms of GPU work per step at full speed, stalls of {:.1f} ms on average\n", seeds, step_ms,
             stall_ms);
  const double base_s = step_ms / 1000.0, stall_s = stall_ms / 1000.0;
  if (!profile_data.empty()) {
    std::vector<std::string> tables;
    for (const auto& entry : std::filesystem::directory_iterator(profile_data)) tables.push_back(entry.path().string());
    std::sort(tables.begin(), tables.end());
    for (const std::string& path : tables) {
      double step_w = 25.0;
      const auto models = models_from_table(path, step_w);
      evaluate(std::filesystem::path(path).stem().string(), models, base_s, stall_s, step_w, seeds);
    }
    return 0;
  }
  const SimGpuModel model;
  evaluate("H100-like model", {model}, base_s, stall_s, 25.0, seeds);
  // Observer mode: every limit is really the one in force, so any move is
  // noise fooling the profiler.
  PowerLimitOptimizerOptions observing;
  observing.observer = true;
  observing.screening_rounds = g_screening_rounds;
  observing.confirming_rounds = g_confirming_rounds;
  observing.restore_on_signals = false;
  observing.log = [](const std::string&) {};
  int fooled = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    TrainingNoise noise;
    noise.stall_mean_s = stall_s;
    noise.seed = static_cast<uint64_t>(seed);
    SimulatedTraining training({model}, base_s, 0.005, noise);
    PowerLimitOptimizer optimizer(training.monitor(), observing);
    for (int e = 0; e < 1000 && optimizer.state() == PowerLimitOptimizer::State::kProfiling; ++e) {
      training.epoch(optimizer, 500);
    }
    fooled += optimizer.chosen_limit_w() && *optimizer.chosen_limit_w() != model.max_limit_mw / 1000.0 ? 1 : 0;
  }
  fmt::print("observer mode (no real difference): moved off {:.0f} W in {}/{} runs\n", model.max_limit_mw / 1000.0,
             fooled, seeds);
  return 0;
}
