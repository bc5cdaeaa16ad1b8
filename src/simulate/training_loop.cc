// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/training_loop.h"

#include <algorithm>
#include <cmath>

#include "joule/error.h"

namespace joule {

namespace {

// A standard normal draw by Box-Muller from the generator's raw bits: the
// <random> distributions are implementation-defined, and a seed must give
// the same steps everywhere.
double standard_normal(std::mt19937_64& rng) {
  constexpr double kTwoPi = 6.283185307179586;
  const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

}  // namespace

SimulatedTraining::SimulatedTraining(std::vector<SimGpuModel> models, double base_step_s, double tick_s,
                                     TrainingNoise noise)
    : base_step_s_(base_step_s), tick_s_(tick_s), noise_(noise), rng_(noise.seed) {
  if (models.empty()) throw UsageError("simulated training needs at least one GPU");
  if (!(base_step_s > 0) || !(tick_s > 0)) throw UsageError("step and tick times must be positive");
  if (!(noise.stall_mean_s >= 0) || !(noise.drift_sigma >= 0) || !(noise.jitter_sigma >= 0) ||
      !(noise.correlation_s > 0) || !(noise.idle_load >= 0 && noise.idle_load <= 1)) {
    throw UsageError("training noise: stall, spreads and correlation time must be non-negative (correlation > 0), "
                     "idle load in [0, 1]");
  }
  drift_ = noise_.drift_sigma * standard_normal(rng_);  // start in the stationary state
  std::vector<std::shared_ptr<Gpu>> plain;
  for (std::size_t i = 0; i < models.size(); ++i) {
    // Stalls of a few ms switch the load between ticks: exact power samples
    // keep the windows exact, so the profiler sees the loop's noise only.
    models[i].keeps_power_samples = true;
    gpus_.push_back(std::make_shared<SimGpu>(static_cast<unsigned>(i), models[i], clock_));
    gpus_.back()->set_load(1.0);
    plain.push_back(gpus_.back());
  }
  MonitorOptions options;
  options.sampler.background_thread = false;
  options.sampler.interval_s = tick_s;
  monitor_ = std::make_unique<Monitor>(plain, std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock_, options);
}

double SimulatedTraining::next_stall_s() {
  if (noise_.stall_mean_s <= 0) return 0.0;
  const double sigma2 = noise_.drift_sigma * noise_.drift_sigma + noise_.jitter_sigma * noise_.jitter_sigma;
  const double jitter = noise_.jitter_sigma * standard_normal(rng_);
  const double stall_s = noise_.stall_mean_s * std::exp(drift_ + jitter - 0.5 * sigma2);
  // The drift moves on by this step's span (roughly: the GPU work's length
  // changes with the limit, which is all the same to the stalls).
  const double rho = std::exp(-(stall_s + base_step_s_) / noise_.correlation_s);
  drift_ = rho * drift_ + std::sqrt(1.0 - rho * rho) * noise_.drift_sigma * standard_normal(rng_);
  return stall_s;
}

void SimulatedTraining::run_for(double seconds) {
  double remaining_s = seconds;
  while (remaining_s > 1e-12) {
    const double dt = std::min(tick_s_, remaining_s);
    clock_->advance_s(dt);
    monitor_->sampler().sample_now();
    remaining_s -= dt;
  }
}

void SimulatedTraining::step(PowerLimitOptimizer& optimizer) {
  optimizer.on_step_begin();
  if (const double stall_s = next_stall_s(); stall_s > 0) {
    for (const auto& gpu : gpus_) gpu->set_load(noise_.idle_load);
    run_for(stall_s);
    for (const auto& gpu : gpus_) gpu->set_load(1.0);
  }
  // Data parallel: a step lasts as long as its slowest GPU.
  double speed = gpus_.front()->relative_speed();
  for (const auto& gpu : gpus_) speed = std::min(speed, gpu->relative_speed());
  run_for(base_step_s_ / speed);
  optimizer.on_step_end();
}

void SimulatedTraining::epoch(PowerLimitOptimizer& optimizer, int steps) {
  optimizer.on_epoch_begin();
  for (int i = 0; i < steps; ++i) step(optimizer);
  optimizer.on_epoch_end();
}

}  // namespace joule
