// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// attribute_window reads the share of the window's samples at the GPU's power
// cap (where the sampler reads the cap state) and, where the cap held most of
// the window, says that a region's figure is what it drew, not what leaving it
// out would save.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "attribution/attribution_test_support.h"
#include "joule/attribution/attribution.h"
#include "joule/attribution/json.h"
#include "joule/attribution/regions.h"
#include "joule/attribution/window.h"
#include "joule/clock.h"
#include "joule/device/sim.h"
#include "joule/measure/monitor.h"

namespace joule::attribution {
namespace {

using test_support::has_note;

constexpr double kTickS = 0.01;
constexpr const char* kCapNote = "at its power cap in";

// 40 steps of a region at `work_load` for 40 ms, then 20 ms at no load, on a
// simulated GPU whose 650 W full load is capped at 550 W; the sampler ticks
// every 10 ms and reads the cap state where `read_cap`.
Attribution attributed(double work_load, bool read_cap) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpuModel model;
  model.max_limit_mw = model.default_limit_mw = 550'000;
  auto gpu = std::make_shared<SimGpu>(0, model, clock);
  MonitorOptions options;
  options.sampler.background_thread = false;
  options.sampler.interval_s = kTickS;
  options.sampler.fields.power_cap = read_cap;
  Monitor monitor({gpu}, {}, clock, options);
  RegionRecorder regions(clock);
  const auto advance = [&](double seconds) {
    for (int i = 0; i < static_cast<int>(std::lround(seconds / kTickS)); ++i) {
      clock->advance_s(kTickS);
      monitor.sampler().sample_now();
    }
  };
  monitor.begin_window("w");
  for (int step = 0; step < 40; ++step) {
    gpu->set_load(work_load);
    regions.begin("work");
    advance(0.04);
    regions.end("work");
    gpu->set_load(0.0);
    advance(0.02);
  }
  const Measurement m = monitor.end_window("w");
  advance(0.2);
  AttributionOptions fit;
  fit.bootstrap_rounds = 0;
  const std::vector<Attribution> read = attribute_window(monitor, monitor.settle(m, 1.0), regions, fit);
  EXPECT_EQ(read.size(), 1u);
  return read.at(0);
}

TEST(PowerCapNoteTest, AWindowMostlyAtTheCapSaysWhatARegionsFigureMeans) {
  const Attribution a = attributed(1.0, true);  // capped while the region runs: 4 ticks of 6
  EXPECT_NEAR(a.power_capped_share, 4.0 / 6.0, 0.02);
  EXPECT_TRUE(has_note(a, kCapNote)) << ::testing::PrintToString(a.notes);
  EXPECT_TRUE(has_note(a, "in 67% of the samples")) << ::testing::PrintToString(a.notes);
  EXPECT_NEAR(to_json(a).at("power_capped_share").get<double>(), a.power_capped_share, 1e-12);
}

TEST(PowerCapNoteTest, AWindowUnderTheCapHasItsShareAndNoNote) {
  const Attribution a = attributed(0.5, true);  // 360 W asked of a 550 W limit
  EXPECT_EQ(a.power_capped_share, 0.0);
  EXPECT_FALSE(has_note(a, kCapNote)) << ::testing::PrintToString(a.notes);
}

TEST(PowerCapNoteTest, WhereTheStateWasNotReadTheShareIsUnknownAndNothingIsSaid) {
  const Attribution a = attributed(1.0, false);
  EXPECT_TRUE(std::isnan(a.power_capped_share));
  EXPECT_FALSE(has_note(a, kCapNote)) << ::testing::PrintToString(a.notes);
  EXPECT_TRUE(to_json(a).at("power_capped_share").is_null());
}

}  // namespace
}  // namespace joule::attribution
