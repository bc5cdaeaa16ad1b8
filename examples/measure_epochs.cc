// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Measuring the energy of code regions with joule::Monitor: one window per
// epoch and a nested window for an evaluation step. Runs on whatever GPUs
// joule finds (simulated ones when there is no NVIDIA driver).
//
//   build/bin/joule_example_measure_epochs
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/measure/monitor.h"

int main() {
  const joule::Devices devices = joule::discover_devices();
  fmt::print("GPUs: {} ({})\n", devices.gpu_backend, devices.gpu_backend_reason);

  joule::MonitorOptions options;
  options.sampler.interval_s = 0.05;  // 20 Hz
  // With CUDA, pass a device synchronise here so queued kernels land in the
  // window that launched them, e.g. [] { cudaDeviceSynchronize(); }.
  options.synchronize = nullptr;
  joule::Monitor monitor(devices, options);

  for (int epoch = 0; epoch < 3; ++epoch) {
    monitor.begin_window("epoch");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // stands in for training steps
    monitor.begin_window("eval");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const joule::Measurement eval = monitor.end_window("eval");
    const joule::Measurement m = monitor.end_window("epoch");
    fmt::print("epoch {}: {:.3f} s, {:.1f} J on GPUs, {:.1f} J on CPUs (eval {:.1f} J)\n", epoch, m.elapsed_s,
               m.gpu_total_energy_j(), m.cpu_total_energy_j(), eval.total_energy_j());
    for (const auto& warning : m.warnings) fmt::print("  warning: {}\n", warning);
  }
  return 0;
}
