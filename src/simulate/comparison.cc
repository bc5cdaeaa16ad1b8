// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace joule {

std::string PolicyVariant::label() const {
  return window ? fmt::format("{} window {}", to_string(policy), *window) : to_string(policy);
}

std::string optimal_text(const SimulationSet& set) {
  const SimulationResult& first = set.results.front().front();
  std::string text = fmt::format("b={} {:.0f} W", first.optimal.batch_size, first.optimal.power_limit_w);
  if (first.optimal_after) {
    text += fmt::format(", after drift b={} {:.0f} W", first.optimal_after->batch_size, first.optimal_after->power_limit_w);
  }
  return text;
}

VariantSummary summarize(const SimulationSet& set, std::size_t variant) {
  VariantSummary summary;
  const auto& list = set.results.at(variant);
  const auto& reference = set.results.at(set.reference);
  std::map<std::pair<int, double>, int> finals;
  std::vector<int> converged_at;
  for (std::size_t s = 0; s < list.size(); ++s) {
    const SimulationResult& r = list[s];
    const SimulationResult& d = reference.at(s);
    summary.energy_last_ratio +=
        r.mean_energy_last_j(kSteadyStateRecurrences) / d.mean_energy_last_j(kSteadyStateRecurrences);
    summary.time_last_ratio += r.mean_time_last_s(kSteadyStateRecurrences) / d.mean_time_last_s(kSteadyStateRecurrences);
    summary.energy_all_ratio += r.total_energy_j() / d.total_energy_j();
    summary.time_all_ratio += r.total_time_s() / d.total_time_s();
    summary.regret_per_optimal += r.cumulative_regret() / r.optimal.expected_cost;
    ++finals[{r.final_batch_size(), r.final_power_limit_w()}];
    converged_at.push_back(r.converged_at());
    if (set.drift_after) {
      for (const Recurrence& x : r.recurrences) {
        summary.stale_after_drift += x.index >= *set.drift_after && x.batch_size == r.optimal.batch_size;
      }
    }
  }
  if (list.empty()) return summary;
  const double n = static_cast<double>(list.size());
  summary.energy_last_ratio /= n;
  summary.time_last_ratio /= n;
  summary.energy_all_ratio /= n;
  summary.time_all_ratio /= n;
  summary.regret_per_optimal /= n;
  summary.stale_after_drift /= n;
  summary.final_config = std::max_element(finals.begin(), finals.end(), [](const auto& a, const auto& b) {
                           return a.second < b.second;
                         })->first;
  std::sort(converged_at.begin(), converged_at.end());
  summary.converged_at = converged_at[converged_at.size() / 2];
  summary.recurrences = list.front().recurrences.size();
  return summary;
}

}  // namespace joule
