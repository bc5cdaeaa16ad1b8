// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A training-like load for energy tests: the GPU switches between busy and
// idle at random, each phase lasting a random whole number of milliseconds
// (what the fake driver's profile files take), from a fixed seed (the same
// sequence on every platform). Power and exact energy at any time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace joule::testing {

class OnOffLoad {
 public:
  OnOffLoad(uint64_t seed, double idle_w, double busy_w, double min_phase_s, double max_phase_s, double length_s)
      : idle_w_(idle_w), busy_w_(busy_w) {
    uint64_t state = seed;
    double t = 0.0;
    starts_s_.push_back(0.0);
    while (t < length_s) {
      t += std::round(1000.0 * (min_phase_s + (max_phase_s - min_phase_s) * unit(state))) / 1000.0;
      starts_s_.push_back(t);
    }
    // Energy at each phase start, so any interval is exact.
    energy_at_start_j_.push_back(0.0);
    for (std::size_t i = 1; i < starts_s_.size(); ++i) {
      energy_at_start_j_.push_back(energy_at_start_j_.back() + phase_power_w(i - 1) * (starts_s_[i] - starts_s_[i - 1]));
    }
  }

  double power_w(double t) const { return phase_power_w(phase(t)); }
  double energy_j(double t0, double t1) const { return energy_to(t1) - energy_to(t0); }
  std::size_t changes() const { return starts_s_.size() - 1; }
  // The load as the fake libnvidia-ml.so.1's profile_file: "duration_ms power_w" lines.
  std::string profile_file() const {
    std::string text;
    for (std::size_t i = 0; i + 1 < starts_s_.size(); ++i) {
      text += std::to_string(std::lround((starts_s_[i + 1] - starts_s_[i]) * 1000.0)) + " " +
              std::to_string(phase_power_w(i)) + "\n";
    }
    return text;
  }

 private:
  // splitmix64, then the top 53 bits as a double in [0, 1).
  static double unit(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
  std::size_t phase(double t) const {
    const auto it = std::upper_bound(starts_s_.begin(), starts_s_.end(), t);
    return it == starts_s_.begin() ? 0 : static_cast<std::size_t>(it - starts_s_.begin()) - 1;
  }
  double phase_power_w(std::size_t i) const { return i % 2 == 0 ? busy_w_ : idle_w_; }
  double energy_to(double t) const {
    if (t <= 0) return phase_power_w(0) * t;
    const std::size_t i = std::min(phase(t), starts_s_.size() - 1);
    return energy_at_start_j_[i] + phase_power_w(i) * (t - starts_s_[i]);
  }

  double idle_w_, busy_w_;
  std::vector<double> starts_s_;
  std::vector<double> energy_at_start_j_;
};

}  // namespace joule::testing
