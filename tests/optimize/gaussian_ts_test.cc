#include "joule/optimize/gaussian_ts.h"

#include <gtest/gtest.h>

#include <cmath>

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
    std::mt19937_64 rng(seed), replay(seed);
    const double draw32 = std::normal_distribution<double>(105.0, std::sqrt(12.5))(replay);
    const double draw64 = std::normal_distribution<double>(106.0, std::sqrt(2.0))(replay);
    EXPECT_EQ(ts.predict({32, 64}, rng), draw32 < draw64 ? 32 : 64) << seed;
  }
}

TEST(GaussianTsTest, ClearlyCheaperArmWinsAndUntriedArmsGoFirst) {
  GaussianThompsonSampler ts;
  for (double c : {10.0, 11.0}) ts.observe(1, c);
  for (double c : {50.0, 51.0}) ts.observe(2, c);
  std::mt19937_64 rng(7);
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

}  // namespace
}  // namespace joule
