// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Seeding the batch-size optimizer with evidence from elsewhere.
#include <gtest/gtest.h>

#include <map>

#include "joule/error.h"
#include "joule/optimize/batch_size_optimizer.h"

namespace joule {
namespace {

BatchSizeOptimizer fresh(uint64_t seed = 1) { return BatchSizeOptimizer({{16, 32, 64, 128, 256}, 128, 2.0, {}, {}, seed}); }

// 64 is the clear best (half the cost of 32), 256 never converged.
WarmStart prior() {
  WarmStart start;
  start.observations = {{32, 200, true}, {64, 100, true}, {64, 104, true}, {32, 210, true}, {256, 400, false}};
  return start;
}

TEST(WarmStartTest, FirstChoiceIsTheTranslatedBestAndPruningIsSkipped) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    BatchSizeOptimizer optimizer = fresh(seed);
    ASSERT_TRUE(optimizer.warm_start(prior()));
    EXPECT_EQ(optimizer.phase(), BatchSizeOptimizer::Phase::kThompson);
    EXPECT_EQ(optimizer.candidates(), (std::vector<int>{32, 64}));  // 256 only failed; 16, 128 unknown
    EXPECT_EQ(optimizer.default_batch_size(), 64);
    EXPECT_EQ(optimizer.predict(), 64) << "seed " << seed;
    // The early-stop threshold waits for this job's own converged runs.
    EXPECT_EQ(optimizer.early_stop_threshold_cost(), std::numeric_limits<double>::infinity());
  }
}

TEST(WarmStartTest, UnexploredSizesAreTriedFirstNearestTheBestFirst) {
  BatchSizeOptimizer optimizer = fresh();
  WarmStart start = prior();
  start.unexplored = {16, 128};
  ASSERT_TRUE(optimizer.warm_start(start));
  EXPECT_EQ(optimizer.candidates(), (std::vector<int>{16, 32, 64, 128}));
  EXPECT_EQ(optimizer.predict(), 128);  // one doubling from 64; 16 is two
  optimizer.observe(128, 150, true);
  EXPECT_EQ(optimizer.predict(), 16);
  optimizer.observe(16, 300, false);
  EXPECT_DOUBLE_EQ(optimizer.early_stop_threshold_cost(), 300);
}

TEST(WarmStartTest, OwnObservationsOverrideAWrongTranslation) {
  // The prior says 64 is cheapest; on this GPU it costs three times as much.
  BatchSizeOptimizer optimizer = fresh(7);
  ASSERT_TRUE(optimizer.warm_start(prior()));
  const std::map<int, double> actual = {{32, 205}, {64, 320}};
  std::map<int, int> late_choices;
  for (int i = 0; i < 30; ++i) {
    const int b = optimizer.predict();
    optimizer.observe(b, actual.at(b) * (1.0 + 0.01 * (i % 3)), true);
    if (i >= 15) ++late_choices[b];
  }
  EXPECT_GE(late_choices[32], 13) << "32: " << late_choices[32] << ", 64: " << late_choices[64];
}

TEST(WarmStartTest, WithoutConvergedEvidenceNothingChanges) {
  BatchSizeOptimizer optimizer = fresh();
  WarmStart start;
  start.observations = {{256, 400, false}};
  start.unexplored = {16};
  EXPECT_FALSE(optimizer.warm_start(start));
  EXPECT_EQ(optimizer.phase(), BatchSizeOptimizer::Phase::kPruning);
  EXPECT_EQ(optimizer.to_json(), fresh().to_json());
}

TEST(WarmStartTest, RejectsBadEvidenceAndStartedOptimizers) {
  WarmStart bad_size = prior();
  bad_size.observations.push_back({48, 100, true});
  EXPECT_THROW(fresh().warm_start(bad_size), UsageError);
  WarmStart bad_unexplored = prior();
  bad_unexplored.unexplored = {512};
  EXPECT_THROW(fresh().warm_start(bad_unexplored), UsageError);
  WarmStart bad_cost = prior();
  bad_cost.observations.push_back({32, -1, true});
  EXPECT_THROW(fresh().warm_start(bad_cost), UsageError);
  WarmStart bad_weight = prior();
  bad_weight.max_prior_observations = 0;
  EXPECT_THROW(fresh().warm_start(bad_weight), UsageError);

  BatchSizeOptimizer started = fresh();
  started.observe(started.predict(), 100, true);
  EXPECT_THROW(started.warm_start(prior()), UsageError);
  BatchSizeOptimizer twice = fresh();
  ASSERT_TRUE(twice.warm_start(prior()));
  EXPECT_THROW(twice.warm_start(prior()), UsageError);
}

TEST(WarmStartTest, WarmStartedStateRoundTripsThroughJson) {
  BatchSizeOptimizer original = fresh(3);
  WarmStart start = prior();
  start.unexplored = {128};
  ASSERT_TRUE(original.warm_start(start));
  original.observe(original.predict(), 150, true);
  const nlohmann::json state = original.to_json();
  ASSERT_TRUE(state.contains("arm_priors"));
  BatchSizeOptimizer restored = BatchSizeOptimizer::from_json(nlohmann::json::parse(state.dump()));
  EXPECT_EQ(restored.to_json(), state);
  EXPECT_EQ(restored.sampler().belief(64).mean, original.sampler().belief(64).mean);
  for (int i = 0; i < 20; ++i) {
    const int b = original.predict();
    ASSERT_EQ(restored.predict(), b) << i;
    original.observe(b, 100 + i, true);
    restored.observe(b, 100 + i, true);
  }
  // A state that was never warm-started has no priors to carry.
  EXPECT_FALSE(fresh().to_json().contains("arm_priors"));
  // A prior for a size that is not a choice is a broken state.
  nlohmann::json broken = state;
  broken["arm_priors"]["48"] = {{"mean", 100.0}, {"precision", 1.0}};
  EXPECT_THROW(BatchSizeOptimizer::from_json(broken), UsageError);
}

// Without kept observations the state holds running sums (version 2); the
// per-size priors travel with them.
TEST(WarmStartTest, WarmStartedRunningSumsStateRoundTripsThroughJson) {
  BatchSizeOptimizer original({{16, 32, 64, 128, 256}, 128, 2.0, {}, {}, 3, false});
  WarmStart start = prior();
  start.unexplored = {128};
  ASSERT_TRUE(original.warm_start(start));
  original.observe(original.predict(), 150, true);
  const nlohmann::json state = original.to_json();
  ASSERT_EQ(state.at("version"), 2);
  ASSERT_TRUE(state.contains("arm_priors"));
  BatchSizeOptimizer restored = BatchSizeOptimizer::from_json(nlohmann::json::parse(state.dump()));
  EXPECT_EQ(restored.to_json(), state);
  for (int i = 0; i < 20; ++i) {
    const int b = original.predict();
    ASSERT_EQ(restored.predict(), b) << i;
    original.observe(b, 100 + i, true);
    restored.observe(b, 100 + i, true);
  }
}

// The prior weighs as at most max_prior_observations of the job's own runs:
// its belief's variance is the per-run spread over that many.
TEST(WarmStartTest, PriorWeighsAsAtMostTheGivenObservations) {
  BatchSizeOptimizer optimizer = fresh();
  WarmStart start;
  start.observations = {{64, 90, true}, {64, 110, true}, {64, 90, true}, {64, 110, true}};
  start.max_prior_observations = 2;
  ASSERT_TRUE(optimizer.warm_start(start));
  const ArmBelief belief = optimizer.sampler().belief(64);
  EXPECT_DOUBLE_EQ(belief.mean, 100);
  EXPECT_DOUBLE_EQ(belief.variance, 100.0 / 2);  // spread 10^2 per run, counted as 2 runs, not 4
  EXPECT_EQ(belief.observations, 0u);
  // Alike costs still get a spread of 10% of their mean.
  BatchSizeOptimizer alike = fresh();
  start.observations = {{64, 100, true}, {64, 100, true}};
  ASSERT_TRUE(alike.warm_start(start));
  EXPECT_DOUBLE_EQ(alike.sampler().belief(64).variance, 100.0 / 2);
}

}  // namespace
}  // namespace joule
