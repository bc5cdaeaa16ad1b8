// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "joule/device/sim.h"
#include "joule/error.h"
#include "joule/simulate/training_loop.h"

namespace joule::cli {

namespace {

// What the GPUs were put back to at the end: "restored the power limit of 2
// GPUs as the run found them: 700 W", "... SM clock of 1 GPU ...: no lock".
std::string restored_message(const std::vector<std::shared_ptr<SimGpu>>& gpus, OptimizerKnob knob) {
  const std::string count = fmt::format("{} GPU{}", gpus.size(), gpus.size() == 1 ? "" : "s");
  std::vector<std::string> values;
  for (const auto& gpu : gpus) {
    std::string value;
    if (knob == OptimizerKnob::kPowerLimit) {
      value = fmt::format("{:.0f} W", gpu->power_limit_mw() / 1000.0);
    } else {
      const auto lock =
          gpu->clock_lock_mhz(knob == OptimizerKnob::kSmClock ? ClockDomain::kSm : ClockDomain::kMemory);
      value = lock ? fmt::format("a lock of {}-{} MHz", lock->min_mhz, lock->max_mhz) : std::string("no lock");
    }
    if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
  }
  std::string to;
  for (std::size_t i = 0; i < values.size(); ++i) to += (i ? ", " : "") + values[i];
  const char* what = knob == OptimizerKnob::kPowerLimit ? "power limit"
                     : knob == OptimizerKnob::kSmClock  ? "SM clock"
                                                        : "memory clock";
  return fmt::format("restored the {} of {} as the run found {}: {}", what, count, gpus.size() == 1 ? "it" : "them",
                     to);
}

}  // namespace

int run_train_sim(const CommonOptions& common, const TrainSimOptions& o) {
  if (o.epochs < 1 || o.steps_per_epoch < 1) throw UsageError("--epochs and --steps-per-epoch must be at least 1");
  if (!(o.step_ms > 0)) throw UsageError(fmt::format("--step-ms {} must be positive", o.step_ms));
  const char* env = std::getenv("JOULE_SIM");
  const SimSpec spec = parse_sim_spec(common.sim_spec.empty() && env ? env : common.sim_spec);
  if (!(o.stall_ms >= 0)) throw UsageError(fmt::format("--stall-ms {} must be >= 0", o.stall_ms));
  TrainingNoise noise;
  noise.stall_mean_s = o.stall_ms / 1000.0;
  noise.seed = o.seed;
  // The sampler ticks at least four times a step: short steps measured on a
  // coarse tick would look noisier than they are.
  const double tick_s = std::min(0.01, o.step_ms / 1000.0 / 4.0);
  SimulatedTraining training(std::vector<SimGpuModel>(spec.count, spec.model), o.step_ms / 1000.0, tick_s, noise);

  PowerLimitOptimizerOptions options;
  options.job_name = o.job;
  options.batch_size = o.batch_size;
  options.objective = parse_objective(o.objective, o.eta, o.max_slowdown);
  options.knob = parse_optimizer_knob(o.knob);
  options.step_w = o.step_w;
  options.step_mhz = o.step_mhz;
  options.warmup_steps = o.warmup_steps;
  options.measure_steps = o.measure_steps;
  options.observer = o.observer;
  options.profile_path = o.profile_path;
  options.reprofile = o.reprofile;
  options.restore_on_signals = false;  // simulated GPUs: nothing outlives the process
  options.log = [](const std::string& text) { std::cout << text; };

  std::cout << fmt::format(
      "joule train-sim: {} SIMULATED GPU{} ({}), {} epoch{} x {} steps, {:.0f} ms per step at full speed{}\n",
      spec.count, spec.count == 1 ? "" : "s", spec.model.name, o.epochs, o.epochs == 1 ? "" : "s",
      o.steps_per_epoch, o.step_ms,
      o.stall_ms > 0 ? fmt::format(", stalls of {:g} ms on average (seed {})", o.stall_ms, o.seed) : "");
  Monitor& monitor = training.monitor();
  PowerLimitOptimizer optimizer(monitor, options);
  monitor.begin_window("training");
  for (int e = 0; e < o.epochs; ++e) training.epoch(optimizer, o.steps_per_epoch);
  const Measurement total = monitor.end_window("training");
  // Put the GPUs back as the run found them, and say so when anything was changed.
  const bool changed = optimizer.changed_settings();
  optimizer.restore();

  if (optimizer.state() != PowerLimitOptimizer::State::kDecided) {
    std::cout << fmt::format(
        "profiling did not finish within the run ({} of {} settings measured, {} round{} done); use more steps\n",
        optimizer.profile().size(), optimizer.candidates().size(), optimizer.rounds(),
        optimizer.rounds() == 1 ? "" : "s");
  } else {
    const auto rows = optimizer.profile();
    const double steps = static_cast<double>(o.epochs) * o.steps_per_epoch;
    const std::string least_constrained = optimizer.knob() == OptimizerKnob::kPowerLimit
                                              ? fmt::format("{:.0f} W", rows.front().power_limit_w)
                                              : fmt::format("{:.0f} MHz", rows.front().clock_mhz);
    std::cout << fmt::format(
        "training: {:.1f} s and {:.1f} kJ in all (profiling included); at {} throughout it would take "
        "{:.1f} s and {:.1f} kJ\n",
        total.elapsed_s, total.gpu_total_energy_j() / 1000.0, least_constrained,
        steps * rows.front().time_per_step_s, steps * rows.front().energy_per_step_j / 1000.0);
  }
  if (changed) std::cout << restored_message(training.gpus(), optimizer.knob()) << '\n';
  return 0;
}

}  // namespace joule::cli
