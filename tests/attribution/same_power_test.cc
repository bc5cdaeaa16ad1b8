// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// AttributionOptions::same_power: regions fitted with one power. Four
// identical 2 ms blocks in a row, far shorter than the 20 ms samples, are
// hard to tell apart one by one; fitted as one, each is its own time at the
// group's power, with the interval of what the data say of them together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "attribution/attribution_test_support.h"
#include "joule/attribution/attribution.h"
#include "joule/error.h"

namespace joule::attribution {
namespace {

using namespace test_support;  // NOLINT: synthetic runs, expect_usage_error (attribution_test_support.h)

// An embedding, four identical blocks at 500 W, a 650 W head and an idle gap:
// 16.5 ms a step.
StepSpec blocks_step() {
  StepSpec spec{{"embed", "block0", "block1", "block2", "block3", "head"}, {300, 500, 500, 500, 500, 650}, {}};
  spec.parts = {{0, 0.5e-3}, {1, 2e-3}, {2, 2e-3}, {3, 2e-3}, {4, 2e-3}, {5, 4e-3}, {std::nullopt, 4e-3}};
  return spec;
}

const std::vector<RegionGroup> kBlocks = {{"blocks", {"block0", "block1", "block2", "block3"}}};

double half_width(const RegionEnergy& r) { return (r.energy_high_j - r.energy_low_j) / 2 / r.energy_j; }

TEST(SamePowerTest, IdenticalBlocksFittedAsOneAreEachWithinOnePercentAtATenthOfTheInterval) {
  StepSpec spec = blocks_step();
  // The blocks draw one power, as the group says (on a real GPU the model's
  // bias, which window.cc adds to the intervals, covers how far identical
  // modules differ).
  spec.power_jitter = 0.0;
  const SyntheticRun run(spec, 600, 7);  // ~10 s
  const std::vector<PowerObservation> obs = observe(run, Kind::kAverages, 7);
  const Attribution own = attribute(obs, run.intervals, spec.names, 0.0, run.end_s, run.total_j);
  AttributionOptions options;
  options.same_power = kBlocks;
  const Attribution tied = attribute(obs, run.intervals, spec.names, 0.0, run.end_s, run.total_j, options);
  EXPECT_TRUE(has_note(tied, "4 regions fitted with one power, group 'blocks' (block0, block1, block2, block3)"));
  EXPECT_FALSE(has_note(own, "fitted with one power"));
  EXPECT_NEAR(parts_sum_j(tied), run.total_j, 1e-9 * run.total_j);
  for (std::size_t r = 1; r <= 4; ++r) {
    const RegionEnergy& b = tied.regions[r];
    ASSERT_TRUE(b.resolved) << b.name;
    EXPECT_EQ(b.power_w, tied.regions[1].power_w) << "one power for the group";
    EXPECT_NEAR(b.energy_j, b.power_w * b.gpu_time_s * tied.scale, 1e-9 * b.energy_j) << "its own time";
    // Each alone: -1.5% to +2.2% at +-4.4-6.0%; as one: +0.6% at +-0.6%.
    EXPECT_NEAR(b.energy_j / run.true_energy_j[r] - 1, 0.0, 0.01) << b.name;
    // What the data say of four neighbours together is far surer than of each.
    EXPECT_LT(half_width(b), 0.2 * half_width(own.regions[r])) << b.name;
  }
  // The regions outside the group keep powers of their own.
  EXPECT_NEAR(tied.regions[5].energy_j / run.true_energy_j[5] - 1, 0.0, 0.02);
  EXPECT_NE(tied.regions[5].power_w, tied.regions[1].power_w);
}

// A group's members in a total: the total's interval comes from the same
// rounds, in which the members' energies move together.
TEST(SamePowerTest, TotalsOfTiedRegionsSumTheirRounds) {
  const StepSpec spec = blocks_step();
  const SyntheticRun run(spec, 300, 11);
  const std::vector<PowerObservation> obs = observe(run, Kind::kAverages, 11);
  AttributionOptions options;
  options.same_power = kBlocks;
  options.totals = {{"first two", {"block0", "block1"}}};
  const Attribution a = attribute(obs, run.intervals, spec.names, 0.0, run.end_s, run.total_j, options);
  ASSERT_EQ(a.totals.size(), 1u);
  const RegionEnergy& total = a.totals[0];
  EXPECT_NEAR(total.energy_j, a.regions[1].energy_j + a.regions[2].energy_j, 1e-9 * total.energy_j);
  // Perfectly correlated parts: the sum's interval is the parts' added.
  EXPECT_NEAR(total.energy_high_j - total.energy_low_j,
              (a.regions[1].energy_high_j - a.regions[1].energy_low_j) +
                  (a.regions[2].energy_high_j - a.regions[2].energy_low_j),
              0.02 * (total.energy_high_j - total.energy_low_j));
}

TEST(SamePowerTest, RejectsGroupsThatCannotBeFittedNamingThem) {
  const std::vector<std::string> names = {"a", "b", "c"};
  std::vector<RegionInterval> intervals = {{0, 0.0, 0.4}, {1, 0.4, 0.8}, {2, 0.0, 1.0, false, true}};
  const std::vector<PowerObservation> obs = {{0.0, 0.5, 300.0}, {0.5, 1.0, 320.0}};
  const auto with = [&](std::vector<RegionGroup> groups) {
    return [&, groups] {
      AttributionOptions options;
      options.same_power = groups;
      attribute(obs, intervals, names, 0.0, 1.0, 310.0, options);
    };
  };
  expect_usage_error(with({{"", {"a", "b"}}}), "a same-power group has no name");
  expect_usage_error(with({{"g", {"a"}}, {"g", {"b"}}}), "two same-power groups are named 'g'");
  expect_usage_error(with({{"g", {}}}), "same-power group 'g' names no region");
  expect_usage_error(with({{"g", {"a", "zz"}}}), "names region 'zz', which is not among the window's regions");
  expect_usage_error(with({{"g", {"a", "b"}}, {"h", {"b"}}}), "region 'b' is in same-power groups 'g' and 'h'");
  expect_usage_error(with({{"g", {"a", "c"}}}), "names region 'c', which is concurrent");
}

}  // namespace
}  // namespace joule::attribution
