// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Carrying what the batch-size optimizer learned on one GPU model over to
// another, and replaying the recurrences that follow.
//
// Epochs to reach the target depend on the batch size, not on the GPU; the
// cost of an epoch does (time per epoch, power at each limit), and so do the
// batch sizes that fit in memory. A cost c observed on the source GPU at batch
// size b therefore becomes, on the target GPU,
//     c * epoch_cost_target(b) / epoch_cost_source(b)
// each epoch cost at that GPU's best power limit for eta. Sizes the target
// cannot run are dropped; sizes only the target runs start unexplored; failed
// (non-converged) observations carry over as failed.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "joule/optimize/batch_size_optimizer.h"
#include "joule/simulate/simulator.h"
#include "joule/simulate/trace.h"

namespace joule {

struct TranslationOptions {
  double eta = 0.5;
  // nullopt: the target's epoch cost is known for every batch size (its
  // power trace). n: known only for n batch sizes, those nearest (in log
  // batch size) to the source's best; for the others the ratio is
  // interpolated in log batch size between profiled sizes, and held constant
  // beyond them.
  std::optional<int> profiled_points;
  // Or these sizes, given (each must be run by both GPUs); overrides
  // profiled_points when not empty.
  std::vector<int> profiled_sizes;
};

struct Translation {
  WarmStart start;  // for BatchSizeOptimizer::warm_start (weights left at their defaults)
  // target / source epoch cost per batch size both GPUs run; estimated where
  // the size was not profiled.
  std::map<int, double> ratio;
  std::vector<int> profiled;  // sizes whose target epoch cost was known
  std::vector<int> dropped;   // sizes with source evidence that the target lacks
  std::size_t dropped_observations = 0;
  std::vector<int> pruned;    // sizes the source tried and pruned: left out
};

// history: the (batch size, cost, converged) the source's optimizer observed,
// in order; in_play: its candidates() after them. Throws UsageError when the
// two traces are of different workloads, profiled_points < 1, or a profiled
// size is not run by both GPUs.
Translation translate_observations(const std::vector<PriorObservation>& history, const std::vector<int>& in_play,
                                   const WorkloadTrace& source, const WorkloadTrace& target,
                                   const TranslationOptions& options);

struct TransferOptions {
  SimulationOptions simulation;  // eta, beta, seed, window (recurrences unused)
  int learn_recurrences = 20;    // on the source GPU
  int deploy_recurrences = 20;   // on the target GPU
  std::optional<int> profiled_points;  // as in TranslationOptions
  std::vector<int> profiled_sizes;     // as in TranslationOptions
  double max_prior_observations = 2.0;  // as in WarmStart
};

struct TransferResult {
  SimulationResult learned;     // the zeus policy on the source
  Translation translation;
  bool warm_started = false;    // false: nothing converged on the source, so nothing to start from
  SimulationResult translated;  // on the target, the optimizer seeded with the translation
  SimulationResult scratch;     // on the target, a fresh optimizer: simulate(target, kZeus) cut short
};

// Learns on source, translates, then replays the target twice under the same
// seed and the same sampled runs: warm-started and from scratch.
TransferResult simulate_transfer(const WorkloadTrace& source, const WorkloadTrace& target,
                                 const TransferOptions& options);

}  // namespace joule
