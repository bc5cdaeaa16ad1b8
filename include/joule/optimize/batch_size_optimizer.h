// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
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
// Warm start: evidence gathered elsewhere (another GPU model's observations,
// their costs translated to this one; see joule/simulate/translate.h) can
// seed a fresh optimizer, which then skips pruning. See warm_start().
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
  // millions of recurrences, and a saved state of flat size); the decisions
  // are the same either way. A window keeps its observations regardless.
  bool keep_observations = true;
};

// One recurrence seen elsewhere, its cost expressed in this job's units.
struct PriorObservation {
  int batch_size = 0;
  double cost = 0.0;
  bool converged = false;
};

struct WarmStart {
  std::vector<PriorObservation> observations;
  // Sizes to try although nothing is known of them (e.g. sizes only this
  // GPU's memory holds). They are tried before the others, once each.
  std::vector<int> unexplored;
  // Prior evidence on a size weighs as at most this many of the job's own
  // observations, so that a mis-translated size is overruled after a few
  // recurrences of its own.
  double max_prior_observations = 2.0;
  // Translated costs are estimates: their spread per observation is taken as
  // at least this fraction of their mean, however alike they are.
  double min_relative_spread = 0.1;
};

class BatchSizeOptimizer {
 public:
  enum class Phase { kPruning, kThompson };

  // Throws UsageError for empty or unsorted sizes, a default not among them,
  // or beta <= 1.
  explicit BatchSizeOptimizer(BatchSizeOptimizerOptions options);

  // Seeds a fresh optimizer (before any predict or observe) with evidence
  // from elsewhere, and goes straight to Thompson sampling over:
  //   - every size with a converged prior observation, its belief starting
  //     from the prior observations' mean (all of that size's, failed runs
  //     included) with the variance of that many observations, at most
  //     max_prior_observations, of spread at least min_relative_spread;
  //   - the unexplored sizes, with no belief: each is tried once before
  //     sampling starts, those nearest (in log size) the best prior size first.
  // Sizes with only failed prior observations, and sizes in neither list,
  // are left out, as pruning would have left them. The early-stop threshold
  // still comes from this job's own converged runs only: a mis-translated cost
  // must not cut them. The default batch size becomes the cheapest prior one.
  // Returns false and changes nothing when no prior observation converged.
  // Throws UsageError for sizes not among the choices, non-positive costs or
  // weights, or an optimizer that has already started.
  bool warm_start(const WarmStart& start);

  int predict();
  // Reports a finished (or early-stopped) recurrence. cost is what it cost,
  // converged whether it reached the target.
  // Throws UsageError, changing nothing, for a size not among the choices or
  // a cost that is not finite.
  void observe(int batch_size, double cost, bool converged);
  // Learns from a recurrence that finished earlier, for an optimizer rebuilt
  // from a job's history (one at a time, in the order they were asked for):
  // in pruning, a run of the size the walk waits for counts as that
  // exploration, as if predict() had handed it out; otherwise as observe().
  void replay(int batch_size, double cost, bool converged);
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
  const BatchSizeOptimizerOptions& options() const { return options_; }

  // State as JSON (options, phase, evidence per batch size, random state),
  // and back: a later process continues exactly where this one stopped, with
  // the same predictions and thresholds. The evidence is, by "version":
  //   1: "observations", every cost per size (kept observations, or a window);
  //   2: "running_sums", {"n", "sum", "welford_mean", "m2"} per size, when
  //      keep_observations is false and there is no window; options then
  //      hold "keep_observations": false. Its size does not grow with the
  //      number of recurrences.
  // "rng" is the random generator's state (PCG32: three numbers). from_json
  // reads both versions, and the larger std::mt19937_64 "rng" that earlier
  // builds wrote; it throws UsageError for an unknown version or
  // evidence that is malformed (negative n, non-finite sums, a size not among
  // the choices, a size missing from running_sums), or fields that disagree
  // (a size in arms, b0, pending, survivors or the round not among the
  // choices, a Thompson phase without arms, a walk past its sizes).
  nlohmann::json to_json() const;
  static BatchSizeOptimizer from_json(const nlohmann::json& state);

 private:
  void check_restored() const;
  void start_round(std::vector<int> set);
  std::optional<int> nearest_untried() const;
  void finish_round();

  BatchSizeOptimizerOptions options_;
  GaussianThompsonSampler sampler_;
  pcg32 rng_;
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
