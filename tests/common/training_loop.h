// A synthetic training loop on simulated GPUs and a virtual clock: each step
// keeps the GPUs fully loaded for base_step_s divided by their speed at the
// current limit, with the sampler ticking as virtual time passes.
#pragma once

#include <memory>
#include <vector>

#include "joule/clock.h"
#include "joule/device/sim.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/power_limit_optimizer.h"

namespace joule::testing {

struct SimTraining {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<SimGpu>> gpus;
  std::unique_ptr<Monitor> monitor;
  double base_step_s = 0.1;
  double tick_s = 0.01;

  explicit SimTraining(std::vector<SimGpuModel> models, double step_s = 0.1) : base_step_s(step_s) {
    std::vector<std::shared_ptr<Gpu>> plain;
    for (std::size_t i = 0; i < models.size(); ++i) {
      gpus.push_back(std::make_shared<SimGpu>(static_cast<unsigned>(i), models[i], clock));
      gpus.back()->set_load(1.0);
      plain.push_back(gpus.back());
    }
    MonitorOptions options;
    options.sampler.background_thread = false;
    options.sampler.interval_s = tick_s;
    monitor = std::make_unique<Monitor>(plain, std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock, options);
  }

  void step(PowerLimitOptimizer& optimizer) {
    optimizer.on_step_begin();
    double remaining_s = base_step_s / gpus.front()->relative_speed();
    while (remaining_s > 1e-12) {
      const double dt = std::min(tick_s, remaining_s);
      clock->advance_s(dt);
      monitor->sampler().sample_now();
      remaining_s -= dt;
    }
    optimizer.on_step_end();
  }

  void epoch(PowerLimitOptimizer& optimizer, int steps) {
    optimizer.on_epoch_begin();
    for (int i = 0; i < steps; ++i) step(optimizer);
    optimizer.on_epoch_end();
  }
};

}  // namespace joule::testing
