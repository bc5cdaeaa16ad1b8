#include "joule/measure/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/scripted_gpu.h"
#include "joule/device/sim.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::ScriptedGpu;

SamplerOptions manual(double interval_s = 0.1) {
  SamplerOptions options;
  options.interval_s = interval_s;
  options.background_thread = false;
  return options;
}

// Drives a manual sampler from the clock's current time to end_s.
void run_until(Sampler& sampler, VirtualClock& clock, double end_s) {
  const double step_s = sampler.options().interval_s;
  while (clock.now_s() + step_s <= end_s + 1e-12) {
    clock.advance_s(step_s);
    sampler.sample_now();
  }
}

TEST(SamplerTest, ConstantPowerGivesExactEnergyForAnyInterval) {
  auto clock = std::make_shared<VirtualClock>();
  auto gpu = std::make_shared<SimGpu>(0, SimGpuModel{}, clock);
  gpu->set_load(1.0);  // 650 W
  Sampler sampler({gpu}, {}, clock, manual());
  sampler.start();
  run_until(sampler, *clock, 5.0);
  EXPECT_NEAR(sampler.gpu_energy(0, 1.0, 3.0).energy_j, 1300.0, 1e-6);
  EXPECT_NEAR(sampler.gpu_energy(0, 1.234, 1.287).energy_j, 650.0 * 0.053, 1e-6);
  // Past the last sample, the last power carries on.
  EXPECT_NEAR(sampler.gpu_energy(0, 4.9, 5.05).energy_j, 650.0 * 0.15, 1e-6);
}

TEST(SamplerTest, LoadStepErrorIsBoundedByOneIntervalOfThePowerChange) {
  auto clock = std::make_shared<VirtualClock>();
  auto gpu = std::make_shared<SimGpu>(0, SimGpuModel{}, clock);
  Sampler sampler({gpu}, {}, clock, manual(0.1));
  sampler.start();
  run_until(sampler, *clock, 1.0);
  clock->advance_s(0.03);  // the step happens between two samples
  gpu->set_load(1.0);
  run_until(sampler, *clock, 3.0);
  const double truth_j = 70.0 * 1.03 + 650.0 * (2.0 - 0.03);
  const double estimate_j = sampler.gpu_energy(0, 0.0, 3.0).energy_j;
  EXPECT_NEAR(estimate_j, truth_j, 0.1 * (650.0 - 70.0));
  EXPECT_NEAR(estimate_j, sampler.gpu_energy(0, 0.0, 1.5).energy_j + sampler.gpu_energy(0, 1.5, 3.0).energy_j, 1e-9);
}

TEST(SamplerTest, CounterCalibratesABiasedPowerReading) {
  auto clock = std::make_shared<VirtualClock>();
  // True power 200 W + a 1 Hz wiggle; the sensor reads 10% low; the counter
  // is exact but only steps every 100 ms.
  auto gpu = std::make_shared<ScriptedGpu>(0, clock, [](double t) { return 200.0 + 50.0 * std::sin(2 * M_PI * t); });
  gpu->reading_bias = 0.9;
  gpu->counter_update_s = 0.1;
  SamplerOptions options = manual(0.01);
  options.counter_interval_s = 1.0;
  Sampler sampler({gpu}, {}, clock, options);
  sampler.start();
  run_until(sampler, *clock, 5.0);
  EXPECT_DOUBLE_EQ(sampler.gpu_scale(0), 1.0);  // not enough counter history yet
  run_until(sampler, *clock, 40.0);
  EXPECT_NEAR(sampler.gpu_scale(0), 1.0 / 0.9, 0.01);
  for (const double length_s : {0.1, 1.0, 10.0}) {
    const double truth_j = gpu->true_energy_j(30.0, 30.0 + length_s);
    EXPECT_NEAR(sampler.gpu_energy(0, 30.0, 30.0 + length_s).energy_j, truth_j, 0.01 * truth_j) << length_s;
  }
  // One counter read per second, not one per tick.
  EXPECT_NEAR(static_cast<double>(sampler.stats().counter_reads), 40.0, 2.0);
}

TEST(SamplerTest, CounterReadsShareOneBudgetRoundRobin) {
  auto clock = std::make_shared<VirtualClock>();
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<ScriptedGpu*> raw;
  for (unsigned i = 0; i < 4; ++i) {
    auto gpu = std::make_shared<ScriptedGpu>(i, clock, [](double) { return 100.0; });
    raw.push_back(gpu.get());
    gpus.push_back(gpu);
  }
  SamplerOptions options = manual(0.1);
  options.counter_interval_s = 0.2;
  Sampler sampler(gpus, {}, clock, options);
  sampler.start();
  run_until(sampler, *clock, 8.0);
  // One read per 0.2 s in all (41 in 8 s), shared evenly by the 4 GPUs.
  int total = 0;
  for (auto* gpu : raw) {
    EXPECT_NEAR(gpu->counter_reads, 41 / 4.0, 1.0);
    total += gpu->counter_reads;
  }
  EXPECT_NEAR(total, 41, 1);
}

TEST(SamplerTest, HistoryIsTrimmedUnlessPinned) {
  auto clock = std::make_shared<VirtualClock>();
  auto gpu = std::make_shared<ScriptedGpu>(0, clock, [](double t) { return t < 50.0 ? 100.0 : 300.0; });
  SamplerOptions options = manual(0.5);
  options.history_s = 10.0;
  Sampler sampler({gpu}, {}, clock, options);
  sampler.start();
  sampler.pin_history(2.0);
  run_until(sampler, *clock, 100.0);
  // Pinned at 2 s: the energy from 2 s is still exact.
  EXPECT_NEAR(sampler.gpu_energy(0, 2.0, 100.0).energy_j, 100.0 * 48.0 + 300.0 * 50.0, 0.5 * 200.0);
  sampler.pin_history(std::numeric_limits<double>::infinity());
  run_until(sampler, *clock, 101.0);
  // Unpinned: history older than 10 s is gone, so a query there extrapolates
  // back from the oldest kept sample (300 W) instead of the true 100 W.
  EXPECT_GT(sampler.gpu_energy(0, 2.0, 100.0).energy_j, 300.0 * 90.0);
}

TEST(SamplerTest, OptionalFieldsGoToTheTimeline) {
  auto clock = std::make_shared<VirtualClock>();
  auto gpu = std::make_shared<ScriptedGpu>(0, clock, [](double) { return 123.0; });
  SamplerOptions options = manual(0.1);
  options.fields = {true, true, true, true};
  Sampler sampler({gpu}, {}, clock, options);
  sampler.start();
  run_until(sampler, *clock, 0.3);
  const auto samples = sampler.timeline().samples();
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_DOUBLE_EQ(samples[3].power_w, 123.0);
  EXPECT_EQ(samples[3].gpu_util_percent, 50);
  EXPECT_EQ(samples[3].memory_util_percent, 25);
  EXPECT_EQ(samples[3].sm_clock_mhz, 1500);
  EXPECT_EQ(samples[3].temperature_c, 50);
  EXPECT_EQ(samples[3].memory_used_bytes, 1 << 20);
}

TEST(SamplerTest, RejectsBadOptions) {
  auto clock = std::make_shared<VirtualClock>();
  SamplerOptions too_fast = manual(0.0001);
  EXPECT_THROW(Sampler({}, {}, clock, too_fast), UsageError);
  SamplerOptions threaded;  // background thread on a virtual clock
  EXPECT_THROW(Sampler({}, {}, clock, threaded), UsageError);
}

TEST(SamplerTest, BackgroundThreadSamplesAtTheRequestedRate) {
  auto gpu = std::make_shared<SimGpu>(0, SimGpuModel{}, SteadyClock::instance());
  SamplerOptions options;
  options.interval_s = 0.005;  // 200 Hz
  Sampler sampler({gpu}, {}, SteadyClock::instance(), options);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  sampler.stop();
  const auto stats = sampler.stats();
  // ~100 ticks in 0.5 s; allow for a loaded test machine.
  EXPECT_GT(stats.ticks, 60u);
  EXPECT_LT(stats.ticks, 110u);
}

}  // namespace
}  // namespace joule
