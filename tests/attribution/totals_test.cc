// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Totals of regions (AttributionOptions::totals): a module's forward and its
// backward reported as one, with the interval of their sum.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "joule/attribution/attribution.h"
#include "joule/error.h"

namespace joule::attribution {
namespace {

const std::vector<std::string> kNames = {"block.forward", "block.backward", "head.forward"};
constexpr std::size_t kForward = 0, kBackward = 1, kHead = 2;

// Steps of the three regions back to back and an idle gap, every part's
// length jittered +-30%, and the power sampled at instants ~20 ms apart
// (5 W of noise): the regions' true energies are known exactly.
struct TimedSteps {
  std::vector<RegionInterval> intervals;
  std::vector<PowerObservation> samples;
  std::vector<double> true_j = std::vector<double>(kNames.size(), 0.0);
  double end_s = 0.0;
  double total_j = 0.0;
};

TimedSteps make_run(int steps, std::uint64_t seed) {
  const double power_w[] = {400.0, 520.0, 300.0}, length_s[] = {4e-3, 7e-3, 2e-3};
  const double idle_w = 80.0, gap_s = 3e-3;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  std::normal_distribution<double> noise_w(0.0, 5.0);
  TimedSteps run;
  std::vector<std::tuple<double, double, double>> segments;  // begin, end, power
  double t = 0.0;
  for (int step = 0; step < steps; ++step) {
    for (std::size_t r = 0; r < kNames.size(); ++r) {
      const double d = length_s[r] * jitter(rng);
      run.intervals.push_back({r, t, t + d});
      segments.emplace_back(t, t + d, power_w[r]);
      run.true_j[r] += power_w[r] * d;
      t += d;
    }
    const double d = gap_s * jitter(rng);
    segments.emplace_back(t, t + d, idle_w);
    t += d;
  }
  run.end_s = t;
  for (const auto& [begin, end, power] : segments) run.total_j += power * (end - begin);
  std::size_t at_segment = 0;
  for (double at = 0.0101; at < t; at += 0.0199) {
    while (std::get<1>(segments[at_segment]) <= at) ++at_segment;
    run.samples.push_back({at, at, std::get<2>(segments[at_segment]) + noise_w(rng)});
  }
  return run;
}

Attribution fit(const TimedSteps& run, const AttributionOptions& options) {
  return attribute(run.samples, run.intervals, kNames, 0.0, run.end_s, run.total_j, options);
}

double half_width(const RegionEnergy& g) { return (g.energy_high_j - g.energy_low_j) / 2.0; }

// The module's total is its forward and backward added, calls once, and its
// interval (from the same rounds) holds the true sum while it is narrower
// than the two intervals' halves added: the parts' errors offset.
TEST(RegionTotalsTest, ATotalIsItsPartsSumWithTheIntervalOfTheSum) {
  const TimedSteps run = make_run(3000, 3);
  AttributionOptions options;
  options.totals = {{"block", {"block.forward", "block.backward"}}, {"head", {"head.forward"}}};
  const Attribution a = fit(run, options);
  ASSERT_EQ(a.totals.size(), 2u);
  const RegionEnergy& block = a.totals[0];
  const RegionEnergy &forward = a.regions[kForward], &backward = a.regions[kBackward];
  EXPECT_EQ(block.name, "block");
  EXPECT_TRUE(block.resolved);
  EXPECT_EQ(block.calls, 3000u);
  EXPECT_NEAR(block.energy_j, forward.energy_j + backward.energy_j, 1e-9 * block.energy_j);
  EXPECT_NEAR(block.gpu_time_s, forward.gpu_time_s + backward.gpu_time_s, 1e-12);
  EXPECT_NEAR(block.share, forward.share + backward.share, 1e-12);
  EXPECT_NEAR(block.energy_per_call_j, block.energy_j / 3000.0, 1e-12);
  EXPECT_NEAR(block.power_w * block.gpu_time_s, forward.power_w * forward.gpu_time_s +
                                                    backward.power_w * backward.gpu_time_s, 1e-6);
  const double truth_j = run.true_j[kForward] + run.true_j[kBackward];
  EXPECT_LE(block.energy_low_j, truth_j);
  EXPECT_GE(block.energy_high_j, truth_j);
  EXPECT_LT(half_width(block), half_width(forward) + half_width(backward));
  std::printf("[ figures  ] block: +-%.2f J, its parts +-%.2f and +-%.2f J; %+.2f%% off the true sum\n",
              half_width(block), half_width(forward), half_width(backward), 100.0 * (block.energy_j / truth_j - 1));
  // A total of one region is that region.
  EXPECT_EQ(a.totals[1].energy_j, a.regions[kHead].energy_j);
  EXPECT_EQ(a.totals[1].energy_low_j, a.regions[kHead].energy_low_j);
  EXPECT_EQ(a.totals[1].energy_high_j, a.regions[kHead].energy_high_j);
}

TEST(RegionTotalsTest, WithoutTheBootstrapATotalHasItsEnergyAndNoInterval) {
  const TimedSteps run = make_run(500, 5);
  AttributionOptions options;
  options.bootstrap_rounds = 0;
  options.totals = {{"block", {"block.forward", "block.backward"}}};
  const Attribution a = fit(run, options);
  ASSERT_EQ(a.totals.size(), 1u);
  EXPECT_NEAR(a.totals[0].energy_j, a.regions[kForward].energy_j + a.regions[kBackward].energy_j, 1e-9);
  EXPECT_TRUE(std::isnan(a.totals[0].energy_low_j));
  EXPECT_TRUE(std::isnan(a.totals[0].energy_high_j));
}

// A total that names what the window lacks, a region twice, nothing, or a
// name another total has is refused, naming it.
TEST(RegionTotalsTest, ATotalNamingWhatTheWindowLacksIsRefusedNamingIt) {
  const TimedSteps run = make_run(200, 7);
  const std::vector<std::pair<std::vector<RegionTotal>, std::string>> bad = {
      {{{"block", {"block.forward", "blocks.backward"}}}, "total 'block' names region 'blocks.backward'"},
      {{{"block", {"block.forward", "block.forward"}}}, "total 'block' names region 'block.forward' twice"},
      {{{"block", {}}}, "total 'block' names no region"},
      {{{"", {"head.forward"}}}, "a total has no name"},
      {{{"x", {"head.forward"}}, {"x", {"block.forward"}}}, "two totals are named 'x'"},
  };
  for (const auto& [totals, message] : bad) {
    SCOPED_TRACE(message);
    AttributionOptions options;
    options.totals = totals;
    try {
      fit(run, options);
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace joule::attribution
