// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Data drift in the simulator, and the comparison figures shown per policy.
#include <gtest/gtest.h>

#include "joule/error.h"
#include "joule/simulate/comparison.h"
#include "joule/simulate/simulator.h"
#include "simulate/toy_trace.h"

namespace joule {
namespace {

using testing::toy_trace;

TEST(DriftTest, DriftedTraceScalesTheEpochsOfTheNamedSizesOnly) {
  const WorkloadTrace d = drifted_trace(toy_trace(), {{64, 2.0}, {128, 0.55}});
  EXPECT_EQ(d.epochs.at(64), (std::vector<std::optional<int>>{16, 16}));
  EXPECT_EQ(d.epochs.at(128), (std::vector<std::optional<int>>{7, 7}));  // 6.6 rounds to 7
  EXPECT_EQ(d.epochs.at(32), (std::vector<std::optional<int>>{10, 10}));
  EXPECT_FALSE(d.epochs.at(16).front().has_value());  // never reaching the target stays so
  EXPECT_EQ(d.max_epochs, 40);
  EXPECT_EQ(drifted_trace(toy_trace(), {{32, 5.0}}).max_epochs, 50);  // longer than any run before
}

TEST(DriftTest, BadDriftsAreRefusedByName) {
  try {
    drifted_trace(toy_trace(), {{48, 2.0}});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no batch size 48"), std::string::npos) << e.what();
  }
  EXPECT_THROW(drifted_trace(toy_trace(), {{64, 0.0}}), UsageError);
  EXPECT_THROW(drifted_trace(toy_trace(), {{64, -1.0}}), UsageError);
}

TEST(DriftTest, AfterTheDriftRunsComeFromTheDriftedTraceAndRegretFromItsOptimum) {
  SimulationOptions options;
  options.recurrences = 10;
  options.drift = DriftScenario{4, {{64, 2.0}}};
  const SimulationResult r = simulate(toy_trace(), Policy::kDefault, options);
  ASSERT_TRUE(r.optimal_after.has_value());
  EXPECT_EQ(r.optimal.batch_size, 64);
  EXPECT_EQ(r.optimal_after->batch_size, 32);
  EXPECT_DOUBLE_EQ(r.optimal_after->expected_cost, 10 * 1770.0);
  for (const Recurrence& x : r.recurrences) {
    const bool drifted = x.index >= 4;
    EXPECT_DOUBLE_EQ(x.epochs, drifted ? 16 : 8) << x.index;
    EXPECT_DOUBLE_EQ(x.regret, drifted ? 16 * 1950.0 - 10 * 1770.0 : 8 * 1950.0 - 8 * 1770.0) << x.index;
  }
}

// The set every figure is computed from: each variant over the same seeds.
SimulationSet run_set(const WorkloadTrace& trace, const std::vector<PolicyVariant>& variants,
                      const std::vector<uint64_t>& seeds, const SimulationOptions& base) {
  SimulationSet set{trace.spec.name, trace.spec.target_text, variants, {}, variants.size() - 1, std::nullopt};
  if (base.drift) set.drift_after = base.drift->after_recurrences;
  for (const PolicyVariant& v : variants) {
    auto& runs = set.results.emplace_back();
    for (uint64_t seed : seeds) {
      SimulationOptions o = base;
      o.seed = seed;
      o.window = v.window;
      runs.push_back(simulate(trace, v.policy, o));
    }
  }
  return set;
}

// Without a window, the arm that was best keeps its long cheap history and
// is chosen long after it turned costly; with one, its recent costs count.
TEST(DriftTest, AWindowLeavesTheStaleChoiceSoonerThanNoWindow) {
  for (const WorkloadTrace& trace : synthetic_workloads()) {
    SimulationOptions options;
    options.recurrences = 200;
    options.drift = DriftScenario{100, {{optimal_config(trace, 0.5).batch_size, 2.0}}};
    const SimulationSet set =
        run_set(trace, {{Policy::kZeus, std::nullopt}, {Policy::kZeus, 10}, {Policy::kDefault, std::nullopt}},
                {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, options);
    const VariantSummary stale = summarize(set, 0), windowed = summarize(set, 1);
    EXPECT_GT(stale.stale_after_drift, 10.0) << trace.spec.name;
    EXPECT_LT(windowed.stale_after_drift, 0.5 * stale.stale_after_drift) << trace.spec.name;
    EXPECT_LT(windowed.regret_per_optimal, stale.regret_per_optimal) << trace.spec.name;
  }
}

TEST(ComparisonTest, RatiosAreMeansOverSeedsOfPerSeedRatiosToDefault) {
  const WorkloadTrace trace = synthetic_workloads().front();
  SimulationOptions options;
  options.recurrences = 40;
  const SimulationSet set = run_set(trace, {{Policy::kZeus, std::nullopt}, {Policy::kDefault, std::nullopt}},
                                    {1, 2, 3}, options);
  const VariantSummary zeus = summarize(set, 0), dflt = summarize(set, 1);
  double energy_all = 0, time_all = 0, energy_last = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    const auto &z = set.results[0][s], &d = set.results[1][s];
    double ze = 0, de = 0, zt = 0, dt = 0, zl = 0, dl = 0;
    for (std::size_t i = 0; i < 40; ++i) {
      ze += z.recurrences[i].energy_j;
      de += d.recurrences[i].energy_j;
      zt += z.recurrences[i].time_s;
      dt += d.recurrences[i].time_s;
      if (i >= 35) {
        zl += z.recurrences[i].energy_j;
        dl += d.recurrences[i].energy_j;
      }
    }
    energy_all += ze / de / 3;
    time_all += zt / dt / 3;
    energy_last += zl / dl / 3;
  }
  EXPECT_NEAR(zeus.energy_all_ratio, energy_all, 1e-12);
  EXPECT_NEAR(zeus.time_all_ratio, time_all, 1e-12);
  EXPECT_NEAR(zeus.energy_last_ratio, energy_last, 1e-12);
  EXPECT_DOUBLE_EQ(dflt.energy_all_ratio, 1.0);
  EXPECT_DOUBLE_EQ(dflt.time_last_ratio, 1.0);
  EXPECT_EQ(zeus.recurrences, 40u);
  EXPECT_EQ(PolicyVariant({Policy::kZeus, 10}).label(), "zeus window 10");
  EXPECT_EQ(PolicyVariant({Policy::kGridSearch, std::nullopt}).label(), "grid");
}

}  // namespace
}  // namespace joule
