// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What attribute()'s tests share: synthetic runs, whose true energies are
// known exactly, and a check of a UsageError's words. A step of regions at known powers repeats with jittered durations
// (so its phase drifts against the sampling) and a jittered power per call;
// the observations are exact integrals of that power: 100 ms energy-counter
// increments, 20 ms span averages with noise, or point samples every 20 ms
// with noise.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "joule/attribution/attribution.h"
#include "joule/error.h"

namespace joule::attribution::test_support {

// One part of the step: a region, or (no region) a gap at the baseline.
struct Part {
  std::optional<std::size_t> region;
  double duration_s = 0.0;
};

struct StepSpec {
  std::vector<std::string> names;
  std::vector<double> power_w;  // per region
  std::vector<Part> parts;      // in the step's order
  double baseline_w = 90.0;
  double duration_jitter = 0.05;  // relative standard deviation, per call
  double power_jitter = 0.03;     // relative standard deviation, per call
};

// A run of the step: its intervals, and its power as exact piecewise-constant
// segments, so that any observation's value is known exactly.
class SyntheticRun {
 public:
  SyntheticRun(const StepSpec& spec, int steps, std::uint64_t seed) : true_energy_j(spec.names.size(), 0.0) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    double t = 0.0;
    for (int step = 0; step < steps; ++step) {
      for (const Part& part : spec.parts) {
        const double d = part.duration_s * std::max(0.2, 1.0 + spec.duration_jitter * normal(rng));
        double p = spec.baseline_w;
        if (part.region) {
          p = spec.power_w[*part.region] * (1.0 + spec.power_jitter * normal(rng));
          intervals.push_back({*part.region, t, t + d});
          true_energy_j[*part.region] += p * d;
        } else {
          idle_time_s += d;
        }
        edges_.push_back(t);
        power_.push_back(p);
        cumulative_j_.push_back(total_j);
        total_j += p * d;
        t += d;
      }
    }
    end_s = t;
  }

  // The energy up to time t.
  double energy_to_j(double t) const {
    const auto i = static_cast<std::size_t>(std::upper_bound(edges_.begin(), edges_.end(), t) - edges_.begin()) - 1;
    return cumulative_j_[i] + power_[i] * (t - edges_[i]);
  }
  double power_at_w(double t) const {
    return power_[static_cast<std::size_t>(std::upper_bound(edges_.begin(), edges_.end(), t) - edges_.begin()) - 1];
  }

  std::vector<RegionInterval> intervals;
  std::vector<double> true_energy_j;  // per region
  double total_j = 0.0;
  double idle_time_s = 0.0;
  double end_s = 0.0;

 private:
  std::vector<double> edges_, power_, cumulative_j_;  // per segment
};

enum class Kind { kCounter, kAverages, kPoints, kAll };
inline const char* name_of(Kind k) {
  switch (k) {
    case Kind::kCounter:
      return "100 ms counter";
    case Kind::kAverages:
      return "20 ms averages";
    case Kind::kPoints:
      return "20 ms points";
    case Kind::kAll:
      return "all three";
  }
  return "";
}

// What a GPU would report: counter increments over 100 ms (exact), span
// averages over 20 ms (noise 10 W), point samples every 20 ms (noise 5 W).
template <class Run>
std::vector<PowerObservation> observe(const Run& run, Kind kind, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<PowerObservation> out;
  if (kind == Kind::kPoints) {
    for (double t = 0.005; t < run.end_s; t += 0.02) out.push_back({t, t, run.power_at_w(t) + 5.0 * normal(rng)});
    return out;
  }
  const double period_s = kind == Kind::kCounter ? 0.1 : 0.02, noise_w = kind == Kind::kCounter ? 0.0 : 10.0;
  for (double t = kind == Kind::kCounter ? 0.037 : 0.011; t + period_s <= run.end_s; t += period_s) {
    const double mean_w = (run.energy_to_j(t + period_s) - run.energy_to_j(t)) / period_s;
    out.push_back({t, t + period_s, mean_w + noise_w * normal(rng)});
  }
  return out;
}

inline double parts_sum_j(const Attribution& a) {
  double sum = a.idle_energy_j;
  for (const RegionEnergy& r : a.regions) sum += r.energy_j;
  return sum;
}

inline bool has_note(const Attribution& a, const std::string& text) {
  return std::any_of(a.notes.begin(), a.notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

// The call throws a UsageError whose message holds `text`.
inline void expect_usage_error(const std::function<void()>& call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "no UsageError; expected one saying: " << text;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace joule::attribution::test_support
