// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The NVML backend against the fake libnvidia-ml.so.1, loaded through dlopen
// exactly as the real driver library would be.
#include "joule/device/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "common/test_support.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::use_fake_nvml;

constexpr const char* kTwoH100s = R"(
driver_version 580.95.05
device name="NVIDIA H100 80GB HBM3" arch=9 power_w=350 min_limit_w=200 max_limit_w=700 default_limit_w=700 util_gpu=87 util_mem=41 sm_mhz=1980 temp_c=61 mem_used_mib=2048
device name="NVIDIA H100 80GB HBM3" arch=9 power_w=120 min_limit_w=200 max_limit_w=700 limit_w=500 instant_power=0
)";

TEST(NvmlTest, ReadsEveryValueThroughTheDriverLibrary) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kTwoH100s);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  ASSERT_EQ(devices.gpus.size(), 2u);
  EXPECT_EQ(devices.driver_version, "580.95.05");
  EXPECT_TRUE(devices.missing_functions.empty());
  Gpu& gpu = *devices.gpus[0];
  EXPECT_EQ(gpu.name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.uuid(), "GPU-fake0000-0000-0000-0000-000000000000");
  EXPECT_EQ(gpu.architecture(), "Hopper");
  EXPECT_EQ(gpu.backend(), "nvml");
  EXPECT_FALSE(gpu.simulated());
  EXPECT_TRUE(gpu.has_energy_counter());
  EXPECT_EQ(gpu.power_mw(), 350'000u);
  EXPECT_EQ(gpu.power_limit_mw(), 700'000u);
  EXPECT_EQ(gpu.default_power_limit_mw(), 700'000u);
  EXPECT_EQ(gpu.power_limit_range_mw().min_mw, 200'000u);
  EXPECT_EQ(gpu.power_limit_range_mw().max_mw, 700'000u);
  EXPECT_EQ(gpu.utilization().gpu_percent, 87u);
  EXPECT_EQ(gpu.utilization().memory_percent, 41u);
  EXPECT_EQ(gpu.sm_clock_mhz(), 1980u);
  EXPECT_EQ(gpu.temperature_c(), 61u);
  EXPECT_EQ(gpu.memory_used_bytes(), 2048ull << 20);
  EXPECT_EQ(devices.gpus[1]->power_limit_mw(), 500'000u);
}

TEST(NvmlTest, EnergyCounterAdvancesWithWallTime) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kTwoH100s);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  const uint64_t before = devices.gpus[0]->total_energy_mj();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t after = devices.gpus[0]->total_energy_mj();
  // 350 W for at least 0.2 s.
  EXPECT_GE(after - before, 70'000u);
  EXPECT_LT(after - before, 350'000u);
}

TEST(NvmlTest, ProbeSaysWhatWorksAndWhyNot) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kTwoH100s);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  for (const auto& status : devices.gpus[1]->probe_capabilities()) {
    // This fake GPU has neither the instantaneous field nor a sample buffer.
    if (status.capability == GpuCapability::kInstantPower || status.capability == GpuCapability::kPowerSamples) {
      EXPECT_FALSE(status.available);
      EXPECT_NE(status.reason.find("Not Supported"), std::string::npos) << status.reason;
    } else {
      EXPECT_TRUE(status.available) << to_string(status.capability) << ": " << status.reason;
    }
  }
}

TEST(NvmlTest, PowerUsageByDefaultInstantFieldOnRequest) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, "device power_w=300 instant_offset_w=25\ndevice power_w=300 instant_power=0\n");
  EXPECT_EQ(open_nvml_gpus(fake.library_path).gpus[0]->power_mw(), 300'000u);
  setenv("JOULE_NVML_POWER_SOURCE", "instant", 1);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  unsetenv("JOULE_NVML_POWER_SOURCE");
  EXPECT_EQ(devices.gpus[0]->power_mw(), 325'000u);
  EXPECT_EQ(devices.gpus[1]->power_mw(), 300'000u);  // no field: power usage after all
}

// Compute and graphics lists merged by pid; memory the driver will not tell
// is absent, not zero; processes come and go with the fake's clock.
TEST(NvmlTest, ListsEachProcessOnceWithTheMemoryTheDriverTells) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, R"(clock virtual
device power_w=300
device power_w=100
process device=0 pid=100 used_mib=512
process device=0 pid=200 used_mib=1024 kind=both
process device=0 pid=300 used_mib=na kind=graphics
process device=0 pid=400 used_mib=64 start_ms=1000 end_ms=2000
)");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  auto* set_fake_time = reinterpret_cast<void (*)(double)>(
      dlsym(dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD), "joule_fake_nvml_set_time_s"));
  ASSERT_NE(set_fake_time, nullptr);
  const std::vector<GpuProcess> at_start = {{100, 512ull << 20}, {200, 1024ull << 20}, {300, std::nullopt}};
  EXPECT_EQ(devices.gpus[0]->running_processes(), at_start);
  EXPECT_TRUE(devices.gpus[1]->running_processes().empty());
  set_fake_time(1.5);
  std::vector<GpuProcess> later = at_start;
  later.push_back({400, 64ull << 20});
  EXPECT_EQ(devices.gpus[0]->running_processes(), later);
  set_fake_time(2.0);
  EXPECT_EQ(devices.gpus[0]->running_processes(), at_start);
}

// More processes than a first guess holds: the list is asked for its size.
TEST(NvmlTest, ListsManyProcesses) {
  TempDir tmp;
  std::string config = "device power_w=300\n";
  for (int pid = 1000; pid < 1040; ++pid) config += "process device=0 pid=" + std::to_string(pid) + " used_mib=1\n";
  const auto fake = use_fake_nvml(tmp, config);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  const std::vector<GpuProcess> listed = devices.gpus[0]->running_processes();
  ASSERT_EQ(listed.size(), 40u);
  EXPECT_EQ(listed.front().pid, 1000u);
  EXPECT_EQ(listed.back().pid, 1039u);
}

TEST(NvmlTest, AProcessListTheDriverRefusesIsATypedErrorAndAnUnavailableCapability) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, "device power_w=300\nprocess device=0 pid=7\n"
                                       "error function=nvmlDeviceGetComputeRunningProcesses_v3 device=0 code=4\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  try {
    devices.gpus[0]->running_processes();
    ADD_FAILURE() << "listed processes the driver refused";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNoPermission);
    EXPECT_NE(std::string(e.what()).find("nvmlDeviceGetComputeRunningProcesses_v3"), std::string::npos) << e.what();
  }
  for (const CapabilityStatus& c : devices.gpus[0]->probe_capabilities()) {
    if (c.capability != GpuCapability::kRunningProcesses) continue;
    EXPECT_FALSE(c.available);
    EXPECT_NE(c.reason.find("nvmlDeviceGetComputeRunningProcesses_v3"), std::string::npos) << c.reason;
  }
}

TEST(NvmlTest, PowerSamplesAreReadOnceEachAndMovedOntoTheCountersTimeline) {
  TempDir tmp;
  // Stamped 4.5 ms before their intervals end, as an H100's are; on the
  // fake's virtual clock, stamps are virtual microseconds.
  const auto fake = use_fake_nvml(tmp, "clock virtual\ndevice power_w=300 sample_ms=20 sample_buffer=120 "
                                       "sample_stamp_lead_ms=4.5\ndevice power_w=300\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  auto* set_fake_time = reinterpret_cast<void (*)(double)>(
      dlsym(dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD), "joule_fake_nvml_set_time_s"));
  ASSERT_NE(set_fake_time, nullptr);
  Gpu& gpu = *devices.gpus[0];
  EXPECT_TRUE(gpu.has_power_samples());  // the buffer exists, though still empty at time 0
  EXPECT_FALSE(devices.gpus[1]->has_power_samples());
  set_fake_time(0.1);
  std::vector<PowerSample> samples;
  gpu.read_power_samples(samples);
  ASSERT_EQ(samples.size(), 5u);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].timestamp_us, 20'000u * (i + 1)) << i;  // the lead taken off
    EXPECT_EQ(samples[i].power_mw, 300'000u);
  }
  EXPECT_DOUBLE_EQ(gpu.power_sample_period_s(), 0.02);  // learned from the first samples
  gpu.read_power_samples(samples);
  EXPECT_EQ(samples.size(), 5u);  // nothing new: nothing appended
  set_fake_time(0.15);
  gpu.read_power_samples(samples);
  ASSERT_EQ(samples.size(), 7u);
  EXPECT_EQ(samples.back().timestamp_us, 140'000u);

  setenv("JOULE_NVML_SAMPLE_OFFSET_MS", "0", 1);
  NvmlDevices raw = open_nvml_gpus(fake.library_path);
  unsetenv("JOULE_NVML_SAMPLE_OFFSET_MS");
  samples.clear();
  raw.gpus[0]->read_power_samples(samples);
  ASSERT_FALSE(samples.empty());
  EXPECT_EQ(samples.back().timestamp_us, 140'000u - 4'500u);  // the driver's own stamp
}

TEST(NvmlTest, MissingLibraryIsADriverErrorNamingThePath) {
  try {
    open_nvml_gpus("/nonexistent/libnvidia-ml.so.1");
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kDriver);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  }
}

TEST(NvmlTest, InitFailureCarriesNvmlsOwnMessage) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, "init_error code=9\n");
  try {
    open_nvml_gpus(fake.library_path);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kDriver);
    EXPECT_NE(std::string(e.what()).find("Driver Not Loaded"), std::string::npos) << e.what();
  }
}

TEST(NvmlTest, OldDriverWithoutEnergyCounterDisablesOnlyThat) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, "device name=\"Tesla P100\" power_w=200\n", /*old_driver=*/true);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  ASSERT_EQ(devices.gpus.size(), 1u);
  Gpu& gpu = *devices.gpus[0];
  EXPECT_FALSE(gpu.has_energy_counter());
  EXPECT_EQ(gpu.architecture(), "unknown");
  EXPECT_EQ(gpu.power_mw(), 200'000u);
  const std::vector<std::string> expected_missing = {"nvmlDeviceGetArchitecture",
                                                     "nvmlDeviceGetTotalEnergyConsumption",
                                                     "nvmlDeviceGetFieldValues", "nvmlDeviceGetSamples",
                                                     "nvmlDeviceGetCurrentClocksEventReasons",
                                                     "nvmlDeviceSetGpuLockedClocks",
                                                     "nvmlDeviceResetGpuLockedClocks",
                                                     "nvmlDeviceSetMemoryLockedClocks",
                                                     "nvmlDeviceResetMemoryLockedClocks"};
  EXPECT_EQ(devices.missing_functions, expected_missing);
  try {
    gpu.total_energy_mj();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNotSupported);
    EXPECT_NE(std::string(e.what()).find("does not export nvmlDeviceGetTotalEnergyConsumption"), std::string::npos);
  }
}

TEST(NvmlTest, PreVoltaGpuFallsBackToIntegratingPower) {
  TempDir tmp;
  // arch 4 = Pascal: the driver has the function but the GPU has no counter.
  const auto fake = use_fake_nvml(tmp, "device name=\"Tesla P100\" arch=4 power_w=200 energy_call_ms=50\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  EXPECT_FALSE(devices.gpus[0]->has_energy_counter());
  SamplerOptions options;
  options.interval_s = 0.01;
  Monitor monitor(devices.gpus, {}, SteadyClock::instance(), {options, {}});
  monitor.begin_window("w");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Measurement m = monitor.end_window("w");
  EXPECT_NEAR(m.gpu_energy_j[0], 200.0 * m.elapsed_s, 0.02 * 200.0 * m.elapsed_s);
  EXPECT_EQ(monitor.sampler().stats().counter_reads, 0u);
}

// Anchor reads planned after a window's end never come once the monitor
// stops: the window then settles with what there is, without waiting.
TEST(NvmlTest, AWindowEndedRightBeforeStopSettlesAfterIt) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300 sample_ms=20 "
                                       "sample_buffer=120 sample_prefill=1 energy_update_ms=100 energy_call_ms=4\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  Monitor monitor(devices.gpus, {}, SteadyClock::instance());
  monitor.begin_window("first");  // finds the counter's steps
  monitor.end_window("first");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  monitor.begin_window("w");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Measurement m = monitor.end_window("w");
  monitor.stop();  // before the read after the end's step
  const Measurement after = monitor.refresh(m);
  EXPECT_TRUE(after.settled);
  EXPECT_NEAR(after.gpu_energy_j[0], 300.0 * after.elapsed_s, 0.6);  // the 20 ms samples, uncalibrated
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(monitor.settle(m, 2.0).settled);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
}

TEST(NvmlTest, SetLimitReachesTheDriverAndOutOfRangeNeverDoes) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kTwoH100s);
  {
    NvmlDevices devices = open_nvml_gpus(fake.library_path);
    Gpu& gpu = *devices.gpus[0];
    gpu.set_power_limit_mw(250'000);
    EXPECT_EQ(gpu.power_limit_mw(), 250'000u);
    EXPECT_THROW(gpu.set_power_limit_mw(150'000), DeviceError);
    EXPECT_THROW(gpu.set_power_limit_mw(800'000), DeviceError);
    gpu.restore_default_power_limit();
    EXPECT_EQ(gpu.power_limit_mw(), 700'000u);
  }
  const std::vector<std::string> expected = {
      "nvmlDeviceSetPowerManagementLimit device=0 limit_mw=250000",
      "nvmlDeviceSetPowerManagementLimit device=0 limit_mw=700000",
  };
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

// The power cap's clock-event reason, through the name drivers since 535 give
// it and through the older name where only that one is exported.
TEST(NvmlTest, AtPowerCapFollowsTheLimitInForceOnNewAndOldDrivers) {
  for (const bool old_driver : {false, true}) {
    SCOPED_TRACE(old_driver ? "old driver" : "driver 580");
    TempDir tmp;
    const auto fake = use_fake_nvml(tmp, "device power_w=560 min_limit_w=200 max_limit_w=700\n"
                                         "device power_w=900 min_limit_w=200 max_limit_w=700\n", old_driver);
    NvmlDevices devices = open_nvml_gpus(fake.library_path);
    Gpu& drawing_560_w = *devices.gpus[0];
    EXPECT_FALSE(drawing_560_w.at_power_cap());
    EXPECT_TRUE(devices.gpus[1]->at_power_cap());  // wants 900 W under a 700 W limit
    drawing_560_w.set_power_limit_mw(300'000);
    EXPECT_TRUE(drawing_560_w.at_power_cap());
    EXPECT_EQ(drawing_560_w.power_mw(), 300'000u);
    drawing_560_w.restore_default_power_limit();
    EXPECT_FALSE(drawing_560_w.at_power_cap());
  }
}

TEST(NvmlTest, AnInjectedClockEventReasonsErrorIsTyped) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, "device power_w=560\n"
                                       "error function=nvmlDeviceGetCurrentClocksEventReasons device=0 code=3\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  try {
    devices.gpus[0]->at_power_cap();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNotSupported);
    EXPECT_NE(std::string(e.what()).find("nvmlDeviceGetCurrentClocksEventReasons"), std::string::npos);
  }
}

constexpr const char* kClockedH100 =
    "device name=\"NVIDIA H100 80GB HBM3\" power_w=560 max_limit_w=700 idle_w=70 max_sm_mhz=1980 min_sm_mhz=210 sm_step_mhz=15 "
    "mem_clocks_mhz=1593,2619\n";

TEST(NvmlTest, ListsSupportedClocksAscendingFromTheDriversHighestFirstLists) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kClockedH100);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  Gpu& gpu = *devices.gpus[0];
  EXPECT_EQ(gpu.supported_clocks_mhz(ClockDomain::kMemory), (std::vector<uint32_t>{1593, 2619}));
  const auto sm = gpu.supported_clocks_mhz(ClockDomain::kSm);  // 119 clocks: more than the first buffer holds
  ASSERT_EQ(sm.size(), 119u);
  EXPECT_EQ(sm.front(), 210u);
  EXPECT_EQ(sm.back(), 1980u);
  EXPECT_TRUE(std::is_sorted(sm.begin(), sm.end()));
  EXPECT_EQ(gpu.sm_clock_mhz(), 1980u);
  EXPECT_EQ(gpu.memory_clock_mhz(), 2619u);
}

TEST(NvmlTest, ClockLocksReachTheDriverHoldTheClocksAndOutOfRangeNeverDoes) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kClockedH100);
  {
    NvmlDevices devices = open_nvml_gpus(fake.library_path);
    Gpu& gpu = *devices.gpus[0];
    EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kSm));
    const uint32_t uncapped_mw = gpu.power_mw();
    gpu.lock_clock_mhz(ClockDomain::kSm, clock_cap_lock(gpu, ClockDomain::kSm, 990));
    EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), (ClockLock{210, 990}));
    EXPECT_EQ(gpu.sm_clock_mhz(), 990u);  // read back from the driver
    // Half the SM clock: the power above idle falls to an eighth.
    EXPECT_NEAR(gpu.power_mw(), 70'000 + (uncapped_mw - 70'000) / 8.0, 1'000);
    gpu.lock_clock_mhz(ClockDomain::kMemory, {1593, 1593});
    EXPECT_EQ(gpu.memory_clock_mhz(), 1593u);
    EXPECT_THROW(gpu.lock_clock_mhz(ClockDomain::kSm, {210, 2100}), DeviceError);
    EXPECT_THROW(gpu.lock_clock_mhz(ClockDomain::kSm, {1500, 1200}), DeviceError);
    EXPECT_THROW(gpu.lock_clock_mhz(ClockDomain::kMemory, {1000, 1593}), DeviceError);
    EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), (ClockLock{210, 990}));
    gpu.reset_clock_lock(ClockDomain::kSm);
    gpu.reset_clock_lock(ClockDomain::kMemory);
    EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kSm));
    EXPECT_EQ(gpu.sm_clock_mhz(), 1980u);
    EXPECT_EQ(gpu.memory_clock_mhz(), 2619u);
    EXPECT_NEAR(gpu.power_mw(), uncapped_mw, 1'000);
  }
  const std::vector<std::string> expected = {
      "nvmlDeviceSetGpuLockedClocks device=0 min_mhz=210 max_mhz=990",
      "nvmlDeviceSetMemoryLockedClocks device=0 min_mhz=1593 max_mhz=1593",
      "nvmlDeviceResetGpuLockedClocks device=0",
      "nvmlDeviceResetMemoryLockedClocks device=0",
  };
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

TEST(NvmlTest, AnOldDriverCapsTheSmClockWithApplicationClocks) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kClockedH100, /*old_driver=*/true);
  {
    NvmlDevices devices = open_nvml_gpus(fake.library_path);
    Gpu& gpu = *devices.gpus[0];
    gpu.lock_clock_mhz(ClockDomain::kSm, {210, 1000});  // 1000 is not a supported clock: 990 is the one below
    EXPECT_EQ(gpu.sm_clock_mhz(), 990u);
    try {
      gpu.lock_clock_mhz(ClockDomain::kMemory, {1593, 1593});
      FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_EQ(e.code(), DeviceErrc::kNotSupported);
      EXPECT_NE(std::string(e.what()).find("nvmlDeviceSetMemoryLockedClocks"), std::string::npos) << e.what();
    }
    gpu.reset_clock_lock(ClockDomain::kSm);
    EXPECT_EQ(gpu.sm_clock_mhz(), 1980u);
  }
  const std::vector<std::string> expected = {
      "nvmlDeviceSetApplicationsClocks device=0 mem_mhz=2619 sm_mhz=990",
      "nvmlDeviceResetApplicationsClocks device=0",
  };
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

TEST(NvmlTest, AGpuWithoutClockControlSaysSoInTheDriversWords) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, std::string("device power_w=300 max_sm_mhz=1410 clocks=0\n") +
                                           "error function=nvmlDeviceResetGpuLockedClocks code=4\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  Gpu& gpu = *devices.gpus[0];
  try {
    gpu.lock_clock_mhz(ClockDomain::kSm, {210, 1200});
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNotSupported);
    EXPECT_NE(std::string(e.what()).find("gpu0: nvmlDeviceSetGpuLockedClocks failed"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kSm));
  try {
    gpu.reset_clock_lock(ClockDomain::kSm);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNoPermission);
  }
}

TEST(NvmlTest, ClockLocksPersistAcrossProcessesLikeTheGpuKeepsThem) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, std::string(kClockedH100) + "persist " + tmp.file("settings") + "\n");
  {
    NvmlDevices devices = open_nvml_gpus(fake.library_path);
    devices.gpus[0]->lock_clock_mhz(ClockDomain::kSm, {210, 1200});
  }
  // Stands in for a new process: the fake reads its config and settings again at the next first init.
  NvmlDevices again = open_nvml_gpus(fake.library_path);
  EXPECT_EQ(again.gpus[0]->sm_clock_mhz(), 1200u);
  EXPECT_FALSE(again.gpus[0]->clock_lock_mhz(ClockDomain::kSm));  // a new process does not know who locked it
  again.gpus[0]->reset_clock_lock(ClockDomain::kSm);
  EXPECT_EQ(again.gpus[0]->sm_clock_mhz(), 1980u);
}

TEST(NvmlTest, ClockSettingsSlowTheFakesStandInWork) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, kClockedH100);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  using SpeedFn = double (*)(unsigned);
  void* handle = dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  const auto speed = reinterpret_cast<SpeedFn>(dlsym(handle, "joule_fake_nvml_relative_speed"));
  ASSERT_NE(speed, nullptr);
  EXPECT_DOUBLE_EQ(speed(0), 1.0);
  devices.gpus[0]->lock_clock_mhz(ClockDomain::kSm, {210, 990});
  EXPECT_DOUBLE_EQ(speed(0), 0.5);
  devices.gpus[0]->lock_clock_mhz(ClockDomain::kMemory, {1593, 1593});
  EXPECT_NEAR(speed(0), 1.0 / (2.0 + 0.2 * (2619.0 / 1593.0 - 1.0)), 1e-12);
  EXPECT_DOUBLE_EQ(speed(1), -1.0);
  dlclose(handle);
}

TEST(NvmlTest, NoPermissionIsTypedAndWorded) {
  TempDir tmp;
  const auto fake = use_fake_nvml(
      tmp, std::string(kTwoH100s) + "error function=nvmlDeviceSetPowerManagementLimit code=4\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  try {
    devices.gpus[1]->set_power_limit_mw(300'000);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNoPermission);
    EXPECT_NE(std::string(e.what()).find("gpu1: nvmlDeviceSetPowerManagementLimit failed: Insufficient Permissions"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(devices.gpus[1]->power_limit_mw(), 500'000u);
}

TEST(NvmlTest, GpuLostMidRunStopsItsEnergyAndSaysSo) {
  TempDir tmp;
  // gpu1 answers for 250 ms, then every call fails as a lost GPU does.
  const auto fake = use_fake_nvml(tmp, std::string(kTwoH100s) + "error function=* device=1 code=15 after_ms=250\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  SamplerOptions options;
  options.interval_s = 0.01;
  Monitor monitor(devices.gpus, {}, SteadyClock::instance(), {options, {}});
  monitor.begin_window("run");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const Measurement m = monitor.end_window("run");
  // gpu0 kept going; gpu1's energy covers only the time before the loss.
  EXPECT_NEAR(m.gpu_energy_j[0], 350.0 * m.elapsed_s, 0.03 * 350.0 * m.elapsed_s);
  EXPECT_GT(m.gpu_energy_j[1], 120.0 * 0.15);
  EXPECT_LT(m.gpu_energy_j[1], 120.0 * 0.35);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("gpu1"), std::string::npos);
  EXPECT_NE(m.warnings[0].find("GPU is lost"), std::string::npos) << m.warnings[0];
}

TEST(NvmlErrorTest, ReturnCodesMapToTypedErrors) {
  TempDir tmp;
  const auto fake = use_fake_nvml(
      tmp, std::string(kTwoH100s) + "error function=nvmlDeviceGetTemperature device=0 code=3\n" +
               "error function=nvmlDeviceGetClockInfo device=0 code=999\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  try {
    devices.gpus[0]->temperature_c();
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kNotSupported);
  }
  try {
    devices.gpus[0]->sm_clock_mhz();
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kUnknown);
    EXPECT_NE(std::string(e.what()).find("Unknown Error"), std::string::npos);
  }
  EXPECT_EQ(devices.gpus[1]->temperature_c(), 40u);  // the other GPU is unaffected
}

}  // namespace
}  // namespace joule
