// One background thread that samples every device at a fixed rate and keeps
// what the Monitor needs to answer "how much energy between t0 and t1" without
// touching a slow driver call on the caller's thread.
//
// Energy model, per GPU: power samples are integrated (trapezoids) into a
// running integral I(t). The GPU's energy counter, where present, is read far
// less often (a call costs ~4 ms of CPU on an H100 and the value only steps
// every ~100 ms) and used to calibrate: a least-squares slope of counter
// energy against I over the last minute scales the integral, so the counter
// sets the absolute level while the power samples give the time resolution.
// Without a counter (pre-Volta) or before 30 s of counter history, the scale
// is 1. docs/measurement.md gives the reasoning and the measured accuracy.
// CPU zones (RAPL) are cheap counters: read every tick, unwrapped, and
// interpolated linearly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "joule/clock.h"
#include "joule/device/cpu_energy.h"
#include "joule/device/gpu.h"
#include "joule/measure/timeline.h"

namespace joule {

// Optional GPU readings beside power; each costs a driver call per tick.
struct SampledFields {
  bool utilization = false;
  bool sm_clock = false;
  bool temperature = false;
  bool memory_used = false;
};

struct SamplerOptions {
  double interval_s = 0.1;            // 10 Hz; anything from 0.001 (1 kHz) up
  // Time between two energy-counter reads, taken round robin over the GPUs:
  // a read costs ~4 ms of CPU on an H100, so the budget is shared, not per
  // GPU (with N GPUs each is read every N intervals). The counter only
  // calibrates the power integral, which needs few points. <= 0: never read.
  double counter_interval_s = 5.0;
  double calibration_span_s = 60.0;   // counter history used for the scale
  double min_calibration_span_s = 30.0;  // counter staleness (<= 100 ms) averages out by then
  double history_s = 30.0;            // energy history kept beyond the oldest pinned time
  std::size_t timeline_capacity = 1'000'000;
  SampledFields fields;
  // false: no thread; the owner calls sample_now() (virtual clocks, tests).
  bool background_thread = true;
};

// Energy of one device over an interval, and how it was obtained.
struct EnergyEstimate {
  double energy_j = 0.0;
  double scale = 1.0;               // counter calibration applied (1: none)
  std::optional<std::string> problem;  // set when the device failed inside the interval
};

struct SamplerStats {
  uint64_t ticks = 0;
  uint64_t counter_reads = 0;
  double thread_cpu_s = 0.0;  // CPU time of the sampling thread
  double running_s = 0.0;     // wall time since start()
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
  // Takes a last sample and joins the thread. Idempotent.
  void stop();
  // One tick: reads every device once. For owners without a thread.
  void sample_now();

  EnergyEstimate gpu_energy(std::size_t gpu, double begin_s, double end_s) const;
  EnergyEstimate cpu_energy(std::size_t zone, double begin_s, double end_s) const;
  // The calibration currently applied to a GPU's power integral.
  double gpu_scale(std::size_t gpu) const;

  // Keep energy history from since_s on (the oldest open window's start);
  // +infinity releases the pin.
  void pin_history(double since_s);

  Timeline& timeline() { return timeline_; }
  const Timeline& timeline() const { return timeline_; }
  SamplerStats stats() const;
  const std::vector<std::shared_ptr<Gpu>>& gpus() const { return gpus_; }
  const std::vector<std::shared_ptr<CpuEnergyZone>>& cpu_zones() const { return cpu_zones_; }
  const SamplerOptions& options() const { return options_; }
  const Clock& clock() const { return *clock_; }

 private:
  struct PowerPoint {
    double time_s;
    double power_w;
    double integral_j;  // integral of power from the first sample to time_s
  };
  struct CounterPoint {
    double integral_j;  // power integral at the moment of the read
    double counter_j;
    double time_s;
  };
  // What readers (end_window) see; guarded by mutex_.
  struct GpuTrack {
    std::deque<PowerPoint> points;
    std::deque<CounterPoint> counters;
    double scale = 1.0;
    std::optional<std::string> failure;
    double failed_at_s = 0.0;
  };
  // What only the sampling side touches; guarded by tick_mutex_.
  struct GpuReader {
    SampledFields fields;  // what still works for this GPU
    bool counter_usable = false;
    std::optional<std::string> failure;
    double failed_at_s = 0.0;
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

  void run();
  void read_gpu(std::size_t i);
  void read_counter(std::size_t i);
  void sample_cpu(std::size_t i);
  void trim_locked(double now_s);
  static double integral_at(const std::deque<PowerPoint>& points, double time_s);
  void recalibrate_locked(GpuTrack& track) const;

  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones_;
  std::shared_ptr<const Clock> clock_;
  SamplerOptions options_;
  Timeline timeline_;

  mutable std::mutex mutex_;  // guards the tracks
  std::vector<GpuTrack> gpu_tracks_;
  std::vector<GpuReader> gpu_readers_;
  std::vector<TimelineSample> batch_;  // this tick's GPU samples
  std::vector<CpuTrack> cpu_tracks_;
  std::size_t next_counter_gpu_ = 0;
  double next_counter_due_s_ = -1e300;
  std::atomic<double> pinned_since_s_;

  std::mutex tick_mutex_;  // one tick at a time (thread, stop(), owners)
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;
  bool started_ = false;
  std::thread thread_;
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint64_t> counter_reads_{0};
  std::atomic<double> thread_cpu_s_{0.0};
  double started_at_s_ = 0.0;
};

}  // namespace joule
