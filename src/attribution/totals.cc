// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/totals.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attribution/checked_input.h"
#include "joule/attribution/spread.h"
#include "joule/error.h"

namespace joule::attribution {

std::vector<std::vector<std::size_t>> checked_totals(const std::vector<RegionTotal>& totals,
                                                     std::span<const std::string> names) {
  return checked_region_groups(totals, names, "total");
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Each round's sum of the members' energies (NaN where any member's is).
std::vector<double> summed_rounds(const std::vector<std::size_t>& members,
                                  const std::vector<std::vector<double>>& rounds) {
  std::vector<double> sums;
  for (std::size_t k = 0; k < rounds[members.front()].size(); ++k) {
    double sum_j = 0.0;
    for (std::size_t r : members) sum_j += k < rounds[r].size() ? rounds[r][k] : kNaN;
    sums.push_back(sum_j);
  }
  return sums;
}

}  // namespace

std::vector<RegionEnergy> sum_regions(const Attribution& a, const std::vector<RegionTotal>& totals,
                                      const std::vector<std::vector<std::size_t>>& members,
                                      const std::vector<std::vector<double>>& rounds, double confidence) {
  std::vector<RegionEnergy> out;
  for (std::size_t i = 0; i < totals.size(); ++i) {
    RegionEnergy g;
    g.name = totals[i].name;
    g.resolved = g.concurrent = true;
    double power_time_ws = 0.0;
    for (std::size_t r : members[i]) {
      const RegionEnergy& part = a.regions[r];
      g.calls = std::max(g.calls, part.calls);
      g.gpu_time_s += part.gpu_time_s;
      g.energy_j += part.energy_j;
      g.share += part.share;
      g.resolved = g.resolved && part.resolved;
      g.concurrent = g.concurrent && part.concurrent;
      power_time_ws += part.power_w * part.gpu_time_s;
    }
    g.energy_per_call_j = g.calls > 0 ? g.energy_j / static_cast<double>(g.calls) : 0.0;
    g.power_w = g.resolved && g.gpu_time_s > 0.0 ? power_time_ws / g.gpu_time_s : kNaN;
    g.power_above_baseline_w = g.concurrent ? g.power_w : g.power_w - a.baseline_w;
    g.energy_low_j = g.energy_high_j = g.energy_std_j = kNaN;
    if (g.resolved && !rounds.empty()) {
      const Spread s = spread_of(summed_rounds(members[i], rounds), confidence);
      // Rounds that all agree (a steady simulated GPU) sum in another order
      // than the parts: the interval still holds its estimate.
      g.energy_low_j = std::min(s.low, g.energy_j);
      g.energy_high_j = std::max(s.high, g.energy_j);
      g.energy_std_j = s.std;
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace joule::attribution
