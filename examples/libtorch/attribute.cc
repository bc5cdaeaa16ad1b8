// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Where a LibTorch training step's energy goes, layer by layer: each layer's
// forward and backward recorded as regions (joule::attribution::
// LibTorchRegions: a layer's call wrapped, its backward from a C++ hook on
// the autograd node that made its output), the data's copy, the loss and the
// optimizer's step as blocks, then the window's energy split among them per
// GPU (attribute_window), printed as a table and written as JSON. A small MLP
// on synthetic data, so it runs anywhere: on the CPU with host edges; on CUDA
// with each edge a CUDA event on the GPU's clock (GpuEdgeClock,
// joule/attribution/libtorch_events.h: nothing waits for the GPU until the
// window ends), where the CUDA headers are at hand, else with a sync per
// edge. On simulated GPUs every region draws the same power, so only the
// bookkeeping shows; docs/attribution.md says how to run it on a real GPU
// (with a measured sample response).
//
//   build/bin/joule_example_libtorch_attribute [SECONDS] [OUT.json] [sync|events] [WIDTH]
// ("sync": host edges after a sync each even where CUDA events could be used,
// to compare their cost; WIDTH: a larger model, two hidden layers of WIDTH
// and a batch of WIDTH: 4096 keeps a GPU busy.)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "joule/attribution/gpu_edge_clock.h"
#include "joule/attribution/json.h"
#include "joule/attribution/libtorch_regions.h"
#include "joule/attribution/response_store.h"
#include "joule/attribution/window.h"
#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"

#if __has_include(<cuda_runtime_api.h>) && __has_include(<ATen/cuda/CUDAContext.h>)
#include "joule/attribution/libtorch_events.h"
#define JOULE_EXAMPLE_CUDA_EVENTS 1
#endif

namespace {

using joule::attribution::LibTorchRegions;

// Where the edges go: CUDA events on the GPU's clock, or host instants.
class Edges {
 public:
  Edges(joule::attribution::RegionRecorder& recorder, bool cuda) : host_(recorder) {
#ifdef JOULE_EXAMPLE_CUDA_EVENTS
    if (cuda) gpu_ = std::make_unique<joule::attribution::GpuEdgeClock>(recorder, events_);
#else
    (void)cuda;
#endif
  }
  joule::attribution::EdgeSink& sink() { return gpu_ ? static_cast<joule::attribution::EdgeSink&>(*gpu_) : host_; }
  // Hands the GPU's edges to the recorder (waits for the GPU once).
  void flush() {
    if (gpu_) gpu_->flush();
  }
  bool on_gpu_clock() const { return gpu_ != nullptr; }

 private:
  joule::attribution::RecorderEdges host_;
#ifdef JOULE_EXAMPLE_CUDA_EVENTS
  joule::attribution::LibTorchCudaEvents events_;
#endif
  std::unique_ptr<joule::attribution::GpuEdgeClock> gpu_;
};

// A block of yours as a region: begins on construction, ends on destruction.
class Block {
 public:
  Block(LibTorchRegions& regions, std::string name) : regions_(regions), name_(std::move(name)) {
    regions_.begin(name_);
  }
  ~Block() { regions_.end(name_); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

 private:
  LibTorchRegions& regions_;
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

// The sample response kept for this GPU model and driver (measured once with
// joule.torch.measure_sample_response, from Python), where there is one:
// docs/attribution.md, "The samples' response". Else the boxcar.
joule::attribution::SampleModel kept_sample_model(const joule::Devices& devices) {
  joule::attribution::SampleModel model;
  if (devices.simulated() || devices.gpus.empty()) return model;
  try {
    model.response = joule::attribution::SampleResponseStore().load({devices.gpus[0]->name(), devices.driver_version});
  } catch (const joule::UsageError& e) {
    std::fprintf(stderr, "%s: not used\n", e.what());
  }
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::stod(argv[1]) : 3.0;
  torch::manual_seed(0);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  // The small MLP; with WIDTH, one hidden layer more and a batch of WIDTH.
  const int64_t width = argc > 4 ? std::stoll(argv[4]) : 256;
  const int64_t batch_size = argc > 4 ? width : 128;
  torch::nn::Sequential model(torch::nn::Linear(64, width), torch::nn::ReLU());
  if (argc > 4) {
    model->push_back(torch::nn::Linear(width, width));
    model->push_back(torch::nn::ReLU());
  }
  model->push_back(torch::nn::Linear(width, 10));
  model->to(device);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05));
  const auto x = torch::randn({batch_size, 64});
  const auto y = torch::randint(0, 10, {batch_size}, torch::TensorOptions().dtype(torch::kLong));

  const joule::Devices devices = joule::discover_devices();
  joule::MonitorOptions options;
  options.sampler.interval_s = 0.01;
  std::function<void()> synchronize;
  if (device.is_cuda()) synchronize = [] { torch::cuda::synchronize(); };
  options.synchronize = synchronize;  // the window's own edges wait for the GPU
  joule::Monitor monitor(devices, options);
#ifdef JOULE_EXAMPLE_CUDA_EVENTS
  const bool cuda_events = device.is_cuda() && !(argc > 3 && std::string(argv[3]) == "sync");
#else
  const bool cuda_events = false;
#endif
  // On the monitor's clock; host edges wait for the GPU where it runs the work.
  joule::attribution::RegionRecorder recorder(monitor.sampler().shared_clock(),
                                              cuda_events ? std::function<void()>{} : synchronize);
  Edges edges(recorder, cuda_events);
  LibTorchRegions regions(edges.sink());
  std::vector<LibTorchRegions::Module> layers;  // "0", "1", ...: each layer's forward and backward
  for (std::size_t i = 0; i < model->size(); ++i) layers.push_back(regions.module(std::to_string(i)));

  monitor.begin_window("train");
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int steps = 0;
  while (std::chrono::steady_clock::now() < until) {
    torch::Tensor h, target, loss;
    {
      Block b(regions, "data");
      h = x.to(device);
      target = y.to(device);
    }
    std::size_t i = 0;
    for (auto& layer : *model) h = layers[i++]([&] { return layer.forward(h); });
    {
      Block b(regions, "loss");
      loss = torch::nn::functional::cross_entropy(h, target);
    }
    sgd.zero_grad();
    loss.backward();  // "<layer>.backward" regions, last layer first
    {
      Block b(regions, "optimizer");
      sgd.step();
    }
    ++steps;
  }
  const joule::Measurement settled = monitor.settle(monitor.end_window("train"), 5.0);
  edges.flush();
  for (const std::string& note : regions.notes()) std::printf("recording: %s\n", note.c_str());
  std::printf("%d steps in %.2f s on %zu%s GPU(s), region edges %s\n", steps, settled.elapsed_s,
              devices.gpus.size(), devices.simulated() ? " SIMULATED" : "",
              edges.on_gpu_clock() ? "from CUDA events" : device.is_cuda() ? "after a sync each" : "on the host");
  const auto attributions =
      joule::attribution::attribute_window(monitor, settled, recorder, {}, kept_sample_model(devices));
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t gpu = 0; gpu < attributions.size(); ++gpu) {
    print_table(attributions[gpu], gpu);
    all.push_back(joule::attribution::to_json(attributions[gpu]));
  }
  if (argc > 2) std::ofstream(argv[2]) << all.dump(1) << "\n";
  return 0;
}
