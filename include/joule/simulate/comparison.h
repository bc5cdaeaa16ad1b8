// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Policies compared on one workload over the same seeds, and the figures the
// CLI table and the HTML report show for each: energy and time relative to
// Default at the end (last five recurrences) and over the whole sequence,
// regret, and where each policy settled.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joule/simulate/simulator.h"

namespace joule {

// One policy as run: the policy and the optimizer's observation window.
struct PolicyVariant {
  Policy policy = Policy::kZeus;
  std::optional<std::size_t> window;
  std::string label() const;  // "zeus", "zeus window 10", "grid", "default"
};

// One workload: every variant over the same seeds (results[variant][seed]).
struct SimulationSet {
  std::string workload;
  std::string target_text;
  std::vector<PolicyVariant> variants;
  std::vector<std::vector<SimulationResult>> results;
  std::size_t reference = 0;  // the Default variant: the denominator of ratios
  std::optional<int> drift_after;
};

// Means over seeds of per-seed ratios to the reference.
struct VariantSummary {
  double energy_last_ratio = 0.0;  // last five recurrences
  double time_last_ratio = 0.0;
  double energy_all_ratio = 0.0;   // every recurrence, exploration included
  double time_all_ratio = 0.0;
  double regret_per_optimal = 0.0;  // cumulative regret / the optimal recurrence's expected cost
  std::pair<int, double> final_config;  // the most common final (batch size, limit)
  int converged_at = 0;                 // median recurrence from which it stayed
  std::size_t recurrences = 0;
  // With a drift: recurrences after it that still used the batch size that
  // was optimal before it (the stale choice), mean over seeds.
  double stale_after_drift = 0.0;
};

constexpr std::size_t kSteadyStateRecurrences = 5;

VariantSummary summarize(const SimulationSet& set, std::size_t variant);

// The set's optimum in words, and after a drift the optimum then: "b=128 100 W,
// after drift b=256 150 W". One text for the simulator's table and its page.
std::string optimal_text(const SimulationSet& set);

}  // namespace joule
