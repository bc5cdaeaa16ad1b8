// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A LibTorch training loop instrumented with joule: per-epoch energy from a
// Monitor window and the just-in-time power-limit optimizer around every step.
// A small MLP on synthetic data, so it runs anywhere (CPU here; CUDA when the
// LibTorch has it). On a machine without NVIDIA GPUs joule uses simulated
// ones and says so.
//
//   build/bin/joule_example_libtorch [--observer]
#include <torch/torch.h>

#include <cstring>
#include <iostream>

#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/measure/monitor.h"
#include "joule/optimize/power_limit_optimizer.h"

int main(int argc, char** argv) {
  const bool observer = argc > 1 && std::strcmp(argv[1], "--observer") == 0;
  torch::manual_seed(0);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  torch::nn::Sequential model(torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  model->to(device);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05));
  const auto x = torch::randn({4096, 64}, device);
  const auto y = torch::randint(0, 10, {4096}, torch::TensorOptions().dtype(torch::kLong).device(device));

  const joule::Devices devices = joule::discover_devices();
  joule::MonitorOptions monitor_options;
  monitor_options.sampler.interval_s = 0.01;
  if (device.is_cuda()) monitor_options.synchronize = [] { torch::cuda::synchronize(); };
  joule::Monitor monitor(devices, monitor_options);

  joule::PowerLimitOptimizerOptions options;
  options.objective = joule::Objective::cost(0.5);
  options.observer = observer;
  options.job_name = "libtorch-mlp";
  options.batch_size = 128;
  options.step_w = 100;  // few limits so the example is short; real jobs keep 25 W
  options.warmup_steps = 2;
  options.measure_steps = 8;
  options.min_warmup_s = 0;
  options.min_measure_s = 0;
  options.screening_rounds = 2;   // and few rounds: real jobs keep the defaults (3, then 20 confirming)
  options.confirming_rounds = 4;
  joule::PowerLimitOptimizer optimizer(monitor, options);

  // Enough epochs for profiling: every limit twice, then the best against the limit in force.
  for (int epoch = 0; epoch < 16; ++epoch) {
    monitor.begin_window("epoch");
    optimizer.on_epoch_begin();
    double loss_sum = 0;
    int batches = 0;
    for (int64_t i = 0; i < x.size(0); i += 128) {
      optimizer.on_step_begin();
      sgd.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x.slice(0, i, i + 128)), y.slice(0, i, i + 128));
      loss.backward();
      sgd.step();
      loss_sum += loss.item<double>();
      ++batches;
      optimizer.on_step_end();
    }
    optimizer.on_epoch_end();
    const joule::Measurement m = monitor.end_window("epoch");
    std::cout << "epoch " << epoch << ": loss " << loss_sum / batches << ", " << m.elapsed_s << " s, "
              << m.gpu_total_energy_j() << " J on " << devices.gpus.size()
              << (devices.simulated() ? " SIMULATED" : "") << " GPU(s)\n";
  }
  if (const auto limit = optimizer.chosen_limit_w()) std::cout << "power limit chosen: " << *limit << " W\n";
  return 0;
}
