// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/gaussian_ts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "joule/error.h"

namespace joule {
namespace {

TEST(GaussianTsTest, FlatPriorPosteriorIsSampleMeanOverN) {
  GaussianThompsonSampler ts;
  for (double c : {10.0, 12.0, 14.0}) ts.observe(64, c);
  const ArmBelief b = ts.belief(64);
  // mean 12; variance of the costs (8/3) divided by n = 3.
  EXPECT_DOUBLE_EQ(b.mean, 12.0);
  EXPECT_NEAR(b.variance, 8.0 / 9.0, 1e-12);
  EXPECT_EQ(b.observations, 3u);
}

TEST(GaussianTsTest, InformativePriorIsWeighedByPrecision) {
  GaussianThompsonSampler ts(std::nullopt, GaussianPrior{20.0, 0.5});
  for (double c : {10.0, 12.0, 14.0}) ts.observe(64, c);
  // data precision n / s^2 = 3 / (8/3) = 1.125; posterior precision 1.625;
  // mean (0.5 * 20 + 1.125 * 12) / 1.625 = 23.5 / 1.625.
  const ArmBelief b = ts.belief(64);
  EXPECT_NEAR(b.mean, 23.5 / 1.625, 1e-12);
  EXPECT_NEAR(b.variance, 1.0 / 1.625, 1e-12);
  // With no data the belief is the prior itself.
  ts.add_arm(128);
  EXPECT_DOUBLE_EQ(ts.belief(128).mean, 20.0);
  EXPECT_DOUBLE_EQ(ts.belief(128).variance, 2.0);
}

TEST(GaussianTsTest, WindowKeepsOnlyTheLastObservations) {
  GaussianThompsonSampler ts(2);
  for (double c : {10.0, 12.0, 14.0}) ts.observe(64, c);
  EXPECT_EQ(ts.observations(64).size(), 2u);
  EXPECT_DOUBLE_EQ(ts.belief(64).mean, 13.0);
  EXPECT_DOUBLE_EQ(ts.belief(64).variance, 0.5);  // variance 1 over 2 observations
  EXPECT_THROW(GaussianThompsonSampler(0), UsageError);
}

TEST(GaussianTsTest, PredictTakesTheSmallestPosteriorDraw) {
  GaussianThompsonSampler ts;
  for (double c : {100.0, 110.0}) ts.observe(32, c);  // N(105, 25/2)
  for (double c : {104.0, 108.0}) ts.observe(64, c);  // N(106, 4/2)
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    pcg32 rng(seed), replay(seed);
    const double draw32 = std::normal_distribution<double>(105.0, std::sqrt(12.5))(replay);
    const double draw64 = std::normal_distribution<double>(106.0, std::sqrt(2.0))(replay);
    EXPECT_EQ(ts.predict({32, 64}, rng), draw32 < draw64 ? 32 : 64) << seed;
  }
}

TEST(GaussianTsTest, ClearlyCheaperArmWinsAndUntriedArmsGoFirst) {
  GaussianThompsonSampler ts;
  for (double c : {10.0, 11.0}) ts.observe(1, c);
  for (double c : {50.0, 51.0}) ts.observe(2, c);
  pcg32 rng(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ts.predict({1, 2}, rng), 1);
  ts.add_arm(3);
  EXPECT_EQ(ts.predict({1, 2, 3}, rng), 3);
  EXPECT_THROW(ts.belief(3), Error);
}

TEST(GaussianTsTest, RunningSumsWithoutHistoryGiveTheSameBeliefs) {
  GaussianThompsonSampler kept, sums_only(std::nullopt, {}, false);
  for (double c : {100.0, 93.5, 120.25, 101.0, 99.0}) {
    kept.observe(32, c);
    sums_only.observe(32, c);
  }
  EXPECT_EQ(kept.observations(32).size(), 5u);
  EXPECT_TRUE(sums_only.observations(32).empty());  // nothing kept: memory stays flat
  EXPECT_EQ(sums_only.count(32), 5u);
  EXPECT_EQ(sums_only.belief(32).mean, kept.belief(32).mean);
  EXPECT_DOUBLE_EQ(sums_only.belief(32).variance, kept.belief(32).variance);
  // Squared deviations sum to 416.5: sample variance 83.3, over n = 5.
  EXPECT_NEAR(kept.belief(32).variance, 416.5 / 5 / 5, 1e-9);
  EXPECT_FALSE(sums_only.keeps_history());
  EXPECT_TRUE(GaussianThompsonSampler(3, {}, false).keeps_history());  // a window is always kept
}

TEST(GaussianTsTest, RestoredRunningSumsGiveTheSameBeliefsAndDraws) {
  GaussianThompsonSampler saved(std::nullopt, {}, false), restored(std::nullopt, {}, false);
  for (double c : {100.1, 93.5, 120.25}) saved.observe(32, c);
  for (double c : {104.3, 108.7}) saved.observe(64, c);
  for (int arm : {32, 64}) restored.restore_running(arm, saved.running(arm));
  EXPECT_EQ(restored.count(32), 3u);
  EXPECT_EQ(restored.belief(32).mean, saved.belief(32).mean);
  EXPECT_EQ(restored.belief(32).variance, saved.belief(32).variance);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    pcg32 a(seed), b(seed);
    EXPECT_EQ(restored.predict({32, 64}, a), saved.predict({32, 64}, b)) << seed;
  }
  EXPECT_EQ(saved.running(128).n, 0u);  // never seen: empty sums
}

TEST(GaussianTsTest, RestoreRunningRefusesSumsNoObservationsGive) {
  GaussianThompsonSampler ts(std::nullopt, {}, false);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(ts.restore_running(32, {2, nan, 1.0, 0.0}), UsageError);
  EXPECT_THROW(ts.restore_running(32, {2, 2.0, 1.0, -std::numeric_limits<double>::infinity()}), UsageError);
  EXPECT_THROW(ts.restore_running(32, {2, 2.0, 1.0, -0.5}), UsageError);  // m2 < 0
  EXPECT_THROW(ts.restore_running(32, {0, 2.0, 1.0, 0.0}), UsageError);   // sums of nothing
  EXPECT_EQ(ts.count(32), 0u);
  // A sampler that keeps observations would disagree with restored sums.
  GaussianThompsonSampler kept;
  EXPECT_THROW(kept.restore_running(32, {2, 2.0, 1.0, 0.0}), UsageError);
  EXPECT_THROW(GaussianThompsonSampler(3, {}, false).restore_running(32, {2, 2.0, 1.0, 0.0}), UsageError);
}


// An infinite or NaN cost is refused before it reaches the sums: one would
// make them non-finite for good.
TEST(GaussianTsTest, NonFiniteCostsAreRefusedAndChangeNothing) {
  GaussianThompsonSampler sampler(std::nullopt, {}, false);
  sampler.observe(32, 10.0);
  EXPECT_THROW(sampler.observe(32, std::numeric_limits<double>::infinity()), UsageError);
  EXPECT_THROW(sampler.observe(32, std::nan("")), UsageError);
  EXPECT_EQ(sampler.running(32).n, 1u);
  EXPECT_EQ(sampler.running(32).sum, 10.0);
}

// Costs all zero (eta 1 and no energy) put the variance at its floor: n over
// it overflowed a double from n = 4 on, making the belief's mean NaN.
TEST(GaussianTsTest, CostsAllZeroKeepEveryBeliefFinite) {
  for (bool history : {true, false}) {
    GaussianThompsonSampler sampler(std::nullopt, {}, history);
    for (int i = 0; i < 1000; ++i) sampler.observe(32, 0.0);
    sampler.observe(64, 1.0);
    sampler.observe(64, 1.5);
    const ArmBelief b = sampler.belief(32);
    EXPECT_EQ(b.mean, 0.0);
    EXPECT_TRUE(std::isfinite(b.variance));
    pcg32 rng(1);
    EXPECT_EQ(sampler.predict({32, 64}, rng), 32);
  }
}

// The largest cost the service accepts (1e17: beta 100 times 1e15 J) at the
// largest count a size_t holds: the running sums stay finite (sum < 2e36,
// m2 < 2e53), and so does every belief drawn from them.
TEST(GaussianTsTest, TheLargestAcceptedCostsAtTheLargestCountKeepTheSumsFinite) {
  constexpr double kMaxCost = 1e17;
  GaussianThompsonSampler sampler(std::nullopt, {}, false);
  for (int i = 0; i < 1000000; ++i) sampler.observe(32, i % 2 ? kMaxCost : 0.0);
  RunningSums r = sampler.running(32);
  EXPECT_TRUE(std::isfinite(r.sum) && std::isfinite(r.m2) && std::isfinite(r.welford_mean));
  // As if 2^64 - 1000 costs had come, half of them the largest: go on from there.
  const double n = std::ldexp(1.0, 64) - 1000;
  sampler.restore_running(32, {std::numeric_limits<std::size_t>::max() - 1000, n * kMaxCost / 2, kMaxCost / 2,
                               n * kMaxCost * kMaxCost / 4});
  for (int i = 0; i < 999; ++i) sampler.observe(32, i % 2 ? kMaxCost : 0.0);
  r = sampler.running(32);
  EXPECT_TRUE(std::isfinite(r.sum) && std::isfinite(r.m2) && std::isfinite(r.welford_mean));
  EXPECT_LT(r.sum, 1e37);
  EXPECT_LT(r.m2, 1e54);
  const ArmBelief b = sampler.belief(32);
  EXPECT_TRUE(std::isfinite(b.mean) && std::isfinite(b.variance));
  pcg32 rng(1);
  sampler.observe(64, 1.0);
  sampler.observe(64, 2.0);
  EXPECT_EQ(sampler.predict({32, 64}, rng), 64);
}

}  // namespace
}  // namespace joule
