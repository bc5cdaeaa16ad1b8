#include "joule/simulate/training_loop.h"

#include <algorithm>

#include "joule/error.h"

namespace joule {

SimulatedTraining::SimulatedTraining(std::vector<SimGpuModel> models, double base_step_s, double tick_s)
    : base_step_s_(base_step_s), tick_s_(tick_s) {
  if (models.empty()) throw UsageError("simulated training needs at least one GPU");
  if (!(base_step_s > 0) || !(tick_s > 0)) throw UsageError("step and tick times must be positive");
  std::vector<std::shared_ptr<Gpu>> plain;
  for (std::size_t i = 0; i < models.size(); ++i) {
    gpus_.push_back(std::make_shared<SimGpu>(static_cast<unsigned>(i), models[i], clock_));
    gpus_.back()->set_load(1.0);
    plain.push_back(gpus_.back());
  }
  MonitorOptions options;
  options.sampler.background_thread = false;
  options.sampler.interval_s = tick_s;
  monitor_ = std::make_unique<Monitor>(plain, std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock_, options);
}

void SimulatedTraining::step(PowerLimitOptimizer& optimizer) {
  optimizer.on_step_begin();
  // Data parallel: a step lasts as long as its slowest GPU.
  double speed = gpus_.front()->relative_speed();
  for (const auto& gpu : gpus_) speed = std::min(speed, gpu->relative_speed());
  double remaining_s = base_step_s_ / speed;
  while (remaining_s > 1e-12) {
    const double dt = std::min(tick_s_, remaining_s);
    clock_->advance_s(dt);
    monitor_->sampler().sample_now();
    remaining_s -= dt;
  }
  optimizer.on_step_end();
}

void SimulatedTraining::epoch(PowerLimitOptimizer& optimizer, int steps) {
  optimizer.on_epoch_begin();
  for (int i = 0; i < steps; ++i) step(optimizer);
  optimizer.on_epoch_end();
}

}  // namespace joule
