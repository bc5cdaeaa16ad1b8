// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "power_history.h"

namespace joule::detail {

std::optional<double> calibration_scale(const std::deque<CounterPoint>& counters, double min_span_s) {
  constexpr double kMinScale = 0.5;  // a calibration outside these bounds means
  constexpr double kMaxScale = 2.0;  // broken readings, not a biased sensor
  const auto& c = counters;
  if (c.size() < 3 || c.back().time_s - c.front().time_s < min_span_s) return std::nullopt;
  double mean_x = 0, mean_y = 0;
  for (const auto& p : c) {
    mean_x += p.integral_j;
    mean_y += p.counter_j;
  }
  mean_x /= static_cast<double>(c.size());
  mean_y /= static_cast<double>(c.size());
  double sxy = 0, sxx = 0;
  for (const auto& p : c) {
    sxy += (p.integral_j - mean_x) * (p.counter_j - mean_y);
    sxx += (p.integral_j - mean_x) * (p.integral_j - mean_x);
  }
  if (sxx <= 0) return std::nullopt;
  const double slope = sxy / sxx;
  return slope >= kMinScale && slope <= kMaxScale ? slope : 1.0;
}

}  // namespace joule::detail
