// A synthetic training loop on simulated GPUs and a virtual clock: each step
// keeps the GPUs fully loaded for base_step_s divided by their speed at the
// current power limit, with the sampler ticking as virtual time passes. Used
// by `joule train-sim` and by the tests of the power-limit optimizer.
#pragma once

#include <memory>
#include <vector>

#include "joule/clock.h"
#include "joule/device/sim.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/power_limit_optimizer.h"

namespace joule {

class SimulatedTraining {
 public:
  // One simulated GPU per model; base_step_s is a step's time at full speed;
  // the sampler ticks every tick_s of virtual time.
  explicit SimulatedTraining(std::vector<SimGpuModel> models, double base_step_s = 0.1, double tick_s = 0.01);

  void step(PowerLimitOptimizer& optimizer);
  void epoch(PowerLimitOptimizer& optimizer, int steps);

  Monitor& monitor() { return *monitor_; }
  const std::vector<std::shared_ptr<SimGpu>>& gpus() const { return gpus_; }
  const VirtualClock& clock() const { return *clock_; }

 private:
  std::shared_ptr<VirtualClock> clock_ = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<SimGpu>> gpus_;
  std::unique_ptr<Monitor> monitor_;
  double base_step_s_;
  double tick_s_;
};

}  // namespace joule
