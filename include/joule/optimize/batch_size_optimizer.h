// Picks the batch size of each recurrence of a training job.
//
// Pruning first, in two rounds. A round starts at the default batch size b0,
// then tries smaller sizes, largest first, until one fails to reach the
// target, then larger sizes, smallest first, likewise. Sizes that reached the
// target survive the round; b0 moves to the cheapest of them. After the second
// round every survivor has two observations and Gaussian Thompson sampling
// takes over among them.
//
// Early stopping: a recurrence whose cost would pass beta times the smallest
// cost observed so far should be stopped and reported as not converged.
//
// Concurrent submissions: predict() may be called again before observe();
// while an exploration is outstanding during pruning, further jobs get the
// best size known so far instead of a second exploration.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "joule/optimize/gaussian_ts.h"
#include "joule/optimize/pruning.h"

namespace joule {

struct BatchSizeOptimizerOptions {
  std::vector<int> batch_sizes;  // the choices; must contain default_batch_size
  int default_batch_size = 0;
  double beta = 2.0;             // early-stopping factor (> 1)
  std::optional<std::size_t> window;
  GaussianPrior prior;
  uint64_t seed = 1;
  // false: the sampler keeps running sums only (flat memory for replays of
  // millions of recurrences); to_json() then refuses.
  bool keep_observations = true;
};

class BatchSizeOptimizer {
 public:
  enum class Phase { kPruning, kThompson };

  // Throws UsageError for empty or unsorted sizes, a default not among them,
  // or beta <= 1.
  explicit BatchSizeOptimizer(BatchSizeOptimizerOptions options);

  int predict();
  // Reports a finished (or early-stopped) recurrence. cost is what it cost,
  // converged whether it reached the target.
  void observe(int batch_size, double cost, bool converged);
  // Stop a running recurrence once its cost passes this (+inf before any
  // converged observation).
  double early_stop_threshold_cost() const;

  Phase phase() const { return phase_; }
  int pruning_round() const { return round_; }
  int default_batch_size() const { return b0_; }
  // Batch sizes still in play (this round's set, or the Thompson arms).
  const std::vector<int>& candidates() const { return phase_ == Phase::kPruning ? walk_.sizes() : arms_; }
  // The cheapest size by mean observed cost among converged ones (b0 if none).
  int best_known() const;
  const GaussianThompsonSampler& sampler() const { return sampler_; }

  // State as JSON (options, phase, observations, random state), and back:
  // a later process continues exactly where this one stopped.
  nlohmann::json to_json() const;
  static BatchSizeOptimizer from_json(const nlohmann::json& state);

 private:
  void start_round(std::vector<int> set);
  void finish_round();

  BatchSizeOptimizerOptions options_;
  GaussianThompsonSampler sampler_;
  std::mt19937_64 rng_;
  Phase phase_ = Phase::kPruning;
  int round_ = 0;
  int b0_ = 0;
  PruningRound walk_;              // this pruning round
  std::vector<int> arms_;          // Thompson-phase batch sizes
  std::optional<int> pending_;     // exploration handed out, not yet observed
  std::vector<int> survivors_;     // converged in this round
  std::vector<std::pair<int, double>> round_costs_;
  double min_cost_ = 0.0;
  bool has_min_cost_ = false;
};

}  // namespace joule
