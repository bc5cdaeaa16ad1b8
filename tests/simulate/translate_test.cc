// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Translating an optimizer's observations between GPU models, on a hand-made
// pair of traces with known answers, and the transfer replay.
#include "joule/simulate/translate.h"

#include <gtest/gtest.h>

#include "joule/error.h"

namespace joule {
namespace {

// One limit (100 W, drawing 100 W) per size, so at eta 0.5 one epoch costs
// 100 x its seconds; every run needs 10 epochs.
WorkloadTrace tiny_trace(const std::map<int, double>& epoch_s) {
  WorkloadTrace t;
  t.spec = {"tiny", "tiny-data", "tiny-net", "sgd", 1.0, "tiny target", epoch_s.begin()->first};
  for (const auto& [b, seconds] : epoch_s) {
    t.batch_sizes.push_back(b);
    t.epochs[b] = {10, 10, 10};
    t.power[b] = {{100.0, seconds, 100.0}};
  }
  t.power_limits_w = {100.0};
  t.max_power_w = 100.0;
  t.max_epochs = 30;
  t.default_batch_size = t.batch_sizes.front();
  return t;
}

// Source A runs 16..128; target B runs 32..256 with epoch-cost ratios
// 32: 0.5, 64: 1, 128: 0.25 (B/A).
const WorkloadTrace kA = tiny_trace({{16, 1}, {32, 2}, {64, 4}, {128, 8}});
const WorkloadTrace kB = tiny_trace({{32, 1}, {64, 4}, {128, 2}, {256, 1}});

std::vector<int> sizes_of(const std::vector<PriorObservation>& observations) {
  std::vector<int> sizes;
  for (const auto& x : observations) sizes.push_back(x.batch_size);
  return sizes;
}

TEST(TranslateTest, CostsScaleByTheEpochCostRatioAndSizesTheTargetLacksAreDropped) {
  const std::vector<PriorObservation> history = {
      {16, 100, true}, {32, 300, true}, {64, 500, true}, {128, 900, false}, {32, 280, true}};
  const Translation t = translate_observations(history, {16, 32, 64, 128}, kA, kB, {});
  EXPECT_EQ(t.ratio, (std::map<int, double>{{32, 0.5}, {64, 1.0}, {128, 0.25}}));
  EXPECT_EQ(t.profiled, (std::vector<int>{32, 64, 128}));
  EXPECT_EQ(t.dropped, std::vector<int>{16});
  EXPECT_EQ(t.dropped_observations, 1u);
  ASSERT_EQ(t.start.observations.size(), 4u);
  EXPECT_EQ(sizes_of(t.start.observations), (std::vector<int>{32, 64, 128, 32}));
  EXPECT_DOUBLE_EQ(t.start.observations[0].cost, 150);
  EXPECT_DOUBLE_EQ(t.start.observations[1].cost, 500);
  EXPECT_DOUBLE_EQ(t.start.observations[2].cost, 225);
  EXPECT_FALSE(t.start.observations[2].converged);  // failures carry over as failures
  EXPECT_DOUBLE_EQ(t.start.observations[3].cost, 140);
  // 256 lies beyond 128, which never converged on A: ruled out there, so not
  // worth a try on B either.
  EXPECT_TRUE(t.start.unexplored.empty());
}

TEST(TranslateTest, SizesOnlyTheTargetRunsStartUnexploredWhenReachable) {
  const std::vector<PriorObservation> history = {{32, 300, true}, {64, 500, true}, {128, 900, true}};
  const Translation t = translate_observations(history, {16, 32, 64, 128}, kA, kB, {});
  EXPECT_EQ(t.start.unexplored, std::vector<int>{256});
  EXPECT_TRUE(t.dropped.empty());
}

TEST(TranslateTest, SizesTheSourcePrunedStayOut) {
  // A's Thompson arms were 32 and 64; 128 was tried and pruned.
  const std::vector<PriorObservation> history = {{64, 500, true}, {128, 900, true}, {32, 300, true}, {128, 950, false}};
  const Translation t = translate_observations(history, {32, 64}, kA, kB, {});
  EXPECT_EQ(t.pruned, std::vector<int>{128});
  EXPECT_EQ(sizes_of(t.start.observations), (std::vector<int>{64, 32}));
  EXPECT_TRUE(t.start.unexplored.empty());  // 256 lies beyond the pruned 128
}

TEST(TranslateTest, ProfiledPointsEstimateTheOtherRatios) {
  const std::vector<PriorObservation> history = {{32, 300, true}, {64, 200, true}, {128, 900, true}};
  // One point: the size nearest A's best (64), its ratio everywhere.
  const Translation one = translate_observations(history, {16, 32, 64, 128}, kA, kB, {0.5, 1, {}});
  EXPECT_EQ(one.profiled, std::vector<int>{64});
  EXPECT_EQ(one.ratio, (std::map<int, double>{{32, 1.0}, {64, 1.0}, {128, 1.0}}));
  // Given sizes 32 and 128: 64 lies halfway in log size, so its ratio is the
  // geometric mean of 0.5 and 0.25.
  const Translation two = translate_observations(history, {16, 32, 64, 128}, kA, kB, {0.5, std::nullopt, {128, 32}});
  EXPECT_EQ(two.profiled, (std::vector<int>{32, 128}));
  EXPECT_DOUBLE_EQ(two.ratio.at(64), std::sqrt(0.5 * 0.25));
  EXPECT_DOUBLE_EQ(two.start.observations[1].cost, 200 * std::sqrt(0.5 * 0.25));

  EXPECT_THROW(translate_observations(history, {32}, kA, kB, {0.5, 0, {}}), UsageError);
  EXPECT_THROW(translate_observations(history, {32}, kA, kB, {0.5, std::nullopt, {16}}), UsageError);  // B lacks 16
  WorkloadTrace other = kB;
  other.spec.dataset = "other";
  EXPECT_THROW(translate_observations(history, {32}, kA, other, {}), UsageError);
}

// The scratch replay is the zeus policy of simulate(), cut short, and the
// learning replay is simulate() on the source: same seed, same luck.
TEST(TranslateTest, ScratchAndLearningReplaysAreTheSimulatorsOwn) {
  const WorkloadTrace source = synthetic_workloads().front();
  WorkloadTrace target = source;
  for (auto& [b, entries] : target.power) {
    for (auto& e : entries) e.time_per_epoch_s *= b >= 512 ? 0.5 : 1.5;  // large sizes got faster
  }
  for (uint64_t seed : {1, 2, 3}) {
    TransferOptions options;
    options.simulation.seed = seed;
    options.learn_recurrences = 25;
    options.deploy_recurrences = 15;
    const TransferResult r = simulate_transfer(source, target, options);
    SimulationOptions plain = options.simulation;
    plain.recurrences = 25;
    const SimulationResult learned = simulate(source, Policy::kZeus, plain);
    plain.recurrences = 15;
    const SimulationResult scratch = simulate(target, Policy::kZeus, plain);
    ASSERT_EQ(r.learned.recurrences.size(), 25u);
    ASSERT_EQ(r.scratch.recurrences.size(), 15u);
    ASSERT_EQ(r.translated.recurrences.size(), 15u);
    for (std::size_t i = 0; i < 25; ++i) EXPECT_EQ(r.learned.recurrences[i].cost, learned.recurrences[i].cost);
    for (std::size_t i = 0; i < 15; ++i) EXPECT_EQ(r.scratch.recurrences[i].cost, scratch.recurrences[i].cost);
    EXPECT_TRUE(r.warm_started);
  }
}

}  // namespace
}  // namespace joule
