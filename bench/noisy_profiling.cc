// How often the power-limit optimizer's choice is right when training steps
// are as noisy as on a real H100 (issue 16, proof (a)): for each seed, a
// simulated H100-like GPU trains with stalls before each step's GPU work
// (TrainingNoise, which spreads 2 s windows as the H100's observer-mode loop
// did); the optimizer profiles with its defaults (1 s warm-up, 2 s measured
// per visit, rounds); the chosen limit's true cost, from the noiseless model
// with the stalls' mean, is compared with the best candidate's.
//
//   joule_bench_noisy_profiling [--seeds N] [--stall-ms M] [--step-ms S]
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  int seeds = 100;
  double stall_ms = 2.0, step_ms = 11.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seeds")) seeds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--stall-ms")) stall_ms = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--step-ms")) step_ms = std::atof(argv[i + 1]);
    else {
      fmt::print(stderr, "unknown option {}\n", argv[i]);
      return 2;
    }
  }
  const SimGpuModel model;
  const double base_s = step_ms / 1000.0, price_w = model.max_limit_mw / 1000.0;
  fmt::print("{} seeds, {:.1f} ms of GPU work per step at full speed, stalls of {:.1f} ms on average\n", seeds, step_ms,
             stall_ms);
  for (const Objective& objective : {Objective::cost(0.5), Objective::energy(), Objective::slowdown(1.1)}) {
    PowerLimitOptimizerOptions options;
    options.objective = objective;
    options.restore_on_signals = false;
    options.log = [](const std::string&) {};
    int within_1pct = 0, moved = 0, decided = 0;
    double worst = 0.0, profiling_s = 0.0, max_profiling_s = 0.0;
    for (int seed = 1; seed <= seeds; ++seed) {
      TrainingNoise noise;
      noise.stall_mean_s = stall_ms / 1000.0;
      noise.seed = static_cast<uint64_t>(seed);
      SimulatedTraining training({model}, base_s, 0.005, noise);
      PowerLimitOptimizer optimizer(training.monitor(), options);
      for (int e = 0; e < 1000 && optimizer.state() == PowerLimitOptimizer::State::kProfiling; ++e) {
        training.epoch(optimizer, 500);
      }
      if (optimizer.state() != PowerLimitOptimizer::State::kDecided) continue;
      ++decided;
      // Each candidate's true cost per step: the stall's mean at the idle
      // load, then the GPU work at the limit's speed and power.
      std::vector<LimitMeasurement> truth;
      for (const double w : optimizer.candidate_limits_w()) {
        const double busy_s = base_s / model.relative_speed(1.0, w);
        truth.push_back({w, noise.stall_mean_s + busy_s,
                         model.power_w(noise.idle_load, w) * noise.stall_mean_s + model.power_w(1.0, w) * busy_s});
      }
      const double best = cost_of(truth[choose_power_limit(truth, objective, price_w)], objective, price_w);
      const auto chosen = std::find_if(truth.begin(), truth.end(),
                                       [&](const auto& m) { return m.power_limit_w == *optimizer.chosen_limit_w(); });
      const double excess = cost_of(*chosen, objective, price_w) / best - 1.0;
      worst = std::max(worst, excess);
      within_1pct += excess <= 0.01 ? 1 : 0;
      moved += *optimizer.chosen_limit_w() != truth.front().power_limit_w ? 1 : 0;
      profiling_s += optimizer.profiling_s();
      max_profiling_s = std::max(max_profiling_s, optimizer.profiling_s());
    }
    fmt::print("{:<20} within 1% of the optimum: {}/{}; moved off {:.0f} W: {}; worst {:+.2f}%; profiling {:.0f} s "
               "mean, {:.0f} s max\n",
               objective.describe(), within_1pct, decided, price_w, moved, 100.0 * worst,
               decided ? profiling_s / decided : 0.0, max_profiling_s);
  }
  // Observer mode: every limit is really the one in force, so any move is
  // noise fooling the profiler.
  PowerLimitOptimizerOptions observing;
  observing.observer = true;
  observing.restore_on_signals = false;
  observing.log = [](const std::string&) {};
  int fooled = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    TrainingNoise noise;
    noise.stall_mean_s = stall_ms / 1000.0;
    noise.seed = static_cast<uint64_t>(seed);
    SimulatedTraining training({model}, base_s, 0.005, noise);
    PowerLimitOptimizer optimizer(training.monitor(), observing);
    for (int e = 0; e < 1000 && optimizer.state() == PowerLimitOptimizer::State::kProfiling; ++e) {
      training.epoch(optimizer, 500);
    }
    fooled += optimizer.chosen_limit_w() && *optimizer.chosen_limit_w() != price_w ? 1 : 0;
  }
  fmt::print("observer mode (no real difference): moved off {:.0f} W in {}/{} runs\n", price_w, fooled, seeds);
  return 0;
}
