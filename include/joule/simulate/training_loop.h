// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A synthetic training loop on simulated GPUs and a virtual clock: each step
// keeps the GPUs fully loaded for base_step_s divided by their speed at the
// current power limit, with the sampler ticking as virtual time passes. Used
// by `joule train-sim` and by the tests of the power-limit optimizer.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "joule/clock.h"
#include "joule/device/sim.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/power_limit_optimizer.h"

namespace joule {

// How a real training loop's steps vary: before each step's GPU work comes a
// stall (input pipeline, Python, the launch queue running dry) during which
// the GPUs idle, and the stalls drift. A step's stall is stall_mean_s times
// exp(d + j - s^2/2): d drifts (an AR(1) process in time, correlation time
// correlation_s, spread drift_sigma), j is each step's own (jitter_sigma),
// s^2 their variances' sum, so the stalls average stall_mean_s. The defaults,
// with a 2 ms stall beside 11 ms of GPU work on the H100-like model, spread
// 2 s windows about as an H100 in observer mode did (bench/README.md section
// 6: 12.3-15.8 ms and 6.2-7.1 J per step). Seeded: a seed gives the same steps.
struct TrainingNoise {
  double stall_mean_s = 0.0;  // 0: no noise, every step alike
  double drift_sigma = 0.6;
  double correlation_s = 1.0;
  double jitter_sigma = 0.5;
  double idle_load = 0.05;  // the GPUs' load while stalled
  uint64_t seed = 1;
};

class SimulatedTraining {
 public:
  // One simulated GPU per model; base_step_s is a step's time at full speed;
  // the sampler ticks every tick_s of virtual time.
  explicit SimulatedTraining(std::vector<SimGpuModel> models, double base_step_s = 0.1, double tick_s = 0.01,
                             TrainingNoise noise = {});

  void step(PowerLimitOptimizer& optimizer);
  void epoch(PowerLimitOptimizer& optimizer, int steps);

  Monitor& monitor() { return *monitor_; }
  const std::vector<std::shared_ptr<SimGpu>>& gpus() const { return gpus_; }
  const VirtualClock& clock() const { return *clock_; }

 private:
  std::shared_ptr<VirtualClock> clock_ = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<SimGpu>> gpus_;
  std::unique_ptr<Monitor> monitor_;
  // Lets seconds of virtual time pass, ticking the sampler.
  void run_for(double seconds);
  double next_stall_s();

  double base_step_s_;
  double tick_s_;
  TrainingNoise noise_;
  std::mt19937_64 rng_;
  double drift_ = 0.0;  // d, the stalls' drifting log factor
};

}  // namespace joule
