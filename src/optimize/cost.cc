// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/cost.h"

#include <fmt/format.h>

#include "joule/error.h"
#include "joule/optimize/objective.h"

namespace joule {

void check_eta(double eta) {
  if (!(eta >= 0.0 && eta <= 1.0)) throw UsageError(fmt::format("eta {} is outside [0, 1]", eta));
}

double zeus_cost(double energy_j, double time_s, double eta, double max_power_w) {
  return eta * energy_j + (1.0 - eta) * max_power_w * time_s;
}

PowerChoice optimal_power_limit(const std::vector<PowerProfileEntry>& profile, double eta, double max_power_w) {
  if (profile.empty()) throw UsageError("optimal_power_limit: empty power profile");
  std::vector<LimitMeasurement> units;
  for (const auto& e : profile) units.push_back({e.power_limit_w, e.time_per_epoch_s, e.avg_power_w * e.time_per_epoch_s});
  const auto& best = profile[choose_power_limit(units, Objective::cost(eta), max_power_w)];
  return {best.power_limit_w,
          zeus_cost(best.avg_power_w * best.time_per_epoch_s, best.time_per_epoch_s, eta, max_power_w),
          best.time_per_epoch_s, best.avg_power_w};
}

}  // namespace joule
