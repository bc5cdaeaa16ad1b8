// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/simulator.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "joule/error.h"
#include "simulate/toy_trace.h"

namespace joule {
namespace {

using testing::toy_trace;

TEST(SimulatorTest, OptimalConfigIsTheLeastExpectedCost) {
  const OptimalConfig best = optimal_config(toy_trace(), 0.5);
  // b=64: 8 epochs x min((47.5+100) x 12, (95+100) x 10) = 8 x 1770
  EXPECT_EQ(best.batch_size, 64);
  EXPECT_DOUBLE_EQ(best.power_limit_w, 100);
  EXPECT_DOUBLE_EQ(best.expected_cost, 8 * 1770.0);
}

TEST(SimulatorTest, DefaultPolicyRunsTheDefaultAtTheLargestLimit) {
  const SimulationResult r = simulate(toy_trace(), Policy::kDefault, {});
  ASSERT_EQ(r.recurrences.size(), 2u * 4u * 2u);
  for (const auto& x : r.recurrences) {
    EXPECT_EQ(x.batch_size, 64);
    EXPECT_DOUBLE_EQ(x.power_limit_w, 200);
    EXPECT_DOUBLE_EQ(x.time_s, 80.0);
    EXPECT_DOUBLE_EQ(x.energy_j, 80.0 * 190);
    EXPECT_DOUBLE_EQ(x.regret, 8 * 1950.0 - 8 * 1770.0);
  }
}

TEST(SimulatorTest, ZeusPolicyFindsTheOptimumAndStopsHopelessRunsEarly) {
  SimulationOptions options;
  options.recurrences = 30;
  const SimulationResult r = simulate(toy_trace(), Policy::kZeus, options);
  EXPECT_EQ(r.final_batch_size(), 64);
  EXPECT_DOUBLE_EQ(r.final_power_limit_w(), 100);
  // Batch size 16 never converges; its attempt is cut at beta x best cost.
  bool saw_stop = false;
  for (const auto& x : r.recurrences) {
    if (x.batch_size == 16) {
      EXPECT_TRUE(x.stopped_early);
      EXPECT_FALSE(x.converged);
      EXPECT_DOUBLE_EQ(x.cost, 2.0 * 8 * 1770.0);
      saw_stop = true;
    }
  }
  EXPECT_TRUE(saw_stop);
  EXPECT_DOUBLE_EQ(r.recurrences.back().regret, 0.0);
}

TEST(SimulatorTest, GridSearchTriesEachLimitThenKeepsTheBest) {
  const SimulationResult r = simulate(toy_trace(), Policy::kGridSearch, {});
  // 64 at 200 and 100 W, 32 at both, 16 once (misses, pruned), 128 at both.
  std::vector<std::pair<int, double>> tried;
  for (int i = 0; i < 7; ++i) tried.emplace_back(r.recurrences[i].batch_size, r.recurrences[i].power_limit_w);
  EXPECT_EQ(tried, (std::vector<std::pair<int, double>>{{64, 200}, {64, 100}, {32, 200}, {32, 100}, {16, 200},
                                                        {128, 200}, {128, 100}}));
  EXPECT_EQ(r.final_batch_size(), 64);
  EXPECT_DOUBLE_EQ(r.final_power_limit_w(), 100);
  EXPECT_EQ(r.converged_at(), 7);
}

// A real trace may lack some limits of a batch size (and its default):
// each batch size is tried over the limits it has, the default runs at its
// own largest.
TEST(SimulatorTest, IncompleteLimitGridsAreSearchedOverTheLimitsEachBatchSizeHas) {
  WorkloadTrace t = toy_trace();
  t.power[32] = {{100, 12.0, 95}};   // 200 W missing
  t.power[128] = {{200, 10.0, 190}};  // 100 W missing
  t.default_batch_size = 32;
  const SimulationResult grid = simulate(t, Policy::kGridSearch, {});
  std::vector<std::pair<int, double>> tried;
  for (int i = 0; i < 5; ++i) tried.emplace_back(grid.recurrences[i].batch_size, grid.recurrences[i].power_limit_w);
  EXPECT_EQ(tried, (std::vector<std::pair<int, double>>{{32, 100}, {16, 200}, {64, 200}, {64, 100}, {128, 200}}));
  EXPECT_EQ(grid.final_batch_size(), 64);
  EXPECT_DOUBLE_EQ(grid.final_power_limit_w(), 100);
  for (const auto& x : simulate(t, Policy::kDefault, {}).recurrences) {
    EXPECT_EQ(x.batch_size, 32);
    EXPECT_DOUBLE_EQ(x.power_limit_w, 100);
  }
  SimulationOptions options;
  options.recurrences = 30;
  EXPECT_EQ(simulate(t, Policy::kZeus, options).final_batch_size(), 64);
}

TEST(SimulatorTest, SameSeedSameResult) {
  const auto trace = synthetic_workloads().front();
  SimulationOptions options;
  options.seed = 5;
  const auto a = simulate(trace, Policy::kZeus, options);
  const auto b = simulate(trace, Policy::kZeus, options);
  ASSERT_EQ(a.recurrences.size(), b.recurrences.size());
  for (std::size_t i = 0; i < a.recurrences.size(); ++i) EXPECT_EQ(a.recurrences[i].cost, b.recurrences[i].cost);
  EXPECT_TRUE(trace.synthetic);
}

// The published V100 traces (bundled in data/): Zeus must save
// energy in the range the Zeus paper reports for V100 (15%-76% less ETA than
// Default), and Grid Search must end near the same configurations at a far
// higher cumulative regret.
TEST(SimulatorTest, ZeusPaperRangeOnTheV100Traces) {
  const std::string dir = std::string(JOULE_SOURCE_DIR) + "/data/zeus-nsdi23";
  for (const auto& spec : zeus_workloads()) {
    const WorkloadTrace trace = load_workload(dir + "/summary_train.csv", dir + "/summary_power_v100.csv", spec);
    double eta_ratio = 0, zeus_regret = 0, grid_regret = 0;
    int grid_near = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      SimulationOptions options;
      options.seed = seed;
      const auto zeus = simulate(trace, Policy::kZeus, options);
      const auto grid = simulate(trace, Policy::kGridSearch, options);
      const auto dflt = simulate(trace, Policy::kDefault, options);
      eta_ratio += zeus.mean_energy_last_j(5) / dflt.mean_energy_last_j(5) / 10.0;
      zeus_regret += zeus.cumulative_regret();
      grid_regret += grid.cumulative_regret();
      const auto& sizes = trace.batch_sizes;
      const auto pos = [&](int b) { return std::find(sizes.begin(), sizes.end(), b) - sizes.begin(); };
      grid_near += std::abs(pos(grid.final_batch_size()) - pos(zeus.optimal.batch_size)) <= 1;
    }
    EXPECT_GE(1.0 - eta_ratio, 0.15) << spec.name;
    EXPECT_LE(1.0 - eta_ratio, 0.76) << spec.name;
    EXPECT_GT(grid_regret, 2.0 * zeus_regret) << spec.name;
    EXPECT_GE(grid_near, 8) << spec.name;
  }
}

}  // namespace
}  // namespace joule
