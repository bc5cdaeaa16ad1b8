// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/spread.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace joule::attribution {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The value at quantile p of `total` values: `below` of them -inf, then
// `sorted`, then +inf for the rest (rounds that did not determine the value
// count against the interval: conservative).
double quantile(const std::vector<double>& sorted, std::size_t below, std::size_t total, double p) {
  const auto at = [&](std::size_t i) {
    if (i < below) return -kInf;
    return i - below < sorted.size() ? sorted[i - below] : kInf;
  };
  const double pos = p * static_cast<double>(total - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const double v0 = at(lo);
  if (static_cast<double>(lo) == pos) return v0;
  const double v1 = at(lo + 1);
  if (!std::isfinite(v0)) return v0;
  if (!std::isfinite(v1)) return v1;
  return v0 + (pos - static_cast<double>(lo)) * (v1 - v0);
}

}  // namespace

Spread spread_of(const std::vector<double>& rounds, double confidence) {
  std::vector<double> values;
  for (double x : rounds) {
    if (std::isfinite(x)) values.push_back(x);
  }
  Spread s;
  s.missing = rounds.size() - values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const double tail = (1.0 - confidence) / 2.0;
  s.low = quantile(values, s.missing, rounds.size(), tail);
  s.high = quantile(values, 0, rounds.size(), 1.0 - tail);
  if (!std::isfinite(s.low) || !std::isfinite(s.high)) s.low = s.high = kNaN;
  if (values.size() >= 2) {
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    double sq = 0.0;
    for (double x : values) sq += (x - mean) * (x - mean);
    s.std = std::sqrt(sq / static_cast<double>(values.size() - 1));
  }
  return s;
}

}  // namespace joule::attribution
