// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Numbers for characterising a job from repeated runs: summary statistics,
// least-squares fits with standard errors, energy/time trade-off metrics and
// the energy-time Pareto front.
#pragma once

#include <cstddef>
#include <vector>

namespace joule {

struct Summary {
  std::size_t n = 0;
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation (n - 1); 0 for n < 2
  double cv() const { return mean != 0.0 ? stddev / mean : 0.0; }  // coefficient of variation
};
Summary summarize(const std::vector<double>& values);

// y = intercept + slope * x by ordinary least squares.
struct LinearFit {
  std::size_t n = 0;
  double slope = 0.0, intercept = 0.0;
  double slope_se = 0.0, intercept_se = 0.0;  // standard errors (need n >= 3)
  double r_squared = 0.0;
};
// Throws UsageError for fewer than 2 points, mismatched sizes, or all x equal.
LinearFit fit_linear(const std::vector<double>& x, const std::vector<double>& y);

// t = a * N^-b, fitted as log t = log a - b log N (positive values only).
// a_se comes from log a's standard error by the delta method (a * se).
struct PowerLawFit {
  std::size_t n = 0;
  double a = 0.0, b = 0.0;
  double a_se = 0.0, b_se = 0.0;
  double r_squared = 0.0;  // in log-log space
};
PowerLawFit fit_power_law(const std::vector<double>& n, const std::vector<double>& t);

// One configuration's mean time and energy.
struct TimeEnergy {
  double time_s = 0.0;
  double energy_j = 0.0;
};

// Relative to a baseline: energy gain % ((Eb - E) / Eb), performance loss %
// ((T - Tb) / Tb), their difference, EDP (E * T) and EDS(k) = E * T^k.
struct TradeOff {
  double energy_gain_percent = 0.0;
  double performance_loss_percent = 0.0;
  double gain_minus_loss = 0.0;
  double edp = 0.0;
  double eds_1_5 = 0.0;
  double eds_2 = 0.0;
};
TradeOff trade_off(const TimeEnergy& config, const TimeEnergy& baseline);
double eds(const TimeEnergy& config, double k);

// Indices of the configurations no other beats in both time and energy,
// fastest first.
std::vector<std::size_t> pareto_front(const std::vector<TimeEnergy>& configs);

// The configuration eta would pick: least eta * E + (1 - eta) * max_power * T.
std::size_t pick_for_eta(const std::vector<TimeEnergy>& configs, double eta, double max_power_w);

}  // namespace joule
