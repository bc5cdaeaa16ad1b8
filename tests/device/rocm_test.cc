// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The ROCm SMI backend against the fake librocm_smi64.so.1, loaded through
// dlopen exactly as the real library would be. Most tests run the fake on its
// virtual clock, so every reading is known exactly.
#include "joule/device/rocm.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.h"
#include "device/rocm/rocm_gpu.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::use_fake_rocm_smi;

// Moves the fake's virtual clock (its config says "clock virtual").
void set_fake_time_s(const std::string& library_path, double seconds) {
  void* handle = dlopen(library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr) << "the fake is not loaded";
  auto set_time = reinterpret_cast<void (*)(double)>(dlsym(handle, "joule_fake_rocm_smi_set_time_s"));
  ASSERT_NE(set_time, nullptr);
  set_time(seconds);
  dlclose(handle);
}

// The DeviceError a call throws (fails the test when it throws none).
template <typename Call>
DeviceError error_of(Call call) {
  try {
    call();
  } catch (const DeviceError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a DeviceError";
  return DeviceError(DeviceErrc::kUnknown, "none thrown");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const CapabilityStatus& status_of(const std::vector<CapabilityStatus>& all, GpuCapability capability) {
  return *std::find_if(all.begin(), all.end(), [&](const CapabilityStatus& s) { return s.capability == capability; });
}

// An MI250X GCD (average power only) and an MI300X (current socket power,
// no edge sensor), on the fake's virtual clock.
constexpr const char* kMi250xAndMi300x = R"(
clock virtual
device name="AMD Instinct MI250X" power_w=300 limit_w=500 min_limit_w=100 max_limit_w=560 default_limit_w=560 util_gpu=87 util_mem=41 temp_c=48 junction_temp_c=61 mem_used_mib=2048 unique_id=0x1234abcd pci=0000:c1:00.0 sys_clocks_mhz=500,800,1700 mem_clocks_mhz=1600 current_socket_power=0
device name="AMD Instinct MI300X" power_w=120 edge_temp=0 junction_temp_c=70 sys_clocks_mhz=500,1300,2100 mem_clocks_mhz=900,1300
)";

TEST(RocmTest, ReadsEveryValueInJoulesUnits) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, kMi250xAndMi300x);
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  ASSERT_EQ(devices.gpus.size(), 2u);
  EXPECT_EQ(devices.library_path, fake.library_path);
  EXPECT_EQ(devices.library_version, "5.2.3");
  EXPECT_TRUE(devices.missing_functions.empty()) << devices.missing_functions.front();
  Gpu& gpu = *devices.gpus[0];
  EXPECT_EQ(gpu.index(), 0u);
  EXPECT_EQ(gpu.name(), "AMD Instinct MI250X");
  EXPECT_EQ(gpu.architecture(), "CDNA2");
  EXPECT_EQ(gpu.uuid(), "0x000000001234abcd");
  EXPECT_EQ(gpu.pci_bus_id(), "0000:C1:00.0");
  EXPECT_EQ(gpu.backend(), "rocm");
  EXPECT_FALSE(gpu.simulated());
  EXPECT_TRUE(gpu.has_energy_counter());
  EXPECT_FALSE(gpu.has_power_samples());
  EXPECT_EQ(gpu.power_reading_source(), "average power");
  EXPECT_EQ(gpu.power_mw(), 300'000u);  // uW from the library
  EXPECT_EQ(gpu.power_limit_mw(), 500'000u);
  EXPECT_EQ(gpu.default_power_limit_mw(), 560'000u);
  EXPECT_EQ(gpu.power_limit_range_mw().min_mw, 100'000u);
  EXPECT_EQ(gpu.power_limit_range_mw().max_mw, 560'000u);
  EXPECT_EQ(gpu.utilization().gpu_percent, 87u);
  EXPECT_EQ(gpu.utilization().memory_percent, 41u);
  EXPECT_EQ(gpu.sm_clock_mhz(), 1700u);      // the current level, Hz -> MHz
  EXPECT_EQ(gpu.memory_clock_mhz(), 1600u);
  EXPECT_EQ(gpu.temperature_c(), 61u);       // junction, not edge (48)
  EXPECT_EQ(gpu.memory_used_bytes(), 2048ull << 20);
  EXPECT_EQ(gpu.label(), "gpu0 AMD Instinct MI250X");

  Gpu& mi300x = *devices.gpus[1];
  EXPECT_EQ(mi300x.index(), 1u);
  EXPECT_EQ(mi300x.architecture(), "CDNA3");
  EXPECT_EQ(mi300x.pci_bus_id(), "0000:19:00.0");  // the fake's default: bus 0x18 + index
  EXPECT_EQ(mi300x.temperature_c(), 70u);
  EXPECT_EQ(mi300x.power_mw(), 120'000u);
  auto& rocm = dynamic_cast<rocm::RocmGpu&>(mi300x);
  EXPECT_EQ(rocm.socket_power_mw(), 120'000u);
  EXPECT_EQ(rocm.device_index(), 1u);
}

TEST(RocmTest, NumbersItsGpusAfterTheOnesAlreadyFound) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, kMi250xAndMi300x);
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path, 3);
  ASSERT_EQ(devices.gpus.size(), 2u);
  EXPECT_EQ(devices.gpus[0]->index(), 3u);
  EXPECT_EQ(devices.gpus[1]->index(), 4u);
  // Each still reads its own device (ROCm SMI's indices 0 and 1).
  EXPECT_EQ(devices.gpus[1]->name(), "AMD Instinct MI300X");
  EXPECT_EQ(devices.gpus[1]->power_mw(), 120'000u);
  const DeviceError e = error_of([&] { devices.gpus[1]->lock_clock_mhz(ClockDomain::kSm, {100, 200}); });
  EXPECT_TRUE(contains(e.what(), "gpu4")) << e.what();
}

TEST(RocmTest, EnergyIsCounterTicksTimesTheirResolution) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=300 energy_update_ms=100\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  auto& gpu = dynamic_cast<rocm::RocmGpu&>(*devices.gpus[0]);
  EXPECT_EQ(gpu.total_energy_mj(), 0u);
  EXPECT_NEAR(gpu.energy_resolution_uj(), 15.3, 1e-5);
  set_fake_time_s(fake.library_path, 10.0);
  // 3000 J in whole 15.3 uJ ticks: within a tick (and the mJ rounding) of 3000 J.
  const uint64_t at_10_s = gpu.total_energy_mj();
  EXPECT_NEAR(static_cast<double>(at_10_s), 3'000'000.0, 1.0);
  // The counter steps every 100 ms: 60 ms on, it has not moved.
  set_fake_time_s(fake.library_path, 10.06);
  EXPECT_EQ(gpu.total_energy_mj(), at_10_s);
  set_fake_time_s(fake.library_path, 10.1);
  EXPECT_NEAR(static_cast<double>(gpu.total_energy_mj()), 3'030'000.0, 1.0);
}

TEST(RocmTest, ACoarserResolutionIsUsedAsTheLibraryReportsIt) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=250 energy_resolution_uj=1000\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  auto& gpu = dynamic_cast<rocm::RocmGpu&>(*devices.gpus[0]);
  set_fake_time_s(fake.library_path, 2.0);
  EXPECT_EQ(gpu.total_energy_mj(), 500'000u);  // 500 J in 1 mJ ticks, exactly
  EXPECT_EQ(gpu.energy_resolution_uj(), 1000.0);
}

TEST(RocmTest, AThirtyTwoBitCounterWrapsAndTheTotalCountsOn) {
  TempDir tmp;
  // 2^32 ticks of 15.3 uJ = 65.7 kJ: a wrap every ~88 s at 750 W.
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=750 counter_bits=32\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  Gpu& gpu = *devices.gpus[0];
  uint64_t previous_mj = gpu.total_energy_mj();
  for (int t_s = 20; t_s <= 400; t_s += 20) {
    set_fake_time_s(fake.library_path, t_s);
    const uint64_t total_mj = gpu.total_energy_mj();
    EXPECT_NEAR(static_cast<double>(total_mj), 750'000.0 * t_s, 1.0) << "at " << t_s << " s";
    EXPECT_GT(total_mj, previous_mj);
    previous_mj = total_mj;
  }
}

TEST(RocmTest, ARestartGoesBackAsNvmlsCounterDoes) {
  for (const int bits : {64, 32}) {
    TempDir tmp;
    const auto fake = use_fake_rocm_smi(
        tmp, "clock virtual\ndevice power_w=300 counter_bits=" + std::to_string(bits) + " energy_reset_ms=5000\n");
    RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
    Gpu& gpu = *devices.gpus[0];
    set_fake_time_s(fake.library_path, 4.0);
    EXPECT_NEAR(static_cast<double>(gpu.total_energy_mj()), 1'200'000.0, 1.0) << bits;
    // Restarted at 5 s: 300 J since. Even a 32-bit counter's drop is no wrap:
    // up to 2^32 would claim ~64 kJ in 2 s, far beyond the GPU's 750 W.
    set_fake_time_s(fake.library_path, 6.0);
    EXPECT_NEAR(static_cast<double>(gpu.total_energy_mj()), 300'000.0, 1.0) << bits;
  }
}

TEST(RocmTest, ACounterDropIsAWrapOnlyWhereOneCouldHaveHappened) {
  using rocm::classify_counter_drop;
  using rocm::CounterDrop;
  constexpr uint64_t k32 = uint64_t{1} << 32;
  // Near 2^32, then small: 1500 ticks (23 mJ) in 1 s.
  EXPECT_EQ(classify_counter_drop(k32 - 1000, 500, 1.0, 15.3, 1500.0), CounterDrop::kWrap);
  // Past 32 bits, the counter is 64 bits wide: it never wraps.
  EXPECT_EQ(classify_counter_drop(k32 + 10, 5, 1.0, 15.3, 1500.0), CounterDrop::kRestart);
  // Small, then smaller: a wrap would mean 65 kJ in 2 s.
  EXPECT_EQ(classify_counter_drop(1'000'000, 10, 2.0, 15.3, 1500.0), CounterDrop::kRestart);
  // ... which is possible in a minute at 1.5 kW.
  EXPECT_EQ(classify_counter_drop(1'000'000, 10, 60.0, 15.3, 1500.0), CounterDrop::kWrap);
  // Time unknown: a counter that fits in 32 bits is taken to have wrapped.
  EXPECT_EQ(classify_counter_drop(1'000'000, 10, 0.0, 15.3, 1500.0), CounterDrop::kWrap);
}

TEST(RocmTest, AveragePowerIsTheFirmwaresMeanAndSocketPowerThePointValue) {
  TempDir tmp;
  // 300 W and 500 W alternating every 100 ms; the average over the last second.
  const auto fake =
      use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=300 pulse_w=500 pulse_period_ms=200 power_ave_window_ms=1000\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  auto& gpu = dynamic_cast<rocm::RocmGpu&>(*devices.gpus[0]);
  set_fake_time_s(fake.library_path, 2.15);
  EXPECT_NEAR(gpu.power_mw(), 400'000.0, 1.0);
  EXPECT_NEAR(gpu.average_power_mw(), 400'000.0, 1.0);
  EXPECT_EQ(gpu.socket_power_mw(), 500'000u);
  set_fake_time_s(fake.library_path, 2.05);
  EXPECT_EQ(gpu.socket_power_mw(), 300'000u);
  EXPECT_TRUE(status_of(gpu.probe_capabilities(), GpuCapability::kInstantPower).available);
}

TEST(RocmTest, AGpuWithoutAnAverageIsReadThroughItsSocketPower) {
  TempDir tmp;
  // An MI300X under ROCm 6: no average power, the current socket power only.
  const auto fake = use_fake_rocm_smi(
      tmp, "clock virtual\ndevice power_w=420\nerror function=rsmi_dev_power_ave_get device=0 code=2\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  Gpu& gpu = *devices.gpus[0];
  EXPECT_EQ(gpu.power_reading_source(), "current socket power");
  EXPECT_EQ(gpu.power_mw(), 420'000u);
  const auto probe = gpu.probe_capabilities();
  EXPECT_FALSE(status_of(probe, GpuCapability::kPowerUsage).available);
  EXPECT_TRUE(contains(status_of(probe, GpuCapability::kPowerUsage).reason, "RSMI_STATUS_NOT_SUPPORTED"));
  EXPECT_TRUE(status_of(probe, GpuCapability::kInstantPower).available);
}

TEST(RocmTest, AnOldLibraryWithoutSocketPowerDisablesOnlyThat) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=300\n", /*old_library=*/true);
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  EXPECT_EQ(devices.missing_functions, std::vector<std::string>{"rsmi_dev_current_socket_power_get"});
  Gpu& gpu = *devices.gpus[0];
  EXPECT_EQ(gpu.power_mw(), 300'000u);
  for (const auto& status : gpu.probe_capabilities()) {
    if (status.capability == GpuCapability::kInstantPower) {
      EXPECT_FALSE(status.available);
      EXPECT_TRUE(contains(status.reason, "does not export rsmi_dev_current_socket_power_get")) << status.reason;
    } else if (status.capability != GpuCapability::kPowerSamples) {
      EXPECT_TRUE(status.available) << to_string(status.capability) << ": " << status.reason;
    }
  }
}

TEST(RocmTest, ProbeSaysWhatWorksAndWhyNot) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, kMi250xAndMi300x);
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  for (const auto& status : devices.gpus[0]->probe_capabilities()) {
    if (status.capability == GpuCapability::kInstantPower) {  // an MI250X has no current socket power
      EXPECT_FALSE(status.available);
      EXPECT_TRUE(contains(status.reason, "rsmi_dev_current_socket_power_get failed")) << status.reason;
      EXPECT_TRUE(contains(status.reason, "not supported")) << status.reason;
    } else if (status.capability == GpuCapability::kPowerSamples) {
      EXPECT_FALSE(status.available);
      EXPECT_TRUE(contains(status.reason, "no buffer")) << status.reason;
    } else {
      EXPECT_TRUE(status.available) << to_string(status.capability) << ": " << status.reason;
    }
  }
  EXPECT_EQ(devices.gpus[0]->probe_capabilities().size(), std::size(kAllGpuCapabilities));
}

TEST(RocmTest, CapsAreSetInMicrowattsAndOutOfRangeNeverReachesTheLibrary) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, kMi250xAndMi300x);
  {
    RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
    Gpu& gpu = *devices.gpus[0];
    gpu.set_power_limit_mw(400'000);
    EXPECT_EQ(gpu.power_limit_mw(), 400'000u);
    for (const uint32_t refused_mw : {50'000u, 99'999u, 560'001u, 900'000u}) {
      const DeviceError e = error_of([&] { gpu.set_power_limit_mw(refused_mw); });
      EXPECT_EQ(e.code(), DeviceErrc::kInvalidArgument);
      EXPECT_TRUE(contains(e.what(), "outside the allowed range 100.0-560.0 W")) << e.what();
    }
    EXPECT_EQ(gpu.power_limit_mw(), 400'000u);
    gpu.restore_default_power_limit();
    EXPECT_EQ(gpu.power_limit_mw(), 560'000u);
  }
  const std::vector<std::string> expected = {
      "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=400000000",
      "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=560000000",
  };
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

TEST(RocmTest, ACapRefusedForWantOfRootIsTypedAndWorded) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=300 settable=0\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  const DeviceError e = error_of([&] { devices.gpus[0]->set_power_limit_mw(400'000); });
  EXPECT_EQ(e.code(), DeviceErrc::kNoPermission);
  EXPECT_TRUE(contains(e.what(), "gpu0: rsmi_dev_power_cap_set failed: RSMI_STATUS_PERMISSION")) << e.what();
  EXPECT_EQ(devices.gpus[0]->power_limit_mw(), 750'000u);
}

TEST(RocmTest, ClocksAreLockedAsTheLevelsWithinTheRangeAndResetToAuto) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(
      tmp, "clock virtual\ndevice power_w=600 idle_w=100 sys_clocks_mhz=500,800,1300,1700 mem_clocks_mhz=900,1600\n");
  {
    RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
    Gpu& gpu = *devices.gpus[0];
    EXPECT_EQ(gpu.supported_clocks_mhz(ClockDomain::kSm), (std::vector<uint32_t>{500, 800, 1300, 1700}));
    EXPECT_EQ(gpu.supported_clocks_mhz(ClockDomain::kMemory), (std::vector<uint32_t>{900, 1600}));
    const uint32_t unlocked_mw = gpu.power_mw();
    // A cap at 1000 MHz: the levels 500 and 800 (bits 0 and 1).
    gpu.lock_clock_mhz(ClockDomain::kSm, clock_cap_lock(gpu, ClockDomain::kSm, 1000));
    EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), (ClockLock{500, 1000}));
    EXPECT_EQ(gpu.sm_clock_mhz(), 800u);
    EXPECT_LT(gpu.power_mw(), unlocked_mw);
    gpu.lock_clock_mhz(ClockDomain::kMemory, {900, 900});
    EXPECT_EQ(gpu.memory_clock_mhz(), 900u);
    // Refused before any call: outside the levels, empty, or holding no level.
    for (const ClockLock refused : {ClockLock{400, 800}, ClockLock{500, 1800}, ClockLock{1300, 800},
                                    ClockLock{900, 1200}}) {
      const DeviceError e = error_of([&] { gpu.lock_clock_mhz(ClockDomain::kSm, refused); });
      EXPECT_EQ(e.code(), DeviceErrc::kInvalidArgument) << e.what();
    }
    EXPECT_TRUE(contains(error_of([&] { gpu.lock_clock_mhz(ClockDomain::kSm, {900, 1200}); }).what(),
                         "holds none of the supported levels"));
    // Back to auto frees both domains; the memory lock still held is applied again.
    gpu.reset_clock_lock(ClockDomain::kSm);
    EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kSm));
    EXPECT_EQ(gpu.sm_clock_mhz(), 1700u);
    EXPECT_EQ(gpu.memory_clock_mhz(), 900u);
    gpu.reset_clock_lock(ClockDomain::kMemory);
    EXPECT_EQ(gpu.memory_clock_mhz(), 1600u);
    EXPECT_NEAR(gpu.power_mw(), unlocked_mw, 1.0);
  }
  const std::vector<std::string> expected = {
      "rsmi_dev_perf_level_set device=0 level=manual",
      "rsmi_dev_gpu_clk_freq_set device=0 clk=sys mask=0x3",
      "rsmi_dev_perf_level_set device=0 level=manual",
      "rsmi_dev_gpu_clk_freq_set device=0 clk=mem mask=0x1",
      "rsmi_dev_perf_level_set device=0 level=auto",
      "rsmi_dev_perf_level_set device=0 level=manual",
      "rsmi_dev_gpu_clk_freq_set device=0 clk=mem mask=0x1",
      "rsmi_dev_perf_level_set device=0 level=auto",
  };
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

TEST(RocmTest, ListsEachGpusProcessesWithTheMemoryKnownToBeOnIt) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, std::string(kMi250xAndMi300x) +
                                               "process device=0 pid=4242 used_mib=512\n"
                                               "process device=0 pid=77 used_mib=100\n"
                                               "process device=1 pid=77 used_mib=300\n"
                                               "process device=1 pid=99 used_mib=64\n"
                                               "process device=1 pid=5 used_mib=1 start_ms=1000\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  // pid 77 uses both GPUs: the library gives its VRAM over both, so none per GPU.
  EXPECT_EQ(devices.gpus[0]->running_processes(),
            (std::vector<GpuProcess>{{77, std::nullopt}, {4242, 512ull << 20}}));
  EXPECT_EQ(devices.gpus[1]->running_processes(), (std::vector<GpuProcess>{{77, std::nullopt}, {99, 64ull << 20}}));
  set_fake_time_s(fake.library_path, 2.0);  // pid 5 has started
  EXPECT_EQ(devices.gpus[1]->running_processes().size(), 3u);
}

TEST(RocmTest, ListsMoreProcessesThanItsFirstBufferHolds) {
  TempDir tmp;
  std::string config = "clock virtual\ndevice power_w=300\n";
  for (int pid = 1000; pid < 1040; ++pid) config += "process device=0 pid=" + std::to_string(pid) + " used_mib=1\n";
  const auto fake = use_fake_rocm_smi(tmp, config);
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  const auto processes = devices.gpus[0]->running_processes();
  ASSERT_EQ(processes.size(), 40u);
  EXPECT_EQ(processes.front().pid, 1000u);
  EXPECT_EQ(processes.back().pid, 1039u);
}

TEST(RocmTest, InjectedErrorsMapToTypedErrorsInTheLibrarysWords) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, std::string(kMi250xAndMi300x) +
                                               "error function=rsmi_dev_temp_metric_get device=0 code=2\n"
                                               "error function=rsmi_dev_busy_percent_get device=0 code=4\n"
                                               "error function=rsmi_dev_gpu_clk_freq_get device=0 code=4294967295\n"
                                               "error function=rsmi_dev_memory_usage_get device=0 code=1\n"
                                               "error function=rsmi_compute_process_info_get code=4\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  Gpu& gpu = *devices.gpus[0];
  DeviceError e = error_of([&] { gpu.temperature_c(); });
  EXPECT_EQ(e.code(), DeviceErrc::kNotSupported);
  EXPECT_TRUE(contains(e.what(), "gpu0: rsmi_dev_temp_metric_get failed: RSMI_STATUS_NOT_SUPPORTED")) << e.what();
  e = error_of([&] { gpu.utilization(); });
  EXPECT_EQ(e.code(), DeviceErrc::kNoPermission);
  e = error_of([&] { gpu.sm_clock_mhz(); });
  EXPECT_EQ(e.code(), DeviceErrc::kUnknown);
  EXPECT_TRUE(contains(e.what(), "RSMI_STATUS_UNKNOWN_ERROR")) << e.what();
  EXPECT_EQ(error_of([&] { gpu.supported_clocks_mhz(ClockDomain::kSm); }).code(), DeviceErrc::kUnknown);
  EXPECT_EQ(error_of([&] { gpu.memory_used_bytes(); }).code(), DeviceErrc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { gpu.running_processes(); }).code(), DeviceErrc::kNoPermission);
  // A lock needs the levels first: it fails there, and nothing is set.
  EXPECT_EQ(error_of([&] { gpu.lock_clock_mhz(ClockDomain::kSm, {500, 800}); }).code(), DeviceErrc::kUnknown);
  EXPECT_TRUE(testing::read_lines(fake.log_path).empty());
  const auto probe = gpu.probe_capabilities();
  EXPECT_FALSE(status_of(probe, GpuCapability::kTemperature).available);
  EXPECT_TRUE(contains(status_of(probe, GpuCapability::kTemperature).reason, "not supported"));
  EXPECT_FALSE(status_of(probe, GpuCapability::kUtilization).available);
  EXPECT_TRUE(status_of(probe, GpuCapability::kPowerUsage).available);
  // The other GPU is unaffected.
  EXPECT_EQ(devices.gpus[1]->temperature_c(), 70u);
  EXPECT_EQ(devices.gpus[1]->sm_clock_mhz(), 2100u);
}

TEST(RocmTest, ALostGpuIsTypedAsNvmlsLostGpuIs) {
  TempDir tmp;
  // gpu1 answers for 5 s, then every call fails.
  const auto fake =
      use_fake_rocm_smi(tmp, std::string(kMi250xAndMi300x) + "error function=* device=1 code=10 after_ms=5000\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  Gpu& lost = *devices.gpus[1];
  EXPECT_EQ(lost.power_mw(), 120'000u);
  set_fake_time_s(fake.library_path, 6.0);
  for (const auto& call : std::vector<std::function<void()>>{[&] { lost.power_mw(); },
                                                              [&] { lost.total_energy_mj(); },
                                                              [&] { lost.temperature_c(); }}) {
    const DeviceError e = error_of(call);
    EXPECT_EQ(e.code(), DeviceErrc::kDeviceLost) << e.what();
    EXPECT_TRUE(contains(e.what(), "gpu1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "lost")) << e.what();
  }
  // A call it never answered says only what the library said.
  EXPECT_EQ(error_of([&] { lost.utilization(); }).code(), DeviceErrc::kNotFound);
  EXPECT_NEAR(static_cast<double>(devices.gpus[0]->total_energy_mj()), 300'000.0 * 6, 1.0);
}

TEST(RocmTest, AGpuLostMidRunStopsItsEnergyAndSaysSo) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(
      tmp, "device power_w=350\ndevice power_w=120\nerror function=* device=1 code=10 after_ms=250\n");
  RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
  SamplerOptions options;
  options.interval_s = 0.01;
  Monitor monitor(devices.gpus, {}, SteadyClock::instance(), {options, {}});
  monitor.begin_window("run");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const Measurement m = monitor.end_window("run");
  EXPECT_NEAR(m.gpu_energy_j[0], 350.0 * m.elapsed_s, 0.03 * 350.0 * m.elapsed_s);
  EXPECT_GT(m.gpu_energy_j[1], 120.0 * 0.15);
  EXPECT_LT(m.gpu_energy_j[1], 120.0 * 0.35);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_TRUE(contains(m.warnings[0], "gpu1")) << m.warnings[0];
  EXPECT_TRUE(contains(m.warnings[0], "lost")) << m.warnings[0];
}

TEST(RocmTest, InitFailureCarriesTheLibrarysOwnMessage) {
  TempDir tmp;
  auto fake = use_fake_rocm_smi(tmp, "init_error code=8\ndevice power_w=300\n");
  DeviceError e = error_of([&] { open_rocm_smi_gpus(fake.library_path); });
  EXPECT_EQ(e.code(), DeviceErrc::kDriver);
  EXPECT_TRUE(contains(e.what(), "rsmi_init failed: RSMI_STATUS_INIT_ERROR")) << e.what();
  fake = use_fake_rocm_smi(tmp, "init_error code=4\ndevice power_w=300\n");
  e = error_of([&] { open_rocm_smi_gpus(fake.library_path); });
  EXPECT_EQ(e.code(), DeviceErrc::kNoPermission);
}

TEST(RocmTest, AMissingLibraryIsADriverErrorNamingThePath) {
  const DeviceError e = error_of([] { open_rocm_smi_gpus("/nonexistent/librocm_smi64.so.1"); });
  EXPECT_EQ(e.code(), DeviceErrc::kDriver);
  EXPECT_TRUE(contains(e.what(), "cannot load ROCm SMI library '/nonexistent/librocm_smi64.so.1'")) << e.what();
}

TEST(RocmTest, TheLibraryIsShutDownWhenItsLastGpuGoes) {
  TempDir tmp;
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice power_w=300\n");
  {
    RocmDevices devices = open_rocm_smi_gpus(fake.library_path);
    EXPECT_EQ(devices.gpus[0]->power_mw(), 300'000u);
  }
  // Opened again with another script: a fresh session reads it.
  testing::write_file(fake.config_path, "clock virtual\ndevice power_w=200\ndevice power_w=100\n");
  RocmDevices again = open_rocm_smi_gpus(fake.library_path);
  ASSERT_EQ(again.gpus.size(), 2u);
  EXPECT_EQ(again.gpus[1]->power_mw(), 100'000u);
}

TEST(RocmTest, NamesTellTheArchitectureAndBusIdsAreWrittenAsLinuxDoes) {
  using rocm::architecture_from_name;
  EXPECT_EQ(architecture_from_name("AMD Instinct MI250X"), "CDNA2");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI210"), "CDNA2");
  EXPECT_EQ(architecture_from_name("Aldebaran/MI200 [Instinct MI250X/MI250]"), "CDNA2");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI300X"), "CDNA3");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI325X"), "CDNA3");
  EXPECT_EQ(architecture_from_name("AMD Instinct MI100"), "CDNA");
  EXPECT_EQ(architecture_from_name("AMD Radeon RX 7900 XTX"), "unknown");
  EXPECT_EQ(architecture_from_name("AMD Radeon Pro VII (MI50 class)"), "unknown");
  EXPECT_EQ(architecture_from_name("unknown AMD GPU"), "unknown");
  EXPECT_EQ(rocm::format_pci_bus_id((uint64_t{0} << 32) | (0xc1 << 8) | (0 << 3) | 0), "0000:C1:00.0");
  EXPECT_EQ(rocm::format_pci_bus_id((uint64_t{2} << 32) | (0x0a << 8) | (0x1f << 3) | 7), "0002:0A:1F.7");
}

}  // namespace
}  // namespace joule
