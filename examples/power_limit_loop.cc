// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The just-in-time power-limit optimizer around a training loop. On a machine
// without NVIDIA GPUs it runs on simulated ones; the "training step" here is
// a short sleep standing in for real work.
//
//   build/bin/joule_example_power_limit_loop
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/power_limit_optimizer.h"

int main() {
  const joule::Devices devices = joule::discover_devices();
  joule::MonitorOptions monitor_options;
  monitor_options.sampler.interval_s = 0.005;
  joule::Monitor monitor(devices, monitor_options);

  joule::PowerLimitOptimizerOptions options;
  // Least energy per step. (Objective::slowdown(1.1) would take the least
  // energy at most 10% slower; with 5 ms sleeping steps on a busy machine,
  // timing noise alone can pass 10%.)
  options.objective = joule::Objective::energy();
  options.job_name = "example";
  options.step_w = 100;        // few candidates, so the example is quick
  options.warmup_steps = 2;
  options.measure_steps = 5;
  options.min_warmup_s = 0;    // real GPUs want the defaults (1 s and 2 s)
  options.min_measure_s = 0;
  joule::PowerLimitOptimizer optimizer(monitor, options);  // prints the table when it decides

  // Profiling visits every limit twice (its cost's spread is measured, not
  // assumed), then again those still undecided: a few epochs of 30 steps,
  // more where a busy machine's timing noise leaves limits undecided longer.
  constexpr int kEpochs = 20;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    optimizer.on_epoch_begin();
    for (int step = 0; step < 30; ++step) {
      optimizer.on_step_begin();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // forward, backward, optimizer step
      optimizer.on_step_end();
    }
    optimizer.on_epoch_end();
  }
  if (const auto limit = optimizer.chosen_limit_w()) {
    fmt::print("training continues at {:.0f} W\n", *limit);
  } else {
    fmt::print("still profiling after {} epochs: no limit chosen yet\n", kEpochs);
  }
  return 0;  // the optimizer's destructor restores the original limits
}
