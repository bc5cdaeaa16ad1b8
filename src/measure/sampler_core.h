// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The Sampler's state and its threads' work (private to src/measure). The
// Sampler (sampler.h) is a handle that forwards every public call here; its
// header documents them, so the public part below names each only.
// The work is in three files, one concern each:
//   sampler_core.cc   the lifecycle: start, the sampling thread's schedule,
//                     stop (bounded, with hung driver calls), waiting for
//                     a window to settle;
//   sampler_reads.cc  a tick: the driver reads, publishing them into the
//                     tracks, counter calibration, trimming the history;
//   window_energy.cc  the queries: a window's energy per device from the
//                     tracks and the counter anchors, and what it covers.
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
#include <utility>
#include <vector>

#include "joule/measure/sampler.h"
#include "power_history.h"

namespace joule::detail {

// "driver power samples every 20 ms", or without the period when unknown.
std::string sample_period_words(double period_s);

class SamplerCore : public std::enable_shared_from_this<SamplerCore> {
 public:
  SamplerCore(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
              std::shared_ptr<const Clock> clock, SamplerOptions options);
  ~SamplerCore();
  SamplerCore(const SamplerCore&) = delete;
  SamplerCore& operator=(const SamplerCore&) = delete;

  // As Sampler's (sampler.h).
  void start();
  void stop();
  void sample_now();
  EnergyEstimate gpu_energy(std::size_t gpu, double begin_s, double end_s) const;
  std::vector<ObservedPower> observed_power(std::size_t gpu, double begin_s, double end_s) const;
  EnergyEstimate cpu_energy(std::size_t zone, double begin_s, double end_s) const;
  void energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted = false) const;
  double gpu_scale(std::size_t gpu) const;
  GpuEnergyMethod gpu_method(std::size_t gpu) const;
  std::string gpu_method_description(std::size_t gpu) const;
  double covered_until_s() const;
  bool wait_settled(double begin_s, double end_s, double timeout_s);
  void note_window_edge(double time_s);
  void prepare_counter_anchors() {
    if (anchors_) anchors_->prepare();
  }
  void poll_counter_anchors();
  void read_counter_every_step(bool on) {
    if (anchors_) anchors_->read_every_step(on);
  }
  std::vector<CounterAnchor> counter_values(std::size_t gpu, double begin_s, double end_s) const;
  void pin_history(double since_s);
  Timeline& timeline() { return timeline_; }
  const Timeline& timeline() const { return timeline_; }
  SamplerStats stats() const;
  const std::vector<std::shared_ptr<Gpu>>& gpus() const { return gpus_; }
  const std::vector<std::shared_ptr<CpuEnergyZone>>& cpu_zones() const { return cpu_zones_; }
  const SamplerOptions& options() const { return options_; }
  const Clock& clock() const { return *clock_; }
  const std::shared_ptr<const Clock>& shared_clock() const { return clock_; }

 private:
  // What readers (end_window) see; guarded by mutex_.
  struct GpuTrack {
    // What every window reads comes first, within a few cache lines: a
    // thread that slept between windows finds them cold.
    PowerPoints points;
    double scale = 1.0;
    bool trimmed = false;  // points older than the front were dropped
    GpuEnergyMethod method = GpuEnergyMethod::kPowerReadings;
    double failed_at_s = 0.0;
    std::optional<std::string> failure;
    std::deque<CounterPoint> counters;          // paired with the integral
    std::deque<CounterPoint> pending_counters;  // read, but the data does not reach them yet
    std::optional<std::string> method_note;  // e.g. why samples stopped being used
    std::optional<std::string> counter_note;  // why the counter no longer calibrates
  };
  // A point read this tick, published under one lock with the others.
  struct NewPoint {
    std::size_t gpu;
    double time_s;
    double power_w;
    Segment segment;
  };
  // What only the sampling side touches; guarded by tick_mutex_.
  struct GpuReader {
    SampledFields fields;  // what still works for this GPU
    bool counter_usable = false;
    GpuEnergyMethod method = GpuEnergyMethod::kPowerReadings;
    std::optional<std::string> method_note;
    std::optional<std::string> failure;
    double failed_at_s = 0.0;
    double last_sample_s = -std::numeric_limits<double>::infinity();
  };
  struct CpuPoint {
    double time_s;
    double energy_j;  // unwrapped since the first sample
  };
  struct CpuTrack {
    std::deque<CpuPoint> points;
    uint64_t last_raw_uj = 0;
    std::optional<std::string> failure;
    double failed_at_s = 0.0;
  };
  // The driver call the sampling side is in now (its thread; without one,
  // the owner's tick): when it began (+infinity: none), on which GPU and
  // what it reads, so that readers tell a hung call without waiting on it.
  // Atomics: set around every call, read by end_window without a lock.
  struct InFlight {
    std::atomic<double> since_s{std::numeric_limits<double>::infinity()};
    std::atomic<std::size_t> gpu{0};
    std::atomic<const char*> what{""};
  };
  struct HungCall {
    std::size_t gpu;
    const char* what;
    double since_s;
    double for_s;
  };

  // --- sampler_core.cc: the lifecycle ---
  void run();
  // The last ticks at a stop: one, then (power samples, real clocks) more
  // until the samples reach the stop time, boundedly.
  void last_ticks();
  // The longest the last ticks may take, hung calls aside.
  double last_ticks_bound_s() const;
  // stop() gave up on the thread: every device without data up to stop_s
  // is marked failed where its data ends, naming the hung call.
  void mark_left_behind(double stop_s);
  // Without a thread: forgets covered wishes; true when one is past due.
  bool manual_wish_due(double now_s);
  // Over sampled_gpus_; their drivers may learn the spacing at the first reads.
  double longest_sample_period_s() const;
  // When the thread should next drain for a waiting caller (+inf: nobody waits).
  double coverage_wake_s_locked() const;

  // --- sampler_reads.cc: a tick ---
  // One tick; drain_samples forces a read of the power-sample buffers.
  void tick(bool drain_samples);
  // Runs fn (a driver call on gpu) marked in flight.
  template <typename Fn>
  auto driver_call(std::size_t gpu, const char* what, double now_s, Fn&& fn);
  // The call in flight when it has lasted past driver_call_timeout_s.
  std::optional<HungCall> hung_call() const;
  // A device's problem while the sampling side is blocked in hung (its data
  // ends at covered_s).
  std::string hung_problem(const std::string& label, std::size_t gpu, const HungCall& hung, double covered_s) const;
  void read_gpu(std::size_t i);
  void drain_power_samples(std::size_t i);
  void read_counter(std::size_t i);
  void sample_cpu(std::size_t i);
  void publish_locked();
  void pair_counters_locked(GpuTrack& track);
  void trim_locked(double now_s);

  // --- window_energy.cc: the queries ---
  // A GPU's energy at an edge on the counter's scale, from the anchors
  // around it, and which anchors that used.
  struct AnchoredEnergy {
    double counter_j = 0.0;
    double needs_data_until_s = 0.0;
    std::pair<double, double> anchors_used;
    bool trusted = true;  // false: the anchors disagree with the samples; use neither
  };
  AnchoredEnergy anchored_energy(const GpuTrack& track, const CounterAnchors::Lookup& anchors, double time_s) const;
  // integral_at times the GPU's counter calibration.
  static double scaled_integral_j(const GpuTrack& track, double time_s) {
    return track.scale * integral_at(track.points, time_s);
  }
  double covered_until_locked() const;
  using AnchorLookups = std::pair<CounterAnchors::Lookup, CounterAnchors::Lookup>;
  EnergyEstimate gpu_energy_locked(std::size_t gpu, double begin_s, double end_s, const AnchorLookups* anchors,
                                   const std::optional<HungCall>& hung) const;
  EnergyEstimate cpu_energy_locked(std::size_t zone, double begin_s, double end_s,
                                   const std::optional<HungCall>& hung) const;

  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones_;
  std::shared_ptr<const Clock> clock_;
  SamplerOptions options_;
  Timeline timeline_;

  mutable std::mutex mutex_;  // guards the tracks
  std::vector<GpuTrack> gpu_tracks_;
  std::vector<GpuReader> gpu_readers_;
  std::vector<std::size_t> sampled_gpus_;  // GPUs that started on power samples
  std::vector<TimelineSample> batch_;  // this tick's timeline samples
  std::vector<NewPoint> new_points_;   // this tick's energy points
  std::vector<PowerSample> drained_;   // scratch for one buffer read
  std::vector<CpuTrack> cpu_tracks_;
  std::unique_ptr<CounterAnchors> anchors_;  // null: no GPU is anchored
  InFlight in_flight_;
  std::condition_variable thread_done_;  // run() returned (wake_mutex_)
  bool thread_done_flag_ = false;
  std::atomic<bool> left_hung_thread_{false};
  mutable std::vector<AnchorLookups> anchor_lookups_;  // scratch, under mutex_
  std::size_t next_counter_gpu_ = 0;
  double next_counter_due_s_ = -1e300;
  double last_drain_s_ = -1e300;
  std::atomic<double> pinned_since_s_;

  std::mutex tick_mutex_;  // one tick at a time (thread, stop(), owners)
  std::mutex wake_mutex_;  // guards stop_requested_ and coverage_wanted_
  std::condition_variable wake_;
  std::condition_variable covered_;  // notified after every tick
  std::multiset<double> coverage_wanted_;  // times callers wait to see covered
  double last_coverage_tick_s_ = -1e300;
  bool stop_requested_ = false;
  bool stopped_ = false;
  bool started_ = false;
  std::thread thread_;
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint64_t> counter_reads_{0};
  std::atomic<uint64_t> sample_drains_{0};
  std::atomic<uint64_t> sample_gaps_{0};
  std::atomic<double> thread_cpu_s_{0.0};
  double started_at_s_ = 0.0;
};

}  // namespace joule::detail
