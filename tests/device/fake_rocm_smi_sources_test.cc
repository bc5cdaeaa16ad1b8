// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The fake librocm_smi64.so.1 itself (tests/fake_rocm_smi): its energy
// counter, power sensors, caps, clock levels and perf levels, processes,
// injected errors, hangs and lost devices, set-call log and wall or virtual time.
// The fake's C functions are called directly through dlsym, so these tests
// pin the fake, whatever joule's ROCm backend makes of it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <rocm_smi/rocm_smi.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::use_fake_rocm_smi;
using testing::write_file;

// ROCm 6's function, not in the 5.2 header the fake is built against.
using SocketPowerGet = rsmi_status_t(uint32_t, uint64_t*);

// Loads the fake, writes its config and calls its functions by name;
// rsmi_shut_down at scope exit, so the next test's rsmi_init rereads its
// config even when all tests run in one process.
class FakeRocm {
 public:
  FakeRocm(const TempDir& dir, const std::string& config, bool old_library = false)
      : fake_(use_fake_rocm_smi(dir, config, old_library)) {
    handle_ = dlopen(fake_.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  }
  ~FakeRocm() {
    if (initialised_) shut_down();
    dlclose(handle_);
  }
  FakeRocm(const FakeRocm&) = delete;
  FakeRocm& operator=(const FakeRocm&) = delete;

  void* symbol(const char* name) const { return dlsym(handle_, name); }

  template <typename F>
  F* function(const char* name) const {
    void* found = symbol(name);
    if (found == nullptr) throw std::runtime_error(std::string("the fake does not export ") + name);
    return reinterpret_cast<F*>(found);
  }

  rsmi_status_t init() {
    const rsmi_status_t rc = function<decltype(rsmi_init)>("rsmi_init")(0);
    initialised_ = rc == RSMI_STATUS_SUCCESS;
    return rc;
  }

  void shut_down() {
    function<decltype(rsmi_shut_down)>("rsmi_shut_down")();
    initialised_ = false;
  }

  // Shuts down and initialises again with config: a fresh start at time 0.
  rsmi_status_t restart(const std::string& config) {
    shut_down();
    write_file(fake_.config_path, config);
    return init();
  }

  void set_time_s(double seconds) const { function<void(double)>("joule_fake_rocm_smi_set_time_s")(seconds); }

  struct Energy {
    rsmi_status_t rc = RSMI_STATUS_UNKNOWN_ERROR;
    uint64_t ticks = 0;
    float resolution_uj = 0;
    uint64_t timestamp_ns = 0;
  };
  Energy energy(uint32_t device = 0) const {
    Energy e;
    e.rc = function<decltype(rsmi_dev_energy_count_get)>("rsmi_dev_energy_count_get")(device, &e.ticks,
                                                                                        &e.resolution_uj,
                                                                                        &e.timestamp_ns);
    return e;
  }

  uint64_t power_ave_uw(uint32_t device = 0) const {
    uint64_t uw = 0;
    EXPECT_EQ(function<decltype(rsmi_dev_power_ave_get)>("rsmi_dev_power_ave_get")(device, 0, &uw),
              RSMI_STATUS_SUCCESS);
    return uw;
  }

  rsmi_status_t socket_power(uint32_t device, uint64_t* uw) const {
    return function<SocketPowerGet>("rsmi_dev_current_socket_power_get")(device, uw);
  }

  rsmi_status_t set_cap_uw(uint64_t cap_uw, uint32_t device = 0, uint32_t sensor = 0) const {
    return function<decltype(rsmi_dev_power_cap_set)>("rsmi_dev_power_cap_set")(device, sensor, cap_uw);
  }

  uint64_t cap_uw(uint32_t device = 0) const {
    uint64_t uw = 0;
    EXPECT_EQ(function<decltype(rsmi_dev_power_cap_get)>("rsmi_dev_power_cap_get")(device, 0, &uw),
              RSMI_STATUS_SUCCESS);
    return uw;
  }

  rsmi_frequencies_t clocks(rsmi_clk_type_t type, uint32_t device = 0) const {
    rsmi_frequencies_t f{};
    EXPECT_EQ(function<decltype(rsmi_dev_gpu_clk_freq_get)>("rsmi_dev_gpu_clk_freq_get")(device, type, &f),
              RSMI_STATUS_SUCCESS);
    return f;
  }

  rsmi_status_t set_clock_mask(rsmi_clk_type_t type, uint64_t mask, uint32_t device = 0) const {
    return function<decltype(rsmi_dev_gpu_clk_freq_set)>("rsmi_dev_gpu_clk_freq_set")(device, type, mask);
  }

  rsmi_status_t set_perf_level(rsmi_dev_perf_level_t level, uint32_t device = 0) const {
    return function<decltype(rsmi_dev_perf_level_set)>("rsmi_dev_perf_level_set")(static_cast<int32_t>(device),
                                                                                    level);
  }

  rsmi_dev_perf_level_t perf_level(uint32_t device = 0) const {
    rsmi_dev_perf_level_t level = RSMI_DEV_PERF_LEVEL_UNKNOWN;
    EXPECT_EQ(function<decltype(rsmi_dev_perf_level_get)>("rsmi_dev_perf_level_get")(device, &level),
              RSMI_STATUS_SUCCESS);
    return level;
  }

  double relative_speed(unsigned device = 0) const {
    return function<double(unsigned)>("joule_fake_rocm_smi_relative_speed")(device);
  }

  std::string log() const { return read_file(fake_.log_path); }

 private:
  testing::FakeRocmSmi fake_;
  void* handle_ = nullptr;
  bool initialised_ = false;
};

// Joules the counter reads: ticks times the resolution it reports.
double counted_j(const FakeRocm::Energy& e) { return static_cast<double>(e.ticks) * e.resolution_uj / 1e6; }

TEST(FakeRocmSmiSourcesTest, CounterAdvancesInWholeTicksOfItsResolutionAtEachUpdate) {
  TempDir tmp;
  // 15.25 uJ is exact in a float, so whole joules make whole ticks here.
  FakeRocm fake(tmp, "clock virtual\ndevice power_w=152.5 energy_resolution_uj=15.25 energy_update_ms=10\n"
                     "device power_w=100\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  struct Expected {
    double t_s;
    uint64_t ticks;
    uint64_t timestamp_ns;
  };
  // 152.5 W for 10 ms is 1.525 J: 100000 ticks of 15.25 uJ.
  for (const Expected& e : {Expected{0.0, 0, 0}, Expected{0.005, 0, 0}, Expected{0.01, 100'000, 10'000'000},
                            Expected{0.0199, 100'000, 10'000'000}, Expected{0.02, 200'000, 20'000'000},
                            Expected{1.234, 12'300'000, 1'230'000'000}}) {
    fake.set_time_s(e.t_s);
    const FakeRocm::Energy read = fake.energy(0);
    ASSERT_EQ(read.rc, RSMI_STATUS_SUCCESS);
    EXPECT_EQ(read.ticks, e.ticks) << "at " << e.t_s << " s";
    EXPECT_EQ(read.timestamp_ns, e.timestamp_ns) << "at " << e.t_s << " s";
    EXPECT_EQ(read.resolution_uj, 15.25f);
  }
  // By default a 15.3 uJ tick (as a float: 15.30000019...) updated every
  // 1 ms, and a partial tick is not counted: 100 W for 1 ms is 100000 uJ,
  // 6535.9 ticks.
  fake.set_time_s(0.0015);
  const FakeRocm::Energy read = fake.energy(1);
  EXPECT_EQ(read.resolution_uj, 15.3f);
  EXPECT_EQ(read.ticks, 6535u);
  EXPECT_EQ(read.timestamp_ns, 1'000'000u);
  // Ticks times the resolution reported never exceed the energy and fall
  // short by less than one tick.
  fake.set_time_s(12.3456);
  const double counted = counted_j(fake.energy(1));
  EXPECT_LE(counted, 100.0 * 12.345);
  EXPECT_GT(counted, 100.0 * 12.345 - 15.3e-6);
}

TEST(FakeRocmSmiSourcesTest, ThirtyTwoBitCounterWrapsAndSixtyFourBitDoesNot) {
  TempDir tmp;
  const std::string keys = "power_w=1000 max_limit_w=1000 energy_resolution_uj=1";
  FakeRocm fake(tmp, "clock virtual\ndevice counter_bits=32 " + keys + "\ndevice " + keys + "\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  fake.set_time_s(4.0);  // 4e9 uJ, below 2^32
  EXPECT_EQ(fake.energy(0).ticks, 4'000'000'000u);
  fake.set_time_s(5.0);  // 5e9 uJ: wrapped once at 2^32 = 4294967296
  EXPECT_EQ(fake.energy(0).ticks, 5'000'000'000u - 4'294'967'296u);
  EXPECT_EQ(fake.energy(1).ticks, 5'000'000'000u);
  EXPECT_NE(fake.restart("device counter_bits=48\n"), RSMI_STATUS_SUCCESS);  // only 32 or 64
}

// 100 W for 1 s, then 700 W for 2 s, repeating.
std::string step_device(const TempDir& tmp, const std::string& keys) {
  write_file(tmp.file("step.profile"), "1000 100\n2000 700\n");
  return "device max_limit_w=700 profile_file=" + tmp.file("step.profile") + " " + keys + "\n";
}

TEST(FakeRocmSmiSourcesTest, AveragePowerIsTheTrailingWindowMeanAndSocketPowerThePointValue) {
  TempDir tmp;
  FakeRocm fake(tmp, "clock virtual\n" + step_device(tmp, "power_update_ms=100 power_ave_window_ms=1000"));
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  fake.set_time_s(0.55);
  EXPECT_EQ(fake.power_ave_uw(), 100'000'000u);  // the mean since 0
  // After the step to 700 W at 1 s the mean ramps 60 W per 100 ms tick.
  for (int k = 0; k <= 10; ++k) {
    for (double within_s : {0.0, 0.05, 0.099}) {
      const double t_s = 1.0 + 0.1 * k + within_s;
      fake.set_time_s(t_s);
      EXPECT_EQ(fake.power_ave_uw(), 100'000'000u + 60'000'000u * static_cast<unsigned>(k)) << "at " << t_s;
      uint64_t socket_uw = 0;
      ASSERT_EQ(fake.socket_power(0, &socket_uw), RSMI_STATUS_SUCCESS);
      EXPECT_EQ(socket_uw, 700'000'000u) << "at " << t_s;  // the point value at the tick
    }
  }
  fake.set_time_s(0.999);
  uint64_t socket_uw = 0;
  ASSERT_EQ(fake.socket_power(0, &socket_uw), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(socket_uw, 100'000'000u);
  uint64_t unused = 0;
  EXPECT_EQ(fake.function<decltype(rsmi_dev_power_ave_get)>("rsmi_dev_power_ave_get")(0, 1, &unused),
            RSMI_STATUS_NOT_SUPPORTED);  // sensor 0 only
}

TEST(FakeRocmSmiSourcesTest, SocketPowerOnlyWhereTheDeviceAndTheLibraryHaveIt) {
  TempDir tmp;
  {
    FakeRocm fake(tmp, "device name=\"AMD Instinct MI250X\" current_socket_power=0\ndevice\n");
    ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
    uint64_t uw = 0;
    EXPECT_EQ(fake.socket_power(0, &uw), RSMI_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(fake.socket_power(1, &uw), RSMI_STATUS_SUCCESS);
    EXPECT_EQ(fake.socket_power(1, nullptr), RSMI_STATUS_INVALID_ARGS);
  }
  FakeRocm old(tmp, "device\n", /*old_library=*/true);
  ASSERT_EQ(old.init(), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(old.symbol("rsmi_dev_current_socket_power_get"), nullptr);
  EXPECT_NE(old.symbol("rsmi_dev_power_ave_get"), nullptr);
  EXPECT_EQ(old.energy().rc, RSMI_STATUS_SUCCESS);
}

TEST(FakeRocmSmiSourcesTest, CapsInsideTheRangeTakeEffectAndOthersAreRefusedAndLogged) {
  TempDir tmp;
  FakeRocm fake(tmp,
                "clock virtual\n"
                "device power_w=500 min_limit_w=200 max_limit_w=750 default_limit_w=700 energy_update_ms=0\n"
                "device settable=0\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  uint64_t max_uw = 0, min_uw = 0, default_uw = 0;
  ASSERT_EQ(fake.function<decltype(rsmi_dev_power_cap_range_get)>("rsmi_dev_power_cap_range_get")(0, 0, &max_uw,
                                                                                                    &min_uw),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(max_uw, 750'000'000u);  // max first, as the header orders them
  EXPECT_EQ(min_uw, 200'000'000u);
  ASSERT_EQ(fake.function<decltype(rsmi_dev_power_cap_default_get)>("rsmi_dev_power_cap_default_get")(0, &default_uw),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(default_uw, 700'000'000u);
  EXPECT_EQ(fake.cap_uw(), 700'000'000u);  // the cap in force starts at the default

  EXPECT_EQ(fake.set_cap_uw(750'000'001), RSMI_STATUS_INVALID_ARGS);
  EXPECT_EQ(fake.set_cap_uw(199'999'999), RSMI_STATUS_INVALID_ARGS);
  EXPECT_EQ(fake.set_cap_uw(300'000'000, 0, 1), RSMI_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(fake.set_cap_uw(300'000'000, 1), RSMI_STATUS_PERMISSION);
  EXPECT_EQ(fake.cap_uw(), 700'000'000u);

  fake.set_time_s(1.0);
  ASSERT_EQ(fake.set_cap_uw(300'000'000), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.cap_uw(), 300'000'000u);
  fake.set_time_s(2.0);
  EXPECT_EQ(fake.power_ave_uw(), 300'000'000u);       // the draw is capped from then on
  EXPECT_NEAR(counted_j(fake.energy()), 800.0, 1e-3);  // 500 J, then 300 J: continuous across the change

  EXPECT_EQ(fake.log(),
            "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=750000001 result=invalid\n"
            "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=199999999 result=invalid\n"
            "rsmi_dev_power_cap_set device=0 sensor=1 cap_uw=300000000 result=not_supported\n"
            "rsmi_dev_power_cap_set device=1 sensor=0 cap_uw=300000000 result=permission\n"
            "rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=300000000\n");
}

TEST(FakeRocmSmiSourcesTest, ClockLevelsMasksAndPerfLevelsHoldTheClockAndScaleThePower) {
  TempDir tmp;
  FakeRocm fake(tmp,
                "clock virtual\n"
                "device power_w=500 idle_w=100 max_limit_w=750 sys_clocks_mhz=500,800,1300,1700 "
                "mem_clocks_mhz=900,1300\n"
                "device clocks=0\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  rsmi_frequencies_t sys = fake.clocks(RSMI_CLK_TYPE_SYS);
  ASSERT_EQ(sys.num_supported, 4u);
  EXPECT_EQ(sys.frequency[0], 500'000'000u);  // Hz, lowest first
  EXPECT_EQ(sys.frequency[3], 1'700'000'000u);
  EXPECT_EQ(sys.current, 3u);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_MEM).current, 1u);
  EXPECT_EQ(fake.perf_level(), RSMI_DEV_PERF_LEVEL_AUTO);
  EXPECT_EQ(fake.power_ave_uw(), 500'000'000u);

  // Levels 1 and 2 allowed: the clock runs at 1300 MHz, in manual mode.
  ASSERT_EQ(fake.set_clock_mask(RSMI_CLK_TYPE_SYS, 0b0110), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.perf_level(), RSMI_DEV_PERF_LEVEL_MANUAL);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_SYS).current, 2u);
  const double f = 1300.0 / 1700.0;
  EXPECT_NEAR(static_cast<double>(fake.power_ave_uw()), (100.0 + 400.0 * f * f * f) * 1e6, 1.0);
  EXPECT_NEAR(fake.relative_speed(), f, 1e-12);

  EXPECT_EQ(fake.set_clock_mask(RSMI_CLK_TYPE_SYS, 0b110000), RSMI_STATUS_INVALID_ARGS);  // no level left
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_SYS).current, 2u);
  EXPECT_EQ(fake.set_clock_mask(RSMI_CLK_TYPE_DF, 1), RSMI_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(fake.set_clock_mask(RSMI_CLK_TYPE_SYS, 1, 1), RSMI_STATUS_NOT_SUPPORTED);  // clocks=0

  // A range holds the clock within it; the level reported is the one at or below.
  auto range_set = fake.function<decltype(rsmi_dev_clk_range_set)>("rsmi_dev_clk_range_set");
  EXPECT_EQ(range_set(0, 400, 1000, RSMI_CLK_TYPE_SYS), RSMI_STATUS_INVALID_ARGS);  // below the lowest level
  EXPECT_EQ(range_set(0, 1000, 800, RSMI_CLK_TYPE_SYS), RSMI_STATUS_INVALID_ARGS);
  ASSERT_EQ(range_set(0, 500, 1000, RSMI_CLK_TYPE_SYS), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_SYS).current, 1u);
  EXPECT_NEAR(fake.relative_speed(), 1000.0 / 1700.0, 1e-12);

  // Auto is the reset: every mask and range cleared.
  ASSERT_EQ(fake.set_perf_level(RSMI_DEV_PERF_LEVEL_AUTO), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_SYS).current, 3u);
  EXPECT_EQ(fake.power_ave_uw(), 500'000'000u);
  EXPECT_DOUBLE_EQ(fake.relative_speed(), 1.0);

  ASSERT_EQ(fake.set_perf_level(RSMI_DEV_PERF_LEVEL_LOW), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_SYS).current, 0u);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_MEM).current, 0u);
  EXPECT_EQ(fake.set_perf_level(RSMI_DEV_PERF_LEVEL_STABLE_PEAK), RSMI_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(fake.set_perf_level(static_cast<rsmi_dev_perf_level_t>(RSMI_DEV_PERF_LEVEL_LAST + 1)),
            RSMI_STATUS_INVALID_ARGS);
  EXPECT_EQ(fake.perf_level(), RSMI_DEV_PERF_LEVEL_LOW);

  // A memory mask slows the memory-bound share of the work.
  ASSERT_EQ(fake.set_perf_level(RSMI_DEV_PERF_LEVEL_AUTO), RSMI_STATUS_SUCCESS);
  ASSERT_EQ(fake.set_clock_mask(RSMI_CLK_TYPE_MEM, 0b01), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_MEM).current, 0u);
  EXPECT_LT(fake.relative_speed(), 1.0);

  EXPECT_EQ(fake.log(),
            "rsmi_dev_gpu_clk_freq_set device=0 clk=sys mask=0x6\n"
            "rsmi_dev_gpu_clk_freq_set device=0 clk=sys mask=0x30 result=invalid\n"
            "rsmi_dev_gpu_clk_freq_set device=0 clk=other mask=0x1 result=not_supported\n"
            "rsmi_dev_gpu_clk_freq_set device=1 clk=sys mask=0x1 result=not_supported\n"
            "rsmi_dev_clk_range_set device=0 clk=sys min_mhz=400 max_mhz=1000 result=invalid\n"
            "rsmi_dev_clk_range_set device=0 clk=sys min_mhz=1000 max_mhz=800 result=invalid\n"
            "rsmi_dev_clk_range_set device=0 clk=sys min_mhz=500 max_mhz=1000\n"
            "rsmi_dev_perf_level_set device=0 level=auto\n"
            "rsmi_dev_perf_level_set device=0 level=low\n"
            "rsmi_dev_perf_level_set device=0 level=5 result=not_supported\n"
            "rsmi_dev_perf_level_set device=0 level=9 result=invalid\n"
            "rsmi_dev_perf_level_set device=0 level=auto\n"
            "rsmi_dev_gpu_clk_freq_set device=0 clk=mem mask=0x1\n");
}

TEST(FakeRocmSmiSourcesTest, SettingsPersistAcrossSessionsLikeARealGpusDo) {
  TempDir tmp;
  const std::string config = "persist " + tmp.file("settings") + "\ndevice sys_clocks_mhz=500,1300,2100\n";
  FakeRocm fake(tmp, config);
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  ASSERT_EQ(fake.set_cap_uw(400'000'000), RSMI_STATUS_SUCCESS);
  ASSERT_EQ(fake.set_clock_mask(RSMI_CLK_TYPE_SYS, 0b011), RSMI_STATUS_SUCCESS);
  ASSERT_EQ(fake.restart(config), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.cap_uw(), 400'000'000u);
  EXPECT_EQ(fake.perf_level(), RSMI_DEV_PERF_LEVEL_MANUAL);
  EXPECT_EQ(fake.clocks(RSMI_CLK_TYPE_SYS).current, 1u);
}

TEST(FakeRocmSmiSourcesTest, InjectedErrorsAndLostDevicesFollowCallsAndTheVirtualClock) {
  TempDir tmp;
  FakeRocm fake(tmp,
                "clock virtual\ndevice\ndevice\n"
                "error function=rsmi_dev_power_ave_get device=0 code=2 after_calls=2\n"
                "error function=* device=1 code=10 after_ms=5000\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  auto power_ave = fake.function<decltype(rsmi_dev_power_ave_get)>("rsmi_dev_power_ave_get");
  uint64_t uw = 0;
  EXPECT_EQ(power_ave(0, 0, &uw), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(power_ave(0, 0, &uw), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(power_ave(0, 0, &uw), RSMI_STATUS_NOT_SUPPORTED);  // code 2, and it keeps firing
  EXPECT_EQ(power_ave(0, 0, &uw), RSMI_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(fake.energy(0).rc, RSMI_STATUS_SUCCESS);  // other functions answer

  fake.set_time_s(4.999);
  EXPECT_EQ(power_ave(1, 0, &uw), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(fake.energy(1).rc, RSMI_STATUS_SUCCESS);
  fake.set_time_s(5.0);  // device 1 is lost: every call on it answers NOT_FOUND
  EXPECT_EQ(power_ave(1, 0, &uw), RSMI_STATUS_NOT_FOUND);
  EXPECT_EQ(fake.energy(1).rc, RSMI_STATUS_NOT_FOUND);
  EXPECT_EQ(fake.set_cap_uw(200'000'000, 1), RSMI_STATUS_NOT_FOUND);
  uint32_t count = 0;
  EXPECT_EQ(fake.function<decltype(rsmi_num_monitor_devices)>("rsmi_num_monitor_devices")(&count),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(count, 2u);  // still enumerated, as a fallen-off device is until the driver reloads

  // Past the devices: INVALID_ARGS; after shut down: INIT_ERROR.
  EXPECT_EQ(power_ave(2, 0, &uw), RSMI_STATUS_INVALID_ARGS);
  fake.shut_down();
  EXPECT_EQ(power_ave(0, 0, &uw), RSMI_STATUS_INIT_ERROR);
  EXPECT_EQ(fake.function<decltype(rsmi_num_monitor_devices)>("rsmi_num_monitor_devices")(&count),
            RSMI_STATUS_INIT_ERROR);
}

TEST(FakeRocmSmiSourcesTest, InitFailsAsScriptedOrOnABrokenConfig) {
  TempDir tmp;
  FakeRocm fake(tmp, "init_error\ndevice\n");
  EXPECT_EQ(fake.init(), RSMI_STATUS_INIT_ERROR);
  EXPECT_EQ(fake.restart("init_error code=4\ndevice\n"), RSMI_STATUS_PERMISSION);
  EXPECT_EQ(fake.restart("device sys_clocks_mhz=800,500\n"), RSMI_STATUS_UNKNOWN_ERROR);  // not ascending
  EXPECT_EQ(fake.restart("device pci=not-an-address\n"), RSMI_STATUS_UNKNOWN_ERROR);
  EXPECT_EQ(fake.restart("process device=0 pid=1\n"), RSMI_STATUS_UNKNOWN_ERROR);  // no device 0 yet
  EXPECT_EQ(fake.restart("gadget\n"), RSMI_STATUS_UNKNOWN_ERROR);
  EXPECT_EQ(fake.restart("device\n"), RSMI_STATUS_SUCCESS);
}

TEST(FakeRocmSmiSourcesTest, HungCallBlocksOnlyItselfUntilReleased) {
  TempDir tmp;
  FakeRocm fake(tmp, "device\nhang function=rsmi_dev_energy_count_get device=0 times=1\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  auto hung_calls = fake.function<int()>("joule_fake_rocm_smi_hung_calls");
  rsmi_status_t hung_rc = RSMI_STATUS_UNKNOWN_ERROR;
  std::thread caller([&] { hung_rc = fake.energy(0).rc; });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (hung_calls() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(hung_calls(), 1);
  // The hung call holds no lock: the same device answers other calls.
  EXPECT_GT(fake.power_ave_uw(0), 0u);
  fake.function<void()>("joule_fake_rocm_smi_release_hangs")();
  caller.join();
  EXPECT_EQ(hung_rc, RSMI_STATUS_SUCCESS);
  EXPECT_EQ(hung_calls(), 0);
  EXPECT_EQ(fake.energy(0).rc, RSMI_STATUS_SUCCESS);  // times=1: the next call does not hang
}

TEST(FakeRocmSmiSourcesTest, ProcessesAreListedOncePerPidWithTheirDevices) {
  TempDir tmp;
  FakeRocm fake(tmp,
                "clock virtual\ndevice\ndevice\n"
                "process device=0 pid=42 used_mib=100\n"
                "process device=1 pid=42 used_mib=50\n"
                "process device=1 pid=7 used_mib=na start_ms=1000 end_ms=2000\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  auto info = fake.function<decltype(rsmi_compute_process_info_get)>("rsmi_compute_process_info_get");
  auto gpus = fake.function<decltype(rsmi_compute_process_gpus_get)>("rsmi_compute_process_gpus_get");
  uint32_t count = 0;
  fake.set_time_s(1.5);
  ASSERT_EQ(info(nullptr, &count), RSMI_STATUS_SUCCESS);
  ASSERT_EQ(count, 2u);
  std::vector<rsmi_process_info_t> procs(2);
  ASSERT_EQ(info(procs.data(), &count), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(procs[0].process_id, 42u);
  EXPECT_EQ(procs[0].vram_usage, 150ull << 20);  // summed over its devices
  EXPECT_EQ(procs[1].process_id, 7u);
  EXPECT_EQ(procs[1].vram_usage, 0u);  // "na" counts nothing
  count = 1;
  EXPECT_EQ(info(procs.data(), &count), RSMI_STATUS_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);

  std::vector<uint32_t> devices(2);
  count = 2;
  ASSERT_EQ(gpus(42, devices.data(), &count), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(devices, (std::vector<uint32_t>{0, 1}));
  count = 2;
  ASSERT_EQ(gpus(7, devices.data(), &count), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(devices[0], 1u);
  EXPECT_EQ(gpus(99, devices.data(), &count), RSMI_STATUS_NOT_FOUND);

  fake.set_time_s(2.0);  // pid 7 has ended
  ASSERT_EQ(info(nullptr, &count), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(gpus(7, devices.data(), &count), RSMI_STATUS_NOT_FOUND);
}

TEST(FakeRocmSmiSourcesTest, IdentityTemperaturesMemoryAndBusyAreAsScripted) {
  TempDir tmp;
  FakeRocm fake(tmp,
                "version 6.1.2\n"
                "device name=\"AMD Instinct MI300X\" pci=0001:c1:02.3 device_id=0x74a1 unique_id=0xabc "
                "edge_temp=0 junction_temp_c=71 mem_temp_c=60 mem_used_mib=2048 mem_total_mib=196608 "
                "util_gpu=85 util_mem=30\n"
                "device name=\"AMD Instinct MI250X\" unique_id=none temp_c=45\n");
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  rsmi_version_t version{};
  ASSERT_EQ(fake.function<decltype(rsmi_version_get)>("rsmi_version_get")(&version), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(version.major, 6u);
  EXPECT_EQ(version.minor, 1u);
  EXPECT_EQ(version.patch, 2u);

  char name[64];
  auto name_get = fake.function<decltype(rsmi_dev_name_get)>("rsmi_dev_name_get");
  ASSERT_EQ(name_get(1, name, sizeof name), RSMI_STATUS_SUCCESS);
  EXPECT_STREQ(name, "AMD Instinct MI250X");
  EXPECT_EQ(name_get(1, name, 8), RSMI_STATUS_INSUFFICIENT_SIZE);
  EXPECT_STREQ(name, "AMD Ins");

  uint16_t id = 0;
  ASSERT_EQ(fake.function<decltype(rsmi_dev_id_get)>("rsmi_dev_id_get")(0, &id), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(id, 0x74a1);
  uint64_t value = 0;
  auto unique_id = fake.function<decltype(rsmi_dev_unique_id_get)>("rsmi_dev_unique_id_get");
  ASSERT_EQ(unique_id(0, &value), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(value, 0xabcu);
  EXPECT_EQ(unique_id(1, &value), RSMI_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(fake.function<decltype(rsmi_dev_pci_id_get)>("rsmi_dev_pci_id_get")(0, &value), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(value, (1ull << 32) | (0xc1u << 8) | (2u << 3) | 3u);

  auto temp = fake.function<decltype(rsmi_dev_temp_metric_get)>("rsmi_dev_temp_metric_get");
  int64_t millidegrees = 0;
  EXPECT_EQ(temp(0, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT, &millidegrees), RSMI_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(temp(0, RSMI_TEMP_TYPE_JUNCTION, RSMI_TEMP_CURRENT, &millidegrees), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(millidegrees, 71'000);
  ASSERT_EQ(temp(0, RSMI_TEMP_TYPE_MEMORY, RSMI_TEMP_CURRENT, &millidegrees), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(millidegrees, 60'000);
  EXPECT_EQ(temp(0, RSMI_TEMP_TYPE_JUNCTION, RSMI_TEMP_MAX, &millidegrees), RSMI_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(temp(1, RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_CURRENT, &millidegrees), RSMI_STATUS_SUCCESS);
  EXPECT_EQ(millidegrees, 45'000);
  EXPECT_EQ(temp(1, RSMI_TEMP_TYPE_MEMORY, RSMI_TEMP_CURRENT, &millidegrees), RSMI_STATUS_NOT_SUPPORTED);

  ASSERT_EQ(fake.function<decltype(rsmi_dev_memory_usage_get)>("rsmi_dev_memory_usage_get")(0, RSMI_MEM_TYPE_VRAM,
                                                                                              &value),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(value, 2048ull << 20);
  ASSERT_EQ(fake.function<decltype(rsmi_dev_memory_total_get)>("rsmi_dev_memory_total_get")(0, RSMI_MEM_TYPE_VRAM,
                                                                                              &value),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(value, 192ull << 30);
  uint32_t percent = 0;
  ASSERT_EQ(fake.function<decltype(rsmi_dev_busy_percent_get)>("rsmi_dev_busy_percent_get")(0, &percent),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(percent, 85u);
  ASSERT_EQ(fake.function<decltype(rsmi_dev_memory_busy_percent_get)>("rsmi_dev_memory_busy_percent_get")(0, &percent),
            RSMI_STATUS_SUCCESS);
  EXPECT_EQ(percent, 30u);

  const char* text = nullptr;
  ASSERT_EQ(fake.function<decltype(rsmi_status_string)>("rsmi_status_string")(RSMI_STATUS_NOT_FOUND, &text),
            RSMI_STATUS_SUCCESS);
  EXPECT_NE(std::string(text).find("NOT_FOUND"), std::string::npos);
}

TEST(FakeRocmSmiSourcesTest, WallClockStampsTheCounterInRealtimeNanoseconds) {
  TempDir tmp;
  FakeRocm fake(tmp, "device power_w=200 energy_update_ms=1\n");
  timespec before{}, after{};
  clock_gettime(CLOCK_REALTIME, &before);
  ASSERT_EQ(fake.init(), RSMI_STATUS_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const FakeRocm::Energy e = fake.energy();
  clock_gettime(CLOCK_REALTIME, &after);
  auto ns = [](const timespec& ts) { return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + ts.tv_nsec; };
  ASSERT_EQ(e.rc, RSMI_STATUS_SUCCESS);
  // Stamped within the call's span (init records realtime to the microsecond).
  EXPECT_GE(e.timestamp_ns + 1000, ns(before) + 50'000'000);
  EXPECT_LE(e.timestamp_ns, ns(after));
  // The energy matches the time it stamps: 200 W since init.
  const double stamped_s = static_cast<double>(e.timestamp_ns - (ns(before) / 1000) * 1000) / 1e9;
  EXPECT_NEAR(counted_j(e), 200.0 * stamped_s, 200.0 * 0.002);
}

}  // namespace
}  // namespace joule
