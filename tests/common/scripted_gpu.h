// A Gpu test double whose true power is any function of (virtual) time. Its
// power reading can be biased and its energy counter can step at a fixed
// period, like real hardware, so the sampler's energy model can be checked
// against the exact integral.
#pragma once

#include <cmath>
#include <functional>
#include <memory>

#include "joule/clock.h"
#include "joule/device/gpu.h"
#include "joule/error.h"

namespace joule::testing {

class ScriptedGpu final : public Gpu {
 public:
  using PowerFn = std::function<double(double time_s)>;

  ScriptedGpu(unsigned index, std::shared_ptr<const Clock> clock, PowerFn true_power_w)
      : index_(index), clock_(std::move(clock)), power_(std::move(true_power_w)) {}

  // The power reading is true power times this factor (a biased sensor).
  double reading_bias = 1.0;
  // The counter only changes every this many seconds (0: continuous).
  double counter_update_s = 0.0;
  bool has_counter = true;
  int counter_reads = 0;

  // Exact energy from t0 to t1 by numerical integration of the script.
  double true_energy_j(double t0, double t1) const {
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
  std::string backend() const override { return "test"; }
  bool simulated() const override { return true; }
  std::vector<CapabilityStatus> probe_capabilities() override { return {}; }
  bool has_energy_counter() const override { return has_counter; }

  uint64_t total_energy_mj() override {
    if (!has_counter) throw DeviceError(DeviceErrc::kNotSupported, "no counter");
    ++counter_reads;
    double t = clock_->now_s();
    if (counter_update_s > 0) t = std::floor(t / counter_update_s) * counter_update_s;
    return static_cast<uint64_t>(true_energy_j(0.0, t) * 1000.0);
  }
  uint32_t power_mw() override {
    return static_cast<uint32_t>(std::lround(power_(clock_->now_s()) * reading_bias * 1000.0));
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
};

}  // namespace joule::testing
