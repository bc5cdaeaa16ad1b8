// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// One background thread that samples every device and keeps what the Monitor
// needs to answer "how much energy between t0 and t1" without touching a slow
// driver call on the caller's thread.
//
// Energy model, per GPU, by the best source the device has:
//  * power samples (GpuEnergyMethod::kPowerSamples): the driver's own buffer
//    of timestamped samples (about every 20 ms on an H100), each taken as the
//    mean power since the previous one and integrated as steps. Read every
//    0.2 s while a window is open, every second otherwise, and at once when a
//    caller waits for a window's settled value: no lag. Where the GPU's
//    energy counter steps on a regular grid, windows are also pinned to the
//    counter's steps near their edges (counter_anchors.h): the counter's
//    change, plus the samples over the few tens of ms from each step to its
//    edge. A window settles once those reads and samples are in, ~0.1 s after
//    it ends on an H100 (~25 ms with samples alone).
//  * power readings (kPowerReadings): one power reading per tick (power
//    usage, or the instantaneous field), integrated with trapezoids. On an
//    H100 power usage is a trailing one-second mean, so energy is attributed
//    up to ~0.5 s late: the fallback where a driver keeps no samples. Where
//    the counter itself advances every millisecond or so and is cheap to read
//    (ROCm SMI's: Gpu::energy_counter_timing), windows are instead read off
//    the counter right after each edge (counter_anchors.h), and settle a few
//    ms after they end.
// Either way the GPU's energy counter, read every 5 s (a call costs ~4 ms of
// CPU on an H100), also calibrates the integral: a least-squares slope of counter
// energy against the integral over the last minute scales it. CPU zones
// (RAPL) are cheap counters: read every tick, unwrapped, interpolated.
// docs/measurement.md gives the reasoning, the error model and the figures.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "joule/clock.h"
#include "joule/device/cpu_energy.h"
#include "joule/device/gpu.h"
#include "joule/measure/counter_anchors.h"
#include "joule/measure/timeline.h"

namespace joule {

// Optional GPU readings beside power; each costs a driver call per tick.
struct SampledFields {
  bool utilization = false;
  bool sm_clock = false;
  bool temperature = false;
  bool memory_used = false;
  bool power_cap = false;  // whether the power cap holds the clocks (Gpu::at_power_cap)
};

// How a GPU's energy is obtained (see the top of this file).
enum class GpuEnergyMethod { kPowerSamples, kPowerReadings };
const char* to_string(GpuEnergyMethod method);

// The sampling interval as users give it, in milliseconds (--interval-ms,
// Python's and the C interface's interval_ms): its range and the one
// conversion to SamplerOptions::interval_s, a UsageError naming `name` and
// the range when outside it.
inline constexpr double kMinSamplingIntervalMs = 0.5, kMaxSamplingIntervalMs = 3'600'000.0;
double sampling_interval_s(double interval_ms, const std::string& name = "interval_ms");

struct SamplerOptions {
  double interval_s = 0.1;            // 10 Hz; anything from 0.0005 (2 kHz) up to an hour
  // Time between two energy-counter reads, taken round robin over the GPUs:
  // a read costs ~4 ms of CPU on an H100, so the budget is shared, not per
  // GPU (with N GPUs each is read every N intervals). The counter only
  // calibrates the power integral, which needs few points. <= 0: never read.
  double counter_interval_s = 5.0;
  double calibration_span_s = 60.0;   // counter history used for the scale
  double min_calibration_span_s = 30.0;  // counter staleness (<= one step: ~100 ms on an H100) averages out by then
  double history_s = 30.0;            // energy history kept beyond the oldest pinned time
  // How often the driver's power-sample buffers are read (at ticks; and at
  // once for a caller that waits for a settled value): while a window is
  // open, and when none is. Both must stay well under the buffer's reach
  // (120 samples of 20 ms on an H100: 2.4 s). A read costs ~0.5 ms of CPU
  // there, so 10 Hz costs ~0.5% of a core per GPU, 1 Hz ~0.05%. 5 Hz while
  // open: end_window's immediate value carries the last power over at most
  // 0.2 s; settled values do not depend on it.
  double power_samples_drain_open_s = 0.2;
  double power_samples_drain_s = 1.0;
  // Windows on GPUs with power samples and an energy counter are pinned to the
  // counter's steps near their edges (counter_anchors.h); reads are rationed.
  CounterAnchorOptions counter_anchors;
  // false: integrate one power reading per tick even where the driver keeps
  // samples (the method of joule 0.1; for comparisons).
  bool use_power_samples = true;
  std::size_t timeline_capacity = 1'000'000;
  SampledFields fields;
  // false: no thread; the owner calls sample_now() (virtual clocks, tests).
  bool background_thread = true;
  // A driver call (power, samples, counter; the anchor reads too) that has
  // not returned after this long is hung: the windows that need its data
  // say so, settle() gives up on it at its own timeout, and stop() leaves
  // the threads blocked in it behind (each ends when its call returns)
  // rather than wait forever. Calls take milliseconds (an H100's counter
  // read ~4 ms), so seconds mean a wedged driver, not a slow one.
  double driver_call_timeout_s = 2.0;
};

// The method a sampler with these options uses for gpu, and why, in words
// (for `joule info`).
GpuEnergyMethod energy_method_for(const Gpu& gpu, const SamplerOptions& options);
std::string explain_energy_method(const Gpu& gpu, const SamplerOptions& options);

// Energy of one device over an interval, and how it was obtained.
struct EnergyEstimate {
  double energy_j = 0.0;
  double scale = 1.0;               // counter calibration applied (1: none)
  GpuEnergyMethod method = GpuEnergyMethod::kPowerReadings;  // GPUs only
  // The sampler held data past the interval's end: the value will not
  // change. Otherwise the last power was carried forward to the end.
  bool settled = false;
  // The value is the counter's change between steps near the edges, plus
  // the power integral between each step and its edge (GPUs only).
  bool counter_anchored = false;
  // How far the data must reach for the value to be final (>= the end).
  double needs_data_until_s = 0.0;
  std::optional<std::string> problem;  // device failed, or history no longer held
};

struct SamplerStats {
  uint64_t ticks = 0;
  uint64_t counter_reads = 0;
  uint64_t sample_drains = 0;   // power-sample buffer reads, all GPUs
  uint64_t sample_gaps = 0;     // times the buffer had overflowed between drains
  CounterAnchors::Stats anchors;  // counter reads for window anchors, and their thread's CPU
  double thread_cpu_s = 0.0;  // CPU time of the sampling thread
  double running_s = 0.0;     // wall time since start()
  // stop() gave up on a thread blocked in a driver call (left behind).
  bool left_hung_thread = false;
};

namespace detail {
class SamplerCore;  // src/measure/sampler_core.h
}  // namespace detail

// A GPU's power data as the driver gave it, for fits finer than a window
// (attribution/): the mean power over (begin_s, end_s] (a buffered sample,
// the mean since the one before), or, when begin_s == end_s, the power at that
// instant (a per-tick reading). Calibrated like the windows' integral.
struct ObservedPower {
  double begin_s = 0.0;
  double end_s = 0.0;
  double power_w = 0.0;
};

class Sampler {
 public:
  Sampler(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
          std::shared_ptr<const Clock> clock, SamplerOptions options = {});
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Takes a first sample synchronously, then (background_thread) starts the
  // thread. Throws UsageError for bad options.
  void start();
  // Takes a last sample and joins the threads. Idempotent. Bounded: a
  // thread blocked in a hung driver call (driver_call_timeout_s) is left
  // behind; the devices without data up to the stop are then marked failed
  // there, so every window says what is missing.
  void stop();
  // One tick: reads every device once, and does the counter reads for
  // anchors that are due. For owners without a thread.
  void sample_now();

  EnergyEstimate gpu_energy(std::size_t gpu, double begin_s, double end_s) const;
  EnergyEstimate cpu_energy(std::size_t zone, double begin_s, double end_s) const;
  // Every GPU's and zone's energy over one interval, under one lock (what a
  // window's end needs, in the order of gpus() and cpu_zones()).
  // end_just_noted: end_s was noted as a window edge a moment ago
  // (Monitor::end_window), so while every GPU's anchors for it are still to
  // be read, the values are the sample integrals, unsettled, and the anchors
  // are not looked up (a third of a window's cost on 8 GPUs).
  void energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted = false) const;
  // The GPU's power data within [begin_s, end_s], oldest first (samples
  // whose whole span lies inside; readings at instants inside). Empty where
  // the history was dropped.
  std::vector<ObservedPower> observed_power(std::size_t gpu, double begin_s, double end_s) const;
  // The calibration currently applied to a GPU's power integral.
  double gpu_scale(std::size_t gpu) const;
  GpuEnergyMethod gpu_method(std::size_t gpu) const;
  // The method in words, e.g. "driver power samples every 20 ms, counter-calibrated".
  std::string gpu_method_description(std::size_t gpu) const;

  // The time up to which every working device's energy is known from data
  // (not carried forward); +infinity when there is no device.
  double covered_until_s() const;
  // Waits up to timeout_s until the energy of [begin_s, end_s] is final on
  // every device: data past its end (the sampling thread reads the power-
  // sample buffers as soon as the drivers have it), and the counter anchors
  // of its edges read (or known not to come). True when final. Without a
  // thread (virtual clocks) it only registers the wish: the first
  // sample_now() past the time needed reads the buffers.
  bool wait_settled(double begin_s, double end_s, double timeout_s);

  // A window edge at time_s (Monitor calls it at begin_window and end_window):
  // the anchors for it are read. Cheap: a short lock, no driver call.
  void note_window_edge(double time_s);
  // Starts finding the energy counters' step grids now rather than at the
  // first window edge (CounterAnchors::prepare): what a Monitor does.
  void prepare_counter_anchors();
  // Without a thread: does the counter reads for anchors that are due now.
  // Call it every millisecond or so of the clock (see counter_anchors.h).
  void poll_counter_anchors();

  // While on (counted: each on wants its own off), every GPU whose windows
  // are anchored to its counter's step grid has the counter read once a step
  // (CounterAnchors::read_every_step): ~10 reads a second, ~4% of a core on
  // an H100. counter_values gives the values read within a span, in time
  // order (empty for a GPU not anchored): an attribution's counter
  // increments (attribution/window.h).
  void read_counter_every_step(bool on);
  std::vector<CounterAnchor> counter_values(std::size_t gpu, double begin_s, double end_s) const;

  // Keep energy history from since_s on (the oldest open window's start);
  // +infinity releases the pin.
  void pin_history(double since_s);

  Timeline& timeline();
  const Timeline& timeline() const;
  SamplerStats stats() const;
  const std::vector<std::shared_ptr<Gpu>>& gpus() const;
  const std::vector<std::shared_ptr<CpuEnergyZone>>& cpu_zones() const;
  const SamplerOptions& options() const;
  const Clock& clock() const;
  // The same clock, shared: for what records on it (attribution's regions).
  std::shared_ptr<const Clock> shared_clock() const;

 private:
  // Everything the threads touch lives in the core, which each thread
  // holds a share of: a thread left blocked in a hung driver call by stop()
  // keeps it alive until the call returns, after the Sampler is gone.
  std::shared_ptr<detail::SamplerCore> core_;
};

}  // namespace joule
