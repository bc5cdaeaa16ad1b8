// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Gaussian Thompson sampling over batch sizes, minimising cost.
//
// Each arm's mean cost has a normal belief. Observations of an arm are taken
// as normal with the variance of the observed costs (the sample variance,
// since it is unknown), and the belief is updated by the conjugate rule:
//   precision_post = precision_prior + n / s^2
//   mean_post      = (precision_prior * mean_prior + (n / s^2) * xbar) / precision_post
// A flat prior has precision 0, so the posterior is N(xbar, s^2 / n).
// Prediction samples every arm's belief and takes the smallest sample.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <pcg_random.hpp>
#include <random>
#include <vector>

namespace joule {

struct GaussianPrior {
  double mean = 0.0;
  double precision = 0.0;  // 0: flat
};

// Everything an arm's belief needs when no window is set: the sum of its
// costs (for the mean) and Welford's running mean and sum of squared
// deviations (for the spread), over n observations in arrival order.
struct RunningSums {
  std::size_t n = 0;
  double sum = 0, welford_mean = 0, m2 = 0;
};

struct ArmBelief {
  double mean = 0.0;
  double variance = 0.0;
  std::size_t observations = 0;
};

class GaussianThompsonSampler {
 public:
  // window: when set, only the last `window` observations of each arm count
  // (for workloads that drift).
  // keep_history: keep every observation (for observations()); false keeps
  // only running sums, so memory stays flat however long a job recurs, and
  // running()/restore_running() carry the state. With a window the window is
  // always kept.
  explicit GaussianThompsonSampler(std::optional<std::size_t> window = std::nullopt, GaussianPrior prior = {},
                                   bool keep_history = true);

  void add_arm(int arm);
  // Replaces the shared prior for one arm (e.g. evidence about it from
  // another GPU model). precision must be > 0.
  void set_arm_prior(int arm, GaussianPrior prior);
  const std::map<int, GaussianPrior>& arm_priors() const { return arm_priors_; }
  // Throws UsageError for a cost that is not finite. Finite costs keep the
  // sums finite as long as n * |cost| and n * cost^2 fit a double (about
  // 1e308): for costs up to 1e100, any number of observations a size_t counts.
  void observe(int arm, double cost);
  // Throws Error when the arm has no observation and the prior is flat.
  ArmBelief belief(int arm) const;
  // Samples each listed arm's belief; returns the arm with the smallest draw.
  // Arms without observations and with a flat prior are drawn first
  // (returned before any other).
  int predict(const std::vector<int>& arms, pcg32& rng) const;

  // The observations kept (empty when keep_history is off and no window).
  const std::deque<double>& observations(int arm) const;
  // How many observations count.
  std::size_t count(int arm) const;
  bool keeps_history() const { return keep_history_ || window_.has_value(); }
  // An arm's running sums (all zero for an arm never observed), for saving
  // the state of a sampler that keeps no history.
  RunningSums running(int arm) const;
  // Puts back sums that running() gave; every later belief, mean and draw is
  // then the same as the saved sampler's. Throws UsageError when the sampler
  // keeps history (its observations are its state, and would disagree with
  // the sums), or for sums no observations give: non-finite, m2 < 0, or
  // nonzero with n = 0.
  void restore_running(int arm, const RunningSums& sums);
  // Mean of the costs that count (nullopt: none). O(1) without a window.
  std::optional<double> mean(int arm) const;
  std::vector<int> arms() const;
  std::optional<std::size_t> window() const { return window_; }
  const GaussianPrior& prior() const { return prior_; }

 private:
  std::optional<std::size_t> window_;
  const GaussianPrior& prior_of(int arm) const;
  static ArmBelief wide_belief(const GaussianPrior& prior, double mean, double variance, std::size_t n);

  GaussianPrior prior_;
  std::map<int, GaussianPrior> arm_priors_;
  bool keep_history_ = true;
  // Running sums of every observation (in arrival order, so the mean is the
  // same number a loop over them gives; Welford's update for the spread):
  // without a window, a belief costs O(1) however long the job recurs.
  std::map<int, std::deque<double>> observations_;
  std::map<int, RunningSums> running_;
};

}  // namespace joule
