// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Named measurement windows over a set of devices. begin_window/end_window
// only read the clock and what the Sampler already holds, so they cost well
// under a microsecond, whatever the driver's energy call costs.
//
// end_window returns at once, with the data up to that moment; the driver's
// power samples that cover the window's last instants arrive about one
// sample period later (20 ms on an H100), and the energy-counter reads that
// pin the window's edges to counter steps (counter_anchors.h) up to ~0.15 s
// later. settle() waits for them and gives the exact value; refresh()
// recomputes without waiting.
#pragma once

#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "joule/clock.h"
#include "joule/device/discovery.h"
#include "joule/measure/sampler.h"

namespace joule {

// How one GPU's energy in a Measurement was obtained. Plain values, so that
// end_window stays cheap; Sampler::gpu_method_description() gives words.
struct GpuEnergySource {
  GpuEnergyMethod method = GpuEnergyMethod::kPowerReadings;
  double calibration_scale = 1.0;  // energy-counter calibration applied (1: none yet, or no counter)
  // The window was pinned to energy-counter steps near its edges (the exact
  // method; counter_anchors.h). false: the power integral alone.
  bool counter_anchored = false;
};

// Energy and time of one window. Vectors follow the Monitor's device order
// (gpus(), then package and DRAM zones in cpu_zones() order).
struct Measurement {
  std::string name;
  double begin_s = 0.0;  // on the monitor's clock
  double elapsed_s = 0.0;
  std::vector<double> gpu_energy_j;
  std::vector<double> cpu_package_energy_j;
  std::vector<double> dram_energy_j;
  // Devices that failed inside the window (their energy stops there).
  std::vector<std::string> warnings;
  // Every device's data reached past the window's end: the values are final.
  // Otherwise the last power was carried forward over the final instants;
  // Monitor::settle() gives the final values.
  bool settled = false;
  std::vector<GpuEnergySource> gpu_sources;

  double end_s() const { return begin_s + elapsed_s; }
  double gpu_total_energy_j() const;
  double cpu_total_energy_j() const;  // packages + DRAM
  double total_energy_j() const;
};

struct MonitorOptions {
  SamplerOptions sampler;
  // Called before the clock is read at each window edge, e.g. a CUDA device
  // synchronise so that queued kernels are counted in the right window.
  std::function<void()> synchronize;
};

class Monitor {
 public:
  Monitor(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
          std::shared_ptr<const Clock> clock, MonitorOptions options = {});
  // All devices found by discovery, on the steady clock.
  explicit Monitor(const Devices& devices, MonitorOptions options = {});
  ~Monitor();

  // Windows may overlap and nest; names must be unique among open windows.
  // Throws UsageError for a duplicate or unknown name.
  void begin_window(const std::string& name);
  Measurement end_window(const std::string& name);
  // The final value of an ended window: waits up to timeout_s for the data
  // that covers its end (no driver call on this thread: the sampling thread
  // reads it), then computes the window again. Returns at once if m is
  // settled; on a timeout, the best value with settled == false. Works for
  // windows that ended within SamplerOptions::history_s (30 s).
  Measurement settle(const Measurement& m, double timeout_s = 1.0);
  // Computes an ended window again from what the sampler holds now.
  Measurement refresh(const Measurement& m) const;
  // end_window, then settle.
  Measurement end_window_settled(const std::string& name, double timeout_s = 1.0);
  bool window_open(const std::string& name) const;

  // Stops sampling (a final sample is taken); open windows can still end.
  void stop();

  Sampler& sampler() { return sampler_; }
  Timeline& timeline() { return sampler_.timeline(); }
  const std::vector<std::shared_ptr<Gpu>>& gpus() const { return sampler_.gpus(); }
  const std::vector<std::shared_ptr<CpuEnergyZone>>& cpu_zones() const { return sampler_.cpu_zones(); }

 private:
  struct OpenWindow {
    std::string name;
    double begin_s;
    bool closing = false;
  };
  struct EndedWindow {
    double begin_s, end_s;
  };
  void remember_ended_locked(double begin_s, double end_s);
  void repin_locked(double now_s);
  Measurement compute(const std::string& name, double begin_s, double end_s, bool end_just_noted = false) const;

  std::shared_ptr<const Clock> clock_;
  std::function<void()> synchronize_;
  Sampler sampler_;
  mutable std::mutex mutex_;
  std::vector<OpenWindow> open_;  // few at a time: a vector beats a map
  // Windows that ended within history_s: their history stays pinned so that
  // settle() and refresh() still find their beginning, however long they ran.
  // Only the oldest beginning matters, so this is a sliding-window minimum:
  // in order of end, beginnings rising, each kept only while no window that
  // ends later began before it. The front is the oldest beginning to keep;
  // each window is pushed and popped once, so a window costs the same after
  // a million others as after none (a full scan cost ~75 us at 50,000).
  std::deque<EndedWindow> recently_ended_;
  // The sampler's history length, copied once: reading it through
  // sampler_.options() at every window's end touched one more cold line.
  const double history_s_;
  // What compute() asks the sampler for, kept between windows so that a
  // window allocates only what its Measurement keeps. Its own lock: windows
  // end on several threads at once, and the sampler's answer is read after
  // the sampler's lock is released.
  mutable std::mutex estimates_mutex_;
  mutable std::vector<EnergyEstimate> gpu_estimates_, zone_estimates_;
  // What the sampler was last told to keep history from (infinity: nothing).
  static constexpr double kRepinStepS = 0.5;
  double pinned_since_s_ = std::numeric_limits<double>::infinity();
};

}  // namespace joule
