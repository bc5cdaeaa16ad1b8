// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/control/devices.h"
#include "joule/device/discovery.h"

#include <gtest/gtest.h>

#include "common/test_support.h"
#include "joule/error.h"

namespace joule {
namespace {

TEST(DiscoveryTest, NoDriverMeansSimulatedGpusAndSaysWhy) {
  DiscoveryOptions options;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options.powercap_root = "/nonexistent/powercap";
  const Devices devices = discover_devices(options);
  EXPECT_TRUE(devices.simulated());
  ASSERT_EQ(devices.gpus.size(), 2u);
  EXPECT_TRUE(devices.gpus[0]->simulated());
  EXPECT_NE(devices.gpu_backend_reason.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(devices.gpu_backend_reason.find("SIMULATED"), std::string::npos);
  EXPECT_NE(devices.nvml_problem.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  ASSERT_EQ(devices.cpu_problems.size(), 1u);
}

// A service's `auto` (AutoFallback::kNoGpus): no driver is no GPU, and
// why, never simulated ones.
TEST(DiscoveryTest, NoDriverWithoutTheSimulatedFallbackMeansNoGpuAndSaysWhy) {
  DiscoveryOptions options;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options.powercap_root = "/nonexistent/powercap";
  options.auto_fallback = AutoFallback::kNoGpus;
  const Devices devices = discover_devices(options);
  EXPECT_FALSE(devices.simulated());
  EXPECT_EQ(devices.gpu_backend, "none");
  EXPECT_TRUE(devices.gpus.empty());
  EXPECT_FALSE(devices.nvml_loaded);
  EXPECT_NE(devices.nvml_problem.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << devices.nvml_problem;
  EXPECT_NE(devices.gpu_backend_reason.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(devices.gpu_backend_reason.find("--backend sim"), std::string::npos) << devices.gpu_backend_reason;
  EXPECT_EQ(devices.gpu_backend_reason.find("SIMULATED"), std::string::npos) << devices.gpu_backend_reason;

  // A driver that loads but lists no GPU: NVML is up, and there is still no GPU.
  testing::TempDir tmp;
  options.nvml_library = testing::use_fake_nvml(tmp, "driver_version 1.0\n").library_path;
  const Devices empty = discover_hardware(options);
  EXPECT_EQ(empty.gpu_backend, "none");
  EXPECT_TRUE(empty.gpus.empty());
  EXPECT_TRUE(empty.nvml_loaded);
  EXPECT_NE(empty.nvml_problem.find("reports no GPU"), std::string::npos) << empty.nvml_problem;

  // Simulated GPUs still come when asked for.
  options.backend = GpuBackend::kSim;
  const Devices sim = discover_hardware(options);
  EXPECT_TRUE(sim.simulated());
  EXPECT_EQ(sim.gpus.size(), 2u);
  EXPECT_TRUE(sim.nvml_problem.empty()) << "NVML is not tried";
}

TEST(DiscoveryTest, ExplicitNvmlBackendFailsInsteadOfFallingBack) {
  DiscoveryOptions options;
  options.backend = GpuBackend::kNvml;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  EXPECT_THROW(discover_devices(options), DeviceError);
}

TEST(DiscoveryTest, FindsTheDriverThroughTheEnvironment) {
  testing::TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"NVIDIA A40\" arch=7\n");
  setenv("JOULE_NVML_LIBRARY", fake.library_path.c_str(), 1);
  const Devices devices = discover_devices();
  unsetenv("JOULE_NVML_LIBRARY");
  EXPECT_EQ(devices.gpu_backend, "nvml");
  ASSERT_EQ(devices.gpus.size(), 1u);
  EXPECT_EQ(devices.gpus[0]->name(), "NVIDIA A40");
  EXPECT_EQ(devices.gpus[0]->architecture(), "Ampere");
}

TEST(DiscoveryTest, DriverWithNoGpusFallsBackToSimulation) {
  testing::TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "driver_version 1.0\n");
  DiscoveryOptions options;
  options.nvml_library = fake.library_path;
  const Devices devices = discover_devices(options);
  EXPECT_TRUE(devices.simulated());
  EXPECT_NE(devices.gpu_backend_reason.find("reports no GPU"), std::string::npos);
}

TEST(DiscoveryTest, SelectsGpusByIndexAndRejectsUnknownOnes) {
  DiscoveryOptions options;
  options.backend = GpuBackend::kSim;
  options.sim_spec = "count=4";
  options.powercap_root = "/nonexistent";
  Devices devices = discover_devices(options);
  select_gpus(devices, {3, 1});
  ASSERT_EQ(devices.gpus.size(), 2u);
  EXPECT_EQ(devices.gpus[0]->index(), 3u);
  try {
    select_gpus(devices, {7});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU index 7 does not exist"), std::string::npos);
  }
  EXPECT_THROW(parse_gpu_backend("cuda"), UsageError);
}

}  // namespace
}  // namespace joule
