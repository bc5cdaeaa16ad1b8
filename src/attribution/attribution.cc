// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/attribution.h"
#include "joule/attribution/spread.h"
#include "joule/attribution/totals.h"
#include "attribution/checked_input.h"

#include <Eigen/Dense>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <pcg_random.hpp>

#include "joule/error.h"

namespace joule::attribution {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Eigenvalues of the unit-diagonal normal matrix below this share of the
// largest are directions the data leave undetermined. Exact collinearity
// leaves rounding (~1e-15); a merely poorly sampled direction stays far above
// and shows as a wide bootstrap interval instead.
constexpr double kNullEigenvalue = 1e-10;
// An unknown whose unit vector has this much of its squared length in those
// directions is not estimable.
constexpr double kNullProjection = 1e-6;
// Idle shares of a span below this are the rounding of regions that tile it.
constexpr double kIdleFloor = 1e-9;
// The least share of the window without an exclusive region from which the
// idle power is fitted. Slivers between back-to-back regions (0.1-0.6% of a
// window on real models) leave it free to take up the model's error: 18-26 kW
// on an H200 idling at 127 W, pulling the regions beside them by 5-10 points
// (bench/README.md section 16j). Counted at 0 W instead, they move the parts
// by at most their share of the time at the true idle power.
constexpr double kMinIdleShareForBaseline = 0.01;
// A fitted idle power at least this share of the exclusive regions' mean
// power is unlike a GPU's idle (an H200 idles at ~18% of a training step's
// power): most likely work left outside every region, such as a GPT's loss
// at ~600 W (bench/README.md section 16j), which the regions then lack.
constexpr double kBusyIdleShareOfRegions = 0.6;

std::size_t packed_size(std::size_t k) { return k * (k + 1) / 2; }
std::size_t packed_index(std::size_t a, std::size_t b) { return a >= b ? a * (a + 1) / 2 + b : b * (b + 1) / 2 + a; }

// One observation's design row: for each column (the regions, then idle) the
// share of the observation it accounts for. Observations must come in order
// of beginning: the first interval that can overlap one then only moves
// forward, so a whole sweep costs O(observations + intervals + overlaps).
// Concurrent intervals end out of order; one that ended early stays in the
// scan until the ones before it end (all-reduces last milliseconds).
class RowBuilder {
 public:
  RowBuilder(const Layout& layout, std::size_t regions, std::span<const double> profile)
      : intervals_(layout.exclusive), concurrent_(layout.concurrent), profile_(profile),
        values_(regions + 1, 0.0), is_touched_(regions + 1, false), idle_(regions) {}

  void build(const PowerObservation& o) {
    for (std::size_t c : touched_) {
      values_[c] = 0.0;
      is_touched_[c] = false;
    }
    touched_.clear();
    while (first_ < intervals_.size() && intervals_[first_].end_s <= o.begin_s) ++first_;
    while (first_concurrent_ < concurrent_.size() && concurrent_[first_concurrent_].end_s <= o.begin_s)
      ++first_concurrent_;
    if (o.end_s == o.begin_s) {
      // A point sample: whichever exclusive region runs at that instant, else
      // idle, and every concurrent region running then.
      const bool in = first_ < intervals_.size() && intervals_[first_].begin_s <= o.begin_s;
      add(in ? intervals_[first_].region : idle_, 1.0);
      for (std::size_t j = first_concurrent_; j < concurrent_.size() && concurrent_[j].begin_s <= o.begin_s; ++j) {
        if (o.begin_s < concurrent_[j].end_s) add(concurrent_[j].region, 1.0);
      }
      return;
    }
    if (profile_.empty() || o.counter) return add_span(o.begin_s, o.end_s, 1.0);
    const double slice_s = (o.end_s - o.begin_s) / static_cast<double>(profile_.size());
    for (std::size_t i = 0; i < profile_.size(); ++i) {
      const double from_s = o.begin_s + static_cast<double>(i) * slice_s;
      if (profile_[i] != 0.0) add_span(from_s, from_s + slice_s, profile_[i]);
    }
  }

  const std::vector<std::size_t>& columns() const { return touched_; }
  double value(std::size_t column) const { return values_[column]; }

 private:
  // The shares of [from_s, to_s) each region and idle take, times weight.
  void add_span(double from_s, double to_s, double weight) {
    const double span_s = to_s - from_s;
    double covered_s = 0.0;
    for (std::size_t j = first_; j < intervals_.size() && intervals_[j].begin_s < to_s; ++j) {
      const double overlap_s = std::min(to_s, intervals_[j].end_s) - std::max(from_s, intervals_[j].begin_s);
      if (overlap_s <= 0.0) continue;
      add(intervals_[j].region, weight * overlap_s / span_s);
      covered_s += overlap_s;
    }
    const double idle = (span_s - covered_s) / span_s;
    if (idle > kIdleFloor) add(idle_, weight * idle);
    // Concurrent regions add to whatever runs: they take no share from it.
    for (std::size_t j = first_concurrent_; j < concurrent_.size() && concurrent_[j].begin_s < to_s; ++j) {
      const double overlap_s = std::min(to_s, concurrent_[j].end_s) - std::max(from_s, concurrent_[j].begin_s);
      if (overlap_s > 0.0) add(concurrent_[j].region, weight * overlap_s / span_s);
    }
  }

  void add(std::size_t column, double share) {
    if (!is_touched_[column]) {
      touched_.push_back(column);
      is_touched_[column] = true;
    }
    values_[column] += share;
  }

  std::span<const RegionInterval> intervals_;   // exclusive
  std::span<const RegionInterval> concurrent_;  // merged per region
  std::span<const double> profile_;  // AttributionOptions::span_profile
  std::vector<double> values_;
  std::vector<std::size_t> touched_;
  std::vector<bool> is_touched_;  // a profile's weights may cancel a value back to 0
  std::size_t idle_;
  std::size_t first_ = 0;
  std::size_t first_concurrent_ = 0;
};

// The normal equations' sums per block of observations: X^T W X (lower
// triangle, packed) and X^T W y, one column per block. A bootstrap round is
// then these matrices times the blocks' draw counts.
struct BlockSums {
  std::size_t k = 0;  // columns: the regions, then idle
  std::size_t blocks = 0;
  std::vector<double> normal;  // packed_size(k) per block
  std::vector<double> rhs;     // k per block

  Eigen::Map<const Eigen::MatrixXd> normal_matrix() const {
    return {normal.data(), static_cast<Eigen::Index>(packed_size(k)), static_cast<Eigen::Index>(blocks)};
  }
  Eigen::Map<const Eigen::MatrixXd> rhs_matrix() const {
    return {rhs.data(), static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(blocks)};
  }
};

BlockSums block_sums(std::span<const PowerObservation> observations, const std::vector<std::size_t>& order,
                     const Layout& layout, std::size_t regions, double begin_s, double block_s,
                     std::span<const double> profile) {
  BlockSums sums;
  sums.k = regions + 1;
  const std::size_t p = packed_size(sums.k);
  RowBuilder row(layout, regions, profile);
  double block = -1.0;
  for (std::size_t i : order) {
    const PowerObservation& o = observations[i];
    const double id = std::floor((o.begin_s - begin_s) / block_s);
    if (sums.blocks == 0 || id != block) {
      block = id;
      ++sums.blocks;
      sums.normal.resize(sums.blocks * p, 0.0);
      sums.rhs.resize(sums.blocks * sums.k, 0.0);
    }
    row.build(o);
    double* n = &sums.normal[(sums.blocks - 1) * p];
    double* c = &sums.rhs[(sums.blocks - 1) * sums.k];
    for (std::size_t a : row.columns()) {
      const double wa = o.weight * row.value(a);
      c[a] += wa * o.power_w;
      for (std::size_t b : row.columns()) {
        if (b <= a) n[packed_index(a, b)] += wa * row.value(b);
      }
    }
  }
  return sums;
}

Eigen::MatrixXd unpack(const Eigen::VectorXd& packed, std::size_t k) {
  Eigen::MatrixXd n(k, k);
  for (std::size_t a = 0; a < k; ++a) {
    for (std::size_t b = 0; b <= a; ++b) n(a, b) = n(b, a) = packed(static_cast<Eigen::Index>(packed_index(a, b)));
  }
  return n;
}

struct Fit {
  Eigen::VectorXd coefficients;     // the least-squares (minimum-norm) solution: regions, then idle
  std::vector<bool> estimable;      // determined by the data
  std::vector<bool> observed;       // some observation has this column
  Eigen::MatrixXd null_projection;  // onto the directions the data leave undetermined
};

// Weighted least squares from the normal equations n x = c. fixed_idle_w: the
// idle power is known; its column moves to the right-hand side.
Fit solve_each(Eigen::MatrixXd n, Eigen::VectorXd c, std::optional<double> fixed_idle_w) {
  const Eigen::Index k = n.rows(), idle = k - 1;
  if (fixed_idle_w) {
    c.head(idle) -= *fixed_idle_w * n.col(idle).head(idle);
    n.row(idle).setZero();
    n.col(idle).setZero();
    c(idle) = 0.0;
  }
  // The unit-diagonal form, so that "small eigenvalue" means collinear, not
  // merely a short region; never-observed columns are zero and null.
  Eigen::VectorXd d(k);
  for (Eigen::Index i = 0; i < k; ++i) d(i) = n(i, i) > 0.0 ? 1.0 / std::sqrt(n(i, i)) : 0.0;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(d.asDiagonal() * n * d.asDiagonal());
  const Eigen::VectorXd& lambda = eigen.eigenvalues();
  const Eigen::MatrixXd& v = eigen.eigenvectors();
  const double tol = kNullEigenvalue * std::max(lambda.maxCoeff(), 0.0);
  const Eigen::VectorXd dc = d.cwiseProduct(c);
  Eigen::VectorXd u = Eigen::VectorXd::Zero(k);
  Fit fit;
  fit.null_projection = Eigen::MatrixXd::Zero(k, k);
  for (Eigen::Index j = 0; j < k; ++j) {
    if (lambda(j) > tol) {
      u += v.col(j) * (v.col(j).dot(dc) / lambda(j));
    } else {
      fit.null_projection += v.col(j) * v.col(j).transpose();
    }
  }
  fit.coefficients = d.cwiseProduct(u);
  if (fixed_idle_w) fit.coefficients(idle) = *fixed_idle_w;
  for (Eigen::Index i = 0; i < k; ++i) {
    fit.estimable.push_back(fit.null_projection(i, i) < kNullProjection);
    fit.observed.push_back(d(i) > 0.0);
  }
  return fit;
}

// The same with columns that share an unknown (AttributionOptions::same_power):
// the normal equations summed over each unknown's columns (n' = T^T n T,
// c' = T^T c, T mapping the unknowns onto the columns) and the solution read
// back per column (x = T x'), so that each column, a shared one included,
// reads as its own.
Fit solve(const Eigen::MatrixXd& n, const Eigen::VectorXd& c, std::optional<double> fixed_idle_w,
          const Unknowns& unknowns) {
  if (unknowns.count == unknowns.of_column.size()) return solve_each(n, c, fixed_idle_w);
  const auto m = static_cast<Eigen::Index>(unknowns.count);
  const auto k = static_cast<Eigen::Index>(unknowns.of_column.size());
  const auto of = [&](Eigen::Index column) {
    return static_cast<Eigen::Index>(unknowns.of_column[static_cast<std::size_t>(column)]);
  };
  Eigen::MatrixXd shared_n = Eigen::MatrixXd::Zero(m, m);
  Eigen::VectorXd shared_c = Eigen::VectorXd::Zero(m);
  for (Eigen::Index a = 0; a < k; ++a) {
    shared_c(of(a)) += c(a);
    for (Eigen::Index b = 0; b < k; ++b) shared_n(of(a), of(b)) += n(a, b);
  }
  const Fit shared = solve_each(std::move(shared_n), std::move(shared_c), fixed_idle_w);
  Fit fit;
  fit.coefficients.resize(k);
  fit.null_projection.resize(k, k);
  for (Eigen::Index a = 0; a < k; ++a) {
    fit.coefficients(a) = shared.coefficients(of(a));
    for (Eigen::Index b = 0; b < k; ++b) fit.null_projection(a, b) = shared.null_projection(of(a), of(b));
    fit.estimable.push_back(shared.estimable[static_cast<std::size_t>(of(a))]);
    fit.observed.push_back(shared.observed[static_cast<std::size_t>(of(a))]);
  }
  return fit;
}

// What the data say of the regions' time and calls (the intervals are exact).
struct Totals {
  std::vector<std::size_t> calls;
  std::vector<double> time_s;  // a concurrent region's: the time any of its calls ran
  std::vector<bool> concurrent;
  double idle_time_s = 0.0;  // with no exclusive region running
};

Totals totals_of(std::span<const RegionInterval> intervals, const Layout& layout, std::size_t regions,
                 double window_s) {
  Totals t{std::vector<std::size_t>(regions, 0), std::vector<double>(regions, 0.0), layout.is_concurrent, 0.0};
  for (const RegionInterval& v : intervals) {
    if (!v.resumed) ++t.calls[v.region];
  }
  double busy_s = 0.0;
  for (const RegionInterval& v : layout.exclusive) {
    t.time_s[v.region] += v.end_s - v.begin_s;
    busy_s += v.end_s - v.begin_s;
  }
  for (const RegionInterval& v : layout.concurrent) t.time_s[v.region] += v.end_s - v.begin_s;
  t.idle_time_s = std::max(0.0, window_s - busy_s);
  return t;
}

void check_enough_observations(std::size_t observations, const Totals& t, const AttributionOptions& options) {
  const auto ran =
      static_cast<std::size_t>(std::count_if(t.time_s.begin(), t.time_s.end(), [](double s) { return s > 0; }));
  const bool baseline = !options.baseline_w && t.idle_time_s > 0.0;
  if (observations < ran + (baseline ? 1 : 0))
    throw UsageError(
        fmt::format("attribution: fewer observations than unknowns: {} observations for {} unknowns ({} "
                    "regions that ran{})",
                    observations, ran + (baseline ? 1 : 0), ran, baseline ? " and the baseline" : ""));
}

// The model's energy over the window: each region at its power for its time
// (a concurrent one at the power it adds), the idle time at the baseline.
double model_energy_j(const Eigen::VectorXd& power_w, double baseline_w, const Totals& t) {
  double sum_j = baseline_w * t.idle_time_s;
  for (std::size_t r = 0; r < t.time_s.size(); ++r) sum_j += power_w(static_cast<Eigen::Index>(r)) * t.time_s[r];
  return sum_j;
}

// Where the fit found the regions' powers and the baseline.
struct Estimate {
  // Per region; one not resolved at the baseline power (a concurrent one at
  // 0 W added): a placeholder that keeps the parts' sum.
  Eigen::VectorXd power_w;
  std::vector<bool> resolved;  // per region
  double baseline_w = 0.0;
  bool baseline_estimated = false;
  bool baseline_separated = false;
};

Estimate estimate_of(const Fit& fit, const Totals& t, const AttributionOptions& options) {
  const std::size_t regions = t.calls.size();
  Estimate e;
  e.baseline_estimated = !options.baseline_w && fit.estimable[regions];
  e.baseline_separated = options.baseline_w || e.baseline_estimated;
  e.baseline_w = options.baseline_w
                     ? *options.baseline_w
                     : (e.baseline_estimated ? fit.coefficients(static_cast<Eigen::Index>(regions)) : 0.0);
  e.power_w = Eigen::VectorXd::Constant(static_cast<Eigen::Index>(regions), e.baseline_w);
  for (std::size_t r = 0; r < regions; ++r) {
    e.resolved.push_back(t.calls[r] > 0 && fit.estimable[r]);
    if (e.resolved[r]) {
      e.power_w(static_cast<Eigen::Index>(r)) = fit.coefficients(static_cast<Eigen::Index>(r));
    } else if (t.concurrent[r]) {
      e.power_w(static_cast<Eigen::Index>(r)) = 0.0;
    }
  }
  return e;
}

// The bootstrap's rounds: per region its scaled energy, and the fitted
// baseline (NaN where the round's blocks do not determine them).
struct Rounds {
  std::vector<std::vector<double>> energy_j;  // per region, per round
  std::vector<double> baseline_w;             // per round
};

Rounds bootstrap(const BlockSums& sums, const Unknowns& unknowns, const Estimate& estimate, const Totals& t,
                 double window_energy_j, const AttributionOptions& options) {
  const std::size_t regions = t.calls.size();
  const auto rounds = static_cast<std::size_t>(options.bootstrap_rounds);
  Rounds out{std::vector<std::vector<double>>(regions, std::vector<double>(rounds, kNaN)),
             std::vector<double>(rounds, kNaN)};
  pcg32 rng(options.seed);
  Eigen::VectorXd counts(static_cast<Eigen::Index>(sums.blocks));
  for (std::size_t round = 0; round < rounds; ++round) {
    counts.setZero();
    for (std::size_t b = 0; b < sums.blocks; ++b) counts(rng(static_cast<std::uint32_t>(sums.blocks))) += 1.0;
    const Fit fit =
        solve(unpack(sums.normal_matrix() * counts, sums.k), sums.rhs_matrix() * counts, options.baseline_w, unknowns);
    // A power this round lacks keeps the estimate's, for the round's scale only.
    Eigen::VectorXd power_w = estimate.power_w;
    for (std::size_t r = 0; r < regions; ++r) {
      if (estimate.resolved[r] && fit.estimable[r])
        power_w(static_cast<Eigen::Index>(r)) = fit.coefficients(static_cast<Eigen::Index>(r));
    }
    const bool own_baseline = estimate.baseline_estimated && fit.estimable[regions];
    const double baseline_w = own_baseline ? fit.coefficients(static_cast<Eigen::Index>(regions)) : estimate.baseline_w;
    if (own_baseline) out.baseline_w[round] = baseline_w;
    const double model_j = model_energy_j(power_w, baseline_w, t);
    if (!(model_j > 0.0)) continue;
    for (std::size_t r = 0; r < regions; ++r) {
      if (estimate.resolved[r] && fit.estimable[r])
        out.energy_j[r][round] = power_w(static_cast<Eigen::Index>(r)) * t.time_s[r] * window_energy_j / model_j;
    }
  }
  return out;
}

double residual_rms_w(std::span<const PowerObservation> observations, const std::vector<std::size_t>& order,
                      const Layout& layout, std::size_t regions,
                      const Eigen::VectorXd& coefficients, std::span<const double> profile) {
  RowBuilder row(layout, regions, profile);
  double sum = 0.0, weights = 0.0;
  for (std::size_t i : order) {
    const PowerObservation& o = observations[i];
    row.build(o);
    double predicted_w = 0.0;
    for (std::size_t c : row.columns()) predicted_w += row.value(c) * coefficients(static_cast<Eigen::Index>(c));
    sum += o.weight * (o.power_w - predicted_w) * (o.power_w - predicted_w);
    weights += o.weight;
  }
  return std::sqrt(sum / weights);
}

std::string column_name(std::size_t c, std::span<const std::string> names) {
  return c < names.size() ? fmt::format("'{}'", names[c]) : std::string("the idle time");
}

// Why a region that ran has no estimate: nothing saw it, or it is always seen
// in the same proportion as others (named).
std::string unresolved_note(std::size_t r, const Fit& fit, std::span<const std::string> names, double time_s,
                            bool concurrent, const Estimate& e) {
  std::string why;
  if (!fit.observed[r]) {
    why = "no observation overlaps it";
  } else {
    std::vector<std::string> partners;
    for (std::size_t j = 0; j < fit.observed.size(); ++j) {
      const double p = fit.null_projection(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j));
      if (j != r && fit.observed[j] && std::abs(p) > kNullProjection) partners.push_back(column_name(j, names));
    }
    why = fmt::format(
        "it is collinear with {}: always observed in the same proportion, so the data cannot split "
        "their power",
        partners.empty() ? std::string("other columns") : fmt::format("{}", fmt::join(partners, ", ")));
  }
  if (concurrent)
    return fmt::format("region '{}' has no estimate: {}; 0 J is attributed to it (its {:.6g} s are counted in what "
                       "it overlaps)",
                       names[r], why, time_s);
  return fmt::format("region '{}' has no estimate: {}; its {:.6g} s are counted at the baseline power ({:.4g} W)",
                     names[r], why, time_s, e.baseline_w);
}

// Whether the idle time is too little a share of the window to fit its power
// from (and is then counted at 0 W, not separated); never where it is given.
bool idle_too_short(const Totals& t, double window_s, const AttributionOptions& options) {
  return !options.baseline_w && t.idle_time_s > 0.0 && t.idle_time_s < kMinIdleShareForBaseline * window_s;
}

void note_baseline(Attribution& out, const Fit& fit, const Totals& t, std::size_t regions, double window_s,
                   bool too_short) {
  if (out.baseline_separated) return;
  std::string why;
  if (too_short) {
    why = fmt::format("the idle time ({:.6g} s, {:.2f}% of the window) is too little to fit the idle power from "
                      "(under {:.0f}%)",
                      t.idle_time_s, 100.0 * t.idle_time_s / window_s, 100.0 * kMinIdleShareForBaseline);
  } else if (fit.observed[regions]) {
    why = "the idle time is collinear with the regions";
  } else {
    why = fmt::format("no time without an exclusive region running was observed (idle {:.6g} s of the window)",
                      t.idle_time_s);
  }
  out.notes.push_back(
      fmt::format("baseline not separated: {}; power_w is absolute and idle time is counted at 0 W; give "
                  "baseline_w (the idle power measured before the loop) to separate it",
                  why));
}

void note_busy_idle(Attribution& out, const Estimate& e, const Totals& t) {
  if (!e.baseline_estimated || !e.baseline_separated) return;
  double time_s = 0.0, energy_j = 0.0;
  for (std::size_t r = 0; r < t.time_s.size(); ++r) {
    if (t.concurrent[r] || !e.resolved[r]) continue;
    time_s += t.time_s[r];
    energy_j += e.power_w(static_cast<Eigen::Index>(r)) * t.time_s[r];
  }
  if (!(time_s > 0.0 && energy_j > 0.0)) return;
  const double regions_w = energy_j / time_s;
  if (e.baseline_w < kBusyIdleShareOfRegions * regions_w) return;
  out.notes.push_back(fmt::format(
      "the idle time ({:.6g} s) is fitted at {:.4g} W, {:.0f}% of the regions' mean power ({:.4g} W): if this GPU "
      "idles lower, that time is work left outside every region (a loss, a copy), missing from the regions; put it "
      "in a region, or give baseline_w (docs/attribution.md, 'Real models')",
      t.idle_time_s, e.baseline_w, 100.0 * e.baseline_w / regions_w, regions_w));
}

void note_same_power(Attribution& out, const std::vector<RegionGroup>& groups) {
  for (const RegionGroup& g : groups) {
    out.notes.push_back(fmt::format("{} regions fitted with one power, group '{}' ({}): each is its own time at the "
                                    "group's power",
                                    g.regions.size(), g.name, fmt::join(g.regions, ", ")));
  }
}

void fill_regions(Attribution& out, const Fit& fit, const Estimate& e, const Totals& t,
                  const std::vector<std::vector<double>>& rounds, std::span<const std::string> names,
                  const AttributionOptions& options) {
  for (std::size_t r = 0; r < names.size(); ++r) {
    RegionEnergy g;
    g.name = names[r];
    g.concurrent = t.concurrent[r];
    g.calls = t.calls[r];
    g.gpu_time_s = t.time_s[r];
    g.resolved = e.resolved[r];
    const double power_w = e.power_w(static_cast<Eigen::Index>(r));
    g.power_w = g.resolved ? power_w : kNaN;
    g.power_above_baseline_w = g.resolved ? (g.concurrent ? power_w : power_w - e.baseline_w) : kNaN;
    g.energy_j = power_w * g.gpu_time_s * out.scale;
    g.energy_per_call_j = g.calls > 0 ? g.energy_j / static_cast<double>(g.calls) : 0.0;
    g.share = out.window_energy_j > 0.0 ? g.energy_j / out.window_energy_j : 0.0;
    g.energy_low_j = g.energy_high_j = g.energy_std_j = kNaN;
    if (t.calls[r] == 0) {
      out.notes.push_back(fmt::format("region '{}' did not run in the window", g.name));
    } else if (!g.resolved) {
      out.notes.push_back(unresolved_note(r, fit, names, g.gpu_time_s, g.concurrent, e));
    } else if (!rounds.empty() && !rounds[r].empty()) {
      const Spread s = spread_of(rounds[r], options.confidence);
      g.energy_low_j = s.low;
      g.energy_high_j = s.high;
      g.energy_std_j = s.std;
      if (!std::isfinite(s.low))
        out.notes.push_back(
            fmt::format("region '{}': no interval: {} of {} bootstrap rounds did not determine it (too "
                        "rarely sampled to resolve; a longer run would)",
                        g.name, s.missing, rounds[r].size()));
      else if (s.high - s.low > g.energy_j)
        out.notes.push_back(
            fmt::format("region '{}': its {:.0f}% interval [{:.4g}, {:.4g}] J is wider than its estimate "
                        "{:.4g} J: too rarely sampled to resolve (a longer run narrows it slowly; longer calls, such "
                        "as a larger batch's, fast: docs/attribution.md, 'Real models')",
                        g.name, 100.0 * options.confidence, s.low, s.high, g.energy_j));
    }
    if (g.resolved && power_w < 0.0 && g.concurrent) {
      // Possible in principle (work that stalls what it overlaps), but more
      // likely a fit that cannot tell it from what it overlaps.
      out.notes.push_back(fmt::format("region '{}': a negative added power ({:.4g} W): it lowers the power of what it "
                                      "overlaps, or the observations cannot tell it from that; its energy is not to "
                                      "be trusted",
                                      g.name, power_w));
    } else if (g.resolved && power_w < 0.0) {
      // No region draws negative power: the fit could not tell this one from
      // its neighbours (too short for how the observations see time).
      out.notes.push_back(fmt::format("region '{}': a negative power ({:.4g} W): shorter or more tied to its "
                                      "neighbours than the observations resolve; its energy is not to be trusted",
                                      g.name, power_w));
    }
    out.regions.push_back(std::move(g));
  }
}

// A region fitted far above anything the GPU can draw is the fit's figure:
// it could not tell the region from its neighbours (always beside the same
// ones, or too short for the samples), and the excess came from them. Its
// interval then reaches down to its time at the idle power (0 W where not
// separated), what the GPU surely drew then, and so does each total's with it.
void widen_above_ceiling(Attribution& out, std::optional<double> ceiling_w,
                         const std::vector<std::vector<std::size_t>>& total_members) {
  if (!ceiling_w) return;
  const double floor_w = out.baseline_separated ? out.baseline_w : 0.0;
  std::vector<double> lowered_j(out.regions.size(), 0.0);
  for (std::size_t r = 0; r < out.regions.size(); ++r) {
    RegionEnergy& g = out.regions[r];
    if (!g.resolved || g.concurrent || !(g.power_w > kImplausiblePowerMultiple * *ceiling_w)) continue;
    const double floor_j = floor_w * g.gpu_time_s * out.scale;
    if (g.energy_low_j > floor_j) {  // false for NaN: no interval to widen
      lowered_j[r] = g.energy_low_j - floor_j;
      g.energy_low_j = floor_j;
    }
    out.notes.push_back(fmt::format("region '{}': fitted at {:.4g} W, {:.1f}x the most this GPU can draw ({:.4g} W, "
                                    "its highest power limit): the fit could not tell it from its neighbours, whose "
                                    "energy it took; its interval reaches down to its time at {:.4g} W, and its "
                                    "neighbours' figures are not to be trusted either",
                                    g.name, g.power_w, g.power_w / *ceiling_w, *ceiling_w, floor_w));
  }
  for (std::size_t i = 0; i < out.totals.size(); ++i) {
    double lowered = 0.0;
    for (std::size_t r : total_members[i]) lowered += lowered_j[r];
    if (lowered > 0.0 && std::isfinite(out.totals[i].energy_low_j)) out.totals[i].energy_low_j -= lowered;
  }
}

void note_bootstrap(Attribution& out, const BlockSums& sums, const AttributionOptions& options) {
  if (options.bootstrap_rounds == 0) {
    out.notes.push_back("no intervals: bootstrap_rounds is 0");
  } else if (sums.blocks < 2) {
    out.notes.push_back(
        fmt::format("no intervals: the observations fill only {} block of {} s; the bootstrap needs "
                    "several (a longer window or a shorter block_s)",
                    sums.blocks, options.block_s));
  } else if (sums.blocks < 10) {
    out.notes.push_back(
        fmt::format("the intervals rest on only {} blocks of {} s and are likely too narrow (a longer "
                    "window or a shorter block_s)",
                    sums.blocks, options.block_s));
  }
}

// The factor that makes the parts sum to the measured energy; far from 1 it
// says the model and the observations disagree with the counter.
void set_scale(Attribution& out) {
  if (out.model_energy_j > 0.0) {
    out.scale = out.window_energy_j / out.model_energy_j;
    if (std::abs(out.scale - 1.0) > 0.05)
      out.notes.push_back(
          fmt::format("the fit integrates to {:.6g} J, {:+.1f}% off the window's measured {:.6g} J; "
                      "every part is scaled to the measured energy",
                      out.model_energy_j, 100.0 * (1.0 / out.scale - 1.0), out.window_energy_j));
  } else {
    out.scale = 1.0;
    out.notes.push_back(
        fmt::format("the fit integrates to {:.6g} J over the window: the parts are not scaled to the "
                    "window's measured {:.6g} J and do not sum to it",
                    out.model_energy_j, out.window_energy_j));
  }
}

void set_baseline_interval(Attribution& out, const std::vector<double>& rounds_w, const AttributionOptions& options) {
  const Spread s = rounds_w.empty() ? Spread{} : spread_of(rounds_w, options.confidence);
  out.baseline_low_w = s.low;
  out.baseline_high_w = s.high;
  // Little idle time observed (say, rounding gaps between regions that tile
  // the step): the fitted baseline then means little.
  if (s.high - s.low > out.baseline_w)
    out.notes.push_back(
        fmt::format("the baseline's {:.0f}% interval [{:.4g}, {:.4g}] W is wider than its estimate "
                    "{:.4g} W: too little idle time was observed (give baseline_w to fix it)",
                    100.0 * options.confidence, s.low, s.high, out.baseline_w));
}

}  // namespace

Attribution attribute(std::span<const PowerObservation> observations, std::span<const RegionInterval> intervals,
                      std::span<const std::string> region_names, double window_begin_s, double window_end_s,
                      double window_energy_j, const AttributionOptions& options) {
  check_arguments(window_begin_s, window_end_s, window_energy_j, options);
  const Layout layout = checked_intervals(intervals, region_names, window_begin_s, window_end_s);
  const std::vector<std::vector<std::size_t>> members = checked_totals(options.totals, region_names);
  const Unknowns unknowns = checked_same_power(options.same_power, region_names, layout);
  const std::vector<std::size_t> order = checked_order(observations, window_begin_s, window_end_s);
  const std::size_t regions = region_names.size();
  const double window_s = window_end_s - window_begin_s;
  const Totals t = totals_of(intervals, layout, regions, window_s);
  // Too little idle time: fitted as if its power were given as 0 W, and
  // reported as not separated.
  const bool too_short = idle_too_short(t, window_s, options);
  AttributionOptions fitted = options;
  if (too_short) fitted.baseline_w = 0.0;
  check_enough_observations(observations.size(), t, fitted);

  const BlockSums sums = block_sums(observations, order, layout, regions, window_begin_s, options.block_s,
                                    options.span_profile);
  const Eigen::VectorXd all = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(sums.blocks));
  const Fit fit =
      solve(unpack(sums.normal_matrix() * all, sums.k), sums.rhs_matrix() * all, fitted.baseline_w, unknowns);
  Estimate e = estimate_of(fit, t, fitted);
  if (too_short) e.baseline_separated = false;

  Attribution out;
  out.baseline_w = e.baseline_w;
  out.baseline_low_w = out.baseline_high_w = kNaN;
  out.baseline_estimated = e.baseline_estimated;
  out.baseline_separated = e.baseline_separated;
  out.idle_time_s = t.idle_time_s;
  out.window_energy_j = window_energy_j;
  out.model_energy_j = model_energy_j(e.power_w, e.baseline_w, t);
  out.observations = observations.size();
  out.residual_rms_w = residual_rms_w(observations, order, layout, regions, fit.coefficients, options.span_profile);
  note_baseline(out, fit, t, regions, window_s, too_short);
  note_busy_idle(out, e, t);
  note_same_power(out, options.same_power);
  set_scale(out);
  out.idle_energy_j = e.baseline_w * t.idle_time_s * out.scale;

  note_bootstrap(out, sums, options);
  Rounds rounds;
  if (options.bootstrap_rounds > 0 && sums.blocks >= 2)
    rounds = bootstrap(sums, unknowns, e, t, window_energy_j, fitted);
  if (e.baseline_estimated) set_baseline_interval(out, rounds.baseline_w, options);
  fill_regions(out, fit, e, t, rounds.energy_j, region_names, options);
  out.totals = sum_regions(out, options.totals, members, rounds.energy_j, options.confidence);
  out.power_ceiling_w = options.power_ceiling_w.value_or(kNaN);
  widen_above_ceiling(out, options.power_ceiling_w, members);
  return out;
}

}  // namespace joule::attribution
