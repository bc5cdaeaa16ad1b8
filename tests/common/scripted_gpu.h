// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A Gpu test double whose true power is any function of (virtual) time. Its
// power reading can be biased and its energy counter can step at a fixed
// period, like real hardware, so the sampler's energy model can be checked
// against the exact integral.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>

#include "joule/clock.h"
#include "joule/device/gpu.h"
#include "joule/error.h"

namespace joule::testing {

class ScriptedGpu final : public Gpu {
 public:
  using PowerFn = std::function<double(double time_s)>;

  using EnergyFn = std::function<double(double begin_s, double end_s)>;

  ScriptedGpu(unsigned index, std::shared_ptr<const Clock> clock, PowerFn true_power_w, EnergyFn exact_energy_j = {})
      : index_(index), clock_(std::move(clock)), power_(std::move(true_power_w)), energy_(std::move(exact_energy_j)) {}

  // The power reading is true power times this factor (a biased sensor).
  double reading_bias = 1.0;
  // With a window, the reading is the mean true power over the trailing
  // window, refreshed every reading_update_s (an H100's power usage: 1 s, 0.1 s).
  double reading_window_s = 0.0;
  double reading_update_s = 0.1;
  // The counter only changes every this many seconds (0: continuous), at
  // counter_phase_s + k * counter_update_s.
  double counter_update_s = 0.0;
  double counter_phase_s = 0.0;
  // >= 0: the counter restarts from 0 at this time (a driver reload).
  double counter_reset_at_s = -1.0;
  bool has_counter = true;
  // What backend() and power_reading_source() say: "rocm" and "average power"
  // make it an AMD GPU (with an average socket power) to the code above the
  // device layer, e.g. the exporter's AMD names.
  std::string backend_name = "test";
  std::string power_source = "scripted power";
  std::atomic<int> counter_reads{0};  // the sampling and anchor threads both read
  // Called in each counter read before the value is taken, e.g. to move a
  // virtual clock on: a read that takes time and sees the counter at its end.
  std::function<void()> counter_read_delay;

  // Exact energy from t0 to t1: the script's own, or by numerical integration.
  double true_energy_j(double t0, double t1) const {
    if (energy_) return energy_(t0, t1);
    const int steps = 20000;
    const double h = (t1 - t0) / steps;
    double sum = 0.5 * (power_(t0) + power_(t1));
    for (int i = 1; i < steps; ++i) sum += power_(t0 + i * h);
    return sum * h;
  }

  unsigned index() const override { return index_; }
  std::string name() const override { return "scripted"; }
  std::string uuid() const override { return "scripted"; }
  std::string architecture() const override { return "test"; }
  std::string backend() const override { return backend_name; }
  bool simulated() const override { return true; }
  std::vector<CapabilityStatus> probe_capabilities() override { return {}; }
  bool has_energy_counter() const override { return has_counter; }

  uint64_t total_energy_mj() override {
    if (!has_counter) throw DeviceError(DeviceErrc::kNotSupported, "no counter");
    ++counter_reads;
    if (counter_read_delay) counter_read_delay();
    double t = clock_->now_s();
    if (counter_update_s > 0) {
      t = std::max(0.0, std::floor((t - counter_phase_s) / counter_update_s) * counter_update_s + counter_phase_s);
    }
    const double since_s = counter_reset_at_s >= 0 && t >= counter_reset_at_s ? counter_reset_at_s : 0.0;
    return static_cast<uint64_t>(true_energy_j(since_s, t) * 1000.0);
  }
  uint32_t power_mw() override {
    double power_w = power_(clock_->now_s());
    if (reading_window_s > 0) {
      const double tick_s = std::floor(clock_->now_s() / reading_update_s) * reading_update_s;
      const double from_s = std::max(0.0, tick_s - reading_window_s);
      power_w = tick_s > from_s ? true_energy_j(from_s, tick_s) / (tick_s - from_s) : power_(0.0);
    }
    return static_cast<uint32_t>(std::lround(power_w * reading_bias * 1000.0));
  }
  std::string power_reading_source() const override { return power_source; }

  // Buffered samples like NVML's: every sample_period_s, the mean true power
  // over the period that ends at the sample's timestamp (0: none). A sample
  // is visible sample_latency_s after its timestamp; at most sample_capacity
  // are held.
  double sample_period_s = 0.0;
  double sample_latency_s = 0.0;
  std::size_t sample_capacity = 100;
  bool has_power_samples() const override { return sample_period_s > 0; }
  double power_sample_period_s() const override { return sample_period_s; }
  void read_power_samples(std::vector<PowerSample>& out) override {
    if (sample_period_s <= 0) throw DeviceError(DeviceErrc::kNotSupported, "no power samples");
    const auto newest = static_cast<int64_t>(std::floor((clock_->now_s() - sample_latency_s) / sample_period_s + 1e-9));
    const int64_t oldest = std::max<int64_t>({next_sample_, newest - static_cast<int64_t>(sample_capacity) + 1, 1});
    for (int64_t i = oldest; i <= newest; ++i) {
      const double end_s = static_cast<double>(i) * sample_period_s;
      const double mean_w = true_energy_j(end_s - sample_period_s, end_s) / sample_period_s;
      out.push_back({static_cast<uint64_t>(std::llround(end_s * 1e6)), static_cast<uint32_t>(std::lround(mean_w * 1000.0))});
    }
    next_sample_ = std::max(next_sample_, newest + 1);
  }

  uint32_t power_limit_mw() override { return 300'000; }
  PowerLimitRange power_limit_range_mw() override { return {100'000, 300'000}; }
  uint32_t default_power_limit_mw() override { return 300'000; }
  Utilization utilization() override { return {50, 25}; }
  uint32_t sm_clock_mhz() override { return 1500; }
  uint32_t temperature_c() override { return 50; }
  uint64_t memory_used_bytes() override { return 1 << 20; }
  void set_power_limit_mw(uint32_t) override {}

 private:
  unsigned index_;
  std::shared_ptr<const Clock> clock_;
  PowerFn power_;
  EnergyFn energy_;
  int64_t next_sample_ = 1;
};

}  // namespace joule::testing
