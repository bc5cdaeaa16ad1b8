// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A counter step's energy split at an edge through the samples' measured
// response (the reasoning is in sample_response.h), and the responses joule
// ships.
#include "joule/measure/sample_response.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "joule/error.h"

namespace joule {
namespace {

constexpr double kBinS = 0.004;
// Samples a little beyond those that see the step pin the power just outside
// it, which the ones crossing its ends also see.
constexpr double kContextS = 0.03;
// The penalty on differences between neighbouring bins and the counter's
// weight (as many samples'), in powers scaled to the samples' mean: small
// enough that the samples are fitted to within their noise, the counter
// nearly exactly.
constexpr double kSmoothness = 1e-3;
constexpr double kCounterWeight = 10.0;

int last_lag_ms(const PowerSampleResponse& r) { return r.first_lag_ms + static_cast<int>(r.weights_ms.size()) - 1; }

double overlap_s(double a0, double a1, double b0, double b1) { return std::max(0.0, std::min(a1, b1) - std::max(a0, b0)); }

// The samples may not leave the step's surroundings unseen for long: a gap
// of more than 3 typical intervals means the buffer overflowed or failed.
bool covered(std::span<const StampedPower> used) {
  if (used.size() < 3) return false;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < used.size(); ++i) gaps.push_back(used[i].time_s - used[i - 1].time_s);
  std::vector<double> sorted = gaps;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
  const double typical_s = sorted[sorted.size() / 2];
  return typical_s > 0 && *std::max_element(gaps.begin(), gaps.end()) <= 3.0 * typical_s;
}

}  // namespace

void check_sample_response(const PowerSampleResponse& r) {
  if (r.weights_ms.empty() || r.weights_ms.size() > 1000) {
    throw UsageError(fmt::format("sample response: {} weights (give 1 to 1000, one per millisecond of lag)",
                                 r.weights_ms.size()));
  }
  double sum = 0.0;
  for (std::size_t i = 0; i < r.weights_ms.size(); ++i) {
    const double w = r.weights_ms[i];
    if (!std::isfinite(w) || w < 0.0) {
      throw UsageError(fmt::format("sample response: weight {} is {} (must be finite and >= 0)", i, w));
    }
    sum += w;
  }
  if (!(sum > 0.0)) throw UsageError("sample response: no weight is positive");
  if (r.first_lag_ms < -1000 || last_lag_ms(r) > 1000) {
    throw UsageError(fmt::format("sample response: lags {} to {} ms (must lie within [-1000, 1000])",
                                 r.first_lag_ms, last_lag_ms(r)));
  }
}

SampleReach response_reach_s(const PowerSampleResponse& r, double begin_s, double end_s) {
  return {begin_s + 1e-3 * r.first_lag_ms, end_s + 1e-3 * (last_lag_ms(r) + 1)};
}

std::optional<double> step_share_before(std::span<const StampedPower> samples, const PowerSampleResponse& r,
                                        const CounterStep& step, double edge_s) {
  if (!(step.end_s > step.begin_s)) return std::nullopt;
  if (edge_s <= step.begin_s) return 0.0;
  if (edge_s >= step.end_s) return 1.0;
  const SampleReach reach = response_reach_s(r, step.begin_s, step.end_s);
  const auto first = std::lower_bound(samples.begin(), samples.end(), reach.first_stamp_s - kContextS,
                                      [](const StampedPower& p, double t) { return p.time_s < t; });
  const auto last = std::upper_bound(first, samples.end(), reach.last_stamp_s + kContextS,
                                     [](double t, const StampedPower& p) { return t < p.time_s; });
  const std::span<const StampedPower> used(first, last);
  if (!covered(used)) return std::nullopt;
  const auto inside = std::count_if(used.begin(), used.end(), [&](const StampedPower& p) {
    return p.time_s >= reach.first_stamp_s && p.time_s <= reach.last_stamp_s;
  });
  if (inside < 3) return std::nullopt;

  // Bins over everything the used samples saw, and the step.
  const double newest_s = 1e-3 * r.first_lag_ms, oldest_s = 1e-3 * (last_lag_ms(r) + 1);
  const double grid_begin_s = std::min(used.front().time_s - oldest_s, step.begin_s);
  const double grid_end_s = std::max(used.back().time_s - newest_s, step.end_s);
  const auto bins = static_cast<Eigen::Index>(std::ceil((grid_end_s - grid_begin_s) / kBinS - 1e-9));
  const auto bin_of = [&](double t) {
    return std::clamp(static_cast<Eigen::Index>(std::floor((t - grid_begin_s) / kBinS)), Eigen::Index{0}, bins - 1);
  };
  double mean_w = 0.0;
  for (const StampedPower& p : used) mean_w += p.power_w / static_cast<double>(used.size());
  if (!(mean_w > 0.0)) return std::nullopt;

  // Normal equations: the samples, the counter, the smoothness.
  Eigen::MatrixXd normal = Eigen::MatrixXd::Zero(bins, bins);
  Eigen::VectorXd rhs = Eigen::VectorXd::Zero(bins);
  Eigen::VectorXd row(bins);
  for (const StampedPower& p : used) {
    row.setZero();
    for (std::size_t i = 0; i < r.weights_ms.size(); ++i) {
      const double lag_s = 1e-3 * (r.first_lag_ms + static_cast<int>(i));
      const double ms_end_s = p.time_s - lag_s, ms_begin_s = ms_end_s - 1e-3;
      for (Eigen::Index j = bin_of(ms_begin_s); j <= bin_of(ms_end_s); ++j) {
        const double bin_begin_s = grid_begin_s + kBinS * static_cast<double>(j);
        row(j) += r.weights_ms[i] * overlap_s(ms_begin_s, ms_end_s, bin_begin_s, bin_begin_s + kBinS) / 1e-3;
      }
    }
    row /= row.sum();  // the weights may not sum to 1 exactly
    normal.selfadjointView<Eigen::Lower>().rankUpdate(row);
    rhs += row * (p.power_w / mean_w);
  }
  Eigen::VectorXd in_step(bins);  // each bin's share of the step's length
  for (Eigen::Index j = 0; j < bins; ++j) {
    const double bin_begin_s = grid_begin_s + kBinS * static_cast<double>(j);
    in_step(j) = overlap_s(bin_begin_s, bin_begin_s + kBinS, step.begin_s, step.end_s) / kBinS;
  }
  const double step_bins = in_step.sum();
  normal.selfadjointView<Eigen::Lower>().rankUpdate(in_step / step_bins, kCounterWeight);
  rhs += kCounterWeight * (in_step / step_bins) * (step.energy_j / (step.end_s - step.begin_s) / mean_w);
  for (Eigen::Index j = 0; j + 1 < bins; ++j) {
    normal(j, j) += kSmoothness;
    normal(j + 1, j + 1) += kSmoothness;
    normal(j + 1, j) -= kSmoothness;
  }
  const Eigen::LDLT<Eigen::MatrixXd> solver(normal.selfadjointView<Eigen::Lower>());
  if (solver.info() != Eigen::Success) return std::nullopt;
  const Eigen::VectorXd power = solver.solve(rhs).cwiseMax(0.0);
  if (!power.allFinite()) return std::nullopt;

  double before = 0.0, total = 0.0;
  for (Eigen::Index j = 0; j < bins; ++j) {
    const double bin_begin_s = grid_begin_s + kBinS * static_cast<double>(j);
    total += power(j) * overlap_s(bin_begin_s, bin_begin_s + kBinS, step.begin_s, step.end_s);
    before += power(j) * overlap_s(bin_begin_s, bin_begin_s + kBinS, step.begin_s, edge_s);
  }
  if (!(total > 0.0)) return std::nullopt;
  return std::clamp(before / total, 0.0, 1.0);
}

std::optional<PowerSampleResponse> builtin_sample_response(const std::string& gpu_name,
                                                           const std::string& driver_version) {
  const std::string branch = driver_version.substr(0, driver_version.find('.'));
  // NVIDIA H200 (141 GB HBM3e), driver 580.159.04: the mean of four fits
  // (measure_sample_response, 40 s each, two leases; bench/README.md sections
  // 16 and 16c), lags 6-59 ms: 10/50/90% of the response by 9/16/36 ms.
  if (gpu_name == "NVIDIA H200" && branch == "580") {
    return PowerSampleResponse{
        {0.0022, 0.0212, 0.0484, 0.0630, 0.0631, 0.0586, 0.0540, 0.0519, 0.0501, 0.0472, 0.0427,
         0.0374, 0.0341, 0.0329, 0.0309, 0.0283, 0.0270, 0.0253, 0.0230, 0.0199, 0.0182, 0.0180,
         0.0172, 0.0161, 0.0142, 0.0113, 0.0104, 0.0110, 0.0106, 0.0095, 0.0087, 0.0081, 0.0065,
         0.0055, 0.0051, 0.0059, 0.0063, 0.0054, 0.0059, 0.0061, 0.0034, 0.0010, 0.0027, 0.0042,
         0.0038, 0.0030, 0.0016, 0.0010, 0.0021, 0.0029, 0.0025, 0.0016, 0.0006, 0.0019},
        6, "joule's H200 response (driver 580)"};
  }
  return std::nullopt;
}

}  // namespace joule
