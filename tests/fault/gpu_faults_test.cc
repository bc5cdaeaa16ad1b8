// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Faults of the GPU layer, injected through the fake libnvidia-ml.so.1: a GPU
// lost in the middle of a window, driver calls that hang (for a while, or
// until released), and an energy counter that restarts from zero (a driver
// reload or GPU reset). Each test says what joule must do; docs/measurement.md
// ("Faults") and docs/reliability.md list them. The faults every driver can
// have (a lost GPU, a hung counter read, a counter reset) run on the fake ROCm
// SMI too (GpuFaultOnFakeDriverTest); those of NVML's power-sample buffer and
// old drivers on the fake NVML alone.
//
// Hangs are real: a thread blocks in the fake's call. Every test runs its
// scenario under run_bounded(), which, should joule wait on a hung call
// forever, releases every hang of the fake (so the process can end) and
// fails the test with how long it took.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "common/fake_drivers.h"
#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/device/nvml.h"
#include "joule/measure/monitor.h"
#include "joule/measure/sampler.h"

namespace joule {
namespace {

using testing::FakeDriver;
using testing::FakeNvml;
using testing::TempDir;
using testing::use_fake_nvml;

// An H100 as the fake plays it (samples every 20 ms, counter steps of 100 ms,
// a one-second trailing power usage), with a counter read of 1 ms rather than
// 4 ms: the tests share two cores.
constexpr const char* kH100 =
    "device name=\"NVIDIA H100 80GB HBM3\" min_limit_w=200 max_limit_w=700 energy_update_ms=100 energy_call_ms=1 "
    "power_update_ms=100 usage_window_ms=1000 sample_ms=20 sample_buffer=120 sample_latency_ms=1";

template <typename Fn>
Fn fake_symbol(const FakeNvml& fake, const char* name) {
  void* library = dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  return library == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(library, name));
}

// Releases the fake's hangs when the test ends, whatever happened: no thread
// stays blocked in it past the test.
struct ReleaseHangsAtExit {
  void (*release)() = nullptr;
  ~ReleaseHangsAtExit() {
    if (release == nullptr) return;
    release();
    // A thread left behind ends within a tick once its call returns: let it,
    // before the process does.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
};

double steady_now_s() { return SteadyClock::instance()->now_s(); }

// Runs fn on a thread for at most limit_s. Past that, every hang is released
// (fn can then finish) and false is returned: joule waited on a hung call.
bool run_bounded(void (*release_hangs)(), double limit_s, const std::function<void()>& fn,
                 double* took_s = nullptr) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  const double start_s = steady_now_s();
  std::thread runner(std::move(task));
  const bool in_time = done.wait_for(std::chrono::duration<double>(limit_s)) == std::future_status::ready;
  if (!in_time) release_hangs();
  runner.join();
  if (took_s != nullptr) *took_s = steady_now_s() - start_s;
  done.get();  // rethrows what fn threw
  return in_time;
}

bool run_bounded(const FakeNvml& fake, double limit_s, const std::function<void()>& fn, double* took_s = nullptr) {
  return run_bounded(fake_symbol<void (*)()>(fake, "joule_fake_nvml_release_hangs"), limit_s, fn, took_s);
}

// The faults any driver can have, once per fake driver.
class GpuFaultOnFakeDriverTest : public ::testing::TestWithParam<FakeDriver> {
 protected:
  const FakeDriver& driver() const { return GetParam(); }
  using ReleaseFn = void (*)();
  ReleaseFn release_hangs(const testing::FakeLibrary& fake) const {
    return driver().helper<ReleaseFn>(fake, "release_hangs");
  }
};

// The driver's real GPU, in the grammar both fakes share.
constexpr const char* kGpu = "device min_limit_w=200 max_limit_w=700 real_sources";

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  return all;
}

// --- a GPU lost mid-window ---------------------------------------------------

// gpu1 falls off the bus 0.6 s after the driver was opened, inside a window:
// the window counts gpu1's energy up to its last data before the loss, names
// it, and is final at once (nothing more will come), not after a timeout.
TEST_P(GpuFaultOnFakeDriverTest, AGpuLostMidWindowCountsItsEnergyUpToTheLossNamesItAndSettlesAtOnce) {
  TempDir tmp;
  const auto fake = driver().use(tmp, std::string(kGpu) + " power_w=300\n" + kGpu +
                                          " power_w=200\nerror function=* device=1 code=@lost after_ms=600\n");
  const double opened_s = steady_now_s();  // the fake's time 0 is no earlier
  const auto gpus = driver().open(fake);
  ASSERT_EQ(gpus.size(), 2u);
  SamplerOptions options;
  options.interval_s = 0.02;
  Monitor monitor(gpus, {}, SteadyClock::instance(), {options, {}});
  Measurement m;
  double settle_took_s = 0;
  ASSERT_TRUE(run_bounded(release_hangs(fake), 10.0, [&] {
    monitor.begin_window("run");
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    m = monitor.end_window("run");
    const double before_s = steady_now_s();
    m = monitor.settle(m, 5.0);
    settle_took_s = steady_now_s() - before_s;
    monitor.stop();
  }));
  EXPECT_TRUE(m.settled);
  EXPECT_LT(settle_took_s, 1.0) << "a lost GPU must not keep the window waiting for data that cannot come";
  EXPECT_NEAR(m.gpu_energy_j[0], 300.0 * m.elapsed_s, 0.02 * 300.0 * m.elapsed_s);
  // Up to the loss (0.6 s after the open), less what the driver's buffer held
  // unread when it went (one drain period, 0.2 s, and scheduling slack).
  const double lost_after_s = opened_s + 0.6 - m.begin_s;
  EXPECT_LT(m.gpu_energy_j[1], 200.0 * (lost_after_s + 0.1));
  EXPECT_GT(m.gpu_energy_j[1], 200.0 * (lost_after_s - 0.4));
  ASSERT_EQ(m.warnings.size(), 1u) << joined(m.warnings);
  EXPECT_NE(m.warnings[0].find("gpu1"), std::string::npos) << m.warnings[0];
  // NVML says "GPU is lost"; ROCm SMI has no such status, and joule says
  // the GPU "is taken as lost".
  EXPECT_NE(m.warnings[0].find(" lost"), std::string::npos) << m.warnings[0];
}

// --- driver calls that fail --------------------------------------------------

// From 0.3 s on the energy counter's reads fail, from 0.5 s the power-sample
// reads (an unknown driver error, not a lost GPU): the GPU keeps being
// measured with its per-tick power readings and an uncalibrated integral,
// the window stays right, and the method says what failed and when.
TEST(GpuFaultTest, FailingSampleAndCounterReadsFallBackToPowerReadingsAndSaySo) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, std::string(kH100) +
                                           " power_w=300\n"
                                           "error function=nvmlDeviceGetTotalEnergyConsumption code=999 after_ms=300\n"
                                           "error function=nvmlDeviceGetSamples code=999 after_ms=500\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  SamplerOptions options;
  options.interval_s = 0.02;
  options.counter_interval_s = 0.4;  // the calibration reads the counter at the start and at 0.4 s
  Monitor monitor(devices.gpus, {}, SteadyClock::instance(), {options, {}});
  Measurement m;
  std::string description;
  ASSERT_TRUE(run_bounded(fake, 10.0, [&] {
    monitor.begin_window("run");
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    m = monitor.end_window_settled("run", 2.0);
    description = monitor.sampler().gpu_method_description(0);
    monitor.stop();
  }));
  EXPECT_TRUE(m.settled);
  EXPECT_TRUE(m.warnings.empty()) << joined(m.warnings);
  EXPECT_NEAR(m.gpu_energy_j[0], 300.0 * m.elapsed_s, 0.02 * 300.0 * m.elapsed_s);
  EXPECT_EQ(m.gpu_sources[0].method, GpuEnergyMethod::kPowerReadings);
  EXPECT_FALSE(m.gpu_sources[0].counter_anchored);
  for (const char* said : {"power samples failed at t=", "power readings used since", "energy counter failed at t=",
                           "uncalibrated since", "windows not anchored: the energy counter failed"}) {
    EXPECT_NE(description.find(said), std::string::npos) << said << " in: " << description;
  }
}

// --- driver calls that hang --------------------------------------------------

// Every power-sample read of gpu0 blocks from 0.4 s on, until released: the
// sampling thread (one for all GPUs) is stuck in it. end_window still returns
// at once; settle() gives up at its timeout, unsettled, with warnings that
// name the hung call and every GPU it holds up; stop() returns (leaving the
// blocked thread behind) and the windows then say what is missing.
TEST(GpuFaultTest, AHungSampleReadIsReportedAndNeitherEndWindowNorSettleNorStopWaitForIt) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp, std::string(kH100) + " power_w=300\n" + kH100 +
                                           " power_w=200\nhang function=nvmlDeviceGetSamples device=0 after_ms=400\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  ReleaseHangsAtExit release{fake_symbol<void (*)()>(fake, "joule_fake_nvml_release_hangs")};
  SamplerOptions options;
  options.interval_s = 0.02;
  auto monitor = std::make_unique<Monitor>(devices.gpus, std::vector<std::shared_ptr<CpuEnergyZone>>{},
                                           SteadyClock::instance(), MonitorOptions{options, {}});
  Measurement ended, settled, after_stop;
  double end_took_s = 0, settle_took_s = 0, stop_took_s = 0;
  double took_s = 0;
  const bool in_time = run_bounded(
      fake, 12.0,
      [&] {
        monitor->begin_window("run");
        // The hang begins at 0.4 s; by the end it is older than the 2 s that
        // make a call hung (SamplerOptions::driver_call_timeout_s).
        std::this_thread::sleep_for(std::chrono::milliseconds(2800));
        double before_s = steady_now_s();
        ended = monitor->end_window("run");
        end_took_s = steady_now_s() - before_s;
        before_s = steady_now_s();
        settled = monitor->settle(ended, 0.5);
        settle_took_s = steady_now_s() - before_s;
        before_s = steady_now_s();
        monitor->stop();
        stop_took_s = steady_now_s() - before_s;
        after_stop = monitor->refresh(ended);
        monitor.reset();  // the Monitor goes too; its blocked thread does not hold it up
      },
      &took_s);
  ASSERT_TRUE(in_time) << "joule waited on the hung driver call: released after " << took_s << " s";
  EXPECT_LT(end_took_s, 0.05);
  EXPECT_LT(settle_took_s, 1.0);
  EXPECT_LT(stop_took_s, 3.0);
  EXPECT_FALSE(settled.settled);
  ASSERT_EQ(settled.warnings.size(), 2u) << joined(settled.warnings);
  EXPECT_EQ(settled.warnings[0].find("gpu0 "), 0u) << settled.warnings[0];
  EXPECT_NE(settled.warnings[0].find(": a driver call (power samples) has not returned"), std::string::npos)
      << settled.warnings[0];
  EXPECT_EQ(settled.warnings[1].find("gpu1 "), 0u) << settled.warnings[1];
  EXPECT_NE(settled.warnings[1].find(": no data after"), std::string::npos) << settled.warnings[1];
  EXPECT_NE(settled.warnings[1].find("blocked in a driver call on gpu0"), std::string::npos) << settled.warnings[1];
  // Carried forward, the immediate values are the powers times the length.
  EXPECT_NEAR(settled.gpu_energy_j[0], 300.0 * settled.elapsed_s, 0.03 * 300.0 * settled.elapsed_s);
  // After the stop, final: what is missing is named, not invented.
  EXPECT_TRUE(after_stop.settled);
  ASSERT_EQ(after_stop.warnings.size(), 2u) << joined(after_stop.warnings);
  for (const std::string& warning : after_stop.warnings) {
    EXPECT_NE(warning.find("is missing (sampling stopped with a driver call on gpu0"), std::string::npos) << warning;
    EXPECT_NE(warning.find("(power samples) blocked for"), std::string::npos) << warning;
  }
  EXPECT_LT(after_stop.gpu_energy_j[0], 300.0 * 0.8);
}

// An older driver (no power samples, no counter): every tick reads power
// usage, and gpu0's reads block from 0.4 s on. The same: reported, and
// neither settle() nor stop() waits for it.
TEST(GpuFaultTest, AHungPowerReadingOnAnOldDriverIsReportedAndStopReturns) {
  TempDir tmp;
  const auto fake = use_fake_nvml(tmp,
                                  "device name=\"Tesla P100\" arch=4 power_w=250\n"
                                  "device name=\"Tesla P100\" arch=4 power_w=150\n"
                                  "hang function=nvmlDeviceGetPowerUsage device=0 after_ms=400\n",
                                  /*old_driver=*/true);
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  ReleaseHangsAtExit release{fake_symbol<void (*)()>(fake, "joule_fake_nvml_release_hangs")};
  SamplerOptions options;
  options.interval_s = 0.02;
  Monitor monitor(devices.gpus, {}, SteadyClock::instance(), {options, {}});
  EXPECT_EQ(monitor.sampler().gpu_method(0), GpuEnergyMethod::kPowerReadings);
  Measurement settled;
  double settle_took_s = 0, stop_took_s = 0, took_s = 0;
  const bool in_time = run_bounded(
      fake, 12.0,
      [&] {
        monitor.begin_window("run");
        std::this_thread::sleep_for(std::chrono::milliseconds(2800));
        const Measurement ended = monitor.end_window("run");
        double before_s = steady_now_s();
        settled = monitor.settle(ended, 0.5);
        settle_took_s = steady_now_s() - before_s;
        before_s = steady_now_s();
        monitor.stop();
        stop_took_s = steady_now_s() - before_s;
      },
      &took_s);
  ASSERT_TRUE(in_time) << "joule waited on the hung power reading: released after " << took_s << " s";
  EXPECT_LT(settle_took_s, 1.0);
  EXPECT_LT(stop_took_s, 3.0);
  EXPECT_FALSE(settled.settled);
  ASSERT_EQ(settled.warnings.size(), 2u) << joined(settled.warnings);
  EXPECT_NE(settled.warnings[0].find(": a driver call (power reading) has not returned"), std::string::npos)
      << settled.warnings[0];
  EXPECT_NE(settled.warnings[1].find("blocked in a driver call on gpu0"), std::string::npos) << settled.warnings[1];
}

// A power-sample read that blocks for 1 s once, then returns: nothing is
// lost (the driver's buffer holds 2.4 s), the window over it settles exact
// and without warnings.
TEST(GpuFaultTest, ADriverCallThatBlocksForASecondThenReturnsLosesNothing) {
  TempDir tmp;
  const auto fake = use_fake_nvml(
      tmp, std::string(kH100) + " power_w=300\nhang function=nvmlDeviceGetSamples after_ms=300 seconds=1 times=1\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  ReleaseHangsAtExit release{fake_symbol<void (*)()>(fake, "joule_fake_nvml_release_hangs")};
  SamplerOptions options;
  options.interval_s = 0.02;
  Monitor monitor(devices.gpus, {}, SteadyClock::instance(), {options, {}});
  Measurement m;
  ASSERT_TRUE(run_bounded(fake, 10.0, [&] {
    monitor.begin_window("run");
    std::this_thread::sleep_for(std::chrono::milliseconds(1800));
    m = monitor.end_window_settled("run", 2.0);
    monitor.stop();
  }));
  EXPECT_TRUE(m.settled);
  EXPECT_TRUE(m.warnings.empty()) << joined(m.warnings);
  EXPECT_NEAR(m.gpu_energy_j[0], 300.0 * m.elapsed_s, 0.01 * 300.0 * m.elapsed_s);
}

// The energy counter's reads block from 0.5 s on (the anchor reader's
// thread is stuck; the sampling thread read the counter before): windows
// keep their sample integral and settle without waiting for the anchors,
// and stop() does not wait for the reader either.
TEST_P(GpuFaultOnFakeDriverTest, AHungEnergyCounterReadLeavesWindowsOnTheirSamplesAndStopReturns) {
  TempDir tmp;
  const auto fake = driver().use(tmp, std::string(kGpu) + " power_w=300\nhang function=@energy after_ms=500\n");
  const auto gpus = driver().open(fake);
  ReleaseHangsAtExit release{release_hangs(fake)};
  SamplerOptions options;
  options.interval_s = 0.02;
  Monitor monitor(gpus, {}, SteadyClock::instance(), {options, {}});
  Measurement m;
  std::string description;
  double settle_took_s = 0, stop_took_s = 0, took_s = 0;
  const bool in_time = run_bounded(
      release_hangs(fake), 12.0,
      [&] {
        monitor.begin_window("run");  // the reader finds the counter's steps before 0.5 s
        // An edge at 0.6 s wants counter reads at once: the first blocks, and
        // by the end it is older than the 2 s that make a call hung
        // (SamplerOptions::driver_call_timeout_s). (Without it, the first
        // read past 0.5 s is the grid's next check, seconds later once the
        // grid is refined.)
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        monitor.begin_window("edge");
        monitor.end_window("edge");
        std::this_thread::sleep_for(std::chrono::milliseconds(2700));
        m = monitor.end_window("run");
        double before_s = steady_now_s();
        m = monitor.settle(m, 3.0);
        settle_took_s = steady_now_s() - before_s;
        description = monitor.sampler().gpu_method_description(0);
        before_s = steady_now_s();
        monitor.stop();
        stop_took_s = steady_now_s() - before_s;
      },
      &took_s);
  ASSERT_TRUE(in_time) << "joule waited on the hung counter read: released after " << took_s << " s";
  EXPECT_TRUE(m.settled);
  EXPECT_LT(settle_took_s, 0.5);
  EXPECT_LT(stop_took_s, 3.0);
  EXPECT_FALSE(m.gpu_sources[0].counter_anchored);
  EXPECT_NEAR(m.gpu_energy_j[0], 300.0 * m.elapsed_s, 0.01 * 300.0 * m.elapsed_s);
  EXPECT_NE(description.find("an energy-counter read has not returned"), std::string::npos) << description;
}

// `joule measure` on a driver whose power-sample reads hang from 0.5 s on:
// the command's exit status and a report come back in bounded time, with a
// warning naming the hung call, instead of joule never returning.
TEST(GpuFaultTest, JouleMeasureOnAHungDriverReportsAndExits) {
  TempDir tmp;
  const auto fake = use_fake_nvml(
      tmp, std::string(kH100) + " power_w=300\nhang function=nvmlDeviceGetSamples after_ms=500\n");
  const double start_s = steady_now_s();
  const auto r = testing::run_process({JOULE_BINARY, "measure", "--", "sh", "-c", "sleep 3; exit 3"},
                                      {{"JOULE_NVML_LIBRARY", fake.library_path}, {"JOULE_POWERCAP_ROOT", "/nonexistent"},
                                       {"JOULE_SIM", ""}},
                                      20.0);
  const double took_s = steady_now_s() - start_s;
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(took_s, 12.0);
  // Named as in flight while the window settles, or (once stop() gave up on
  // the call and the window was computed again) as the data it left missing.
  const bool named = r.err.find("a driver call (power samples) has not returned") != std::string::npos ||
                     (r.err.find("is missing") != std::string::npos &&
                      r.err.find("(power samples) blocked for") != std::string::npos);
  EXPECT_TRUE(named) << r.err << r.out;
}

// --- the energy counter restarts ---------------------------------------------

// Exact energy of the fake's pulse (200 W, then 500 W, each 0.35 s) over [a, b].
double pulse_energy_j(double a_s, double b_s) {
  const auto from_zero = [](double t_s) {
    const double period_s = 0.7;
    const double whole = std::floor(t_s / period_s);
    const double phase_s = t_s - whole * period_s;
    const double in_period_j = phase_s <= 0.35 ? 200.0 * phase_s : 200.0 * 0.35 + 500.0 * (phase_s - 0.35);
    return whole * (200.0 + 500.0) * 0.35 + in_period_j;
  };
  return from_zero(b_s) - from_zero(a_s);
}

// A sampler without its thread on the fake driver's GPU, moved on a virtual
// clock (joule's and the fake's together) in 0.1 ms steps: anchors polled
// every 0.5 ms, samples every 0.1 s, the windows' edges noted as time passes
// them, and each window's value taken 0.3 s after its end, as settle() gives
// it. The windows come by their ends.
struct TimedWindow {
  double begin_s, end_s;
};
class VirtualClockRun {
 public:
  VirtualClockRun(const FakeDriver& driver, const testing::FakeLibrary& fake)
      : sampler_(driver.open(fake), {}, clock_, options()),
        set_fake_time_(driver.helper<void (*)(double)>(fake, "set_time_s")) {  // once the fake is loaded
    sampler_.start();
    sampler_.pin_history(0.0);
  }
  Sampler& sampler() { return sampler_; }

  std::vector<EnergyEstimate> run_to(double until_s, const std::vector<TimedWindow>& windows) {
    std::vector<double> edges;
    for (const TimedWindow& w : windows) edges.insert(edges.end(), {w.begin_s, w.end_s});
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    auto next_edge = edges.begin();
    std::vector<EnergyEstimate> at_settle(windows.size());
    std::size_t next_settle = 0;
    for (int64_t step = 1; step * 1e-4 <= until_s; ++step) {
      const double now_s = static_cast<double>(step) * 1e-4;
      clock_->set_s(now_s);
      set_fake_time_(now_s);
      for (; next_edge != edges.end() && *next_edge <= now_s + 1e-9; ++next_edge) sampler_.note_window_edge(*next_edge);
      if (step % 5 == 0) sampler_.poll_counter_anchors();
      if (step % 1000 == 0) sampler_.sample_now();
      for (; next_settle < windows.size() && windows[next_settle].end_s + 0.3 <= now_s; ++next_settle) {
        at_settle[next_settle] = sampler_.gpu_energy(0, windows[next_settle].begin_s, windows[next_settle].end_s);
      }
    }
    EXPECT_EQ(next_settle, windows.size()) << "windows must come by their ends, and end 0.3 s before the run";
    return at_settle;
  }

 private:
  static SamplerOptions options() {
    SamplerOptions options;
    options.background_thread = false;
    options.power_samples_drain_s = 0.1;
    return options;
  }
  std::shared_ptr<VirtualClock> clock_ = std::make_shared<VirtualClock>();
  Sampler sampler_;
  void (*set_fake_time_)(double);
};

// The counter restarts from 0 at 10.05 s (a driver reload or GPU reset) while
// windows are open across it, on a virtual clock. Windows across the reset
// keep their right energy (no jump of the counter's whole value), the anchor
// reader finds the counter's steps again and windows after it are anchored.
TEST_P(GpuFaultOnFakeDriverTest, AnEnergyCounterResetMidRunLeavesWindowsAcrossItRightAndAnchorsComeBack) {
  TempDir tmp;
  const auto fake = driver().use(
      tmp, "clock virtual\n" + std::string(kGpu) +
               " energy_phase_ms=37 power_w=200 pulse_w=500 pulse_period_ms=700 energy_reset_ms=10050\n");
  VirtualClockRun run(driver(), fake);
  const std::vector<TimedWindow> windows = {  // by their ends
      {0.5, 1.0},      // the first edge: the reader finds the counter's steps
      {2.0, 9.0},      // before the reset: anchored
      {10.02, 10.09},  // around the reset's instant
      {9.52, 10.51},   // across it
      {10.04, 12.51},  // from just before it
      {5.03, 15.04},   // long, across it
      {16.01, 17.02},  // after it: anchored again
      {17.5, 19.5},
  };
  // Each window's value as settle() gives it, and as a refresh gives it at
  // the end of the run.
  const std::vector<EnergyEstimate> at_settle = run.run_to(20.5, windows);
  Sampler& sampler = run.sampler();
  SCOPED_TRACE(sampler.gpu_method_description(0));
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const TimedWindow& w = windows[i];
    const double truth_j = pulse_energy_j(w.begin_s, w.end_s);
    for (const EnergyEstimate& e : {at_settle[i], sampler.gpu_energy(0, w.begin_s, w.end_s)}) {
      SCOPED_TRACE(::testing::Message() << "window " << w.begin_s << "-" << w.end_s << ": " << e.energy_j
                                        << " J against " << truth_j << " J, anchored " << e.counter_anchored);
      EXPECT_TRUE(e.settled);
      EXPECT_FALSE(e.problem) << *e.problem;
      EXPECT_NEAR(e.energy_j, truth_j, std::max(0.01 * truth_j, 1.0));
    }
    // Anchored where the steps were known on both edges (found again after
    // the reset). A refresh after the reset may fall back to the samples:
    // the reader forgets the old steps' values when the counter goes back.
    if (i == 1 || i >= 6) {
      EXPECT_TRUE(at_settle[i].counter_anchored) << w.begin_s << "-" << w.end_s;
    }
  }
  EXPECT_GE(sampler.stats().anchors.relocks, 1u);  // the reset was seen, and the steps found again
  EXPECT_NEAR(sampler.gpu_scale(0), 1.0, 0.01);   // the calibration kept its bearings
}

// The counter restarts at 5.05 s with no edge read for 1.5 s around it, at a
// steady 300 W. A fast counter (ROCm SMI) cannot bridge so long a stretch
// from its rates on either side: windows across the restart keep their
// samples (as a counter read by grid does), and those wholly on either side
// stay anchored, also when refreshed after it (the anchors before the
// restart are kept, in their own epoch, not dropped).
TEST_P(GpuFaultOnFakeDriverTest, ACounterRestartFarFromAnyEdgeLeavesWindowsAcrossItOnTheirSamples) {
  TempDir tmp;
  const auto fake = driver().use(
      tmp, "clock virtual\n" + std::string(kGpu) + " energy_phase_ms=37 power_w=300 energy_reset_ms=5050\n");
  VirtualClockRun run(driver(), fake);
  const std::vector<TimedWindow> windows = {{0.5, 1.0}, {2.0, 4.5}, {4.5, 6.0}, {2.0, 7.0}, {6.0, 7.0}};  // by their ends
  const std::vector<bool> across = {false, false, true, true, false};
  const std::vector<EnergyEstimate> at_settle = run.run_to(8.0, windows);
  Sampler& sampler = run.sampler();
  SCOPED_TRACE(sampler.gpu_method_description(0));
  const bool fast_counter = driver().backend == GpuBackend::kRocm;
  for (std::size_t i = 1; i < windows.size(); ++i) {
    const TimedWindow& w = windows[i];
    const double truth_j = 300.0 * (w.end_s - w.begin_s);
    const EnergyEstimate refreshed = sampler.gpu_energy(0, w.begin_s, w.end_s);
    for (const EnergyEstimate& e : {at_settle[i], refreshed}) {
      SCOPED_TRACE(::testing::Message() << "window " << w.begin_s << "-" << w.end_s << ": " << e.energy_j
                                        << " J against " << truth_j << " J, anchored " << e.counter_anchored);
      EXPECT_TRUE(e.settled);
      EXPECT_FALSE(e.problem) << *e.problem;
      EXPECT_NEAR(e.energy_j, truth_j, 0.01 * truth_j);
      if (across[i]) {
        EXPECT_FALSE(e.counter_anchored);
      }
    }
    // A counter read by grid drops its anchors at a restart and finds its
    // steps again first; a fast counter keeps them and reads on.
    if (fast_counter && !across[i]) {
      EXPECT_TRUE(at_settle[i].counter_anchored) << w.begin_s << "-" << w.end_s;
      EXPECT_TRUE(refreshed.counter_anchored) << w.begin_s << "-" << w.end_s;
    }
  }
  EXPECT_GE(sampler.stats().anchors.relocks, 1u);
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, GpuFaultOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

}  // namespace
}  // namespace joule
