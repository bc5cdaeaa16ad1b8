#include "joule/optimize/noisy_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <utility>

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

}  // namespace

NoiseAwareChoice choose_with_noise(const std::vector<CandidateSamples>& candidates, std::size_t baseline,
                                   const Objective& objective, double price_w, const NoiseAwareOptions& options) {
  if (candidates.empty()) throw UsageError("noise-aware choice: no candidates");
  if (baseline >= candidates.size()) throw UsageError("noise-aware choice: the baseline is not a candidate");
  if (!(options.confidence > 0.5 && options.confidence < 1.0)) {
    throw UsageError(fmt::format("noise-aware choice: confidence {} is outside (0.5, 1)", options.confidence));
  }
  objective.validate();

  NoiseAwareChoice choice;
  choice.chosen = baseline;
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
    choice.estimates.push_back(e);
  }
  const std::vector<std::vector<double>> raw_times = time_visits;
  choice.stall_adjusted = adjust_for_stalls(cost_visits, stall_visits, raw_times);
  if (choice.stall_adjusted) adjust_for_stalls(time_visits, stall_visits, raw_times);
  for (std::size_t c = 0; c < k; ++c) {
    choice.estimates[c].cost = mean_of(cost_visits[c]);
    choice.estimates[c].time_per_step_s = mean_of(time_visits[c]);
  }
  Spread cost_spread = pooled_spread(cost_visits);
  Spread time_spread = pooled_spread(time_visits);
  if (choice.stall_adjusted) {  // the regression's slope took one degree of freedom
    for (Spread* s : {&cost_spread, &time_spread}) {
      s->relative_variance = s->df > 1.0 ? s->relative_variance * s->df / (s->df - 1.0) : 0.0;
      s->df -= 1.0;
    }
  }
  choice.relative_sd = std::sqrt(cost_spread.relative_variance);
  const auto standard_error = [](const Spread& spread, double mean, std::size_t n) {
    return mean * std::sqrt(spread.relative_variance / static_cast<double>(n));
  };

  const CandidateEstimate& base = choice.estimates[baseline];
  if (base.visits == 0 || cost_spread.df < 1.0) {
    // Nothing to compare yet: every candidate is open, and staying is the choice.
    for (std::size_t c = 0; c < k; ++c) choice.open.push_back(c);
    choice.summary = "too few measurements to compare: staying at the baseline";
    return choice;
  }
  std::size_t comparisons = 0;
  for (std::size_t c = 0; c < k; ++c) {
    CandidateEstimate& e = choice.estimates[c];
    if (e.visits == 0) continue;
    e.cost_se = standard_error(cost_spread, e.cost, e.visits);
    if (c != baseline) ++comparisons;
  }
  const double alpha = (1.0 - options.confidence) / static_cast<double>(std::max<std::size_t>(1, comparisons));
  choice.t_critical = student_t_quantile(1.0 - alpha, cost_spread.df);
  const double t = choice.t_critical;
  if (objective.kind == Objective::Kind::kMaxSlowdown) {
    // Against the fastest limit's mean, as choose_power_limit() counts it.
    double fastest_s = base.time_per_step_s;
    for (const CandidateEstimate& e : choice.estimates) {
      if (e.visits > 0) fastest_s = std::min(fastest_s, e.time_per_step_s);
    }
    for (std::size_t c = 0; c < k; ++c) {
      CandidateEstimate& e = choice.estimates[c];
      if (c == baseline || e.visits == 0) continue;
      const double time_se = standard_error(time_spread, e.time_per_step_s, e.visits);
      e.admissible = e.time_per_step_s + t * time_se <= objective.max_slowdown * fastest_s;
    }
  }

  // Significantly better than the baseline: the lowest mean among those.
  const auto difference_se = [&](std::size_t a, std::size_t b) {
    return std::hypot(choice.estimates[a].cost_se, choice.estimates[b].cost_se);
  };
  for (std::size_t c = 0; c < k; ++c) {
    const CandidateEstimate& e = choice.estimates[c];
    if (c == baseline || e.visits == 0 || !e.admissible) continue;
    const double gain = base.cost - e.cost;
    if (gain > t * difference_se(c, baseline) && gain > 1e-9 * base.cost &&
        (choice.chosen == baseline || e.cost < choice.estimates[choice.chosen].cost)) {
      choice.chosen = c;
    }
  }
  choice.moved = choice.chosen != baseline;

  // Open: a candidate that could still beat the choice by more than the
  // tolerance (its plausible advantage), and then the choice itself too.
  const CandidateEstimate& chosen = choice.estimates[choice.chosen];
  const double worth = options.tolerance * chosen.cost;
  for (std::size_t c = 0; c < k; ++c) {
    const CandidateEstimate& e = choice.estimates[c];
    if (c == choice.chosen) continue;
    if (e.visits < 2) {
      choice.open.push_back(c);
      continue;
    }
    if (!e.admissible) continue;
    if (chosen.cost - e.cost + t * difference_se(c, choice.chosen) > worth) choice.open.push_back(c);
  }
  if (!choice.open.empty()) choice.open.push_back(choice.chosen);
  std::sort(choice.open.begin(), choice.open.end());

  const double confidence_pct = 100.0 * options.confidence;
  if (choice.moved) {
    const double gain = base.cost - chosen.cost;
    choice.summary = fmt::format(
        "{:g} over the baseline {:g}: cost {:+.1f}% +- {:.1f}% (significant at {:g}% over {} comparisons{})",
        chosen.setting, base.setting, -100.0 * gain / base.cost,
        100.0 * t * difference_se(choice.chosen, baseline) / base.cost, confidence_pct, comparisons,
        choice.stall_adjusted ? ", stalls taken out" : "");
  } else {
    choice.summary = fmt::format("no significant difference at {:g}% over {} comparisons{}: staying at {:g}",
                                 confidence_pct, comparisons, choice.stall_adjusted ? ", stalls taken out" : "",
                                 base.setting);
  }
  return choice;
}

}  // namespace joule
