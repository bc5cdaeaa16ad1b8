// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Where a LibTorch training step's energy goes: the step's phases recorded as
// regions (joule::attribution::RegionRecorder), then the window's energy
// split among them per GPU (attribute_window), printed as a table and
// written as JSON. A small MLP on synthetic data, so it runs anywhere (CPU
// here; CUDA when the LibTorch has it, where every edge waits for the GPU).
// On simulated GPUs every region draws the same power, so only the
// bookkeeping shows; docs/attribution.md says how to run it on a real GPU
// (with a measured sample response, and edges from CUDA events through
// RegionRecorder::begin_at/end_at).
//
//   build/bin/joule_example_libtorch_attribute [SECONDS] [OUT.json]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <fstream>
#include <iostream>
#include <string>

#include "joule/attribution/json.h"
#include "joule/attribution/window.h"
#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/measure/monitor.h"

namespace {

// `with`-style region: begins on construction, ends on destruction.
class Region {
 public:
  Region(joule::attribution::RegionRecorder& recorder, std::string name) : recorder_(recorder), name_(std::move(name)) {
    recorder_.begin(name_);
  }
  ~Region() { recorder_.end(name_); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  joule::attribution::RegionRecorder& recorder_;
  std::string name_;
};

void print_table(const joule::attribution::Attribution& a, std::size_t gpu) {
  std::printf("GPU %zu: %.1f J in the window, baseline %s\n", gpu, a.window_energy_j,
              a.baseline_separated ? (std::to_string(static_cast<int>(a.baseline_w)) + " W").c_str()
                                   : "not separated");
  std::printf("  %-10s %6s %10s %12s %7s\n", "region", "calls", "GPU ms", "mJ/call", "share");
  for (const auto& r : a.regions) {
    std::printf("  %-10s %6zu %10.1f %12.2f %6.1f%%%s\n", r.name.c_str(), r.calls, 1e3 * r.gpu_time_s,
                1e3 * r.energy_per_call_j, 100.0 * r.share, r.resolved ? "" : "  (not resolved)");
  }
  std::printf("  %-10s %6s %10.1f %12s %6.1f%%\n", "(idle)", "", 1e3 * a.idle_time_s, "",
              a.window_energy_j > 0 ? 100.0 * a.idle_energy_j / a.window_energy_j : 0.0);
  for (const auto& note : a.notes) std::printf("  note: %s\n", note.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::stod(argv[1]) : 3.0;
  torch::manual_seed(0);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  torch::nn::Sequential model(torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  model->to(device);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05));
  const auto x = torch::randn({128, 64});
  const auto y = torch::randint(0, 10, {128}, torch::TensorOptions().dtype(torch::kLong));

  const joule::Devices devices = joule::discover_devices();
  joule::MonitorOptions options;
  options.sampler.interval_s = 0.01;
  std::function<void()> synchronize;
  if (device.is_cuda()) synchronize = [] { torch::cuda::synchronize(); };
  options.synchronize = synchronize;
  joule::Monitor monitor(devices, options);
  joule::attribution::RegionRecorder regions(monitor.sampler().shared_clock(), synchronize);  // the monitor's clock

  monitor.begin_window("train");
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int steps = 0;
  while (std::chrono::steady_clock::now() < until) {
    torch::Tensor batch, target, loss;
    {
      Region r(regions, "data");
      batch = x.to(device);
      target = y.to(device);
    }
    {
      Region r(regions, "forward");
      loss = torch::nn::functional::cross_entropy(model->forward(batch), target);
    }
    {
      Region r(regions, "backward");
      sgd.zero_grad();
      loss.backward();
    }
    {
      Region r(regions, "optimizer");
      sgd.step();
    }
    ++steps;
  }
  const joule::Measurement settled = monitor.settle(monitor.end_window("train"), 5.0);
  std::printf("%d steps in %.2f s on %zu%s GPU(s)\n", steps, settled.elapsed_s, devices.gpus.size(),
              devices.simulated() ? " SIMULATED" : "");
  const auto attributions = joule::attribution::attribute_window(monitor, settled, regions);
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t gpu = 0; gpu < attributions.size(); ++gpu) {
    print_table(attributions[gpu], gpu);
    all.push_back(joule::attribution::to_json(attributions[gpu]));
  }
  if (argc > 2) std::ofstream(argv[2]) << all.dump(1) << "\n";
  return 0;
}
