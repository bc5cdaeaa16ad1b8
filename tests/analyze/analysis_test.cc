// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/analysis.h"

#include <gtest/gtest.h>

#include <cmath>

#include "joule/error.h"

namespace joule {
namespace {

TEST(SummaryTest, MeanSampleStddevAndCv) {
  const Summary s = summarize({10, 12, 11, 13});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 11.5);
  EXPECT_NEAR(s.stddev, 1.2909944487358056, 1e-12);  // sqrt(5/3)
  EXPECT_NEAR(s.cv(), 1.2909944487358056 / 11.5, 1e-12);
  EXPECT_DOUBLE_EQ(summarize({7}).stddev, 0.0);
}

TEST(FitTest, ExactPowerLawIsRecoveredWithZeroError) {
  std::vector<double> n = {1, 2, 4, 8}, t;
  for (double x : n) t.push_back(100.0 * std::pow(x, -0.9));
  const PowerLawFit f = fit_power_law(n, t);
  EXPECT_NEAR(f.a, 100.0, 1e-9);
  EXPECT_NEAR(f.b, 0.9, 1e-12);
  EXPECT_NEAR(f.b_se, 0.0, 1e-9);
  EXPECT_NEAR(f.r_squared, 1.0, 1e-12);
}

// Expected values computed once with NumPy 1.24 (Debian python3-numpy):
//   x=[1,2,4,8,16]; t=[100,54,28.5,15.2,8.3]
//   p,cov = np.polyfit(np.log(x), np.log(t), 1, cov='unscaled'); cov *= SSR/(n-2)
//   b = -p[0]; b_se = sqrt(cov[0,0]); a = exp(p[1]); a_se = a*sqrt(cov[1,1]); R^2 in log space
TEST(FitTest, NoisyPowerLawMatchesNumPy) {
  const PowerLawFit f = fit_power_law({1, 2, 4, 8, 16}, {100.0, 54.0, 28.5, 15.2, 8.3});
  EXPECT_EQ(f.n, 5u);
  EXPECT_NEAR(f.b, 0.9010377790237563, 1e-12);
  EXPECT_NEAR(f.b_se, 0.00455018205267798, 1e-12);
  EXPECT_NEAR(f.a, 100.02552913061608, 1e-9);
  EXPECT_NEAR(f.a_se, 0.772753030324283, 1e-9);
  EXPECT_NEAR(f.r_squared, 0.9999235003276477, 1e-12);
}

// Energy (kWh) against GPU-hours, same NumPy procedure on the raw values:
//   gh=[0.5,1,2,4]; kwh=[0.21,0.40,0.83,1.61]
TEST(FitTest, EnergyPerGpuHourMatchesNumPy) {
  const LinearFit f = fit_linear({0.5, 1.0, 2.0, 4.0}, {0.21, 0.40, 0.83, 1.61});
  EXPECT_NEAR(f.slope, 0.401565217391, 1e-11);
  EXPECT_NEAR(f.slope_se, 0.00564079121399, 1e-12);
  EXPECT_NEAR(f.intercept, 0.0095652173913, 1e-12);
  EXPECT_NEAR(f.intercept_se, 0.0130013813429, 1e-12);
  EXPECT_NEAR(f.r_squared, 0.9996055186145903, 1e-12);
}

TEST(FitTest, BadInputIsRefused) {
  EXPECT_THROW(fit_linear({1}, {2}), UsageError);
  EXPECT_THROW(fit_linear({1, 1}, {2, 3}), UsageError);
  EXPECT_THROW(fit_linear({1, 2}, {2}), UsageError);
  EXPECT_THROW(fit_power_law({1, 0}, {2, 3}), UsageError);
}

TEST(TradeOffTest, HandWorkedAgainstABaseline) {
  // Baseline 100 s, 30 kJ; config 110 s, 24 kJ: 20% less energy, 10% slower.
  const TradeOff t = trade_off({110.0, 24000.0}, {100.0, 30000.0});
  EXPECT_NEAR(t.energy_gain_percent, 20.0, 1e-12);
  EXPECT_NEAR(t.performance_loss_percent, 10.0, 1e-12);
  EXPECT_NEAR(t.gain_minus_loss, 10.0, 1e-12);
  EXPECT_DOUBLE_EQ(t.edp, 24000.0 * 110.0);
  EXPECT_NEAR(t.eds_1_5, 24000.0 * std::pow(110.0, 1.5), 1e-6);
  EXPECT_DOUBLE_EQ(t.eds_2, 24000.0 * 110.0 * 110.0);
}

TEST(ParetoTest, FrontKeepsOnlyUndominatedConfigurationsFastestFirst) {
  const std::vector<TimeEnergy> configs = {
      {100, 300},  // 0: fastest
      {110, 250},  // 1: front
      {115, 260},  // 2: dominated by 1
      {130, 200},  // 3: front
      {150, 200},  // 4: same energy, slower: dominated
      {160, 150},  // 5: front
  };
  EXPECT_EQ(pareto_front(configs), (std::vector<std::size_t>{0, 1, 3, 5}));
  // eta = 0: time only -> fastest; eta = 1: energy only -> least energy.
  EXPECT_EQ(pick_for_eta(configs, 0.0, 300.0), 0u);
  EXPECT_EQ(pick_for_eta(configs, 1.0, 300.0), 5u);
  // eta = 0.5, max power 300 W: cost = 0.5 E + 150 T -> 0: 15150, 1: 16625, 3: 19600, 5: 24075.
  EXPECT_EQ(pick_for_eta(configs, 0.5, 300.0), 0u);
  // eta = 0.99: 0.99 E + 3 T -> 0: 597, 1: 577.5, 3: 588, 5: 628.5.
  EXPECT_EQ(pick_for_eta(configs, 0.99, 3.0 / 0.01), 1u);
}

}  // namespace
}  // namespace joule
