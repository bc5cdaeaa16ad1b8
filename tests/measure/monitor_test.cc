// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/measure/monitor.h"

#include <gtest/gtest.h>

#include "common/on_off_load.h"
#include "common/scripted_gpu.h"
#include "joule/device/sim.h"
#include "joule/error.h"

namespace joule {
namespace {

struct MonitorFixture : ::testing::Test {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  std::shared_ptr<SimGpu> gpu0 = std::make_shared<SimGpu>(0, SimGpuModel{}, clock);
  std::shared_ptr<SimGpu> gpu1 = std::make_shared<SimGpu>(1, SimGpuModel{}, clock);
  int synchronize_calls = 0;
  std::unique_ptr<Monitor> monitor;

  void SetUp() override {
    MonitorOptions options;
    options.sampler.background_thread = false;
    options.sampler.interval_s = 0.1;
    options.synchronize = [this] { ++synchronize_calls; };
    gpu1->set_load(1.0);
    monitor = std::make_unique<Monitor>(std::vector<std::shared_ptr<Gpu>>{gpu0, gpu1},
                                        std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock, options);
  }

  void advance(double seconds) {
    for (int i = 0; i < static_cast<int>(std::lround(seconds / 0.1)); ++i) {
      clock->advance_s(0.1);
      monitor->sampler().sample_now();
    }
  }
};

TEST_F(MonitorFixture, NestedAndOverlappingWindowsEachGetTheirOwnEnergy) {
  monitor->begin_window("epoch");
  advance(1.0);
  monitor->begin_window("step");
  advance(0.5);
  monitor->begin_window("overlap");
  advance(0.5);
  const Measurement step = monitor->end_window("step");
  advance(1.0);
  const Measurement epoch = monitor->end_window("epoch");
  advance(0.2);
  const Measurement overlap = monitor->end_window("overlap");

  EXPECT_NEAR(step.elapsed_s, 1.0, 1e-9);
  EXPECT_NEAR(epoch.elapsed_s, 3.0, 1e-9);
  EXPECT_NEAR(overlap.elapsed_s, 1.7, 1e-9);
  EXPECT_NEAR(step.gpu_energy_j[0], 70.0, 1e-6);
  EXPECT_NEAR(step.gpu_energy_j[1], 650.0, 1e-6);
  EXPECT_NEAR(epoch.gpu_total_energy_j(), 3.0 * 720.0, 1e-6);
  EXPECT_NEAR(overlap.total_energy_j(), 1.7 * 720.0, 1e-6);
  EXPECT_EQ(epoch.name, "epoch");
  EXPECT_TRUE(epoch.warnings.empty());
  EXPECT_EQ(synchronize_calls, 6);
}

TEST_F(MonitorFixture, ALimitChangeInsideAWindowIsCounted) {
  monitor->begin_window("w");
  advance(1.0);
  gpu1->set_power_limit_mw(300'000);
  advance(1.0);
  const Measurement m = monitor->end_window("w");
  EXPECT_NEAR(m.gpu_energy_j[1], 650.0 + 300.0, 0.1 * 350.0);  // within one interval of the change
}

TEST_F(MonitorFixture, WindowNamesMustBeOpenAndUnique) {
  monitor->begin_window("a");
  EXPECT_THROW(monitor->begin_window("a"), UsageError);
  EXPECT_THROW(monitor->end_window("b"), UsageError);
  EXPECT_TRUE(monitor->window_open("a"));
  monitor->end_window("a");
  EXPECT_FALSE(monitor->window_open("a"));
  EXPECT_THROW(monitor->end_window("a"), UsageError);
  monitor->begin_window("a");  // the name is free again
}

TEST_F(MonitorFixture, LongWindowsOutliveTheSamplerHistory) {
  // history_s defaults to 30 s; an open window pins what it needs. The load
  // changes early, so history lost at the start would show in the result.
  gpu0->set_load(1.0);
  monitor->begin_window("long");
  advance(10.0);
  gpu0->set_load(0.0);
  advance(90.0);
  const Measurement m = monitor->end_window("long");
  // Each of the two load steps may cost up to half an interval of the change;
  // lost history would cost thousands of joules.
  EXPECT_NEAR(m.gpu_energy_j[0], 650.0 * 10.0 + 70.0 * (m.elapsed_s - 10.0), 0.1 * 580.0);
}

TEST_F(MonitorFixture, ALongWindowCanStillBeSettledAfterItEnds) {
  // A window longer than the history: once it ends, settle() and refresh()
  // compute it again, and its beginning must still be held then.
  gpu0->set_load(1.0);
  monitor->begin_window("long");
  advance(10.0);
  gpu0->set_load(0.0);
  advance(90.0);
  const Measurement ended = monitor->end_window("long");
  advance(5.0);  // sampling (and trimming) goes on while the caller settles
  const Measurement again = monitor->refresh(ended);
  EXPECT_TRUE(again.warnings.empty()) << again.warnings.front();
  EXPECT_NEAR(again.gpu_energy_j[0], ended.gpu_energy_j[0], 0.02 * ended.gpu_energy_j[0]);
}

TEST_F(MonitorFixture, EndedLongWindowsStayPinnedAmongManyShortOnes) {
  // The pin is the oldest beginning among open windows and windows that ended
  // within the history, kept as a running minimum: short windows ending after
  // a long one, and long windows ending out of their beginnings' order, must
  // not release a beginning that a window still needs.
  gpu0->set_load(1.0);
  monitor->begin_window("outer");
  advance(10.0);
  monitor->begin_window("inner");
  gpu0->set_load(0.0);
  for (int i = 0; i < 900; ++i) {  // one short window per 0.1 s for 90 s
    monitor->begin_window("step");
    advance(0.1);
    monitor->end_window("step");
  }
  const Measurement inner = monitor->end_window("inner");  // began after outer, ends first
  const Measurement outer = monitor->end_window("outer");
  for (int i = 0; i < 50; ++i) {  // more short windows while the long ones settle
    monitor->begin_window("step");
    advance(0.1);
    monitor->end_window("step");
  }
  for (const Measurement& ended : {inner, outer}) {
    const Measurement again = monitor->refresh(ended);
    EXPECT_TRUE(again.warnings.empty()) << ended.name << ": " << again.warnings.front();
    EXPECT_NEAR(again.gpu_energy_j[0], ended.gpu_energy_j[0], 0.02 * ended.gpu_energy_j[0]) << ended.name;
  }
}

TEST(MeasurementTest, TotalsAddUpEveryDomain) {
  Measurement m;
  m.gpu_energy_j = {1.0, 2.0};
  m.cpu_package_energy_j = {3.0};
  m.dram_energy_j = {4.0};
  EXPECT_DOUBLE_EQ(m.gpu_total_energy_j(), 3.0);
  EXPECT_DOUBLE_EQ(m.cpu_total_energy_j(), 7.0);
  EXPECT_DOUBLE_EQ(m.total_energy_j(), 10.0);
}

TEST(MonitorSettleTest, EndWindowIsImmediateAndSettleGivesTheExactValue) {
  const testing::OnOffLoad load(11, 100.0, 700.0, 0.15, 2.5, 30.0);
  auto clock = std::make_shared<VirtualClock>();
  auto gpu = std::make_shared<testing::ScriptedGpu>(
      0, clock, [&load](double t) { return load.power_w(t); },
      [&load](double t0, double t1) { return load.energy_j(t0, t1); });
  gpu->sample_period_s = 0.02;
  gpu->sample_latency_s = 0.001;
  MonitorOptions options;
  options.sampler.background_thread = false;
  Monitor monitor({gpu}, {}, clock, options);
  auto tick_to = [&](double until_s) {
    while (clock->now_s() + 0.1 <= until_s + 1e-9) {
      clock->advance_s(0.1);
      monitor.sampler().sample_now();
    }
  };
  tick_to(3.0);
  clock->advance_s(0.05);
  monitor.begin_window("step");
  tick_to(5.0);
  clock->advance_s(0.07);
  const Measurement immediate = monitor.end_window("step");
  EXPECT_FALSE(immediate.settled);  // the samples after 5.0 s have not been drained
  ASSERT_EQ(immediate.gpu_sources.size(), 1u);
  EXPECT_EQ(immediate.gpu_sources[0].method, GpuEnergyMethod::kPowerSamples);
  const std::string description = monitor.sampler().gpu_method_description(0);
  EXPECT_NE(description.find("driver power samples every 20 ms"), std::string::npos) << description;
  // Still not settled without new data; a manual monitor does not wait.
  EXPECT_FALSE(monitor.settle(immediate, 0.5).settled);
  tick_to(5.2);  // the wish settle() left makes the next tick drain the buffer
  const Measurement settled = monitor.refresh(immediate);
  EXPECT_TRUE(settled.settled);
  EXPECT_EQ(settled.name, "step");
  EXPECT_DOUBLE_EQ(settled.begin_s, immediate.begin_s);
  EXPECT_NEAR(settled.elapsed_s, immediate.elapsed_s, 1e-12);
  const double truth_j = load.energy_j(settled.begin_s, settled.end_s());
  EXPECT_NEAR(settled.gpu_energy_j[0], truth_j, 0.02 * 600.0);
  EXPECT_TRUE(monitor.settle(settled).settled);  // settled stays settled, no wait
}

}  // namespace
}  // namespace joule
