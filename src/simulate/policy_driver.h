// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The policies the simulator replays, behind one interface, and the costing
// of one recurrence: shared by the single-job simulation and the cluster
// replay. Internal to the simulate module.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <utility>

#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/pruning.h"
#include "joule/simulate/simulator.h"

namespace joule::simulate_internal {

// Chooses (batch size, limit) per recurrence and learns from the outcome.
// choose() may be called again before the observe() of an earlier choice
// (recurrences that overlap in time).
class PolicyDriver {
 public:
  virtual ~PolicyDriver() = default;
  virtual std::pair<int, double> choose() = 0;
  virtual void observe(const Recurrence& r) = 0;
  virtual double early_stop_threshold() const = 0;
};

std::unique_ptr<PolicyDriver> make_policy_driver(const WorkloadTrace& trace, Policy policy,
                                                 const SimulationOptions& options);

// One recurrence of batch size b at limit_w, on the seeded run `run` of the
// train trace, stopped early once its cost passes threshold.
Recurrence run_recurrence(const WorkloadTrace& trace, int b, double limit_w, std::size_t run, double threshold,
                          double eta);

}  // namespace joule::simulate_internal
