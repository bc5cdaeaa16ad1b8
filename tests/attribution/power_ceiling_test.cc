// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// AttributionOptions::power_ceiling_w: a region fitted far above anything the
// GPU can draw (its highest power limit) is the fit's figure, not a draw: the
// result says so and its interval reaches down to what the GPU surely drew
// then; attribute_window reads the ceiling from each GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attribution/attribution_test_support.h"
#include "joule/attribution/attribution.h"
#include "joule/attribution/regions.h"
#include "joule/attribution/window.h"
#include "joule/error.h"
#include "joule/clock.h"
#include "joule/device/sim.h"
#include "joule/measure/monitor.h"

namespace joule::attribution {
namespace {

using namespace test_support;  // NOLINT: synthetic runs, expect_usage_error (attribution_test_support.h)

// A 300 W embedding, a 600 W block and a 1 ms burst at 1,200 W, then idle:
// 10 ms a step, 10 s.
StepSpec burst_step() {
  StepSpec spec{{"embed", "block", "burst"}, {300, 600, 1200}, {}};
  spec.parts = {{0, 1e-3}, {1, 5e-3}, {2, 1e-3}, {std::nullopt, 3e-3}};
  return spec;
}

Attribution fitted(std::optional<double> ceiling_w) {
  const StepSpec spec = burst_step();
  const SyntheticRun run(spec, 1000, 3);
  AttributionOptions options;
  options.power_ceiling_w = ceiling_w;
  options.totals = {{"tail", {"block", "burst"}}};
  return attribute(observe(run, Kind::kAverages, 3), run.intervals, spec.names, 0.0, run.end_s, run.total_j,
                   options);
}

TEST(PowerCeilingTest, ARegionFittedAboveWhatTheGpuCanDrawIsNotedAndItsIntervalReachesItsIdleEnergy) {
  const Attribution a = fitted(800.0);  // the burst's 1,200 W is 1.5x: no GPU holds that
  const Attribution unchecked = fitted(std::nullopt);
  const RegionEnergy& burst = a.regions[2];
  ASSERT_TRUE(burst.resolved && a.baseline_separated);
  EXPECT_NEAR(burst.power_w, 1200.0, 60.0);
  EXPECT_EQ(a.power_ceiling_w, 800.0);
  EXPECT_TRUE(has_note(a, "region 'burst': fitted at ")) << ::testing::PrintToString(a.notes);
  EXPECT_TRUE(has_note(a, "x the most this GPU can draw (800 W, its highest power limit)"));
  EXPECT_FALSE(has_note(a, "region 'block': fitted at"));  // 600 W of 800
  EXPECT_FALSE(has_note(a, "region 'embed': fitted at"));
  // The burst's interval reaches down to its time at the idle power; its
  // estimate, its top and the other regions' intervals stay as fitted.
  const double idle_j = a.baseline_w * burst.gpu_time_s * a.scale;
  EXPECT_NEAR(burst.energy_low_j, idle_j, 1e-9 * idle_j);
  EXPECT_GT(unchecked.regions[2].energy_low_j, 2.0 * idle_j);
  EXPECT_EQ(burst.energy_j, unchecked.regions[2].energy_j);
  EXPECT_EQ(burst.energy_high_j, unchecked.regions[2].energy_high_j);
  EXPECT_EQ(a.regions[1].energy_low_j, unchecked.regions[1].energy_low_j);
  // A total with the burst in it is lowered by as much.
  const double lowered_j = unchecked.regions[2].energy_low_j - burst.energy_low_j;
  EXPECT_NEAR(a.totals[0].energy_low_j, unchecked.totals[0].energy_low_j - lowered_j, 1e-9 * a.totals[0].energy_j);
  EXPECT_EQ(a.totals[0].energy_high_j, unchecked.totals[0].energy_high_j);
}

TEST(PowerCeilingTest, WithinAQuarterAboveTheCeilingOrWithoutOneNothingIsNoted) {
  // 1,200 W under a 1,000 W ceiling: 1.2x, within what a fit's noise and a
  // GPU's excursions allow.
  const Attribution within = fitted(1000.0);
  EXPECT_FALSE(has_note(within, "the most this GPU can draw")) << ::testing::PrintToString(within.notes);
  const Attribution unchecked = fitted(std::nullopt);
  EXPECT_TRUE(std::isnan(unchecked.power_ceiling_w));
  EXPECT_FALSE(has_note(unchecked, "the most this GPU can draw"));
  // The same fit either way: the ceiling only notes.
  EXPECT_EQ(within.regions[2].energy_j, unchecked.regions[2].energy_j);
}

TEST(PowerCeilingTest, ACeilingThatIsNoPowerIsRefusedByName) {
  for (const double bad : {0.0, -700.0, std::nan("")}) {
    expect_usage_error([&] { fitted(bad); }, "power_ceiling_w");
  }
}

TEST(PowerCeilingTest, AWindowIsCheckedAgainstEachGpusHighestPowerLimit) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpuModel model;
  model.max_limit_mw = model.default_limit_mw = 550'000;
  auto gpu = std::make_shared<SimGpu>(0, model, clock);
  gpu->set_load(1.0);  // 650 W asked, capped at 550 W: within its ceiling
  MonitorOptions options;
  options.sampler.background_thread = false;
  options.sampler.interval_s = 0.01;
  Monitor monitor({gpu}, {}, clock, options);
  RegionRecorder regions(clock);
  const auto advance = [&](double seconds) {
    for (int i = 0; i < static_cast<int>(std::lround(seconds / 0.01)); ++i) {
      clock->advance_s(0.01);
      monitor.sampler().sample_now();
    }
  };
  monitor.begin_window("w");
  for (int step = 0; step < 40; ++step) {
    regions.begin("work");
    advance(0.04);
    regions.end("work");
    advance(0.02);
  }
  const Measurement m = monitor.end_window("w");
  advance(0.2);
  const Measurement settled = monitor.settle(m, 1.0);
  AttributionOptions fit;
  fit.bootstrap_rounds = 0;
  const std::vector<Attribution> read = attribute_window(monitor, settled, regions, fit);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].power_ceiling_w, 550.0);
  EXPECT_FALSE(has_note(read[0], "the most this GPU can draw")) << ::testing::PrintToString(read[0].notes);
  fit.power_ceiling_w = 100.0;  // given: used as given (another GPU's ceiling)
  const std::vector<Attribution> given = attribute_window(monitor, settled, regions, fit);
  EXPECT_EQ(given[0].power_ceiling_w, 100.0);
  EXPECT_TRUE(has_note(given[0], "region 'work': fitted at")) << ::testing::PrintToString(given[0].notes);
}

}  // namespace
}  // namespace joule::attribution
