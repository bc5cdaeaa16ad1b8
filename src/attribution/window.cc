// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/window.h"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
#include <string>

#include "joule/attribution/spread.h"
#include "joule/attribution/totals.h"
#include "joule/common/root_sum_square.h"
#include "joule/device/power_limit_facts.h"
#include "joule/error.h"

namespace joule::attribution {

namespace {

// The observations with each sample's span cut to its last cover_s and moved
// delay_s earlier, on the window's own scale.
std::vector<PowerObservation> observations_of(const std::vector<ObservedPower>& observed, double begin_s,
                                              double cover_s, double delay_s) {
  std::vector<PowerObservation> out;
  out.reserve(observed.size());
  for (const ObservedPower& o : observed) {
    const double from_s = cover_s > 0 && o.end_s > o.begin_s ? std::max(o.begin_s, o.end_s - cover_s) : o.begin_s;
    out.push_back({from_s - delay_s - begin_s, o.end_s - delay_s - begin_s, o.power_w});
  }
  return out;
}

// The observations as a response of `ms` milliseconds from first_lag_ms
// sees them: each spans [stamp - (first_lag + ms), stamp - first_lag]
// (AttributionOptions::span_profile weighs it).
std::vector<PowerObservation> observations_with(const std::vector<ObservedPower>& observed, double begin_s,
                                                double end_s, std::size_t ms, int first_lag_ms) {
  const double newest_s = 1e-3 * first_lag_ms, oldest_s = newest_s + 1e-3 * static_cast<double>(ms);
  std::vector<PowerObservation> out;
  for (const ObservedPower& o : observed) {
    // A span past the window's edges saw time whose regions are not known here.
    if (o.end_s - oldest_s < begin_s || o.end_s - newest_s > end_s) continue;
    out.push_back({o.end_s - oldest_s - begin_s, o.end_s - newest_s - begin_s, o.power_w});
  }
  return out;
}

// D^T D for the squared second differences of the coefficients after the
// first (the intercept).
Eigen::MatrixXd roughness_of(Eigen::Index k) {
  Eigen::MatrixXd roughness = Eigen::MatrixXd::Zero(k, k);
  for (Eigen::Index l = 1; l + 2 < k; ++l) {
    const double d[3] = {1.0, -2.0, 1.0};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) roughness(l + i, l + j) += d[i] * d[j];
    }
  }
  return roughness;
}

// The normal equations (a^T a and a^T y) of each group of rows.
template <typename GroupOf>
std::pair<std::vector<Eigen::MatrixXd>, std::vector<Eigen::VectorXd>> grouped_normal_equations(
    const Eigen::MatrixXd& a, const Eigen::VectorXd& y, std::size_t groups, GroupOf&& group_of) {
  std::vector<Eigen::MatrixXd> normal(groups, Eigen::MatrixXd::Zero(a.cols(), a.cols()));
  std::vector<Eigen::VectorXd> rhs(groups, Eigen::VectorXd::Zero(a.cols()));
  for (Eigen::Index row = 0; row < a.rows(); ++row) {
    const std::size_t g = group_of(row);
    normal[g].selfadjointView<Eigen::Lower>().rankUpdate(a.row(row).transpose());
    rhs[g] += a.row(row).transpose() * y(row);
  }
  for (auto& m : normal) m = m.selfadjointView<Eigen::Lower>();
  return {std::move(normal), std::move(rhs)};
}

// Least squares of y on a, with penalty * rows x the roughness, the penalty
// chosen by 5-fold cross-validation over contiguous folds. Returns the
// coefficients and the penalty.
std::pair<Eigen::VectorXd, double> smoothed_fit(const Eigen::MatrixXd& a, const Eigen::VectorXd& y) {
  constexpr std::size_t kFolds = 5;
  const Eigen::Index n = a.rows(), k = a.cols();
  const Eigen::MatrixXd roughness = roughness_of(k);
  const auto fold_of = [&](Eigen::Index row) { return static_cast<std::size_t>(row * kFolds / n); };
  const auto [normal, rhs] = grouped_normal_equations(a, y, kFolds, fold_of);
  Eigen::MatrixXd all_normal = Eigen::MatrixXd::Zero(k, k);
  Eigen::VectorXd all_rhs = Eigen::VectorXd::Zero(k);
  for (std::size_t f = 0; f < kFolds; ++f) all_normal += normal[f], all_rhs += rhs[f];
  const auto solve = [&](const Eigen::MatrixXd& m, const Eigen::VectorXd& r, double penalty, double rows) {
    return Eigen::VectorXd((m + penalty * rows * roughness).ldlt().solve(r));
  };
  double best_penalty = 0.0, best_error = std::numeric_limits<double>::infinity();
  for (double penalty : {0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0}) {
    double error = 0.0;
    for (std::size_t f = 0; f < kFolds; ++f) {
      const Eigen::VectorXd c = solve(all_normal - normal[f], all_rhs - rhs[f], penalty,
                                      static_cast<double>(n) * (kFolds - 1) / kFolds);
      for (Eigen::Index row = 0; row < n; ++row) {
        if (fold_of(row) == f) error += std::pow(y(row) - a.row(row).dot(c), 2);
      }
    }
    if (error < best_error) best_error = error, best_penalty = penalty;
  }
  return {solve(all_normal, all_rhs, best_penalty, static_cast<double>(n)), best_penalty};
}

// The response's weights from the fit's coefficients (after the intercept):
// negative ones dropped, normalised; empty if none is positive.
std::vector<double> weights_of(const Eigen::VectorXd& c) {
  std::vector<double> w;
  double kept = 0.0;
  for (Eigen::Index l = 1; l < c.size(); ++l) kept += w.emplace_back(std::max(0.0, c(l)));
  if (!(kept > 0.0)) return {};
  for (double& x : w) x /= kept;
  return w;
}

// The response refitted on block-bootstrap resamples of the samples (blocks
// of 50, ~1 s), with the chosen penalty: how much it could differ.
std::vector<std::vector<double>> response_rounds(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, double penalty,
                                                 int rounds) {
  constexpr Eigen::Index kBlock = 50;
  const Eigen::Index n = a.rows(), k = a.cols(), blocks = (n + kBlock - 1) / kBlock;
  const auto [normal, rhs] = grouped_normal_equations(
      a, y, static_cast<std::size_t>(blocks), [](Eigen::Index row) { return static_cast<std::size_t>(row / kBlock); });
  const Eigen::MatrixXd roughness = roughness_of(k);
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::size_t> pick(0, static_cast<std::size_t>(blocks) - 1);
  std::vector<std::vector<double>> out;
  for (int r = 0; r < rounds; ++r) {
    Eigen::MatrixXd m = Eigen::MatrixXd::Zero(k, k);
    Eigen::VectorXd v = Eigen::VectorXd::Zero(k);
    for (Eigen::Index b = 0; b < blocks; ++b) {
      const std::size_t drawn = pick(rng);
      m += normal[drawn];
      v += rhs[drawn];
    }
    if (auto w = weights_of((m + penalty * static_cast<double>(n) * roughness).ldlt().solve(v)); !w.empty()) {
      out.push_back(std::move(w));
    }
  }
  return out;
}

// One fit with a response (newest first, from first_lag_ms) on the window's
// own scale.
Attribution fit_with_response(const std::vector<ObservedPower>& observed, std::span<const RegionInterval> intervals,
                              const std::vector<std::string>& names, double length_s, double begin_s,
                              double window_energy_j, AttributionOptions options, const std::vector<double>& weights,
                              int first_lag_ms, std::span<const PowerObservation> extra) {
  std::vector<double> oldest_first(weights.rbegin(), weights.rend());
  double sum = 0.0;
  for (double w : oldest_first) {
    if (!std::isfinite(w)) throw UsageError("sample response: a weight is not finite");
    sum += w;
  }
  if (!(sum > 0.0)) throw UsageError("sample response: the weights do not sum to a positive number");
  for (double& w : oldest_first) w /= sum;
  options.span_profile = oldest_first;
  std::vector<PowerObservation> all =
      observations_with(observed, begin_s, begin_s + length_s, oldest_first.size(), first_lag_ms);
  all.insert(all.end(), extra.begin(), extra.end());
  return attribute(all, intervals, names, 0.0, length_s, window_energy_j, options);
}

// A spread (an interval's half, a standard deviation) with another added in
// quadrature; the other alone where there was none (no bootstrap).
double widened(double spread, double more) { return std::isfinite(spread) ? root_sum_square(spread, more) : more; }

// z with P(|N(0, 1)| < z) = confidence, by bisection on erf (once a fit).
double two_sided_normal_quantile(double confidence) {
  double low = 0.0, high = 40.0;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (low + high);
    (std::erf(mid / std::numbers::sqrt2) < confidence ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

// A resolved part's interval and standard deviation widened by a spread of
// sd_j (1 sigma) in quadrature.
void widen_by_sd(RegionEnergy& g, double sd_j, double z) {
  if (!g.resolved || !std::isfinite(g.energy_low_j)) return;  // no interval to widen
  g.energy_low_j = g.energy_j - widened(g.energy_j - g.energy_low_j, z * sd_j);
  g.energy_high_j = g.energy_j + widened(g.energy_high_j - g.energy_j, z * sd_j);
  g.energy_std_j = widened(g.energy_std_j, sd_j);
}

// The model's own bias (SampleModel::model_bias) carried into each resolved
// region's interval and standard deviation, and each total's: its parts'
// biases added, as a module's forward and backward err the same way (their
// errors correlate at 0.51 over 72 GPT block-runs; taken as independent,
// 35 of 48 training totals held their truth: bench/README.md section 16j);
// a note says what the intervals hold.
void carry_model_bias(Attribution& a, double bias, double confidence,
                      const std::vector<std::vector<std::size_t>>& total_members) {
  if (bias == 0.0) {
    a.notes.push_back("intervals hold the statistical error only (model bias 0): against real GPUs' truths the model "
                      "itself was off by up to 17% per region (docs/attribution.md, 'The GPU proof')");
    return;
  }
  const double z = two_sided_normal_quantile(confidence);
  for (RegionEnergy& g : a.regions) widen_by_sd(g, bias * std::abs(g.energy_j), z);
  for (std::size_t i = 0; i < a.totals.size(); ++i) {
    double magnitudes_j = 0.0;
    for (std::size_t r : total_members[i]) magnitudes_j += std::abs(a.regions[r].energy_j);
    widen_by_sd(a.totals[i], bias * magnitudes_j, z);
  }
  a.notes.push_back(fmt::format(
      "intervals include the model's own bias, {:.1f}% of each region's energy (1 sigma; measured against "
      "leave-one-out truths on an H100 and an H200: docs/attribution.md, 'Intervals that hold')",
      100.0 * bias));
}

// Each resolved part's interval widened by how far refits move it (its
// energies over them, per part), the two spreads added in quadrature.
void widen_by_refits(std::vector<RegionEnergy>& parts, const std::vector<std::vector<double>>& energies,
                     double confidence) {
  for (std::size_t r = 0; r < parts.size(); ++r) {
    RegionEnergy& g = parts[r];
    if (!g.resolved || energies[r].size() < 2) continue;
    const Spread s = spread_of(energies[r], confidence);  // every refit resolved: none missing
    const double below = std::max(0.0, g.energy_j - s.low);
    const double above = std::max(0.0, s.high - g.energy_j);
    g.energy_low_j = g.energy_j - widened(g.energy_j - g.energy_low_j, below);
    g.energy_high_j = g.energy_j + widened(g.energy_high_j - g.energy_j, above);
    g.energy_std_j = widened(g.energy_std_j, s.std);
  }
}

// The fit with the response, each region's interval widened by how far the
// response's rounds move its energy (the two spreads added in quadrature).
Attribution attribute_with_response(const std::vector<ObservedPower>& observed,
                                    std::span<const RegionInterval> intervals, const std::vector<std::string>& names,
                                    double length_s, double begin_s, double window_energy_j,
                                    const AttributionOptions& options, const SampleResponse& response,
                                    std::span<const PowerObservation> extra) {
  Attribution out = fit_with_response(observed, intervals, names, length_s, begin_s, window_energy_j, options,
                                      response.response_ms, response.first_lag_ms, extra);
  out.notes.push_back(fmt::format("samples weighed by the measured response (from {} to {} ms before the stamp){}",
                                  response.first_lag_ms,
                                  response.first_lag_ms + static_cast<int>(response.response_ms.size()),
                                  response.source.empty() ? "" : ", " + response.source));
  if (response.rounds.empty()) return out;
  AttributionOptions quick = options;  // the refits give energies only: no intervals, no notes
  quick.bootstrap_rounds = 0;
  quick.power_ceiling_w.reset();
  std::vector<std::vector<double>> energies(out.regions.size());  // per region, over the rounds
  std::vector<std::vector<double>> total_energies(out.totals.size());
  for (const std::vector<double>& round : response.rounds) {
    const Attribution alt = fit_with_response(observed, intervals, names, length_s, begin_s, window_energy_j, quick,
                                              round, response.rounds_first_lag_ms, extra);
    for (std::size_t r = 0; r < out.regions.size(); ++r) {
      if (alt.regions[r].resolved) energies[r].push_back(alt.regions[r].energy_j);
    }
    for (std::size_t i = 0; i < out.totals.size(); ++i) {
      if (alt.totals[i].resolved) total_energies[i].push_back(alt.totals[i].energy_j);
    }
  }
  widen_by_refits(out.regions, energies, options.confidence);
  widen_by_refits(out.totals, total_energies, options.confidence);
  out.notes.push_back(fmt::format(
      "intervals include the response's uncertainty ({} refits with bootstrapped responses)", response.rounds.size()));
  return out;
}

// How long after the work a sample shows it, on average under the response
// (from its stamp).
double mean_lag_s(const SampleResponse& response) {
  double lag_ms = 0.0, sum = 0.0;
  for (std::size_t i = 0; i < response.response_ms.size(); ++i) {
    lag_ms += response.response_ms[i] * (response.first_lag_ms + static_cast<double>(i) + 0.5);
    sum += response.response_ms[i];
  }
  return sum > 0.0 ? 1e-3 * lag_ms / sum : 0.0;
}

// The energy counter's increments between consecutive values read within
// [begin_s, end_s]: each the exact mean of the power the GPU sensed over its
// span (a read missed makes one span of two steps).
std::vector<ObservedPower> counter_increments(const std::vector<CounterAnchor>& values, double begin_s, double end_s) {
  constexpr double kMaxSpanS = 1.0;  // a longer gap says little about any region
  std::vector<ObservedPower> out;
  for (std::size_t i = 1; i < values.size(); ++i) {
    if (values[i - 1].step_s < begin_s || values[i].step_s > end_s) continue;
    if (values[i].epoch != values[i - 1].epoch) continue;  // a restart between them
    const double span_s = values[i].step_s - values[i - 1].step_s;
    const double energy_j = values[i].counter_j - values[i - 1].counter_j;
    if (!(span_s > 0.0 && span_s <= kMaxSpanS && energy_j >= 0.0)) continue;
    out.push_back({values[i - 1].step_s, values[i].step_s, energy_j / span_s});
  }
  return out;
}

// Counter increments as observations: on the window's scale, lag_s earlier
// (the counter counts work when the GPU senses its power, after it ran),
// those inside the window, each with the given weight.
std::vector<PowerObservation> counter_observations(const std::vector<ObservedPower>& increments, double begin_s,
                                                   double length_s, double lag_s, double weight) {
  std::vector<PowerObservation> out;
  for (const ObservedPower& o : increments) {
    const double from_s = o.begin_s - lag_s - begin_s, to_s = o.end_s - lag_s - begin_s;
    if (from_s >= 0.0 && to_s <= length_s) out.push_back({from_s, to_s, o.power_w, weight, true});
  }
  return out;
}

// The counter's lag, where not given: where the samples, read as joule
// stamps them (each over the interval before its stamp), put the work (on
// an H200 the counter matches the samples read so: bench/README.md section
// 3), unless the counter's own fit is clearly better elsewhere. A step that
// repeats makes the counter's residual nearly periodic in the lag (an
// H200's 25 ms step: 5.3-7.8 W over 0-30 ms), so its minimum alone says
// little, and recurs a step period apart: of equal minima the one nearest
// the samples' lag is taken. A counter that counts the work as it runs (the
// fake H100's) shows one clear minimum. rms_w_of(lag_s): the counter's own
// residual there. Returns the lag and why, in words.
template <typename RmsOf>
std::pair<double, std::string> chosen_counter_lag(double samples_lag_s, RmsOf&& rms_w_of) {
  constexpr double kClearlyBetter = 0.9;  // a residual this much below the samples' lag's moves the lag
  constexpr double kAsGood = 1.02;        // residuals this close to the least are as good
  std::vector<double> rms_w_at;           // per whole ms from kMinCounterLagMs
  for (int ms = kMinCounterLagMs; ms <= kMaxCounterLagMs; ++ms) rms_w_at.push_back(rms_w_of(1e-3 * ms));
  const double least_rms_w = *std::min_element(rms_w_at.begin(), rms_w_at.end());
  const double prior_s = 1e-3 * std::round(1e3 * samples_lag_s);
  double best_s = 0.0, best_rms_w = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < rms_w_at.size(); ++i) {
    const double at_s = 1e-3 * (kMinCounterLagMs + static_cast<int>(i));
    if (rms_w_at[i] <= kAsGood * least_rms_w &&
        (!std::isfinite(best_rms_w) || std::abs(at_s - prior_s) < std::abs(best_s - prior_s))) {
      best_s = at_s, best_rms_w = rms_w_at[i];
    }
  }
  if (best_rms_w < kClearlyBetter * rms_w_of(prior_s)) {
    return {best_s, fmt::format("the counter's own least residual, of equal ones the nearest the samples' lag, "
                                "{:.0f} ms, where it is clearly higher",
                                1e3 * prior_s)};
  }
  return {prior_s, "the samples' lag; the counter's own residual is no clearer"};
}

// The counter's increments weighted against the samples (weight 1) by the
// inverse square of each kind's residual alone, at the lag given or chosen
// (chosen_counter_lag), and a note that says so; empty where too few lie in
// the window.
struct CounterPart {
  std::vector<PowerObservation> observations;
  std::string note;
};
CounterPart counter_part(const std::vector<ObservedPower>& increments, std::span<const RegionInterval> intervals,
                         const std::vector<std::string>& names, double begin_s, double length_s,
                         double window_energy_j, const AttributionOptions& options, std::optional<double> lag_s,
                         double samples_lag_s, double samples_rms_w) {
  constexpr std::size_t kMinIncrements = 3;
  // The counter alone must determine every region that ran and the
  // baseline to have a residual of its own. A window whose only values are
  // other windows' edges (no every-step reads) has a few increments.
  std::vector<bool> ran(names.size(), false);
  for (const RegionInterval& v : intervals) ran[v.region] = true;
  const std::size_t unknowns = static_cast<std::size_t>(std::count(ran.begin(), ran.end(), true)) + 1;
  const std::size_t needed = std::max(kMinIncrements, unknowns + 1);
  if (increments.size() < kMinIncrements) return {};  // a window's own edges: nothing to say
  if (increments.size() < needed) {
    return {{}, fmt::format("{} energy-counter increments in the window, too few to fit alone ({} unknowns): the "
                            "samples alone",
                            increments.size(), unknowns)};
  }
  AttributionOptions quick = options;  // the refits give energies only: no intervals, no notes
  quick.bootstrap_rounds = 0;
  quick.power_ceiling_w.reset();
  const auto counter_rms_w = [&](double lag) {
    const std::vector<PowerObservation> alone = counter_observations(increments, begin_s, length_s, lag, 1.0);
    if (alone.size() < needed) return std::numeric_limits<double>::infinity();
    return attribute(alone, intervals, names, 0.0, length_s, window_energy_j, quick).residual_rms_w;
  };
  const auto [chosen_s, how] =
      lag_s ? std::pair<double, std::string>{*lag_s, "given"} : chosen_counter_lag(samples_lag_s, counter_rms_w);
  const double rms_w = counter_rms_w(chosen_s);
  if (!std::isfinite(rms_w)) return {};
  // Exact integrals fit a right model to their own rounding: a floor keeps
  // the samples in the fit (and the normal equations conditioned).
  const double samples_w = std::max(samples_rms_w, 1e-3);
  const double weight = std::pow(samples_w / std::max({rms_w, 0.01 * samples_w, 1e-3}), 2);
  CounterPart part;
  part.observations = counter_observations(increments, begin_s, length_s, chosen_s, weight);
  part.note = fmt::format(
      "{} energy-counter increments fitted with the samples: the counter taken {:.0f} ms behind the work ({}), "
      "each weighted {:.3g} x a sample (residuals alone: counter {:.3g} W, samples {:.3g} W)",
      part.observations.size(), 1e3 * chosen_s, how, weight, rms_w, samples_rms_w);
  return part;
}

// The samples' typical interval (their median span), 0 without samples.
double sample_interval_s(const std::vector<ObservedPower>& observed) {
  std::vector<double> spans;
  for (const ObservedPower& o : observed) {
    if (o.end_s > o.begin_s) spans.push_back(o.end_s - o.begin_s);
  }
  if (spans.empty()) return 0.0;
  std::nth_element(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(spans.size() / 2), spans.end());
  return spans[spans.size() / 2];
}

// The (cover, delay) in whole milliseconds, each in its range (a range of
// one value: given), whose fit leaves the least residual. Every pair is
// tried: with a right model the residual has a sharp minimum that a coarser
// grid steps over.
template <typename Fit>
std::pair<int, int> least_residual_ms(std::pair<int, int> covers, std::pair<int, int> delays, Fit&& fit) {
  std::pair<int, int> best{covers.first, delays.first};
  double best_rms_w = std::numeric_limits<double>::infinity();
  for (int c = covers.first; c <= covers.second; ++c) {
    for (int d = delays.first; d <= delays.second; ++d) {
      const double rms_w = fit(c, d);
      if (rms_w < best_rms_w) best_rms_w = rms_w, best = {c, d};
    }
  }
  return best;
}

// What reads a window's power data needs it final.
void require_settled(const Measurement& m) {
  if (!m.settled) {
    throw UsageError(fmt::format("window '{}' is not settled: settle it before attributing its energy", m.name));
  }
}

// The GPU's time at its power cap over the window, where the sampler read it.
void note_power_cap(Attribution& a, std::optional<double> capped_share) {
  if (!capped_share) return;
  a.power_capped_share = *capped_share;
  if (*capped_share < kMostlyCappedShare) return;
  a.notes.push_back(fmt::format(
      "the GPU was at its power cap in {:.0f}% of the samples: a region's figure is what it drew as the step ran; "
      "leaving it out lets the limiter spread the step's power anew, so it can save more or less than its figure "
      "(measure a change as a change; docs/attribution.md)",
      100.0 * *capped_share));
}

}  // namespace

Attribution attribute_gpu(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions, double begin_s,
                          double end_s, double window_energy_j, const AttributionOptions& options,
                          SampleModel samples) {
  return attribute_observed(sampler.observed_power(gpu, begin_s, end_s),
                            samples.counter_increments ? sampler.counter_values(gpu, begin_s, end_s)
                                                       : std::vector<CounterAnchor>{},
                            regions.intervals_within(begin_s, end_s), regions.names(), begin_s, end_s,
                            window_energy_j, options, std::move(samples));
}

Attribution attribute_observed(const std::vector<ObservedPower>& observed,
                               const std::vector<CounterAnchor>& counter_values,
                               std::vector<RegionInterval> intervals, const std::vector<std::string>& names,
                               double begin_s, double end_s, double window_energy_j,
                               const AttributionOptions& options, SampleModel samples) {
  if (samples.cover_s && (!(*samples.cover_s >= 0.0) || !std::isfinite(*samples.cover_s))) {
    throw UsageError(fmt::format("sample cover {} s: must be 0 (the whole interval) or positive", *samples.cover_s));
  }
  if (samples.delay_s && !std::isfinite(*samples.delay_s)) {
    throw UsageError(fmt::format("sample delay {} s: must be finite", *samples.delay_s));
  }
  if (samples.counter_lag_s && !std::isfinite(*samples.counter_lag_s)) {
    throw UsageError(fmt::format("counter lag {} s: must be finite", *samples.counter_lag_s));
  }
  if (samples.model_bias && !(*samples.model_bias >= 0.0 && *samples.model_bias <= 1.0)) {
    throw UsageError(fmt::format("model bias {}: must be within [0, 1] (a share of each region's energy)",
                                 *samples.model_bias));
  }
  if (!(std::isfinite(begin_s) && std::isfinite(end_s) && end_s > begin_s)) {
    throw UsageError(fmt::format("attribution: the window [{}, {}] s is not an interval", begin_s, end_s));
  }
  for (RegionInterval& v : intervals) {  // cut to the window, on its own scale
    if (v.region >= names.size()) {
      throw UsageError(fmt::format("attribution: an interval names region {} of {}", v.region, names.size()));
    }
    v.begin_s = std::max(v.begin_s, begin_s) - begin_s;
    v.end_s = std::min(v.end_s, end_s) - begin_s;
  }
  std::erase_if(intervals, [](const RegionInterval& v) { return !(v.end_s > v.begin_s); });
  const double length_s = end_s - begin_s;
  const std::vector<ObservedPower> increments = samples.counter_increments
                                                    ? counter_increments(counter_values, begin_s, end_s)
                                                    : std::vector<ObservedPower>{};
  AttributionOptions quick = options;  // for fits whose intervals are not reported
  quick.bootstrap_rounds = 0;
  // The counter's part, weighted against the samples' residual alone.
  // samples_lag_s: how far behind the work the samples read as stamped are.
  const auto counter_with = [&](double samples_lag_s, double samples_rms_w) {
    if (increments.empty()) return CounterPart{};
    return counter_part(increments, intervals, names, begin_s, length_s, window_energy_j, options,
                        samples.counter_lag_s, samples_lag_s, samples_rms_w);
  };
  if (samples.response) {
    if (samples.cover_s || samples.delay_s) {
      throw UsageError("sample model: a measured response replaces the cover and the delay: give one or the other");
    }
    const SampleResponse& response = *samples.response;
    const CounterPart counter = counter_with(
        mean_lag_s(response) - 0.5 * sample_interval_s(observed),
        increments.empty() ? 0.0
                           : fit_with_response(observed, intervals, names, length_s, begin_s,
                                               window_energy_j, quick, response.response_ms, response.first_lag_ms, {})
                                 .residual_rms_w);
    Attribution out = attribute_with_response(observed, intervals, names, length_s, begin_s,
                                              window_energy_j, options, response, counter.observations);
    carry_model_bias(out, samples.model_bias.value_or(kProofModelBias), options.confidence,
                     checked_totals(options.totals, names));
    if (!counter.note.empty()) out.notes.push_back(counter.note);
    return out;
  }
  const auto fit = [&](double cover_s, double delay_s, const AttributionOptions& with,
                       std::span<const PowerObservation> extra = {}) {
    // A sample moved past the window's edge by its delay saw time whose
    // regions are not known here: only the ones inside count.
    std::vector<PowerObservation> inside = observations_of(observed, begin_s, cover_s, delay_s);
    std::erase_if(inside, [&](const PowerObservation& o) { return o.begin_s < 0.0 || o.end_s > length_s; });
    inside.insert(inside.end(), extra.begin(), extra.end());
    return attribute(inside, intervals, names, 0.0, length_s, window_energy_j, with);
  };
  double cover_s = samples.cover_s.value_or(0.0);
  double delay_s = samples.delay_s.value_or(0.0);
  std::string chosen;
  const double interval_s = sample_interval_s(observed);
  const int interval_ms = static_cast<int>(std::floor(1e3 * interval_s + 1e-6));
  if ((!samples.cover_s || !samples.delay_s) && interval_ms >= 1) {
    // Whole milliseconds, each fitted without intervals.
    const auto ms_or = [](const std::optional<double>& given_s, int first_ms, int last_ms) {
      if (!given_s) return std::pair{first_ms, last_ms};
      const int ms = static_cast<int>(std::lround(1e3 * *given_s));
      return std::pair{ms, ms};
    };
    const auto [cover_ms, delay_ms] = least_residual_ms(
        ms_or(samples.cover_s, 1, interval_ms), ms_or(samples.delay_s, -interval_ms / 2, interval_ms),
        [&](int c, int d) { return fit(c * 1e-3, d * 1e-3, quick).residual_rms_w; });
    if (!samples.cover_s) cover_s = cover_ms * 1e-3;
    if (!samples.delay_s) delay_s = delay_ms * 1e-3;
    chosen = fmt::format("samples taken to average their last {:.0f} ms (of {:.0f} ms between them), stamped {:.0f} "
                         "ms after it: the least residual of the {} tried",
                         1e3 * cover_s, 1e3 * interval_s, 1e3 * delay_s,
                         samples.cover_s ? "delays" : samples.delay_s ? "covers" : "covers and delays");
  }
  // A boxcar's mean lag from the stamp is its delay and half its cover (0:
  // the whole interval); read as stamped, a sample's lag is half its interval.
  const double samples_lag_s = delay_s + 0.5 * (cover_s > 0.0 ? cover_s : interval_s) - 0.5 * interval_s;
  const CounterPart counter =
      counter_with(samples_lag_s, increments.empty() ? 0.0 : fit(cover_s, delay_s, quick).residual_rms_w);
  Attribution result = fit(cover_s, delay_s, options, counter.observations);
  if (!chosen.empty()) result.notes.push_back(chosen);
  if (!counter.note.empty()) result.notes.push_back(counter.note);
  return result;
}

SampleResponse fit_sample_response(const Sampler& sampler, std::size_t gpu, const RegionRecorder& regions,
                                   const std::string& high_region, double begin_s, double end_s, int min_lag_ms,
                                   int max_lag_ms) {
  if (min_lag_ms < -1000 || max_lag_ms > 1000 || max_lag_ms < min_lag_ms) {
    throw UsageError(fmt::format("sample response: lags [{}, {}] ms are not an interval within [-1000, 1000]",
                                 min_lag_ms, max_lag_ms));
  }
  const auto names = regions.names();
  const auto high = std::find(names.begin(), names.end(), high_region);
  if (high == names.end()) throw UsageError(fmt::format("sample response: no region '{}' was recorded", high_region));
  const auto high_index = static_cast<std::size_t>(high - names.begin());
  // The share of "high" in each millisecond of the window.
  const auto bins = static_cast<std::size_t>(std::ceil(1e3 * (end_s - begin_s))) + 1;
  std::vector<double> share(bins, 0.0);
  for (const RegionInterval& v : regions.intervals_within(begin_s, end_s)) {
    if (v.region != high_index) continue;
    const double lo = 1e3 * (v.begin_s - begin_s), hi = 1e3 * (v.end_s - begin_s);
    for (auto i = static_cast<std::size_t>(lo); i < bins && static_cast<double>(i) < hi; ++i) {
      share[i] += std::min(hi, i + 1.0) - std::max(lo, static_cast<double>(i));
    }
  }
  // One row per sample whose lags all lie in the window: 1, then the shares
  // of "high" in the millisecond [stamp - (lag + 1), stamp - lag] per lag.
  const int lags = max_lag_ms - min_lag_ms + 1;
  std::vector<std::pair<long, double>> rows;  // (stamp in ms from begin_s, power)
  for (const ObservedPower& o : sampler.observed_power(gpu, begin_s, end_s)) {
    const long stamp = std::lround(1e3 * (o.end_s - begin_s));
    if (stamp - max_lag_ms - 1 >= 0 && stamp - min_lag_ms <= static_cast<long>(bins)) {
      rows.emplace_back(stamp, o.power_w);
    }
  }
  if (rows.size() < static_cast<std::size_t>(4 * lags)) {
    throw UsageError(fmt::format("sample response: {} samples inside the window, too few for {} lags (run longer)",
                                 rows.size(), lags));
  }
  Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()), lags + 1);
  Eigen::VectorXd y(static_cast<Eigen::Index>(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto i = static_cast<Eigen::Index>(r);
    a(i, 0) = 1.0;
    for (int l = 0; l < lags; ++l) a(i, l + 1) = share[static_cast<std::size_t>(rows[r].first - 1 - (min_lag_ms + l))];
    y(i) = rows[r].second;
  }
  // Smoothed: the squared second differences of the weights are penalised,
  // by the strength of those tried that predicts held-out samples best
  // (5 contiguous folds). A real sensor's response is smooth and its samples
  // noisy, and there smoothing takes out a comb of alternating weights that
  // fits noise; a noiseless boxcar (the fake) keeps its sharp edges.
  const auto [c, penalty] = smoothed_fit(a, y);
  SampleResponse out;
  out.samples = rows.size();
  out.residual_rms_w = std::sqrt((y - a * c).squaredNorm() / static_cast<double>(rows.size()));
  out.low_w = c(0);
  out.high_w = c(0) + c.tail(lags).sum();
  // Negative weights (noise) dropped, then the lags holding all but 1%.
  const std::vector<double> w = weights_of(c);
  if (w.empty()) throw UsageError("sample response: the samples do not follow the 'high' region at any lag");
  std::vector<double> cumulative(w.size());
  std::partial_sum(w.begin(), w.end(), cumulative.begin());
  const auto lag_at = [&](double q) {
    return static_cast<int>(std::lower_bound(cumulative.begin(), cumulative.end(), q) - cumulative.begin());
  };
  const int first = lag_at(0.005), last = std::min(lag_at(0.995), lags - 1);
  out.first_lag_ms = min_lag_ms + first;
  double cut = 0.0;
  for (int l = first; l <= last; ++l) cut += w[static_cast<std::size_t>(l)];
  for (int l = first; l <= last; ++l) out.response_ms.push_back(w[static_cast<std::size_t>(l)] / cut);
  out.lag10_ms = min_lag_ms + lag_at(0.1);
  out.lag50_ms = min_lag_ms + lag_at(0.5);
  out.lag90_ms = min_lag_ms + lag_at(0.9);
  out.smoothing = penalty;
  constexpr int kResponseRounds = 20;
  out.rounds = response_rounds(a, y, penalty, kResponseRounds);
  out.rounds_first_lag_ms = min_lag_ms;
  return out;
}

SampleResponse fit_sample_response(Monitor& monitor, const Measurement& settled, std::size_t gpu,
                                   const RegionRecorder& regions, const std::string& high_region, int min_lag_ms,
                                   int max_lag_ms) {
  require_settled(settled);
  if (gpu >= settled.gpu_energy_j.size()) {
    throw UsageError(fmt::format("sample response: GPU {} does not exist (the window has {})", gpu,
                                 settled.gpu_energy_j.size()));
  }
  return fit_sample_response(monitor.sampler(), gpu, regions, high_region, settled.begin_s, settled.end_s(),
                             min_lag_ms, max_lag_ms);
}

std::vector<Attribution> attribute_window(Monitor& monitor, const Measurement& settled, const RegionRecorder& regions,
                                          const AttributionOptions& options, SampleModel samples) {
  require_settled(settled);
  std::vector<Attribution> out;
  for (std::size_t gpu = 0; gpu < settled.gpu_energy_j.size(); ++gpu) {
    AttributionOptions gpu_options = options;
    if (!gpu_options.power_ceiling_w && gpu < monitor.gpus().size()) {
      const std::optional<double> max_w = read_power_limit_facts(*monitor.gpus()[gpu]).max_w;  // read-only
      if (max_w && std::isfinite(*max_w) && *max_w > 0.0) gpu_options.power_ceiling_w = max_w;
    }
    out.push_back(attribute_gpu(monitor.sampler(), gpu, regions, settled.begin_s, settled.end_s(),
                                settled.gpu_energy_j[gpu], gpu_options, samples));
    out.back().simulated = gpu < monitor.gpus().size() && monitor.gpus()[gpu]->simulated();
    note_power_cap(out.back(), monitor.timeline().power_capped_share(static_cast<uint32_t>(gpu), settled.begin_s,
                                                                     settled.end_s()));
  }
  return out;
}

}  // namespace joule::attribution
