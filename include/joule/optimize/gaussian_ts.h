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
#include <random>
#include <vector>

namespace joule {

struct GaussianPrior {
  double mean = 0.0;
  double precision = 0.0;  // 0: flat
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
  explicit GaussianThompsonSampler(std::optional<std::size_t> window = std::nullopt, GaussianPrior prior = {});

  void add_arm(int arm);
  // Replaces the shared prior for one arm (e.g. evidence about it from
  // another GPU model). precision must be > 0.
  void set_arm_prior(int arm, GaussianPrior prior);
  const std::map<int, GaussianPrior>& arm_priors() const { return arm_priors_; }
  void observe(int arm, double cost);
  // Throws Error when the arm has no observation and the prior is flat.
  ArmBelief belief(int arm) const;
  // Samples each listed arm's belief; returns the arm with the smallest draw.
  // Arms without observations and with a flat prior are drawn first
  // (returned before any other).
  int predict(const std::vector<int>& arms, std::mt19937_64& rng) const;

  const std::deque<double>& observations(int arm) const;
  std::vector<int> arms() const;
  std::optional<std::size_t> window() const { return window_; }
  const GaussianPrior& prior() const { return prior_; }

 private:
  std::optional<std::size_t> window_;
  const GaussianPrior& prior_of(int arm) const;

  GaussianPrior prior_;
  std::map<int, GaussianPrior> arm_priors_;
  std::map<int, std::deque<double>> observations_;
};

}  // namespace joule
