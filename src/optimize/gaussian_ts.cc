// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/gaussian_ts.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "joule/error.h"

namespace joule {

GaussianThompsonSampler::GaussianThompsonSampler(std::optional<std::size_t> window, GaussianPrior prior,
                                                 bool keep_history)
    : window_(window), prior_(prior), keep_history_(keep_history) {
  if (window_ && *window_ == 0) throw UsageError("the observation window must hold at least one observation");
  if (!(prior_.precision >= 0.0)) throw UsageError("the prior precision must be >= 0");
}

// Without history no deque is made at all: an empty std::deque still
// allocates a block, which is most of an optimizer's memory in a cluster
// replay of many groups.
void GaussianThompsonSampler::add_arm(int arm) {
  if (keeps_history()) observations_[arm];
  running_[arm];
}

void GaussianThompsonSampler::set_arm_prior(int arm, GaussianPrior prior) {
  if (!(prior.precision > 0.0) || !std::isfinite(prior.precision) || !std::isfinite(prior.mean)) {
    throw UsageError(fmt::format("batch size {}: a per-arm prior needs a finite mean and a precision > 0", arm));
  }
  add_arm(arm);
  arm_priors_[arm] = prior;
}

const GaussianPrior& GaussianThompsonSampler::prior_of(int arm) const {
  const auto it = arm_priors_.find(arm);
  return it == arm_priors_.end() ? prior_ : it->second;
}

void GaussianThompsonSampler::observe(int arm, double cost) {
  // One infinite or NaN cost would make the arm's sums non-finite for good
  // (and a saved state unreadable: JSON has no infinity).
  if (!std::isfinite(cost)) throw UsageError(fmt::format("batch size {}: the cost {} is not a finite number", arm, cost));
  if (keeps_history()) {
    auto& list = observations_[arm];
    list.push_back(cost);
    if (window_ && list.size() > *window_) list.pop_front();
  }
  RunningSums& r = running_[arm];
  ++r.n;
  r.sum += cost;
  const double delta = cost - r.welford_mean;
  r.welford_mean += delta / static_cast<double>(r.n);
  r.m2 += delta * (cost - r.welford_mean);
}

RunningSums GaussianThompsonSampler::running(int arm) const {
  const auto it = running_.find(arm);
  return it == running_.end() ? RunningSums{} : it->second;
}

void GaussianThompsonSampler::restore_running(int arm, const RunningSums& sums) {
  if (keeps_history()) {
    throw UsageError(
        fmt::format("batch size {}: running sums cannot replace the observations this sampler keeps", arm));
  }
  const bool finite = std::isfinite(sums.sum) && std::isfinite(sums.welford_mean) && std::isfinite(sums.m2);
  const bool empty_is_zero = sums.n > 0 || (sums.sum == 0 && sums.welford_mean == 0 && sums.m2 == 0);
  if (!finite || !(sums.m2 >= 0) || !empty_is_zero) {
    throw UsageError(fmt::format(
        "batch size {}: running sums n {}, sum {}, welford_mean {}, m2 {} are not those of any observations "
        "(they must be finite, m2 >= 0, and all 0 when n is 0)",
        arm, sums.n, sums.sum, sums.welford_mean, sums.m2));
  }
  running_[arm] = sums;
}

std::size_t GaussianThompsonSampler::count(int arm) const {
  if (window_) return observations(arm).size();
  auto it = running_.find(arm);
  return it == running_.end() ? 0 : it->second.n;
}

std::optional<double> GaussianThompsonSampler::mean(int arm) const {
  const std::size_t n = count(arm);
  if (n == 0) return std::nullopt;
  if (!window_) return running_.at(arm).sum / static_cast<double>(n);
  const auto& x = observations(arm);
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

const std::deque<double>& GaussianThompsonSampler::observations(int arm) const {
  static const std::deque<double> kNone;
  auto it = observations_.find(arm);
  return it == observations_.end() ? kNone : it->second;
}

std::vector<int> GaussianThompsonSampler::arms() const {
  std::vector<int> result;
  for (const auto& [arm, sums] : running_) result.push_back(arm);
  return result;
}

ArmBelief GaussianThompsonSampler::belief(int arm) const {
  const std::size_t n = count(arm);
  const GaussianPrior& prior = prior_of(arm);
  if (n == 0) {
    if (prior.precision <= 0) throw Error(fmt::format("batch size {} has no observation and the prior is flat", arm));
    return {prior.mean, 1.0 / prior.precision, 0};
  }
  const double mean = *this->mean(arm);
  double variance = 0;
  if (window_) {
    for (double v : observations(arm)) variance += (v - mean) * (v - mean);
  } else {
    variance = running_.at(arm).m2;
  }
  variance /= static_cast<double>(n);
  // One observation, or identical ones, say nothing about the spread: assume
  // a wide spread for one (the arm stays worth sampling) and a narrow floor
  // for identical costs (deterministic arms) so the update stays defined.
  if (n == 1) variance = mean * mean;
  variance = std::max(variance, 1e-12 * mean * mean + std::numeric_limits<double>::min());
  const double data_precision = static_cast<double>(n) / variance;
  const double precision = prior.precision + data_precision;
  const double posterior_mean = (prior.precision * prior.mean + data_precision * mean) / precision;
  if (std::isfinite(precision) && std::isfinite(posterior_mean)) return {posterior_mean, 1.0 / precision, n};
  return wide_belief(prior, mean, variance, n);
}

// Costs that are all (nearly) zero put the variance at its floor, and n
// divided by it overflows a double (n / DBL_MIN for n >= 4): the precision is
// infinite and the posterior mean NaN. The same update in long double (range
// to 1e4932) stays finite for every n a size_t counts; only these cases take
// it, so every other belief keeps its bits.
ArmBelief GaussianThompsonSampler::wide_belief(const GaussianPrior& prior, double mean, double variance,
                                               std::size_t n) {
  const long double data_precision = static_cast<long double>(n) / variance;
  const long double precision = static_cast<long double>(prior.precision) + data_precision;
  const long double posterior_mean =
      (static_cast<long double>(prior.precision) * prior.mean + data_precision * mean) / precision;
  return {static_cast<double>(posterior_mean), static_cast<double>(1.0L / precision), n};
}

int GaussianThompsonSampler::predict(const std::vector<int>& arms, pcg32& rng) const {
  if (arms.empty()) throw Error("Thompson sampling needs at least one batch size");
  int best_arm = arms.front();
  double best_draw = std::numeric_limits<double>::infinity();
  for (int arm : arms) {
    if (count(arm) == 0 && prior_of(arm).precision <= 0) return arm;  // never tried: try it
    const ArmBelief b = belief(arm);
    const double draw = std::normal_distribution<double>(b.mean, std::sqrt(b.variance))(rng);
    if (draw < best_draw) {
      best_draw = draw;
      best_arm = arm;
    }
  }
  return best_arm;
}

}  // namespace joule
