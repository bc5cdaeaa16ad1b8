// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "optimize/knob_control.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "joule/error.h"

namespace joule {

namespace {

class PowerLimitControl final : public KnobControl {
 public:
  PowerLimitControl(const PowerLimitOptimizerOptions& options, std::vector<std::shared_ptr<Gpu>> gpus)
      : KnobControl(OptimizerKnob::kPowerLimit, std::move(gpus)) {
    // Candidates lie inside every GPU's constraints.
    uint32_t low_mw = 0, high_mw = UINT32_MAX;
    for (const auto& gpu : gpus_) {
      const PowerLimitRange range = gpu->power_limit_range_mw();
      low_mw = std::max(low_mw, range.min_mw);
      high_mw = std::min(high_mw, range.max_mw);
      original_mw_.push_back(gpu->power_limit_mw());
    }
    if (low_mw > high_mw) throw UsageError("power-limit optimizer: the GPUs share no power limit");
    for (double w = high_mw / 1000.0; w >= low_mw / 1000.0 - 1e-9; w -= options.step_w) candidates_.push_back(w);
    if (candidates_.back() > low_mw / 1000.0 + 1e-9) candidates_.push_back(low_mw / 1000.0);
    original_ = original_mw_.front() / 1000.0;
  }

  void apply(std::size_t i, double value) override {
    const auto limit_mw = static_cast<uint32_t>(std::lround(value * 1000.0));
    if (gpus_[i]->power_limit_mw() != limit_mw) gpus_[i]->set_power_limit_mw(limit_mw);
  }
  void restore(std::size_t i) override {
    if (gpus_[i]->power_limit_mw() != original_mw_[i]) gpus_[i]->set_power_limit_mw(original_mw_[i]);
  }

 private:
  std::vector<uint32_t> original_mw_;
};

// A clock cap: the lock from the lowest supported clock up to the value. The
// highest supported clock means no cap: the lock is reset (or the GPU's
// original lock put back). NVML cannot read a lock back, so the control
// remembers what it applied and skips repeats itself.
class ClockCapControl final : public KnobControl {
 public:
  ClockCapControl(const PowerLimitOptimizerOptions& options, std::vector<std::shared_ptr<Gpu>> gpus)
      : KnobControl(options.knob, std::move(gpus)),
        domain_(options.knob == OptimizerKnob::kSmClock ? ClockDomain::kSm : ClockDomain::kMemory) {
    // The clocks every GPU accepts.
    std::vector<uint32_t> shared = gpus_.front()->supported_clocks_mhz(domain_);
    for (const auto& gpu : gpus_) {
      const auto supported = gpu->supported_clocks_mhz(domain_);
      std::vector<uint32_t> both;
      std::set_intersection(shared.begin(), shared.end(), supported.begin(), supported.end(), std::back_inserter(both));
      shared = both;
      original_lock_.push_back(gpu->clock_lock_mhz(domain_));
    }
    if (shared.empty()) {
      throw UsageError(fmt::format("clock optimizer: the GPUs share no supported {} clock", to_string(domain_)));
    }
    lowest_mhz_ = shared.front();
    const uint32_t highest = shared.back();
    const double floor_mhz = highest * options.min_clock_fraction;
    // SM clocks come in steps of a few MHz: try one every step_mhz (the
    // supported clock at or below each mark). Memory clocks are few: each.
    const double step = domain_ == ClockDomain::kSm ? options.step_mhz : 0.0;
    for (auto it = shared.rbegin(); it != shared.rend() && *it >= floor_mhz - 1e-9; ++it) {
      if (candidates_.empty() || step <= 0 || candidates_.back() - *it >= step - 1e-9) candidates_.push_back(*it);
    }
    applied_.assign(gpus_.size(), std::nullopt);
    const auto& first = original_lock_.front();
    original_ = first ? std::min<double>(first->max_mhz, highest) : highest;
    highest_mhz_ = highest;
  }

  void apply(std::size_t i, double value) override {
    if (value == original_of(i)) return restore(i);
    if (applied_[i] == value) return;
    const auto cap_mhz = static_cast<uint32_t>(value);
    gpus_[i]->lock_clock_mhz(domain_, {std::min(lowest_mhz_, cap_mhz), cap_mhz});
    applied_[i] = value;
  }

  void restore(std::size_t i) override {
    if (!applied_[i]) return;
    if (original_lock_[i]) {
      gpus_[i]->lock_clock_mhz(domain_, *original_lock_[i]);
    } else {
      gpus_[i]->reset_clock_lock(domain_);
    }
    applied_[i].reset();
  }

 private:
  double original_of(std::size_t i) const {
    return original_lock_[i] ? std::min<double>(original_lock_[i]->max_mhz, highest_mhz_) : highest_mhz_;
  }

  ClockDomain domain_;
  uint32_t lowest_mhz_ = 0;
  double highest_mhz_ = 0;
  std::vector<std::optional<ClockLock>> original_lock_;
  std::vector<std::optional<double>> applied_;  // none: as it was before
};

}  // namespace

std::unique_ptr<KnobControl> KnobControl::create(const PowerLimitOptimizerOptions& options,
                                                 std::vector<std::shared_ptr<Gpu>> gpus) {
  if (options.knob == OptimizerKnob::kPowerLimit) return std::make_unique<PowerLimitControl>(options, std::move(gpus));
  return std::make_unique<ClockCapControl>(options, std::move(gpus));
}

std::string KnobControl::describe(double value) const {
  switch (knob_) {
    case OptimizerKnob::kPowerLimit: return fmt::format("{:.0f} W", value);
    case OptimizerKnob::kSmClock: return fmt::format("SM clock cap {:.0f} MHz", value);
    case OptimizerKnob::kMemoryClock: return fmt::format("memory clock cap {:.0f} MHz", value);
  }
  return "?";
}

std::string KnobControl::with_unit(double value) const {
  return fmt::format("{:.0f} {}", value, knob_ == OptimizerKnob::kPowerLimit ? "W" : "MHz");
}

std::string KnobControl::column_header() const {
  switch (knob_) {
    case OptimizerKnob::kPowerLimit: return "limit W";
    case OptimizerKnob::kSmClock: return "SM cap MHz";
    case OptimizerKnob::kMemoryClock: return "mem cap MHz";
  }
  return "?";
}

}  // namespace joule
