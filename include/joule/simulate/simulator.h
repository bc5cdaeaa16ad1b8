// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Replays a recurring training job on traces: each recurrence picks a batch
// size and power limit by a policy, samples one seeded run of that batch size
// (epochs to target, or a miss), and costs it with the trace's time and power.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/simulate/trace.h"

namespace joule {

enum class Policy {
  kZeus,        // batch-size optimizer (pruning + Thompson sampling), best limit per batch size
  kGridSearch,  // one (batch size, limit) per recurrence with pruning, then the best one seen
  kDefault,     // the default batch size at the largest power limit
};

const char* to_string(Policy policy);
Policy parse_policy(const std::string& text);  // throws UsageError

// Data drift: from recurrence `after_recurrences` on, the job needs more (or
// fewer) epochs to reach its target at some batch sizes, as when fresh data
// changes what trains well. Power and time per epoch stay.
struct DriftScenario {
  int after_recurrences = 0;
  std::map<int, double> epoch_scale;  // batch size -> factor on its epochs to target
};

struct SimulationOptions;
struct Recurrence;

// A batch-size optimizer outside this process (e.g. `joule serve`, through
// `joule simulate --service`): the zeus policy asks it for every recurrence
// and reports every outcome instead of keeping its own optimizer.
class RemoteZeusOptimizer {
 public:
  struct Decision {
    int batch_size = 0;
    std::optional<double> power_limit_w;  // none: the trace's best for that size
    double early_stop_threshold_cost = 0.0;
  };
  virtual ~RemoteZeusOptimizer() = default;
  virtual Decision ask() = 0;
  virtual void report(const Recurrence& r) = 0;
};
using RemoteZeusFactory =
    std::function<std::unique_ptr<RemoteZeusOptimizer>(const WorkloadTrace&, const SimulationOptions&)>;

struct SimulationOptions {
  double eta = 0.5;
  double beta = 2.0;
  uint64_t seed = 1;
  std::optional<std::size_t> window;
  int recurrences = 0;  // 0: 2 x |batch sizes| x |power limits|
  std::optional<DriftScenario> drift;
  RemoteZeusFactory remote_zeus;  // set: the zeus policy's optimizer lives there
};

struct Recurrence {
  int index = 0;
  int batch_size = 0;
  double power_limit_w = 0.0;
  bool converged = false;
  bool stopped_early = false;
  double epochs = 0.0;
  double time_s = 0.0;
  double energy_j = 0.0;
  double cost = 0.0;
  double regret = 0.0;  // cost minus the expected cost of the optimal configuration
};

struct OptimalConfig {
  int batch_size = 0;
  double power_limit_w = 0.0;
  double expected_cost = 0.0;
};

// The configuration with the least expected cost: batch sizes whose every
// run reaches the target, mean epochs times the best epoch cost.
OptimalConfig optimal_config(const WorkloadTrace& trace, double eta);

// The trace as it is after a drift: epochs to target of each batch size in
// epoch_scale multiplied by its factor (rounded, at least one epoch).
// Throws UsageError for a batch size not in the trace or a factor <= 0.
WorkloadTrace drifted_trace(const WorkloadTrace& trace, const std::map<int, double>& epoch_scale);

struct SimulationResult {
  std::string workload;
  Policy policy = Policy::kZeus;
  uint64_t seed = 0;
  OptimalConfig optimal;                       // before any drift
  std::optional<OptimalConfig> optimal_after;  // after the drift, with one
  std::optional<std::size_t> window;           // the optimizer's, for labels
  std::vector<Recurrence> recurrences;

  double cumulative_regret() const;
  // Mean energy and time of the last n recurrences.
  double mean_energy_last_j(std::size_t n) const;
  double mean_time_last_s(std::size_t n) const;
  // Energy and time of every recurrence, exploration included: what the
  // user paid over the whole sequence.
  double total_energy_j() const;
  double total_time_s() const;
  // The last recurrence's configuration, and the first recurrence from which
  // every later one used it.
  int final_batch_size() const;
  double final_power_limit_w() const;
  int converged_at() const;
};

SimulationResult simulate(const WorkloadTrace& trace, Policy policy, const SimulationOptions& options);

}  // namespace joule
