// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/control/devices.h"
#include "joule/device/discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

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

// use_fake_rocm_smi points $JOULE_ROCM_SMI_LIBRARY at the fake; each test
// that uses it puts the variable back, so later tests in the same process
// look for the real library again.
struct RocmLibraryVariableRestored {
  ~RocmLibraryVariableRestored() { unsetenv("JOULE_ROCM_SMI_LIBRARY"); }
};

constexpr const char* kTwoAmdGpus =
    "device name=\"AMD Instinct MI250X\" power_w=300\ndevice name=\"AMD Instinct MI250X\" power_w=200\n";

TEST(DiscoveryTest, AutoFindsAmdGpusWhereOnlyRocmSmiIsPresent) {
  RocmLibraryVariableRestored restored;
  testing::TempDir tmp;
  const auto rocm = testing::use_fake_rocm_smi(tmp, kTwoAmdGpus);
  DiscoveryOptions options;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options.powercap_root = "/nonexistent/powercap";
  for (const AutoFallback fallback : {AutoFallback::kSimulated, AutoFallback::kNoGpus}) {
    options.auto_fallback = fallback;
    const Devices devices = discover_devices(options);
    EXPECT_EQ(devices.gpu_backend, "rocm");
    EXPECT_FALSE(devices.simulated());
    ASSERT_EQ(devices.gpus.size(), 2u);
    for (unsigned i = 0; i < 2; ++i) {
      EXPECT_EQ(devices.gpus[i]->backend(), "rocm");
      EXPECT_EQ(devices.gpus[i]->index(), i);
      EXPECT_FALSE(devices.gpus[i]->simulated());
    }
    EXPECT_TRUE(devices.rocm_loaded);
    EXPECT_EQ(devices.rocm_library, rocm.library_path);
    EXPECT_EQ(devices.rocm_version, "5.2.3");
    EXPECT_TRUE(devices.rocm_problem.empty()) << devices.rocm_problem;
    EXPECT_NE(devices.nvml_problem.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
    EXPECT_NE(devices.gpu_backend_reason.find("ROCm SMI 5.2.3 from " + rocm.library_path), std::string::npos)
        << devices.gpu_backend_reason;
  }
}

TEST(DiscoveryTest, AMixedNodeListsNvidiaThenAmdGpusWithUniqueIndices) {
  RocmLibraryVariableRestored restored;
  testing::TempDir tmp;
  const auto nvml = testing::use_fake_nvml(tmp, "device name=\"NVIDIA H100\" arch=9 power_w=350\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, kTwoAmdGpus);
  DiscoveryOptions options;
  options.nvml_library = nvml.library_path;
  options.powercap_root = "/nonexistent/powercap";
  Devices devices = discover_devices(options);
  EXPECT_EQ(devices.gpu_backend, "nvml+rocm");
  EXPECT_FALSE(devices.simulated());
  ASSERT_EQ(devices.gpus.size(), 3u);
  const std::vector<std::string> backends = {"nvml", "rocm", "rocm"};
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(devices.gpus[i]->index(), i);  // its place in the list: select_gpus relies on it
    EXPECT_EQ(devices.gpus[i]->backend(), backends[i]);
  }
  EXPECT_EQ(devices.gpus[2]->power_mw(), 200'000u);  // the second AMD GPU reads its own device
  EXPECT_TRUE(devices.nvml_problem.empty() && devices.rocm_problem.empty());
  EXPECT_NE(devices.gpu_backend_reason.find("1 NVIDIA GPU through NVML"), std::string::npos)
      << devices.gpu_backend_reason;
  EXPECT_NE(devices.gpu_backend_reason.find("2 AMD GPUs through ROCm SMI"), std::string::npos)
      << devices.gpu_backend_reason;
  select_gpus(devices, {2, 0});
  EXPECT_EQ(devices.gpus[0]->name(), "AMD Instinct MI250X");
  EXPECT_EQ(devices.gpus[1]->name(), "NVIDIA H100");

  // Each backend asked for by name gives its own GPUs only.
  options.backend = GpuBackend::kNvml;
  EXPECT_EQ(discover_hardware(options).gpus.size(), 1u);
  options.backend = GpuBackend::kRocm;
  const Devices amd = discover_hardware(options);
  EXPECT_EQ(amd.gpu_backend, "rocm");
  ASSERT_EQ(amd.gpus.size(), 2u);
  EXPECT_EQ(amd.gpus[0]->index(), 0u);
  EXPECT_TRUE(amd.nvml_problem.empty()) << "NVML is not tried";
  EXPECT_FALSE(amd.nvml_loaded);
}

TEST(DiscoveryTest, AnExplicitRocmBackendFailsWithTheReason) {
  RocmLibraryVariableRestored restored;
  DiscoveryOptions options;
  options.backend = GpuBackend::kRocm;
  options.rocm_library = "/nonexistent/librocm_smi64.so.1";
  try {
    discover_hardware(options);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kDriver);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/librocm_smi64.so.1"), std::string::npos) << e.what();
  }
  testing::TempDir tmp;
  options.rocm_library = testing::use_fake_rocm_smi(tmp, "version 5.2.3\n").library_path;
  try {
    discover_hardware(options);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNotFound);
    EXPECT_NE(std::string(e.what()).find("reports no GPU"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_gpu_backend("rocm"), GpuBackend::kRocm);
}

TEST(DiscoveryTest, WithNeitherLibraryTheReasonNamesBothAndWhyEachFailed) {
  DiscoveryOptions options;
  options.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options.rocm_library = "/nonexistent/librocm_smi64.so.1";
  options.powercap_root = "/nonexistent/powercap";
  options.auto_fallback = AutoFallback::kNoGpus;
  const Devices devices = discover_hardware(options);
  EXPECT_EQ(devices.gpu_backend, "none");
  EXPECT_FALSE(devices.rocm_loaded);
  for (const char* part : {"no NVIDIA GPU usable: cannot load NVML library '/nonexistent/libnvidia-ml.so.1'",
                           "no AMD GPU usable: cannot load ROCm SMI library '/nonexistent/librocm_smi64.so.1'",
                           "cannot open shared object file"}) {
    EXPECT_NE(devices.gpu_backend_reason.find(part), std::string::npos) << part << " in " << devices.gpu_backend_reason;
  }
  EXPECT_NE(devices.rocm_problem.find("/nonexistent/librocm_smi64.so.1"), std::string::npos);

  // The default library is not loaded where the amdgpu driver is absent (its
  // init would only fail, with complaints on stderr): the reason says so.
  if (access("/sys/module/amdgpu", F_OK) == 0) GTEST_SKIP() << "this machine has the amdgpu driver";
  unsetenv("JOULE_ROCM_SMI_LIBRARY");
  options.rocm_library.clear();
  const Devices defaults = discover_hardware(options);
  EXPECT_NE(defaults.rocm_problem.find("ROCm SMI ('librocm_smi64.so.1') not loaded: the amdgpu kernel driver is not "
                                       "loaded (no /sys/module/amdgpu)"),
            std::string::npos)
      << defaults.rocm_problem;
  EXPECT_NE(defaults.gpu_backend_reason.find(defaults.rocm_problem), std::string::npos);
}

}  // namespace
}  // namespace joule
