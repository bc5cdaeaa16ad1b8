// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/clock.h"

#include <gtest/gtest.h>

#include "joule/error.h"

namespace joule {
namespace {

TEST(VirtualClockTest, MovesOnlyWhenAdvanced) {
  VirtualClock clock(5.0);
  EXPECT_DOUBLE_EQ(clock.now_s(), 5.0);
  clock.advance_s(0.25);
  EXPECT_DOUBLE_EQ(clock.now_s(), 5.25);
  clock.set_s(10.0);
  EXPECT_DOUBLE_EQ(clock.now_s(), 10.0);
  EXPECT_TRUE(clock.is_virtual());
}

TEST(VirtualClockTest, RefusesToGoBackwards) {
  VirtualClock clock(1.0);
  EXPECT_THROW(clock.advance_s(-0.1), Error);
  EXPECT_THROW(clock.set_s(0.5), Error);
  EXPECT_DOUBLE_EQ(clock.now_s(), 1.0);
}

TEST(SteadyClockTest, IsMonotonicAndReal) {
  const auto clock = SteadyClock::instance();
  const double a = clock->now_s();
  const double b = clock->now_s();
  EXPECT_LE(a, b);
  EXPECT_FALSE(clock->is_virtual());
}

}  // namespace
}  // namespace joule
