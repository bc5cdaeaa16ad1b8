// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The fake libnvidia-ml.so.1's model of an H100's power and energy sources
// (energy counter, power usage, instantaneous field, buffered samples), on its
// virtual clock. The fake's C functions are called directly through dlsym, so
// these tests pin the fake itself, whatever joule's NVML backend makes of it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/test_support.h"
#include "device/nvml/nvml_abi.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::use_fake_nvml;
using testing::write_file;

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;

// Loads the fake, writes its config and calls its functions by name.
// nvmlShutdown at scope exit, so the next test's nvmlInit rereads its config
// even when all tests run in one process.
class FakeDriver {
 public:
  FakeDriver(const TempDir& dir, const std::string& config, bool old_driver = false)
      : fake_(use_fake_nvml(dir, config, old_driver)) {
    handle_ = dlopen(fake_.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  }
  ~FakeDriver() {
    if (initialised_) function<decltype(nvmlShutdown)>("nvmlShutdown")();
    dlclose(handle_);
  }
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  void* symbol(const char* name) const { return dlsym(handle_, name); }

  template <typename F>
  F* function(const char* name) const {
    void* found = symbol(name);
    if (found == nullptr) throw std::runtime_error(std::string("the fake does not export ") + name);
    return reinterpret_cast<F*>(found);
  }

  nvmlReturn_t init() {
    const nvmlReturn_t rc = function<decltype(nvmlInit_v2)>("nvmlInit_v2")();
    initialised_ = rc == kSuccess;
    return rc;
  }

  // Shuts down and initialises again with config: a fresh start at time 0.
  void restart(const std::string& config) {
    function<decltype(nvmlShutdown)>("nvmlShutdown")();
    initialised_ = false;
    write_file(fake_.config_path, config);
    ASSERT_EQ(init(), kSuccess);
  }

  // Shuts down and initialises again with a config nvmlInit must refuse.
  void restart_expecting_failure(const std::string& config) {
    function<decltype(nvmlShutdown)>("nvmlShutdown")();
    initialised_ = false;
    write_file(fake_.config_path, config);
    EXPECT_NE(init(), kSuccess);
  }

  void set_time_s(double seconds) {
    function<void(double)>("joule_fake_nvml_set_time_s")(seconds);
  }

  nvmlDevice_t device(unsigned index) const {
    nvmlDevice_t handle = nullptr;
    EXPECT_EQ(function<decltype(nvmlDeviceGetHandleByIndex_v2)>("nvmlDeviceGetHandleByIndex_v2")(index, &handle),
              kSuccess);
    return handle;
  }

  unsigned long long energy_mj(unsigned index = 0) const {
    unsigned long long energy_mj = 0;
    EXPECT_EQ(function<decltype(nvmlDeviceGetTotalEnergyConsumption)>("nvmlDeviceGetTotalEnergyConsumption")(
                  device(index), &energy_mj),
              kSuccess);
    return energy_mj;
  }

  unsigned power_usage_mw(unsigned index = 0) const {
    unsigned power_mw = 0;
    EXPECT_EQ(function<decltype(nvmlDeviceGetPowerUsage)>("nvmlDeviceGetPowerUsage")(device(index), &power_mw),
              kSuccess);
    return power_mw;
  }

  unsigned instant_power_mw(unsigned index = 0) const {
    nvmlFieldValue_t value{};
    value.fieldId = nvml::kFieldPowerInstant;
    EXPECT_EQ(function<decltype(nvmlDeviceGetFieldValues)>("nvmlDeviceGetFieldValues")(device(index), 1, &value),
              kSuccess);
    EXPECT_EQ(value.nvmlReturn, kSuccess);
    return value.value.uiVal;
  }

  nvmlReturn_t set_limit_mw(unsigned limit_mw, unsigned index = 0) const {
    return function<decltype(nvmlDeviceSetPowerManagementLimit)>("nvmlDeviceSetPowerManagementLimit")(device(index),
                                                                                                        limit_mw);
  }

  struct Samples {
    nvmlReturn_t rc = -1;
    int value_type = -1;
    std::vector<nvmlSample_t> samples;
  };

  // nvmlDeviceGetSamples into a buffer of buffer_size samples.
  Samples samples(unsigned long long last_seen_us, unsigned buffer_size = 1000, unsigned index = 0,
                  int type = nvml::kTotalPowerSamples) const {
    Samples result;
    result.samples.resize(buffer_size);
    unsigned count = buffer_size;
    result.rc = function<decltype(nvmlDeviceGetSamples)>("nvmlDeviceGetSamples")(
        device(index), type, last_seen_us, &result.value_type, &count, result.samples.data());
    result.samples.resize(result.rc == kSuccess ? count : 0);
    return result;
  }

  // nvmlDeviceGetSamples with no buffer: the capacity.
  std::pair<nvmlReturn_t, unsigned> sample_capacity(unsigned index = 0) const {
    int value_type = -1;
    unsigned count = 0;
    const nvmlReturn_t rc = function<decltype(nvmlDeviceGetSamples)>("nvmlDeviceGetSamples")(
        device(index), nvml::kTotalPowerSamples, 0, &value_type, &count, nullptr);
    return {rc, count};
  }

  const testing::FakeNvml& fake() const { return fake_; }

 private:
  testing::FakeNvml fake_;
  void* handle_ = nullptr;
  bool initialised_ = false;
};

std::vector<unsigned long long> timestamps_us(const std::vector<nvmlSample_t>& samples) {
  std::vector<unsigned long long> result;
  for (const auto& sample : samples) result.push_back(sample.timeStamp);
  return result;
}

std::vector<unsigned> values_mw(const std::vector<nvmlSample_t>& samples) {
  std::vector<unsigned> result;
  for (const auto& sample : samples) result.push_back(sample.sampleValue.uiVal);
  return result;
}

unsigned long long realtime_us(const timespec& ts) {
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL + static_cast<unsigned long long>(ts.tv_nsec) / 1000;
}

// 100 W for 1 s, then 700 W for 2 s, repeating.
constexpr const char* kStepProfile = "# a load step\n1000 100\n2000 700  # full load\n";

std::string step_device(const TempDir& tmp, const std::string& keys) {
  write_file(tmp.file("step.profile"), kStepProfile);
  return "device max_limit_w=700 profile_file=" + tmp.file("step.profile") + " " + keys + "\n";
}

TEST(FakeNvmlSourcesTest, CounterStepsOnlyAtTicksAndIsTheExactIntegral) {
  TempDir tmp;
  FakeDriver fake(tmp, "clock virtual\n" + step_device(tmp, "energy_update_ms=100 energy_call_ms=4"));
  ASSERT_EQ(fake.init(), kSuccess);
  const std::vector<std::pair<double, unsigned long long>> expected = {
      {0.0, 0},
      {0.05, 0},
      {0.1, 10'000},    // 100 W x 0.1 s
      {0.199, 10'000},  // no step between ticks
      {0.2, 20'000},
      {1.0, 100'000},
      {1.05, 100'000},
      {1.1, 170'000},    // 100 J + 700 W x 0.1 s
      {1.25, 240'000},   // tick 1.2: 100 J + 140 J
      {3.0, 1'500'000},  // one whole period: 100 J + 1400 J
      {4.15, 1'670'000}, // tick 4.1: 1500 + 100 + 70 J
  };
  for (const auto& [t_s, energy_mj] : expected) {
    fake.set_time_s(t_s);
    EXPECT_EQ(fake.energy_mj(), energy_mj) << "at " << t_s << " s";
  }
  // On a virtual clock the call does not busy-wait its 4 ms.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) fake.energy_mj();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
}

TEST(FakeNvmlSourcesTest, PowerUsageIsTheTrailingOneSecondMeanAtTheTick) {
  TempDir tmp;
  FakeDriver fake(tmp, "clock virtual\n" + step_device(tmp, "power_update_ms=100 usage_window_ms=1000") +
                           step_device(tmp, "power_update_ms=100"));
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(0.05);
  EXPECT_EQ(fake.power_usage_mw(), 100'000u);  // tick 0: nothing to average yet, the power then
  fake.set_time_s(0.55);
  EXPECT_EQ(fake.power_usage_mw(), 100'000u);  // the mean since 0
  // After the step to 700 W at 1 s the mean ramps 60 W per tick for a second.
  for (int k = 0; k <= 10; ++k) {
    const unsigned expected_mw = 100'000u + 60'000u * static_cast<unsigned>(k);
    for (double within_s : {0.0, 0.05, 0.099}) {
      const double t_s = 1.0 + 0.1 * k + within_s;
      fake.set_time_s(t_s);
      EXPECT_EQ(fake.power_usage_mw(), expected_mw) << "at " << t_s << " s";
    }
  }
  fake.set_time_s(3.33);  // tick 3.3: (2.3, 3.3] is 0.7 s at 700 W and 0.3 s at 100 W
  EXPECT_EQ(fake.power_usage_mw(), 520'000u);
  // Without a window: the power at the last tick.
  fake.set_time_s(0.999);
  EXPECT_EQ(fake.power_usage_mw(1), 100'000u);
  fake.set_time_s(1.05);
  EXPECT_EQ(fake.power_usage_mw(1), 700'000u);
}

TEST(FakeNvmlSourcesTest, InstantFieldIsThePointValueAtTheTick) {
  TempDir tmp;
  write_file(tmp.file("late.profile"), "1050 100\n950 700\n");  // the step falls between ticks
  const std::string profile = " max_limit_w=700 instant_offset_w=5 profile_file=" + tmp.file("late.profile");
  FakeDriver fake(tmp, "clock virtual\ndevice power_update_ms=100" + profile + "\ndevice" + profile + "\n");
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(1.07);
  EXPECT_EQ(fake.instant_power_mw(0), 105'000u);  // tick 1.0: still 100 W then
  EXPECT_EQ(fake.instant_power_mw(1), 705'000u);  // no ticks: the power now
  fake.set_time_s(1.1);
  EXPECT_EQ(fake.instant_power_mw(0), 705'000u);  // a point value, not the mean over (1.0, 1.1]
  fake.set_time_s(2.05);  // the profile repeats every 2 s
  EXPECT_EQ(fake.instant_power_mw(0), 105'000u);
  EXPECT_EQ(fake.instant_power_mw(1), 105'000u);
  fake.set_time_s(3.07);  // 1.07 s into the second period
  EXPECT_EQ(fake.instant_power_mw(0), 105'000u);
  EXPECT_EQ(fake.instant_power_mw(1), 705'000u);
}

// 100 W until 1.01 s, then 700 W: the step falls inside the sample (1.00, 1.02].
std::string sample_config(const TempDir& tmp, const std::string& keys) {
  write_file(tmp.file("samples.profile"), "1010 100\n990 700\n");
  return "clock virtual\ndevice max_limit_w=700 sample_ms=20 profile_file=" + tmp.file("samples.profile") + " " +
         keys + "\n";
}

std::vector<unsigned long long> sample_stamps_us(long long first, long long last) {
  std::vector<unsigned long long> stamps;
  for (long long i = first; i <= last; ++i) stamps.push_back(static_cast<unsigned long long>(i) * 20'000ULL);
  return stamps;
}

TEST(FakeNvmlSamplesTest, EachSampleIsTheMeanOverItsIntervalStampedInVirtualMicroseconds) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, ""));
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(1.1);
  const auto read = fake.samples(0);
  ASSERT_EQ(read.rc, kSuccess);
  EXPECT_EQ(read.value_type, nvml::kValueTypeUnsignedInt);
  ASSERT_EQ(read.samples.size(), 55u);  // (0, 1.1 s] in 20 ms steps
  EXPECT_EQ(timestamps_us(read.samples), sample_stamps_us(1, 55));
  std::vector<unsigned> expected(55, 100'000u);
  expected[50] = 400'000u;  // (1.00, 1.02]: 10 ms at 100 W, 10 ms at 700 W
  for (std::size_t i = 51; i < 55; ++i) expected[i] = 700'000u;
  EXPECT_EQ(values_mw(read.samples), expected);
}

TEST(FakeNvmlSamplesTest, OnlySamplesNewerThanLastSeenAndNotFoundWhenNoneIs) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, ""));
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(0.019);
  EXPECT_EQ(fake.samples(0).rc, kNotFound);  // the first sample ends at 20 ms
  fake.set_time_s(1.1);
  EXPECT_EQ(timestamps_us(fake.samples(1'000'000).samples), sample_stamps_us(51, 55));
  EXPECT_EQ(timestamps_us(fake.samples(1'000'001).samples), sample_stamps_us(51, 55));
  EXPECT_EQ(fake.samples(1'100'000).rc, kNotFound);
  // A small buffer gets the oldest of the new samples.
  EXPECT_EQ(timestamps_us(fake.samples(0, 3).samples), sample_stamps_us(1, 3));
  fake.set_time_s(1.12);
  const auto newer = fake.samples(1'100'000);
  EXPECT_EQ(timestamps_us(newer.samples), sample_stamps_us(56, 56));
  EXPECT_EQ(values_mw(newer.samples), std::vector<unsigned>{700'000u});
}

TEST(FakeNvmlSamplesTest, NullBufferAsksForTheCapacity) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, "sample_buffer=64") + "device sample_ms=20\n");
  ASSERT_EQ(fake.init(), kSuccess);
  EXPECT_EQ(fake.sample_capacity(0), std::make_pair(kSuccess, 64u));
  EXPECT_EQ(fake.sample_capacity(1), std::make_pair(kSuccess, 100u));  // the default
}

TEST(FakeNvmlSamplesTest, RingBufferKeepsOnlyTheNewestSamples) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, "sample_buffer=10"));
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(1.0);
  EXPECT_EQ(timestamps_us(fake.samples(0).samples), sample_stamps_us(41, 50));
  fake.set_time_s(1.04);
  EXPECT_EQ(timestamps_us(fake.samples(0).samples), sample_stamps_us(43, 52));
}

TEST(FakeNvmlSamplesTest, LatencyDelaysEachSample) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, "sample_latency_ms=35"));
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(0.054);
  EXPECT_EQ(fake.samples(0).rc, kNotFound);  // the 20 ms sample shows at 55 ms
  fake.set_time_s(0.094);
  EXPECT_EQ(timestamps_us(fake.samples(0).samples), sample_stamps_us(1, 2));
  fake.set_time_s(0.095);
  EXPECT_EQ(timestamps_us(fake.samples(0).samples), sample_stamps_us(1, 3));
}

TEST(FakeNvmlSamplesTest, OtherTypesAndDevicesWithoutABufferAreNotSupported) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, "") + "device power_w=50\n");
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(0.5);
  EXPECT_EQ(fake.samples(0, 10, 0, /*type=*/1).rc, kNotSupported);
  EXPECT_EQ(fake.samples(0, 10, 1).rc, kNotSupported);
  EXPECT_EQ(fake.sample_capacity(1).first, kNotSupported);
}

TEST(FakeNvmlSamplesTest, InjectedErrorsFollowTheVirtualClock) {
  TempDir tmp;
  FakeDriver fake(tmp, sample_config(tmp, "") + "error function=nvmlDeviceGetSamples device=0 code=15 after_ms=500\n");
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(0.499);
  EXPECT_EQ(fake.samples(0).rc, kSuccess);
  fake.set_time_s(0.5);
  EXPECT_EQ(fake.samples(0).rc, 15);
  EXPECT_EQ(fake.sample_capacity().first, 15);
  EXPECT_EQ(fake.power_usage_mw(), 100'000u);  // other functions still answer
}

TEST(FakeNvmlSamplesTest, LimitChangeKeepsThePastAndTheCounterContinuous) {
  TempDir tmp;
  FakeDriver fake(tmp,
                  "clock virtual\ndevice power_w=500 min_limit_w=100 max_limit_w=700 sample_ms=20 "
                  "energy_update_ms=100 power_update_ms=100 usage_window_ms=1000\n");
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(0.5);
  ASSERT_EQ(fake.set_limit_mw(300'000), kSuccess);
  fake.set_time_s(1.0);
  const auto read = fake.samples(0);
  ASSERT_EQ(read.samples.size(), 50u);
  std::vector<unsigned> expected(25, 500'000u);  // samples before the change keep 500 W
  expected.resize(50, 300'000u);
  EXPECT_EQ(values_mw(read.samples), expected);
  EXPECT_EQ(fake.energy_mj(), 400'000u);        // 0.5 s x 500 W + 0.5 s x 300 W
  EXPECT_EQ(fake.power_usage_mw(), 400'000u);  // the mean of the last second spans both
}

TEST(FakeNvmlSamplesTest, WallClockStampsAreRealtimeAndStable) {
  TempDir tmp;
  FakeDriver fake(tmp, "device power_w=250 sample_ms=20\n");
  timespec before{}, after{};
  clock_gettime(CLOCK_REALTIME, &before);
  ASSERT_EQ(fake.init(), kSuccess);
  clock_gettime(CLOCK_REALTIME, &after);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  const auto first = fake.samples(0);
  ASSERT_EQ(first.rc, kSuccess);
  ASSERT_GE(first.samples.size(), 3u);
  EXPECT_GE(first.samples[0].timeStamp, realtime_us(before) + 20'000);
  EXPECT_LE(first.samples[0].timeStamp, realtime_us(after) + 20'000);
  for (std::size_t i = 1; i < first.samples.size(); ++i) {
    EXPECT_EQ(first.samples[i].timeStamp - first.samples[i - 1].timeStamp, 20'000u);
  }
  EXPECT_EQ(values_mw(first.samples), std::vector<unsigned>(first.samples.size(), 250'000u));
  const auto again = fake.samples(0, 2);
  EXPECT_EQ(timestamps_us(again.samples),
            (std::vector<unsigned long long>{first.samples[0].timeStamp, first.samples[1].timeStamp}));
}

TEST(FakeNvmlSamplesTest, PrefilledBufferIsFullAtInitLikeARealDrivers) {
  TempDir tmp;
  FakeDriver fake(tmp, "device power_w=250 sample_ms=20 sample_buffer=50 sample_prefill=1\n");
  timespec before{}, after{};
  clock_gettime(CLOCK_REALTIME, &before);
  ASSERT_EQ(fake.init(), kSuccess);
  const auto read = fake.samples(0);
  clock_gettime(CLOCK_REALTIME, &after);
  ASSERT_EQ(read.rc, kSuccess);
  ASSERT_EQ(read.samples.size(), 50u);  // full at once, whenever the process started
  // The newest ended no later than the call and at most one period before init.
  EXPECT_GT(read.samples.back().timeStamp + 20'000, realtime_us(before));
  EXPECT_LE(read.samples.back().timeStamp, realtime_us(after) + 1'000);  // 1 ms: steady vs realtime drift
  for (std::size_t i = 1; i < read.samples.size(); ++i) {
    EXPECT_EQ(read.samples[i].timeStamp - read.samples[i - 1].timeStamp, 20'000u);
  }
  EXPECT_EQ(values_mw(read.samples), std::vector<unsigned>(50, 250'000u));  // the power at 0 before init
  // A virtual clock stamps t_i * 1e6: it has no room for samples before 0.
  ::testing::internal::CaptureStderr();
  fake.restart_expecting_failure("clock virtual\ndevice sample_ms=20 sample_prefill=1\n");
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("sample_prefill needs 'clock wall'"), std::string::npos);
}

TEST(FakeNvmlSamplesTest, OldDriverHasNoSamplesFunction) {
  TempDir tmp;
  FakeDriver fake(tmp, "device power_w=250 sample_ms=20\n", /*old_driver=*/true);
  EXPECT_EQ(fake.symbol("nvmlDeviceGetSamples"), nullptr);
  EXPECT_NE(fake.symbol("nvmlDeviceGetPowerUsage"), nullptr);
  EXPECT_NE(fake.symbol("joule_fake_nvml_set_time_s"), nullptr);
}

std::string random_config(int seed) {
  return "clock virtual\ndevice power_w=100 pulse_w=600 max_limit_w=700 profile=random seed=" + std::to_string(seed) +
         " min_phase_ms=150 max_phase_ms=2500 sample_ms=20 sample_buffer=1000 energy_update_ms=100\n";
}

struct Phase {
  long long start_ms;
  unsigned power_mw;
  bool operator==(const Phase&) const = default;
};

// The phases of the first until_ms, read from the instant field (unlagged
// without power_update_ms) at every millisecond: phases are whole milliseconds.
std::vector<Phase> scan_phases(FakeDriver& fake, long long until_ms) {
  std::vector<Phase> phases;
  for (long long t_ms = 0; t_ms <= until_ms; ++t_ms) {
    fake.set_time_s(static_cast<double>(t_ms) / 1000.0);
    const unsigned power_mw = fake.instant_power_mw();
    if (phases.empty() || phases.back().power_mw != power_mw) phases.push_back({t_ms, power_mw});
  }
  return phases;
}

std::vector<long long> starts_ms(const std::vector<Phase>& phases) {
  std::vector<long long> starts;
  for (const auto& phase : phases) starts.push_back(phase.start_ms);
  return starts;
}

TEST(FakeNvmlRandomProfileTest, SameSeedSameSequenceOnEveryPlatform) {
  TempDir tmp;
  FakeDriver fake(tmp, random_config(42));
  ASSERT_EQ(fake.init(), kSuccess);
  const auto first = scan_phases(fake, 10'000);
  // splitmix64(42) pins these: a platform giving others breaks reproducibility.
  const std::vector<long long> golden = {0, 348, 1330, 2811, 5044, 5594, 6084};
  ASSERT_GE(first.size(), golden.size());
  const auto starts = starts_ms(first);
  EXPECT_EQ(std::vector<long long>(starts.begin(), starts.begin() + 7), golden);
  fake.restart(random_config(42));
  EXPECT_EQ(scan_phases(fake, 10'000), first);
  fake.restart(random_config(43));
  EXPECT_NE(scan_phases(fake, 10'000), first);
}

TEST(FakeNvmlRandomProfileTest, PhasesAlternateFromPulseWithLengthsWithinBounds) {
  TempDir tmp;
  FakeDriver fake(tmp, random_config(7));
  ASSERT_EQ(fake.init(), kSuccess);
  const auto phases = scan_phases(fake, 60'000);
  ASSERT_GE(phases.size(), 20u);  // 60 s of phases of 1.3 s on average
  for (std::size_t i = 0; i < phases.size(); ++i) {
    EXPECT_EQ(phases[i].power_mw, i % 2 == 0 ? 600'000u : 100'000u) << "phase " << i;
    if (i + 1 < phases.size()) {  // the last one may go on past the scan
      const long long length_ms = phases[i + 1].start_ms - phases[i].start_ms;
      EXPECT_GE(length_ms, 150) << "phase " << i;
      EXPECT_LE(length_ms, 2500) << "phase " << i;
    }
  }
}

TEST(FakeNvmlRandomProfileTest, SamplesIntegrateToTheEnergyCounter) {
  TempDir tmp;
  FakeDriver fake(tmp, random_config(42));
  ASSERT_EQ(fake.init(), kSuccess);
  fake.set_time_s(10.0);
  const auto read = fake.samples(0);
  ASSERT_EQ(read.rc, kSuccess);
  ASSERT_EQ(read.samples.size(), 500u);
  double sum_mj = 0;
  int straddling = 0;  // samples across a phase change, neither 100 W nor 600 W
  for (const auto& sample : read.samples) {
    sum_mj += sample.sampleValue.uiVal * 0.020;  // mW x 20 ms
    if (sample.sampleValue.uiVal != 100'000u && sample.sampleValue.uiVal != 600'000u) ++straddling;
  }
  EXPECT_GT(straddling, 0);
  const auto counter_mj = static_cast<double>(fake.energy_mj());
  EXPECT_GT(counter_mj, 100.0 * 10 * 1000);
  // Each sample is rounded to 1 mW (0.01 mJ over 20 ms), the counter to 1 mJ.
  EXPECT_NEAR(sum_mj, counter_mj, 500 * 0.01 + 0.5);
}

TEST(FakeNvmlProfileFileTest, MalformedLineFailsInitNamingFileAndLine) {
  TempDir tmp;
  write_file(tmp.file("bad.profile"), "# ok so far\n1000 100\n500 watts\n");
  FakeDriver fake(tmp, "clock virtual\ndevice profile_file=" + tmp.file("bad.profile") + "\n");
  ::testing::internal::CaptureStderr();
  EXPECT_NE(fake.init(), kSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(tmp.file("bad.profile") + " line 3"), std::string::npos) << err;
}

TEST(FakeNvmlProfileFileTest, MissingFileFailsInit) {
  TempDir tmp;
  FakeDriver fake(tmp, "device profile_file=" + tmp.file("absent.profile") + "\n");
  ::testing::internal::CaptureStderr();
  EXPECT_NE(fake.init(), kSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(tmp.file("absent.profile")), std::string::npos) << err;
}

}  // namespace
}  // namespace joule
