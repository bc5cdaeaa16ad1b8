// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A training loop with the power-limit optimizer, on whatever GPUs joule
// finds (the tests point it at a fake libnvidia-ml.so.1 or librocm_smi64.so.1),
// for tests that need a real process: how it ends decides how limits must be
// restored.
//   joule_test_train_loop normal|throw|wait READY_FILE [KNOB [BACKEND]]
//     normal: profile every limit, then train a few steps and exit 0
//     throw:  throw an exception in the middle of profiling (exit 3)
//     wait:   create READY_FILE at the second limit, then keep stepping until killed
//   KNOB: power_limit (default), sm_clock or memory_clock. A step sleeps
//   20 ms stretched by the fake driver's clock model
//   (joule_fake_nvml_relative_speed, joule_fake_rocm_smi_relative_speed), as
//   work on a capped GPU would be. BACKEND: nvml (default) or rocm, the one
//   driver it uses.
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include "joule/control/devices.h"
#include "joule/device/discovery.h"
#include "joule/optimize/power_limit_optimizer.h"

namespace {

// The fake driver's speed of gpu0 under its clock settings (1 without it).
double fake_relative_speed(joule::GpuBackend backend) {
  const bool rocm = backend == joule::GpuBackend::kRocm;
  const char* library = std::getenv(rocm ? "JOULE_ROCM_SMI_LIBRARY" : "JOULE_NVML_LIBRARY");
  void* handle = library ? dlopen(library, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (handle == nullptr) return 1.0;
  using SpeedFn = double (*)(unsigned);
  const auto speed = reinterpret_cast<SpeedFn>(
      dlsym(handle, rocm ? "joule_fake_rocm_smi_relative_speed" : "joule_fake_nvml_relative_speed"));
  const double value = speed ? speed(0) : 1.0;
  dlclose(handle);
  return value > 0 ? value : 1.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::cerr << "usage: joule_test_train_loop normal|throw|wait READY_FILE [power_limit|sm_clock|memory_clock "
                 "[nvml|rocm]]\n";
    return 2;
  }
  const std::string mode = argv[1], ready = argv[2];
  try {
    joule::DiscoveryOptions discovery;
    discovery.backend = joule::parse_gpu_backend(argc == 5 ? argv[4] : "nvml");
    const joule::Devices devices = joule::discover_devices(discovery);
    joule::MonitorOptions monitor_options;
    monitor_options.sampler.interval_s = 0.005;
    joule::Monitor monitor(devices, monitor_options);
    joule::PowerLimitOptimizerOptions options;
    options.objective = joule::Objective::energy();
    options.step_w = 50;
    options.warmup_steps = 1;
    // Windows of 4 x 20 ms: long enough that a loaded machine's scheduling
    // noise (a few ms per step) cannot swap the 50 W-apart candidates; 3 ms
    // steps let it, and the choice flaked under parallel builds.
    options.measure_steps = 4;
    options.min_warmup_s = 0;
    options.min_measure_s = 0;
    options.noise_aware = false;  // one round: these tests are about setting and restoring limits
    options.knob = joule::parse_optimizer_knob(argc >= 4 ? argv[3] : "power_limit");
    options.step_mhz = 495;  // 1980, 1485 and 990 MHz on an H100's clocks
    joule::PowerLimitOptimizer optimizer(monitor, options);
    optimizer.on_epoch_begin();
    for (int step = 0;; ++step) {
      optimizer.on_step_begin();
      const double step_ms = 20.0 / fake_relative_speed(discovery.backend);
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms));
      optimizer.on_step_end();
      if (mode == "throw" && step == 5) throw std::runtime_error("training failed");
      if (mode == "wait" && step == 5) std::ofstream(ready) << "ready\n";
      if (mode == "normal" && optimizer.state() == joule::PowerLimitOptimizer::State::kDecided && step > 20) break;
    }
    optimizer.on_epoch_end();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "joule_test_train_loop: " << e.what() << '\n';
    return 3;
  }
}
