// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "bench_support.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "joule/clock.h"
#include "joule/device/nvml.h"
#include "joule/device/rocm.h"
#include "joule/device/sim.h"
#include "joule/error.h"

namespace joule::bench {

std::vector<std::shared_ptr<Gpu>> open_bench_gpus(const std::string& backend, unsigned count) {
  if (backend == "sim") {
    std::vector<std::shared_ptr<Gpu>> gpus;
    for (unsigned i = 0; i < count; ++i) {
      auto gpu = std::make_shared<SimGpu>(i, SimGpuModel{}, SteadyClock::instance());
      gpu->set_load(0.8);
      gpus.push_back(gpu);
    }
    return gpus;
  }
  if (backend == "fake") {
    // $JOULE_BENCH_FAKE_NVML points at a copy of the fake library (e.g. on a
    // machine the build tree was carried to); else the one this build made.
    const char* override_path = std::getenv("JOULE_BENCH_FAKE_NVML");
#ifdef JOULE_FAKE_NVML_PATH
    const std::string library = override_path ? override_path : JOULE_FAKE_NVML_PATH;
#else
    if (override_path == nullptr) {
      throw Error("this build has no fake NVML library; set JOULE_BENCH_FAKE_NVML or build the tests");
    }
    const std::string library = override_path;
#endif
    const std::string config = fmt::format("/tmp/joule-bench-fake-nvml-{}.conf", count);
    std::ofstream out(config);
    // An H100 as measured (driver 580): 100 W idle and 700 W busy phases of
    // 0.15-2.5 s at random (device i: seed 3 + i); counter steps every
    // 100 ms at 4 ms a call; power usage a trailing 1 s mean and the instant
    // field refreshed every 100 ms; a buffer of 120 power samples 20 ms apart.
    for (unsigned i = 0; i < count; ++i) {
      out << "device name=\"NVIDIA H100 80GB HBM3 (fake)\" power_w=100 pulse_w=700 profile=random seed=" << 3 + i
          << " min_phase_ms=150 max_phase_ms=2500 min_limit_w=200 max_limit_w=700 energy_call_ms=4 "
             "energy_update_ms=100 power_update_ms=100 usage_window_ms=1000 sample_ms=20 sample_buffer=120 sample_stamp_lead_ms=4.5\n";
    }
    out.close();
    setenv("JOULE_FAKE_NVML_CONFIG", config.c_str(), 1);
    return open_nvml_gpus(library).gpus;
  }
  if (backend == "fake-rocm") {
#ifdef JOULE_FAKE_ROCM_SMI_PATH
    // MI250X-like GCDs as the fake describes them (docs/devices.md): the
    // same random 100/700 W load, a counter of 15.3 uJ ticks updated every
    // 1 ms, average power a trailing 1 s mean, no power samples.
    const std::string config = fmt::format("/tmp/joule-bench-fake-rocm-{}.conf", count);
    std::ofstream out(config);
    for (unsigned i = 0; i < count; ++i) {
      out << "device name=\"AMD Instinct MI250X (fake)\" power_w=100 pulse_w=700 profile=random seed=" << 3 + i
          << " min_phase_ms=150 max_phase_ms=2500 max_limit_w=750 limit_w=750 energy_update_ms=1 "
             "power_ave_window_ms=1000 current_socket_power=0\n";
    }
    out.close();
    setenv("JOULE_FAKE_ROCM_SMI_CONFIG", config.c_str(), 1);
    return open_rocm_smi_gpus(JOULE_FAKE_ROCM_SMI_PATH).gpus;
#else
    throw Error("this build has no fake ROCm SMI library; build the tests");
#endif
  }
  if (backend == "nvml") return open_nvml_gpus(nvml_library_path()).gpus;
  throw Error(fmt::format("unknown bench backend '{}' (sim, fake, fake-rocm or nvml)", backend));
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

double process_cpu_s() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

}  // namespace joule::bench
