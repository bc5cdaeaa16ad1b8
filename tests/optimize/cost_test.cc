// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/cost.h"

#include <gtest/gtest.h>

#include "joule/error.h"

namespace joule {
namespace {

TEST(CostTest, ZeusCostWeighsEnergyAgainstTime) {
  EXPECT_DOUBLE_EQ(zeus_cost(1000.0, 10.0, 1.0, 250.0), 1000.0);   // energy only
  EXPECT_DOUBLE_EQ(zeus_cost(1000.0, 10.0, 0.0, 250.0), 2500.0);   // time only, in max-power joules
  EXPECT_DOUBLE_EQ(zeus_cost(1000.0, 10.0, 0.5, 250.0), 1750.0);
  EXPECT_THROW(check_eta(1.5), UsageError);
  EXPECT_THROW(check_eta(-0.1), UsageError);
}

TEST(CostTest, BestLimitMinimisesEpochCost) {
  // limit, time/epoch, power: (eta P + (1-eta) 250) t at eta = 0.5
  const std::vector<PowerProfileEntry> profile = {
      {150, 12.0, 140.0},  // (70 + 125) * 12 = 2340
      {200, 10.0, 190.0},  // (95 + 125) * 10 = 2200
      {250, 9.5, 240.0},   // (120 + 125) * 9.5 = 2327.5
  };
  const PowerChoice choice = optimal_power_limit(profile, 0.5, 250.0);
  EXPECT_DOUBLE_EQ(choice.power_limit_w, 200.0);
  EXPECT_DOUBLE_EQ(choice.epoch_cost, 2200.0);
  EXPECT_DOUBLE_EQ(optimal_power_limit(profile, 0.0, 250.0).power_limit_w, 250.0);  // fastest
  EXPECT_DOUBLE_EQ(optimal_power_limit(profile, 1.0, 250.0).power_limit_w, 150.0);  // 1680 < 1900 < 2280 J
  EXPECT_THROW(optimal_power_limit({}, 0.5, 250.0), UsageError);
}

}  // namespace
}  // namespace joule
