// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Simulated GPUs: a power and throughput model on an injectable clock. They
// stand in for real GPUs when none is found (and say so in every output), and
// let tests and simulations run the measurement and control paths without
// hardware.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "joule/clock.h"
#include "joule/device/gpu.h"

namespace joule {

// How a simulated GPU draws power and how fast it runs under a power limit
// and clock locks. At load u the GPU asks for idle + u * (full_load - idle)
// watts; a limit below that demand caps the power, and the SM clock (and with
// it the speed) falls with the cube root of the dynamic power (voltage and
// frequency scaling). An SM clock cap below the clock the limit allows holds
// the speed at cap / max_sm_clock and the dynamic power at its cube. A memory
// clock cap at a fraction m of the highest memory clock saves
// memory_power_fraction * (1 - m) of the dynamic power and stretches the
// memory-bound part of a step: 1 / speed grows by memory_bound_fraction * (1/m - 1).
struct SimGpuModel {
  std::string name = "Simulated GPU (H100-like)";
  uint32_t min_limit_mw = 200'000;
  uint32_t max_limit_mw = 700'000;
  uint32_t default_limit_mw = 700'000;
  double idle_power_w = 70.0;
  double full_load_power_w = 650.0;
  uint32_t max_sm_clock_mhz = 1980;
  uint32_t min_sm_clock_mhz = 210;   // supported SM clocks: min to max in steps
  uint32_t sm_clock_step_mhz = 15;
  uint32_t memory_clock_mhz = 2619;  // the highest memory clock (an H100 SXM's HBM3)
  // Lower memory clocks the model accepts besides memory_clock_mhz (a real
  // H100 offers only 2619 MHz; the model offers more so the knob can be shown).
  std::vector<uint32_t> lower_memory_clocks_mhz = {1593};
  double memory_bound_fraction = 0.2;
  double memory_power_fraction = 0.15;
  uint64_t memory_used_bytes = 1ull << 30;
  // Whether the GPU keeps buffered power samples, as some drivers do: each
  // the exact mean power over a span that ends at every change of load or
  // settings and at each read. Off, a sampler integrates
  // the model's power read once per tick, which errs wherever the load
  // changes between ticks (millisecond stalls in a training step).
  bool keeps_power_samples = false;
  // With keeps_power_samples: 0, a sample ends at every change and read (as
  // above); positive, samples end on a fixed grid of this period on the
  // clock, each the exact mean over its period, as a driver's buffer does
  // (an H100's every ~20 ms): coarser than what runs, like the data that
  // attribution per region fits.
  double power_sample_period_s = 0.0;

  // Optional measured behaviour at full load, by power limit (mW): the power
  // drawn and the throughput relative to the uncapped GPU. When present it
  // replaces the analytic model (load scales the power above idle; limits
  // between table entries are interpolated linearly).
  struct MeasuredPoint {
    double power_w = 0.0;
    double relative_speed = 1.0;
  };
  std::map<uint32_t, MeasuredPoint> measured;

  // What the GPU is held to besides its load: the power limit and the clock
  // caps (0: not capped).
  struct Settings {
    double limit_w = 0.0;
    uint32_t sm_cap_mhz = 0;
    uint32_t memory_cap_mhz = 0;
  };

  // Power drawn at load in [0, 1] under limit_w (no clock caps).
  double power_w(double load, double limit_w) const { return power_w(load, Settings{limit_w}); }
  // Throughput relative to the uncapped GPU at the same load, in (0, 1].
  double relative_speed(double load, double limit_w) const { return relative_speed(load, Settings{limit_w}); }
  double power_w(double load, const Settings& settings) const;
  double relative_speed(double load, const Settings& settings) const;
  // Whether the power limit lowers the draw at this load (the GPU at its cap).
  bool power_capped(double load, const Settings& settings) const;
  // The SM clock the GPU runs at, as a fraction of max_sm_clock_mhz.
  double sm_clock_fraction(double load, const Settings& settings) const;
  std::vector<uint32_t> supported_clocks_mhz(ClockDomain domain) const;
};

class SimGpu final : public Gpu {
 public:
  SimGpu(unsigned index, SimGpuModel model, std::shared_ptr<const Clock> clock);

  unsigned index() const override { return index_; }
  std::string name() const override { return model_.name; }
  std::string uuid() const override;
  std::string architecture() const override { return "simulated"; }
  std::string backend() const override { return "sim"; }
  std::string pci_bus_id() const override;
  bool simulated() const override { return true; }

  std::vector<CapabilityStatus> probe_capabilities() override;
  bool has_energy_counter() const override { return true; }

  uint64_t total_energy_mj() override;
  uint32_t power_mw() override;
  // The model's power at the moment of reading: no lag, no averaging.
  std::string power_reading_source() const override { return "model"; }
  bool has_power_samples() const override { return model_.keeps_power_samples; }
  double power_sample_period_s() const override {
    return model_.keeps_power_samples ? model_.power_sample_period_s : 0.0;
  }
  // Each sample the exact mean power over its span; a span ends at every
  // change of load or settings and at each read, or on the grid of
  // power_sample_period_s.
  void read_power_samples(std::vector<PowerSample>& out) override;
  uint32_t power_limit_mw() override;
  PowerLimitRange power_limit_range_mw() override;
  uint32_t default_power_limit_mw() override { return model_.default_limit_mw; }
  Utilization utilization() override;
  uint32_t sm_clock_mhz() override;
  uint32_t memory_clock_mhz() override;
  uint32_t temperature_c() override;
  bool at_power_cap() override;
  uint64_t memory_used_bytes() override { return model_.memory_used_bytes; }
  std::vector<GpuProcess> running_processes() override;
  // One sample per process set by set_process_utilization, stamped with the
  // sim's clock (its seconds as microseconds), when asked after the last.
  ProcessUtilizationSamples process_utilization(uint64_t since_unix_us) override;
  void set_power_limit_mw(uint32_t limit_mw) override;
  std::vector<uint32_t> supported_clocks_mhz(ClockDomain domain) override;
  std::optional<ClockLock> clock_lock_mhz(ClockDomain domain) override;
  void lock_clock_mhz(ClockDomain domain, ClockLock lock) override;
  void reset_clock_lock(ClockDomain domain) override;

  // The processes the simulated GPU says are using it (none at first).
  void set_processes(std::vector<GpuProcess> processes);
  // The SM utilisation, in percent, process_utilization says each pid had.
  void set_process_utilization(std::map<uint32_t, double> sm_percent);

  // The fraction of the GPU kept busy from now on, in [0, 1].
  void set_load(double load);
  double load() const;
  // Throughput relative to the uncapped GPU, at the current load and limit.
  double relative_speed() const;
  // Exact energy since creation, in joules (the counter truncates to mJ).
  double energy_j() const;
  const SimGpuModel& model() const { return model_; }

 private:
  // Accounts the energy drawn since the last change, at the old settings.
  void advance_locked() const;
  // Before a change of load or settings: accounts the energy and ends the
  // buffered power sample (keeps_power_samples).
  void begin_change_locked();
  void close_sample_locked();
  void close_periods_locked();
  void push_sample_locked(double end_s, double energy_j);
  static constexpr std::size_t kMaxBufferedSamples = 1 << 16;
  SimGpuModel::Settings settings_locked() const;

  unsigned index_;
  SimGpuModel model_;
  std::shared_ptr<const Clock> clock_;
  mutable std::mutex mutex_;
  mutable double energy_j_ = 0.0;
  mutable double accounted_until_s_;
  double sampled_until_s_;  // read_power_samples: the end of the last sample, and the energy then
  double sampled_energy_j_ = 0.0;
  std::deque<PowerSample> samples_;
  double load_ = 0.0;
  uint32_t limit_mw_;
  std::optional<ClockLock> sm_lock_, memory_lock_;
  std::vector<GpuProcess> processes_;
  std::map<uint32_t, double> process_sm_percent_;
};

// What `JOULE_SIM` (or --sim) asks for: "count=4,load=0.6,name=...".
struct SimSpec {
  unsigned count = 2;
  double load = 0.0;
  SimGpuModel model;
};

// Parses a comma-separated key=value list (keys: count, load, name, idle_w,
// full_w, min_w, max_w, default_w, sample_ms: buffered power samples every
// that many ms). Throws UsageError naming the bad item.
SimSpec parse_sim_spec(const std::string& text);

}  // namespace joule
