// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "joule/error.h"
#include "joule/optimize/cost.h"

namespace joule {

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.n = values.size();
  if (s.n == 0) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.n);
  if (s.n < 2) return s;
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(squares / static_cast<double>(s.n - 1));
  return s;
}

LinearFit fit_linear(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) throw UsageError("fit: x and y differ in length");
  if (x.size() < 2) throw UsageError("fit: needs at least 2 points");
  LinearFit f;
  f.n = x.size();
  const double n = static_cast<double>(f.n);
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < f.n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0) throw UsageError("fit: all x values are equal");
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  double ssr = 0;
  for (std::size_t i = 0; i < f.n; ++i) {
    const double r = y[i] - (f.intercept + f.slope * x[i]);
    ssr += r * r;
  }
  f.r_squared = syy > 0 ? 1.0 - ssr / syy : 1.0;
  if (f.n >= 3) {
    const double s2 = ssr / (n - 2);
    f.slope_se = std::sqrt(s2 / sxx);
    f.intercept_se = std::sqrt(s2 * (1.0 / n + mx * mx / sxx));
  }
  return f;
}

PowerLawFit fit_power_law(const std::vector<double>& n, const std::vector<double>& t) {
  if (n.size() != t.size()) throw UsageError("power-law fit: N and t differ in length");
  std::vector<double> lx, ly;
  for (std::size_t i = 0; i < n.size(); ++i) {
    if (!(n[i] > 0) || !(t[i] > 0)) {
      throw UsageError(fmt::format("power-law fit: point {} ({}, {}) is not positive", i, n[i], t[i]));
    }
    lx.push_back(std::log(n[i]));
    ly.push_back(std::log(t[i]));
  }
  const LinearFit lin = fit_linear(lx, ly);
  PowerLawFit f;
  f.n = lin.n;
  f.a = std::exp(lin.intercept);
  f.b = -lin.slope;
  f.a_se = f.a * lin.intercept_se;
  f.b_se = lin.slope_se;
  f.r_squared = lin.r_squared;
  return f;
}

double eds(const TimeEnergy& c, double k) { return c.energy_j * std::pow(c.time_s, k); }

TradeOff trade_off(const TimeEnergy& c, const TimeEnergy& base) {
  TradeOff t;
  t.energy_gain_percent = 100.0 * (base.energy_j - c.energy_j) / base.energy_j;
  t.performance_loss_percent = 100.0 * (c.time_s - base.time_s) / base.time_s;
  t.gain_minus_loss = t.energy_gain_percent - t.performance_loss_percent;
  t.edp = eds(c, 1.0);
  t.eds_1_5 = eds(c, 1.5);
  t.eds_2 = eds(c, 2.0);
  return t;
}

std::vector<std::size_t> pareto_front(const std::vector<TimeEnergy>& configs) {
  std::vector<std::size_t> order(configs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return configs[a].time_s != configs[b].time_s ? configs[a].time_s < configs[b].time_s
                                                   : configs[a].energy_j < configs[b].energy_j;
  });
  // Fastest first; a point joins when it uses less energy than every faster one.
  std::vector<std::size_t> front;
  double best_energy = std::numeric_limits<double>::infinity();
  for (std::size_t i : order) {
    if (configs[i].energy_j < best_energy) {
      front.push_back(i);
      best_energy = configs[i].energy_j;
    }
  }
  return front;
}

std::size_t pick_for_eta(const std::vector<TimeEnergy>& configs, double eta, double max_power_w) {
  check_eta(eta);
  if (configs.empty()) throw UsageError("pick_for_eta: no configurations");
  std::size_t best = 0;
  for (std::size_t i = 1; i < configs.size(); ++i) {
    if (zeus_cost(configs[i].energy_j, configs[i].time_s, eta, max_power_w) <
        zeus_cost(configs[best].energy_j, configs[best].time_s, eta, max_power_w)) {
      best = i;
    }
  }
  return best;
}

}  // namespace joule
