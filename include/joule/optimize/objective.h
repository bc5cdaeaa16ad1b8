// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What the power-limit optimizer minimises, and the choice it makes from a
// per-limit profile.
#pragma once

#include <string>
#include <vector>

namespace joule {

struct Objective {
  enum class Kind { kTime, kEnergy, kCost, kMaxSlowdown };
  Kind kind = Kind::kCost;
  double eta = 0.5;           // kCost: energy (1) vs time (0)
  double max_slowdown = 1.1;  // kMaxSlowdown: allowed time relative to the fastest limit

  static Objective time() { return {Kind::kTime, 0.0, 1.0}; }
  static Objective energy() { return {Kind::kEnergy, 1.0, 1.0}; }
  static Objective cost(double eta) { return {Kind::kCost, eta, 1.0}; }
  static Objective slowdown(double max_slowdown) { return {Kind::kMaxSlowdown, 0.0, max_slowdown}; }

  // "time", "energy", "cost(eta=0.5)", "max-slowdown(1.10)".
  std::string describe() const;
  // Throws UsageError for eta outside [0, 1] or a slowdown below 1.
  void validate() const;
};

// Parses "time", "energy", "cost", "slowdown" with the given parameters.
Objective parse_objective(const std::string& name, double eta, double max_slowdown);

// One power limit's measured cost of a unit of work (a training step, or an
// epoch in traces), summed over the job's GPUs.
struct LimitMeasurement {
  double power_limit_w = 0.0;
  double time_s = 0.0;    // per unit
  double energy_j = 0.0;  // per unit, all GPUs
};

// Index of the limit the objective prefers. max_power_w is the largest limit
// times the number of GPUs (the Zeus cost's time price). Ties (within a relative 1e-9) go to the higher
// limit. Throws UsageError for an empty profile.
std::size_t choose_power_limit(const std::vector<LimitMeasurement>& profile, const Objective& objective,
                               double max_power_w);

}  // namespace joule
