// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/noisy_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

#include "joule/common/root_sum_square.h"
#include "joule/error.h"

namespace joule {

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0)) throw UsageError(fmt::format("normal quantile: p = {} is outside (0, 1)", p));
  // Acklam's rational approximation (relative error below 1.2e-9).
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  if (p < kLow || p > 1.0 - kLow) {
    const double q = std::sqrt(-2.0 * std::log(p < kLow ? p : 1.0 - p));
    const double x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
                     ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    return p < kLow ? x : -x;
  }
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

double student_t_quantile(double p, double df) {
  if (!(df >= 1.0)) throw UsageError(fmt::format("t quantile: {} degrees of freedom (needs >= 1)", df));
  constexpr double kPi = 3.14159265358979323846;
  if (df == 1.0) return std::tan(kPi * (p - 0.5));  // Cauchy
  if (df == 2.0) return (2.0 * p - 1.0) / std::sqrt(2.0 * p * (1.0 - p));
  // Cornish-Fisher expansion around the normal quantile (Abramowitz and
  // Stegun 26.7.5): within 0.5% for df >= 3 at the quantiles used here.
  const double z = normal_quantile(p), z2 = z * z;
  const double g1 = (z2 + 1.0) * z / 4.0;
  const double g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
  const double g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
  const double g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
  return z + g1 / df + g2 / (df * df) + g3 / (df * df * df) + g4 / (df * df * df * df);
}

namespace {

// The objective's cost of one stretch (kMaxSlowdown: its energy; the time
// bound is checked apart).
double stretch_cost(const StretchSample& s, const Objective& objective, double price_w) {
  switch (objective.kind) {
    case Objective::Kind::kTime: return s.time_per_step_s;
    case Objective::Kind::kEnergy:
    case Objective::Kind::kMaxSlowdown: return s.energy_per_step_j;
    case Objective::Kind::kCost:
      return objective.eta * s.energy_per_step_j + (1.0 - objective.eta) * price_w * s.time_per_step_s;
  }
  return 0.0;
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// A candidate's visits: the mean time, energy and cost per step of each.
struct VisitMeans {
  std::vector<double> time_s, energy_j, cost;
  std::vector<double> stall_s;  // time per step beyond the fast steps'; NaN where not known
};

VisitMeans visit_means(const CandidateSamples& candidate, const Objective& objective, double price_w) {
  std::map<int, std::vector<const StretchSample*>> by_visit;
  for (const StretchSample& s : candidate.stretches) by_visit[s.visit].push_back(&s);
  VisitMeans means;
  for (const auto& [visit, stretches] : by_visit) {
    double time_s = 0, energy_j = 0, cost = 0, stall_s = 0;
    for (const StretchSample* s : stretches) {
      stall_s += s->fast_time_per_step_s > 0 ? s->time_per_step_s - s->fast_time_per_step_s
                                             : std::numeric_limits<double>::quiet_NaN();
      time_s += s->time_per_step_s;
      energy_j += s->energy_per_step_j;
      cost += stretch_cost(*s, objective, price_w);
    }
    const auto n = static_cast<double>(stretches.size());
    means.time_s.push_back(time_s / n);
    means.energy_j.push_back(energy_j / n);
    means.cost.push_back(cost / n);
    means.stall_s.push_back(stall_s / n);
  }
  return means;
}

// Takes the stalls' share out of each visit's value (see the header): the
// pooled within-candidate regression of relative value on relative stall,
// then every visit moved to the mean stall of all visits. false (nothing
// changed) when a stall is unknown or the stalls do not vary.
bool adjust_for_stalls(std::vector<std::vector<double>>& values, const std::vector<std::vector<double>>& stalls,
                       const std::vector<std::vector<double>>& times) {
  double all_stalls = 0, count = 0;
  for (const auto& visits : stalls) {
    for (const double x : visits) {
      if (!std::isfinite(x)) return false;
      all_stalls += x;
      count += 1;
    }
  }
  if (count == 0) return false;
  const double mean_stall = all_stalls / count;
  double sxy = 0, sxx = 0;
  for (std::size_t c = 0; c < values.size(); ++c) {
    const double y_mean = mean_of(values[c]), x_mean = mean_of(stalls[c]), t_mean = mean_of(times[c]);
    if (values[c].size() < 2 || !(y_mean > 0) || !(t_mean > 0)) continue;
    for (std::size_t v = 0; v < values[c].size(); ++v) {
      const double ry = values[c][v] / y_mean - 1.0, rx = (stalls[c][v] - x_mean) / t_mean;
      sxy += ry * rx;
      sxx += rx * rx;
    }
  }
  if (!(sxx > 0)) return false;
  const double beta = sxy / sxx;
  for (std::size_t c = 0; c < values.size(); ++c) {
    const double y_mean = mean_of(values[c]), t_mean = mean_of(times[c]);
    if (!(y_mean > 0) || !(t_mean > 0)) continue;
    for (std::size_t v = 0; v < values[c].size(); ++v) {
      values[c][v] -= beta * y_mean * (stalls[c][v] - mean_stall) / t_mean;
    }
  }
  return true;
}


// The spread of a visit's mean around its candidate's mean, relative to it,
// pooled over candidates; and its degrees of freedom.
struct Spread {
  double relative_variance = 0.0;
  double df = 0.0;
};

Spread pooled_spread(const std::vector<std::vector<double>>& visits_per_candidate) {
  double sum_sq = 0.0, n = 0.0, groups = 0.0;
  for (const auto& visits : visits_per_candidate) {
    const double mean = mean_of(visits);
    if (visits.empty() || !(mean > 0)) continue;
    groups += 1.0;
    for (const double x : visits) {
      sum_sq += (x / mean - 1.0) * (x / mean - 1.0);
      n += 1.0;
    }
  }
  Spread s;
  s.df = n - groups;
  if (s.df >= 1.0) s.relative_variance = sum_sq / s.df;
  return s;
}

// Each candidate's means and standard errors (the stall covariate taken
// out where known), and the pooled spreads behind them.
struct Estimated {
  std::vector<CandidateEstimate> estimates;
  Spread cost_spread, time_spread;
  bool stall_adjusted = false;
};

Estimated estimate_candidates(const std::vector<CandidateSamples>& candidates, const Objective& objective,
                              double price_w) {
  Estimated out;
  const std::size_t k = candidates.size();
  std::vector<std::vector<double>> cost_visits(k), time_visits(k), stall_visits(k);
  for (std::size_t c = 0; c < k; ++c) {
    const VisitMeans means = visit_means(candidates[c], objective, price_w);
    CandidateEstimate e;
    e.setting = candidates[c].setting;
    e.visits = means.cost.size();
    e.energy_per_step_j = mean_of(means.energy_j);
    cost_visits[c] = means.cost;
    time_visits[c] = means.time_s;
    stall_visits[c] = means.stall_s;
    out.estimates.push_back(e);
  }
  const std::vector<std::vector<double>> raw_times = time_visits;
  out.stall_adjusted = adjust_for_stalls(cost_visits, stall_visits, raw_times);
  if (out.stall_adjusted) adjust_for_stalls(time_visits, stall_visits, raw_times);
  out.cost_spread = pooled_spread(cost_visits);
  out.time_spread = pooled_spread(time_visits);
  if (out.stall_adjusted) {  // the regression's slope took one degree of freedom
    for (Spread* s : {&out.cost_spread, &out.time_spread}) {
      s->relative_variance = s->df > 1.0 ? s->relative_variance * s->df / (s->df - 1.0) : 0.0;
      s->df -= 1.0;
    }
  }
  for (std::size_t c = 0; c < k; ++c) {
    CandidateEstimate& e = out.estimates[c];
    e.cost = mean_of(cost_visits[c]);
    e.time_per_step_s = mean_of(time_visits[c]);
    if (e.visits == 0 || out.cost_spread.df < 1.0) continue;
    const auto n = static_cast<double>(e.visits);
    e.cost_se = e.cost * std::sqrt(out.cost_spread.relative_variance / n);
    e.time_se = e.time_per_step_s * std::sqrt(out.time_spread.relative_variance / n);
  }
  return out;
}

void validate(const std::vector<CandidateSamples>& candidates, std::size_t baseline, const Objective& objective,
              const NoiseAwareOptions& options) {
  if (candidates.empty()) throw UsageError("noise-aware choice: no candidates");
  if (baseline >= candidates.size()) throw UsageError("noise-aware choice: the baseline is not a candidate");
  if (!(options.confidence > 0.5 && options.confidence < 1.0)) {
    throw UsageError(fmt::format("noise-aware choice: confidence {} is outside (0.5, 1)", options.confidence));
  }
  if (!(options.screening_share > 0.0 && options.screening_share < 1.0) || !(options.tolerance >= 0.0)) {
    throw UsageError(fmt::format("noise-aware choice: screening's share {} must lie in (0, 1) and tolerance {} be >= 0",
                                 options.screening_share, options.tolerance));
  }
  objective.validate();
}

double relative_difference_se(const CandidateEstimate& a, const CandidateEstimate& b) {
  return root_sum_square(a.cost_se, b.cost_se);
}

// Indices of the measured candidates in ascending setting.
std::vector<std::size_t> measured_by_setting(const std::vector<CandidateEstimate>& estimates) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < estimates.size(); ++i) {
    if (estimates[i].visits > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return estimates[a].setting < estimates[b].setting;
  });
  return order;
}

// value(c) averaged with its neighbours in setting (order: ascending).
std::vector<double> running_mean(const std::vector<std::size_t>& order, const std::vector<CandidateEstimate>& estimates,
                                 double CandidateEstimate::*value) {
  std::vector<double> out(estimates.size(), 0.0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t first = i == 0 ? 0 : i - 1, last = std::min(i + 1, order.size() - 1);
    double sum = 0;
    for (std::size_t j = first; j <= last; ++j) sum += estimates[order[j]].*value;
    out[order[i]] = sum / static_cast<double>(last - first + 1);
  }
  return out;
}

// The candidate with the lowest mean time among `among` (kMaxSlowdown's reference).
std::size_t fastest_of(const std::vector<CandidateEstimate>& estimates, const std::vector<std::size_t>& among) {
  return *std::min_element(among.begin(), among.end(), [&](std::size_t a, std::size_t b) {
    return estimates[a].time_per_step_s < estimates[b].time_per_step_s;
  });
}

std::string stalls_note(bool adjusted) { return adjusted ? ", stalls taken out" : ""; }

}  // namespace

NoiseAwareChoice choose_with_noise(const std::vector<CandidateSamples>& candidates, std::size_t baseline,
                                   const Objective& objective, double price_w, const NoiseAwareOptions& options) {
  validate(candidates, baseline, objective, options);
  const std::size_t k = candidates.size();
  Estimated est = estimate_candidates(candidates, objective, price_w);
  NoiseAwareChoice choice;
  choice.chosen = baseline;
  choice.stall_adjusted = est.stall_adjusted;
  choice.relative_sd = std::sqrt(est.cost_spread.relative_variance);
  choice.degrees_of_freedom = est.cost_spread.df;
  choice.estimates = std::move(est.estimates);

  const CandidateEstimate& base = choice.estimates[baseline];
  if (base.visits == 0 || est.cost_spread.df < 1.0) {
    // Nothing to compare yet: every candidate is open, and staying is the choice.
    for (std::size_t c = 0; c < k; ++c) choice.open.push_back(c);
    choice.summary = "too few measurements to compare: staying at the baseline";
    return choice;
  }
  std::size_t comparisons = 0;
  for (std::size_t c = 0; c < k; ++c) comparisons += c != baseline && choice.estimates[c].visits > 0 ? 1 : 0;
  const double alpha = (1.0 - options.confidence) / static_cast<double>(std::max<std::size_t>(1, comparisons));
  choice.t_critical = choice.estimates_t_critical = student_t_quantile(1.0 - alpha, est.cost_spread.df);
  const double t = choice.t_critical;
  // kMaxSlowdown: against the fastest limit's mean, as choose_power_limit() counts it.
  const double fastest_s = [&] {
    double fastest = base.time_per_step_s;
    for (const CandidateEstimate& e : choice.estimates) {
      if (e.visits > 0) fastest = std::min(fastest, e.time_per_step_s);
    }
    return fastest;
  }();
  const bool bounded = objective.kind == Objective::Kind::kMaxSlowdown;
  for (std::size_t c = 0; c < k; ++c) {
    CandidateEstimate& e = choice.estimates[c];
    if (!bounded || c == baseline || e.visits == 0) continue;
    e.admissible = e.time_per_step_s + t * e.time_se <= objective.max_slowdown * fastest_s;
  }

  // Significantly better than the baseline: the lowest mean among those.
  for (std::size_t c = 0; c < k; ++c) {
    const CandidateEstimate& e = choice.estimates[c];
    if (c == baseline || e.visits == 0 || !e.admissible) continue;
    const double gain = base.cost - e.cost;
    if (gain > t * relative_difference_se(e, base) && gain > 1e-9 * base.cost &&
        (choice.chosen == baseline || e.cost < choice.estimates[choice.chosen].cost)) {
      choice.chosen = c;
    }
  }
  choice.moved = choice.chosen != baseline;

  // Open: a candidate that could still beat the choice by more than the
  // tolerance (its plausible advantage), and then the choice itself too.
  // kMaxSlowdown: one not shown inadmissible either (its time's lower bound
  // past the slowdown).
  const CandidateEstimate& chosen = choice.estimates[choice.chosen];
  const double worth = options.tolerance * chosen.cost;
  for (std::size_t c = 0; c < k; ++c) {
    const CandidateEstimate& e = choice.estimates[c];
    if (c == choice.chosen) continue;
    if (e.visits < 2) {
      choice.open.push_back(c);
      continue;
    }
    if (bounded && !e.admissible && e.time_per_step_s - t * e.time_se > objective.max_slowdown * fastest_s) continue;
    if (chosen.cost - e.cost + t * relative_difference_se(e, chosen) > worth) choice.open.push_back(c);
  }
  if (!choice.open.empty()) choice.open.push_back(choice.chosen);
  std::sort(choice.open.begin(), choice.open.end());

  const double confidence_pct = 100.0 * options.confidence;
  if (choice.moved) {
    const double gain = base.cost - chosen.cost;
    choice.summary = fmt::format(
        "{:g} over the baseline {:g}: cost {:+.1f}% +- {:.1f}% (significant at {:g}% over {} comparisons{})",
        chosen.setting, base.setting, -100.0 * gain / base.cost,
        100.0 * t * relative_difference_se(chosen, base) / base.cost, confidence_pct, comparisons,
        stalls_note(choice.stall_adjusted));
  } else {
    choice.summary = fmt::format("no significant difference at {:g}% over {} comparisons{}: staying at {:g}",
                                 confidence_pct, comparisons, stalls_note(choice.stall_adjusted), base.setting);
  }
  return choice;
}

namespace {

// Whether some candidate could be more than the tolerance cheaper than the
// baseline at the top of its own interval (no correction: a stricter bound
// only sends more to confirming); kMaxSlowdown: among those not shown
// slower than the bound (their time's lower bound past it).
bool any_could_be_cheaper(const NoiseAwareChoice& choice, std::size_t baseline, const Objective& objective,
                          double t_each, double tolerance) {
  const CandidateEstimate& base = choice.estimates[baseline];
  double fastest_s = base.time_per_step_s;
  for (const CandidateEstimate& e : choice.estimates) {
    if (e.visits > 0) fastest_s = std::min(fastest_s, e.time_per_step_s);
  }
  for (std::size_t c = 0; c < choice.estimates.size(); ++c) {
    const CandidateEstimate& e = choice.estimates[c];
    if (c == baseline || e.visits == 0) continue;
    if (objective.kind == Objective::Kind::kMaxSlowdown &&
        e.time_per_step_s - t_each * e.time_se > objective.max_slowdown * fastest_s) {
      continue;
    }
    if (base.cost - e.cost + t_each * relative_difference_se(e, base) > tolerance * base.cost) return true;
  }
  return false;
}

// The lowest cost, the baseline aside, by `cost` (one value per candidate);
// kMaxSlowdown: among those whose time, less one standard error, is within
// the slowdown of the reference's (the fastest at screening: its time is
// biased low by the choice, so a generous test lets the confirming rounds
// decide). order: the measured candidates by setting. None: estimates.size().
std::size_t pick_contender(const std::vector<CandidateEstimate>& e, const std::vector<double>& cost,
                           const std::vector<std::size_t>& order, std::size_t baseline, std::size_t reference,
                           const Objective& objective) {
  const double bound_s = objective.max_slowdown * e[reference].time_per_step_s;
  std::size_t contender = e.size();
  for (const std::size_t c : order) {
    if (c == baseline) continue;
    if (objective.kind == Objective::Kind::kMaxSlowdown && e[c].time_per_step_s - e[c].time_se > bound_s) continue;
    if (contender == e.size() || cost[c] < cost[contender]) contender = c;
  }
  return contender;
}

// kMaxSlowdown's time tests on the confirming rounds: each confirmed
// candidate other than the reference (the fastest at screening) and the
// baseline passes when its time's estimate is within max_slowdown of the
// reference's and its upper bound (one-sided, at alpha with Bonferroni over
// the candidates tested) within max_slowdown * (1 + tolerance). Returns
// those that passed, and the reference (within the bound by definition)
// unless it is the baseline; what failed is said in `note`.
std::vector<std::size_t> within_bound(const std::vector<CandidateEstimate>& e, const std::vector<std::size_t>& confirmed,
                                      std::size_t baseline, std::size_t reference, double max_slowdown,
                                      double tolerance, double alpha, double df, std::string& note) {
  std::vector<std::size_t> tested;
  for (const std::size_t c : confirmed) {
    if (c != reference && c != baseline) tested.push_back(c);
  }
  std::vector<std::size_t> passed;
  if (reference != baseline) passed.push_back(reference);
  if (tested.empty()) return passed;
  const double t = student_t_quantile(1.0 - alpha / static_cast<double>(tested.size()), df);
  const CandidateEstimate& ref = e[reference];
  for (const std::size_t c : tested) {
    const double ratio = e[c].time_per_step_s / ref.time_per_step_s;
    const double ratio_se = ratio * root_sum_square(e[c].time_se / e[c].time_per_step_s, ref.time_se / ref.time_per_step_s);
    if (ratio > max_slowdown || ratio + t * ratio_se > max_slowdown * (1.0 + tolerance)) {
      note += fmt::format("; {:g} is {:.1f}% +- {:.1f}% slower than {:g}, not shown within {:.0f}%", e[c].setting,
                          100.0 * (ratio - 1.0), 100.0 * t * ratio_se, ref.setting, 100.0 * (max_slowdown - 1.0));
      continue;
    }
    passed.push_back(c);
  }
  return passed;
}

// The cheapest of `among` (the baseline when empty).
std::size_t cheapest_of(const std::vector<CandidateEstimate>& e, const std::vector<std::size_t>& among,
                        std::size_t baseline) {
  std::size_t cheapest = baseline;
  for (const std::size_t c : among) {
    if (cheapest == baseline || e[c].cost < e[cheapest].cost) cheapest = c;
  }
  return cheapest;
}

}  // namespace

NoiseAwareChoice screen_with_noise(const std::vector<CandidateSamples>& candidates, std::size_t baseline,
                                   const Objective& objective, double price_w, const NoiseAwareOptions& options) {
  validate(candidates, baseline, objective, options);
  NoiseAwareOptions quick = options;
  quick.confidence = 1.0 - (1.0 - options.confidence) * options.screening_share;
  NoiseAwareChoice choice = choose_with_noise(candidates, baseline, objective, price_w, quick);
  if (choice.moved && choice.open.empty()) {
    choice.summary += ", decided at screening";
    return choice;
  }
  if (choice.t_critical == 0.0) return choice;  // too few measurements to compare: staying
  const std::vector<CandidateEstimate>& e = choice.estimates;
  const double alpha = (1.0 - options.confidence) * (1.0 - options.screening_share);
  if (!any_could_be_cheaper(choice, baseline, objective, student_t_quantile(1.0 - alpha, choice.degrees_of_freedom),
                            options.tolerance)) {
    choice.summary = fmt::format("no candidate can be {:g}% cheaper at {:g}%{}: staying at {:g}",
                                 100.0 * options.tolerance, 100.0 * options.confidence,
                                 stalls_note(choice.stall_adjusted), e[baseline].setting);
    return choice;
  }
  const std::vector<std::size_t> order = measured_by_setting(e);
  choice.reference = fastest_of(e, order);
  // Two picks: the lowest cost after a running mean over neighbouring
  // settings (costs vary smoothly with a setting; noise does not), and the
  // lowest as measured (a sharp minimum that the mean would flatten).
  const std::size_t contender =
      pick_contender(e, running_mean(order, e, &CandidateEstimate::cost), order, baseline, choice.reference, objective);
  std::vector<double> measured_cost(e.size());
  for (std::size_t c = 0; c < e.size(); ++c) measured_cost[c] = e[c].cost;
  const std::size_t sharp = pick_contender(e, measured_cost, order, baseline, choice.reference, objective);
  if (contender == e.size()) {
    choice.summary = fmt::format("no candidate within the slowdown at screening: staying at {:g}", e[baseline].setting);
    return choice;
  }
  // The contender and both its neighbours (smoothing may shift the minimum
  // by a setting), the measured minimum; kMaxSlowdown: the reference too.
  choice.confirm = {baseline, contender, sharp};
  const auto at = static_cast<std::size_t>(std::find(order.begin(), order.end(), contender) - order.begin());
  if (at > 0) choice.confirm.push_back(order[at - 1]);
  if (at + 1 < order.size()) choice.confirm.push_back(order[at + 1]);
  if (objective.kind == Objective::Kind::kMaxSlowdown) choice.confirm.push_back(choice.reference);
  std::sort(choice.confirm.begin(), choice.confirm.end());
  choice.confirm.erase(std::unique(choice.confirm.begin(), choice.confirm.end()), choice.confirm.end());
  choice.chosen = baseline;
  choice.moved = false;
  choice.decided = false;
  choice.summary = fmt::format("contender {:g} (cost {:+.1f}% against {:g} at screening): to be confirmed",
                               e[contender].setting, 100.0 * (e[contender].cost / e[baseline].cost - 1.0),
                               e[baseline].setting);
  return choice;
}

NoiseAwareChoice confirm_with_noise(const std::vector<CandidateSamples>& confirming, std::size_t baseline,
                                    const NoiseAwareChoice& screening, const Objective& objective, double price_w,
                                    const NoiseAwareOptions& options) {
  validate(confirming, baseline, objective, options);
  if (screening.decided || screening.confirm.size() < 2 || confirming.size() != screening.estimates.size()) {
    throw UsageError("noise-aware choice: confirming needs an undecided screening of the same candidates");
  }
  NoiseAwareChoice choice = screening;
  choice.decided = true;
  choice.chosen = baseline;
  choice.moved = false;
  const Estimated est = estimate_candidates(confirming, objective, price_w);
  choice.stall_adjusted = est.stall_adjusted;
  choice.relative_sd = std::sqrt(est.cost_spread.relative_variance);
  choice.degrees_of_freedom = est.cost_spread.df;
  for (const std::size_t c : screening.confirm) choice.confirmed.push_back(est.estimates[c]);
  const std::vector<CandidateEstimate>& e = est.estimates;
  const CandidateEstimate& base = e[baseline];
  const double alpha = (1.0 - options.confidence) * (1.0 - options.screening_share);
  const double confidence_pct = 100.0 * (1.0 - alpha);
  if (base.visits < 2 || est.cost_spread.df < 1.0) {
    choice.summary = "too few confirming measurements: staying at the baseline";
    return choice;
  }

  // What the baseline is tested against: the cheapest of the confirmed (on
  // the confirming rounds), Bonferroni over those it was chosen from; for
  // kMaxSlowdown among those shown within the slowdown (half the error rate
  // each for the time and the energy tests).
  std::vector<std::size_t> eligible;
  std::string bound_note;
  double cost_alpha = alpha;
  if (objective.kind == Objective::Kind::kMaxSlowdown) {
    eligible = within_bound(e, screening.confirm, baseline, screening.reference, objective.max_slowdown,
                            options.tolerance, alpha / 2.0, est.time_spread.df, bound_note);
    cost_alpha = alpha / 2.0;
  } else {
    std::copy_if(screening.confirm.begin(), screening.confirm.end(), std::back_inserter(eligible),
                 [&](std::size_t c) { return c != baseline; });
  }
  const std::size_t candidate = cheapest_of(e, eligible, baseline);
  choice.t_critical =
      student_t_quantile(1.0 - cost_alpha / static_cast<double>(std::max<std::size_t>(1, eligible.size())),
                         est.cost_spread.df);
  const CandidateEstimate& contender = e[candidate];
  const double gain = base.cost - contender.cost;
  const double margin = choice.t_critical * relative_difference_se(contender, base);
  if (candidate != baseline && gain > margin && gain > 1e-9 * base.cost) {
    choice.chosen = candidate;
    choice.moved = true;
    choice.summary = fmt::format("{:g} over the baseline {:g}: cost {:+.1f}% +- {:.1f}% (confirmed at {:g}% on {} "
                                 "fresh visits each{}){}",
                                 contender.setting, base.setting, -100.0 * gain / base.cost, 100.0 * margin / base.cost,
                                 confidence_pct, base.visits, stalls_note(est.stall_adjusted), bound_note);
  } else if (candidate != baseline) {
    choice.summary = fmt::format("{:g} against the baseline {:g}: cost {:+.1f}% +- {:.1f}%, not significant at {:g}% "
                                 "on {} fresh visits each{}: staying at {:g}{}",
                                 contender.setting, base.setting, -100.0 * gain / base.cost, 100.0 * margin / base.cost,
                                 confidence_pct, base.visits, stalls_note(est.stall_adjusted), base.setting, bound_note);
  } else {
    choice.summary = fmt::format("no contender within the slowdown: staying at {:g}{}", base.setting, bound_note);
  }
  return choice;
}

}  // namespace joule
