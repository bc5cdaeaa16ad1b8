// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/objective.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "joule/error.h"
#include "joule/optimize/cost.h"

namespace joule {

std::string Objective::describe() const {
  switch (kind) {
    case Kind::kTime: return "time";
    case Kind::kEnergy: return "energy";
    case Kind::kCost: return fmt::format("cost(eta={})", eta);
    case Kind::kMaxSlowdown: return fmt::format("max-slowdown({:.2f})", max_slowdown);
  }
  return "?";
}

void Objective::validate() const {
  if (kind == Kind::kCost) check_eta(eta);
  if (kind == Kind::kMaxSlowdown && !(max_slowdown >= 1.0)) {
    throw UsageError(fmt::format("max slowdown {} must be at least 1", max_slowdown));
  }
}

Objective parse_objective(const std::string& name, double eta, double max_slowdown) {
  Objective objective;
  if (name == "time") {
    objective = Objective::time();
  } else if (name == "energy") {
    objective = Objective::energy();
  } else if (name == "cost") {
    objective = Objective::cost(eta);
  } else if (name == "slowdown") {
    objective = Objective::slowdown(max_slowdown);
  } else {
    throw UsageError(fmt::format("unknown objective '{}' (expected time, energy, cost or slowdown)", name));
  }
  objective.validate();
  return objective;
}

std::size_t choose_power_limit(const std::vector<LimitMeasurement>& profile, const Objective& objective,
                               double max_power_w) {
  if (profile.empty()) throw UsageError("choose_power_limit: empty profile");
  double fastest_s = std::numeric_limits<double>::infinity();
  for (const auto& m : profile) fastest_s = std::min(fastest_s, m.time_s);
  auto score = [&](const LimitMeasurement& m) {
    switch (objective.kind) {
      case Objective::Kind::kTime: return m.time_s;
      case Objective::Kind::kEnergy: return m.energy_j;
      case Objective::Kind::kCost: return zeus_cost(m.energy_j, m.time_s, objective.eta, max_power_w);
      case Objective::Kind::kMaxSlowdown:
        return m.time_s <= objective.max_slowdown * fastest_s ? m.energy_j : std::numeric_limits<double>::infinity();
    }
    return std::numeric_limits<double>::infinity();
  };
  // Scores within a relative 1e-9 are ties (rounding, not measurement), and
  // a tie goes to the higher limit: the same cost, less risk of slowing down.
  auto tied = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); };
  std::size_t best = 0;
  for (std::size_t i = 1; i < profile.size(); ++i) {
    const double a = score(profile[i]), b = score(profile[best]);
    if (tied(a, b) ? profile[i].power_limit_w > profile[best].power_limit_w : a < b) best = i;
  }
  return best;
}

}  // namespace joule
