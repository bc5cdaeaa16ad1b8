// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/measure/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "joule/error.h"

namespace joule {

namespace {

std::string sample_period_words(double period_s) {
  return period_s > 0 ? fmt::format("driver power samples every {:.0f} ms", 1e3 * period_s)
                      : std::string("driver power samples");
}

constexpr double kMinScale = 0.5;  // a calibration outside these bounds means
constexpr double kMaxScale = 2.0;  // broken readings, not a biased sensor

std::vector<std::string> timeline_names(const std::vector<std::shared_ptr<Gpu>>& gpus,
                                        const std::vector<std::shared_ptr<CpuEnergyZone>>& zones) {
  std::vector<std::string> names;
  for (const auto& gpu : gpus) names.push_back(fmt::format("gpu{}", gpu->index()));
  for (const auto& zone : zones) {
    names.push_back(fmt::format("cpu{}-{}", zone->package_index(),
                                zone->domain() == CpuDomain::kPackage ? "package" : "dram"));
  }
  return names;
}

// The first point after time_s (upper_bound), searched from the newest
// point back in doubling steps: window edges are mostly recent, and a
// binary search over the whole history (1,500 points at 20 ms) touches a
// cache line per halving, cold when the caller slept between windows.
template <typename Points>
typename Points::const_iterator first_point_after(const Points& points, double time_s) {
  std::size_t low = 0;                // points before low are at or before time_s
  std::size_t high = points.size();  // points from high on are after it
  for (std::size_t step = 1; high > low; step *= 2) {
    const std::size_t probe = high > step ? high - step : 0;
    if (points[probe].time_s <= time_s) {
      low = probe + 1;
      break;
    }
    high = probe;
  }
  using Point = typename Points::value_type;
  return std::upper_bound(points.begin() + static_cast<std::ptrdiff_t>(low),
                          points.begin() + static_cast<std::ptrdiff_t>(high), time_s,
                          [](double t, const Point& p) { return t < p.time_s; });
}

}  // namespace

const char* to_string(GpuEnergyMethod method) {
  switch (method) {
    case GpuEnergyMethod::kPowerSamples: return "power-samples";
    case GpuEnergyMethod::kPowerReadings: return "power-readings";
  }
  return "unknown";
}

GpuEnergyMethod energy_method_for(const Gpu& gpu, const SamplerOptions& options) {
  return options.use_power_samples && gpu.has_power_samples() ? GpuEnergyMethod::kPowerSamples
                                                              : GpuEnergyMethod::kPowerReadings;
}

std::string explain_energy_method(const Gpu& gpu, const SamplerOptions& options) {
  std::string text =
      energy_method_for(gpu, options) == GpuEnergyMethod::kPowerSamples
          ? sample_period_words(gpu.power_sample_period_s()) +
                ", integrated (no lag; a window's value settles once the data covering its end is in)"
          : fmt::format("{} read every {:.0f} ms, integrated{}", gpu.power_reading_source(),
                        1e3 * options.interval_s,
                        gpu.power_reading_source() == "power usage"
                            ? " (the driver keeps no power samples; if power usage is a trailing mean, as on "
                              "Hopper, short windows across load changes are attributed late)"
                            : "");
  text += gpu.has_energy_counter() ? "; calibrated by the energy counter" : "; no energy counter to calibrate";
  if (energy_method_for(gpu, options) == GpuEnergyMethod::kPowerSamples && gpu.has_energy_counter() &&
      options.counter_interval_s > 0 && options.counter_anchors.enabled) {
    text += fmt::format("; windows pinned to the counter's steps around their edges where it steps regularly "
                        "(found at the first window; up to {:g} counter reads/s)",
                        options.counter_anchors.reads_per_s);
  } else if (gpu.has_energy_counter() && options.counter_interval_s > 0 && options.counter_anchors.enabled &&
             CounterAnchors::reads_at_edges(gpu.energy_counter_timing())) {
    text += fmt::format("; windows anchored on counter reads right after their edges where the counter moves "
                        "every few ms (measured at the first window; up to {:g} edges/s)",
                        options.counter_anchors.reads_per_s);
  }
  return text;
}

namespace detail {

// The Sampler's state and its threads' work (the class comment is
// Sampler's, in the header). Its threads hold a share of it.
class SamplerCore : public std::enable_shared_from_this<SamplerCore> {
 public:
  SamplerCore(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
              std::shared_ptr<const Clock> clock, SamplerOptions options);
  ~SamplerCore();
  SamplerCore(const SamplerCore&) = delete;
  SamplerCore& operator=(const SamplerCore&) = delete;

  // Takes a first sample synchronously, then (background_thread) starts the
  // thread. Throws UsageError for bad options.
  void start();
  // Takes a last sample and joins the thread. Idempotent.
  void stop();
  // One tick: reads every device once, and does the counter reads for
  // anchors that are due. For owners without a thread.
  void sample_now();

  EnergyEstimate gpu_energy(std::size_t gpu, double begin_s, double end_s) const;
  std::vector<ObservedPower> observed_power(std::size_t gpu, double begin_s, double end_s) const;
  EnergyEstimate cpu_energy(std::size_t zone, double begin_s, double end_s) const;
  // Every GPU's and zone's energy over one interval, under one lock (what a
  // window's end needs, in the order of gpus() and cpu_zones()).
  // end_just_noted: end_s was noted as a window edge a moment ago
  // (Monitor::end_window), so while every GPU's anchors for it are still to
  // be read, the values are the sample integrals, unsettled, and the anchors
  // are not looked up (a third of a window's cost on 8 GPUs).
  void energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted = false) const;
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
  void prepare_counter_anchors() {
    if (anchors_) anchors_->prepare();
  }
  // Without a thread: does the counter reads for anchors that are due now.
  // Call it every millisecond or so of the clock (see counter_anchors.h).
  void poll_counter_anchors();

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
  const std::shared_ptr<const Clock>& shared_clock() const { return clock_; }

  bool left_hung_thread() const { return left_hung_thread_.load(); }

 private:
  // How power runs over the segment that ends at a point.
  enum class Segment : uint8_t {
    kLinear,  // between two readings (power readings)
    kStep,    // the point's power throughout (a power sample is the mean since the previous one)
  };
  struct PowerPoint {
    double time_s;
    double power_w;
    double integral_j;  // integral of power from the first point to time_s
    Segment segment;
  };
  struct CounterPoint {
    double time_s;
    double counter_j;
    double integral_j;  // power integral at time_s, filled once the data covers it
  };
  // What readers (end_window) see; guarded by mutex_.
  struct GpuTrack {
    // What every window reads comes first, within a few cache lines: a
    // thread that slept between windows finds them cold.
    std::deque<PowerPoint> points;
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

  // A GPU's energy at an edge on the counter's scale, from the anchors
  // around it, and which anchors that used.
  struct AnchoredEnergy {
    double counter_j = 0.0;
    double needs_data_until_s = 0.0;
    std::pair<double, double> anchors_used;
    bool trusted = true;  // false: the anchors disagree with the samples; use neither
  };
  AnchoredEnergy anchored_energy(const GpuTrack& track, const CounterAnchors::Lookup& anchors, double time_s) const;
  // Largest minus smallest power among the points that cover [from_s, to_s].
  static double power_range_w(const std::deque<PowerPoint>& points, double from_s, double to_s);

  void run();
  // The last ticks at a stop: one, then (power samples, real clocks) more
  // until the samples reach the stop time, boundedly.
  void last_ticks();
  // The longest the last ticks may take, hung calls aside.
  double last_ticks_bound_s() const;
  // stop() gave up on the thread: every device without data up to stop_s
  // is marked failed where its data ends, naming the hung call.
  void mark_left_behind(double stop_s);

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
  // Runs fn (a driver call on gpu) marked in flight.
  template <typename Fn>
  auto driver_call(std::size_t gpu, const char* what, double now_s, Fn&& fn);
  // The call in flight when it has lasted past driver_call_timeout_s.
  std::optional<HungCall> hung_call() const;
  // A device's problem while the sampling side is blocked in hung (its data
  // ends at covered_s).
  std::string hung_problem(const std::string& label, std::size_t gpu, const HungCall& hung, double covered_s) const;
  // One tick; drain_samples forces a read of the power-sample buffers.
  void tick(bool drain_samples);
  void read_gpu(std::size_t i);
  void drain_power_samples(std::size_t i);
  void read_counter(std::size_t i);
  void sample_cpu(std::size_t i);
  void publish_locked();
  void pair_counters_locked(GpuTrack& track);
  void trim_locked(double now_s);
  static double integral_at(const std::deque<PowerPoint>& points, double time_s);
  // integral_at times the GPU's counter calibration.
  static double scaled_integral_j(const GpuTrack& track, double time_s);
  void recalibrate_locked(GpuTrack& track) const;
  double covered_until_locked() const;
  using AnchorLookups = std::pair<CounterAnchors::Lookup, CounterAnchors::Lookup>;
  EnergyEstimate gpu_energy_locked(std::size_t gpu, double begin_s, double end_s, const AnchorLookups* anchors,
                                   const std::optional<HungCall>& hung) const;
  EnergyEstimate cpu_energy_locked(std::size_t zone, double begin_s, double end_s,
                                   const std::optional<HungCall>& hung) const;
  // Without a thread: forgets covered wishes; true when one is past due.
  bool manual_wish_due(double now_s);
  // Over sampled_gpus_; their drivers may learn the spacing at the first reads.
  double longest_sample_period_s() const;
  // When the thread should next drain for a waiting caller (+inf: nobody waits).
  double coverage_wake_s_locked() const;

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

}  // namespace detail

using detail::SamplerCore;

SamplerCore::SamplerCore(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
                 std::shared_ptr<const Clock> clock, SamplerOptions options)
    : gpus_(std::move(gpus)),
      cpu_zones_(std::move(cpu_zones)),
      clock_(std::move(clock)),
      options_(options),
      timeline_(timeline_names(gpus_, cpu_zones_), options.timeline_capacity),
      gpu_tracks_(gpus_.size()),
      gpu_readers_(gpus_.size()),
      cpu_tracks_(cpu_zones_.size()),
      pinned_since_s_(std::numeric_limits<double>::infinity()) {
  if (!clock_) throw UsageError("Sampler needs a clock");
  if (!(options_.interval_s * 1000.0 >= kMinSamplingIntervalMs && options_.interval_s * 1000.0 <= kMaxSamplingIntervalMs)) {
    throw UsageError(fmt::format("sampling interval {} s is outside {:g}-{:g} s", options_.interval_s,
                                 kMinSamplingIntervalMs / 1000.0, kMaxSamplingIntervalMs / 1000.0));
  }
  for (const double drain_s : {options_.power_samples_drain_s, options_.power_samples_drain_open_s}) {
    if (!(drain_s >= 0.0 && drain_s <= 60.0)) {
      throw UsageError(fmt::format("power-sample drain interval {} s is outside 0-60 s", drain_s));
    }
  }
  if (options_.background_thread && clock_->is_virtual()) {
    throw UsageError("a sampler on a virtual clock cannot run a background thread; call sample_now()");
  }
  std::vector<bool> anchored(gpus_.size(), false);
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuReader& reader = gpu_readers_[i];
    reader.fields = options_.fields;
    reader.counter_usable = options_.counter_interval_s > 0 && gpus_[i]->has_energy_counter();
    if (energy_method_for(*gpus_[i], options_) == GpuEnergyMethod::kPowerSamples) {
      reader.method = GpuEnergyMethod::kPowerSamples;
      gpu_tracks_[i].method = reader.method;
      sampled_gpus_.push_back(i);
      // Anchoring needs the samples between the steps and the edges.
      anchored[i] = reader.counter_usable && options_.counter_anchors.enabled;
    } else {
      // ... unless the counter is fast and cheap enough to read at the edges.
      anchored[i] = reader.counter_usable && options_.counter_anchors.enabled &&
                    CounterAnchors::reads_at_edges(gpus_[i]->energy_counter_timing());
    }
  }
  if (!(options_.driver_call_timeout_s > 0)) {
    throw UsageError(fmt::format("driver call timeout {} s must be positive", options_.driver_call_timeout_s));
  }
  if (std::find(anchored.begin(), anchored.end(), true) != anchored.end()) {
    CounterAnchorOptions anchor_options = options_.counter_anchors;
    anchor_options.hung_read_s = options_.driver_call_timeout_s;  // one notion of a hung call
    anchors_ = std::make_unique<CounterAnchors>(gpus_, anchored, clock_, anchor_options);
  }
}

SamplerCore::~SamplerCore() {
  try {
    stop();
  } catch (const std::exception&) {
    // A failing timeline stream must not terminate the process from a
    // destructor; stop() called explicitly reports it.
  }
}

void SamplerCore::start() {
  if (started_) return;
  started_ = true;
  started_at_s_ = clock_->now_s();
  tick(true);
  if (!options_.background_thread) return;
  // Each thread holds a share of the core: one that stop() leaves blocked in
  // a hung driver call still has everything it touches when the call returns.
  thread_ = std::thread([self = shared_from_this()] { self->run(); });
  if (anchors_) {
    anchors_->start(
        [this] {
          { std::lock_guard lock(wake_mutex_); }  // a waiter between its check and its wait must not miss this
          covered_.notify_all();
        },
        shared_from_this());
  }
}

void SamplerCore::stop() {
  if (!started_) return;
  {
    std::lock_guard lock(wake_mutex_);
    if (stop_requested_) return;
    stop_requested_ = true;
  }
  wake_.notify_all();
  const double stop_s = clock_->now_s();
  if (!thread_.joinable()) {
    if (anchors_) anchors_->stop();
    last_ticks();  // the owner ticks: no thread, no anchor thread
  } else {
    // The thread takes the last ticks itself (run()), so that a driver call
    // that hangs blocks it, not the caller; the caller waits only so long.
    if (anchors_) anchors_->request_stop();  // winds down meanwhile
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(last_ticks_bound_s() + options_.driver_call_timeout_s);
    bool done = false;
    {
      std::unique_lock lock(wake_mutex_);
      done = thread_done_.wait_until(lock, deadline, [this] { return thread_done_flag_; });
    }
    if (done) {
      thread_.join();
    } else {
      thread_.detach();  // it holds the core; it ends when the call returns
      left_hung_thread_.store(true);
    }
    // A healthy anchor thread ends within a poll and a read; a hung one is
    // waited for only as long as the sampling thread was.
    constexpr double kAnchorWindDownS = 0.25;
    const double anchor_wait_s = std::max(
        kAnchorWindDownS, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count());
    if (anchors_ && !anchors_->stop_within(anchor_wait_s)) left_hung_thread_.store(true);
    if (!done) mark_left_behind(stop_s);
  }
  {
    std::lock_guard lock(wake_mutex_);
    stopped_ = true;
  }
  covered_.notify_all();
  timeline_.flush();
}

double SamplerCore::last_ticks_bound_s() const {
  return sampled_gpus_.empty() || clock_->is_virtual() ? 0.0 : 3 * longest_sample_period_s() + 0.05;
}

void SamplerCore::last_ticks() {
  // A last tick at the stop time bounds every window. Power samples reach it
  // only about one sample period later: wait for them, boundedly.
  const double stop_s = clock_->now_s();
  tick(true);
  const double give_up_s = stop_s + last_ticks_bound_s();
  while (covered_until_s() < stop_s && clock_->now_s() < give_up_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    tick(true);
  }
}

void SamplerCore::mark_left_behind(double stop_s) {
  const std::optional<HungCall> hung = hung_call();
  const std::string why =
      hung ? fmt::format("sampling stopped with a driver call on {} ({}) blocked for {:.1f} s",
                         gpus_[hung->gpu]->label(), hung->what, hung->for_s)
           : std::string("sampling stopped with its thread blocked in a driver call");
  std::lock_guard lock(mutex_);
  for (GpuTrack& track : gpu_tracks_) {
    const double covered_s = track.points.empty() ? started_at_s_ : track.points.back().time_s;
    if (track.failure || covered_s >= stop_s) continue;
    track.failure = why;
    track.failed_at_s = covered_s;
  }
  for (CpuTrack& track : cpu_tracks_) {
    const double covered_s = track.points.empty() ? started_at_s_ : track.points.back().time_s;
    if (track.failure || covered_s >= stop_s) continue;
    track.failure = why;
    track.failed_at_s = covered_s;
  }
}

void SamplerCore::run() {
  // Absolute deadlines keep the rate exact; a tick that overruns skips the
  // deadlines it missed instead of bursting to catch up. Between ticks the
  // thread also wakes to drain power samples for a caller that waits for a
  // window's settled value.
  double next_tick_s = clock_->now_s() + options_.interval_s;
  std::unique_lock lock(wake_mutex_);
  while (!stop_requested_) {
    const double coverage_s = coverage_wake_s_locked();
    const double wait_s = std::min(next_tick_s, coverage_s) - clock_->now_s();
    if (wait_s > 0) {
      // Woken early by stop() or by a new wish; either way, look again.
      wake_.wait_for(lock, std::chrono::duration<double>(wait_s));
      continue;
    }
    const double now_s = clock_->now_s();
    const bool for_coverage = now_s >= coverage_s;
    if (for_coverage) last_coverage_tick_s_ = now_s;
    lock.unlock();
    tick(for_coverage);
    thread_cpu_s_.store(this_thread_cpu_s());
    lock.lock();
    if (now_s >= next_tick_s) {
      next_tick_s += options_.interval_s;
      if (next_tick_s < now_s) next_tick_s = now_s + options_.interval_s;
    }
  }
  lock.unlock();
  last_ticks();
  lock.lock();
  thread_done_flag_ = true;
  thread_done_.notify_all();
}

bool SamplerCore::manual_wish_due(double now_s) {
  std::lock_guard lock(wake_mutex_);
  const double covered_s = covered_until_s();
  coverage_wanted_.erase(coverage_wanted_.begin(), coverage_wanted_.upper_bound(covered_s));
  return !coverage_wanted_.empty() && *coverage_wanted_.begin() <= now_s;
}

double SamplerCore::longest_sample_period_s() const {
  // Drivers learn their spacing from the samples they return, so ask each time.
  double longest_s = 0.0;
  for (const std::size_t i : sampled_gpus_) longest_s = std::max(longest_s, gpus_[i]->power_sample_period_s());
  return longest_s;
}

double SamplerCore::coverage_wake_s_locked() const {
  if (coverage_wanted_.empty()) return std::numeric_limits<double>::infinity();
  const auto first_open = coverage_wanted_.upper_bound(covered_until_s());
  if (first_open == coverage_wanted_.end()) return std::numeric_limits<double>::infinity();
  // The sample that covers t ends within one sample period after t and is
  // readable about a millisecond later (H100); power readings and RAPL
  // counters only need a tick after t. Retries are spaced, so a device that
  // stopped delivering cannot make the thread spin.
  constexpr double kVisibleAfterS = 0.002;
  constexpr double kRetryS = 0.01;
  return std::max(*first_open + longest_sample_period_s() + kVisibleAfterS, last_coverage_tick_s_ + kRetryS);
}

bool SamplerCore::wait_settled(double begin_s, double end_s, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, timeout_s));
  std::vector<EnergyEstimate> gpus, zones;
  // What still lacks, and how far the data must reach: anchors, once read,
  // may move that past the window's end.
  const auto settled_or_needs = [&](double& needs_s) {
    energies(begin_s, end_s, gpus, zones);
    bool settled = true;
    needs_s = end_s;
    for (const auto* estimates : {&gpus, &zones}) {
      for (const EnergyEstimate& e : *estimates) {
        settled = settled && e.settled;
        needs_s = std::max(needs_s, e.needs_data_until_s);
      }
    }
    return settled;
  };
  std::unique_lock lock(wake_mutex_);  // held while checking: a tick or an anchor cannot slip in between
  for (;;) {
    double needs_s = end_s;
    if (settled_or_needs(needs_s)) return true;
    const auto wish = coverage_wanted_.insert(needs_s);
    if (!thread_.joinable()) return false;  // the owner's next ticks drain past needs_s
    wake_.notify_all();  // the thread recomputes when to wake
    const bool timed_out = stopped_ || covered_.wait_until(lock, deadline) == std::cv_status::timeout;
    coverage_wanted_.erase(wish);
    if (timed_out) return settled_or_needs(needs_s);
  }
}

void SamplerCore::note_window_edge(double time_s) {
  if (anchors_) anchors_->note_edge(time_s);
}

void SamplerCore::poll_counter_anchors() {
  if (anchors_) anchors_->poll();
}

void SamplerCore::sample_now() {
  tick(false);
  // Anchors too, when no thread reads them; ticks far apart find no counter
  // steps (they need reads a few ms apart), so such owners get none.
  if (anchors_ && !thread_.joinable()) anchors_->poll();
}

void SamplerCore::tick(bool drain_samples) {
  std::lock_guard tick_lock(tick_mutex_);
  // Device calls happen without the track lock; results are then published
  // under one lock per tick, so readers (end_window) wait at most for that.
  batch_.clear();
  new_points_.clear();
  const double now_s = clock_->now_s();
  // Often while a window is open, so that end_window's immediate value
  // carries the last power forward briefly; rarely otherwise. Half a tick of
  // slack keeps a schedule of whole ticks from slipping by one.
  const double drain_every_s = std::isfinite(pinned_since_s_.load()) ? options_.power_samples_drain_open_s
                                                                     : options_.power_samples_drain_s;
  if (now_s >= last_drain_s_ + drain_every_s - 0.5 * options_.interval_s) drain_samples = true;
  if (!thread_.joinable()) drain_samples = drain_samples || manual_wish_due(now_s);
  if (drain_samples) last_drain_s_ = now_s;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    read_gpu(i);
    const GpuReader& reader = gpu_readers_[i];
    if (drain_samples && reader.method == GpuEnergyMethod::kPowerSamples && !reader.failure) drain_power_samples(i);
  }
  {
    std::lock_guard lock(mutex_);
    publish_locked();
  }
  timeline_.add(batch_);
  for (std::size_t i = 0; i < cpu_zones_.size(); ++i) sample_cpu(i);

  // At most one energy-counter read per counter interval, round robin over
  // the GPUs: each read costs milliseconds of CPU and delays this thread.
  // A fixed schedule (due += interval) keeps the average rate even when ticks
  // land just before a due time.
  if (options_.counter_interval_s > 0 && now_s + 1e-9 >= next_counter_due_s_) {
    next_counter_due_s_ = std::max(next_counter_due_s_ + options_.counter_interval_s, now_s);
    for (std::size_t k = 0; k < gpus_.size(); ++k) {
      const std::size_t i = (next_counter_gpu_ + k) % gpus_.size();
      const GpuReader& reader = gpu_readers_[i];
      if (reader.counter_usable && !reader.failure) {
        read_counter(i);
        next_counter_gpu_ = (i + 1) % gpus_.size();
        break;
      }
    }
  }
  {
    std::lock_guard lock(mutex_);
    for (auto& track : gpu_tracks_) pair_counters_locked(track);
    trim_locked(now_s);
  }
  ticks_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(wake_mutex_);  // a waiter between its check and its wait must not miss this
  }
  covered_.notify_all();
}

void SamplerCore::publish_locked() {
  for (const NewPoint& p : new_points_) {
    GpuTrack& track = gpu_tracks_[p.gpu];
    // Failed for good (lost, or its thread left behind by stop()): a thread
    // whose hung call returned late adds nothing past what the windows say.
    if (track.failure) continue;
    double integral_j = 0.0;
    if (!track.points.empty()) {
      const PowerPoint& last = track.points.back();
      if (p.time_s <= last.time_s) continue;  // two ticks in the same instant (virtual clock)
      const double dt_s = p.time_s - last.time_s;
      integral_j = last.integral_j +
                   (p.segment == Segment::kStep ? p.power_w * dt_s : 0.5 * (last.power_w + p.power_w) * dt_s);
    }
    track.points.push_back({p.time_s, p.power_w, integral_j, p.segment});
  }
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const GpuReader& reader = gpu_readers_[i];
    GpuTrack& track = gpu_tracks_[i];
    if (track.method != reader.method) {  // a fall-back from samples, once
      track.method = reader.method;
      track.method_note = reader.method_note;
    }
    if (reader.failure && !track.failure) {
      track.failure = reader.failure;
      track.failed_at_s = reader.failed_at_s;
    }
  }
}

template <typename Fn>
auto SamplerCore::driver_call(std::size_t gpu, const char* what, double now_s, Fn&& fn) {
  // Cleared however the call ends (a DeviceError is the common failure).
  struct Clear {
    InFlight& in_flight;
    ~Clear() { in_flight.since_s.store(std::numeric_limits<double>::infinity(), std::memory_order_release); }
  };
  in_flight_.gpu.store(gpu, std::memory_order_relaxed);
  in_flight_.what.store(what, std::memory_order_relaxed);
  in_flight_.since_s.store(now_s, std::memory_order_release);
  const Clear clear{in_flight_};
  return fn();
}

std::optional<SamplerCore::HungCall> SamplerCore::hung_call() const {
  const double since_s = in_flight_.since_s.load(std::memory_order_acquire);
  if (!std::isfinite(since_s)) return std::nullopt;  // no call in flight: the common case, no clock read
  const double for_s = clock_->now_s() - since_s;
  if (for_s < options_.driver_call_timeout_s) return std::nullopt;
  return HungCall{in_flight_.gpu.load(std::memory_order_relaxed), in_flight_.what.load(std::memory_order_relaxed),
                  since_s, for_s};
}

std::string SamplerCore::hung_problem(const std::string& label, std::size_t gpu, const HungCall& hung,
                                      double covered_s) const {
  const double data_until_s = (std::isfinite(covered_s) ? covered_s : started_at_s_) - started_at_s_;
  if (gpu == hung.gpu) {
    return fmt::format("{}: a driver call ({}) has not returned for {:.1f} s (hung); no data after t={:.3f} s, "
                       "the last power carried forward",
                       label, hung.what, hung.for_s, data_until_s);
  }
  return fmt::format("{}: no data after t={:.3f} s: the sampling thread is blocked in a driver call on {} ({}) "
                     "for {:.1f} s; the last power carried forward",
                     label, data_until_s, gpus_[hung.gpu]->label(), hung.what, hung.for_s);
}

void SamplerCore::read_gpu(std::size_t i) {
  GpuReader& reader = gpu_readers_[i];
  if (reader.failure) return;
  Gpu& gpu = *gpus_[i];
  TimelineSample sample;
  sample.time_s = clock_->now_s();
  sample.device = static_cast<uint32_t>(i);
  try {
    sample.power_w = driver_call(i, "power reading", sample.time_s, [&] { return gpu.power_mw(); }) / 1000.0;
  } catch (const DeviceError& e) {
    reader.failure = e.what();
    reader.failed_at_s = sample.time_s;
    return;
  }
  // An optional field that fails is dropped for this GPU, not retried each tick.
  auto optional_read = [&](bool& wanted, auto read) {
    if (!wanted) return;
    try {
      driver_call(i, "optional reading", sample.time_s, read);
    } catch (const DeviceError&) {
      wanted = false;
    }
  };
  SampledFields& fields = reader.fields;
  optional_read(fields.utilization, [&] {
    const Utilization u = gpu.utilization();
    sample.gpu_util_percent = static_cast<int32_t>(u.gpu_percent);
    sample.memory_util_percent = static_cast<int32_t>(u.memory_percent);
  });
  optional_read(fields.sm_clock, [&] { sample.sm_clock_mhz = static_cast<int32_t>(gpu.sm_clock_mhz()); });
  optional_read(fields.temperature, [&] { sample.temperature_c = static_cast<int32_t>(gpu.temperature_c()); });
  optional_read(fields.memory_used, [&] { sample.memory_used_bytes = static_cast<int64_t>(gpu.memory_used_bytes()); });
  batch_.push_back(sample);
  if (reader.method == GpuEnergyMethod::kPowerReadings) {
    new_points_.push_back({i, sample.time_s, sample.power_w, Segment::kLinear});
  }
}

void SamplerCore::drain_power_samples(std::size_t i) {
  GpuReader& reader = gpu_readers_[i];
  Gpu& gpu = *gpus_[i];
  drained_.clear();
  try {
    driver_call(i, "power samples", clock_->now_s(), [&] { gpu.read_power_samples(drained_); });
  } catch (const DeviceError& e) {
    const double now_s = clock_->now_s();
    if (e.code() == DeviceErrc::kDeviceLost) {
      reader.failure = e.what();
      reader.failed_at_s = now_s;
      return;
    }
    // Keep measuring with the per-tick reading rather than not at all.
    reader.method = GpuEnergyMethod::kPowerReadings;
    reader.method_note = fmt::format("power samples failed at t={:.3f} s ({}); power readings used since",
                                     now_s - started_at_s_, e.what());
    return;
  }
  sample_drains_.fetch_add(1, std::memory_order_relaxed);
  // A spacing well over the usual one means the buffer overflowed between
  // drains (the thread was held up): the missing stretch is taken at the
  // next sample's power, and counted.
  const double period_s = gpu.power_sample_period_s();
  const double gap_s = period_s > 0 ? 2.5 * period_s : std::numeric_limits<double>::infinity();
  for (const PowerSample& sample : drained_) {
    const double time_s = clock_->from_realtime_us(sample.timestamp_us);
    if (time_s <= reader.last_sample_s) continue;
    if (std::isfinite(reader.last_sample_s) && time_s - reader.last_sample_s > gap_s) {
      sample_gaps_.fetch_add(1, std::memory_order_relaxed);
    }
    new_points_.push_back({i, time_s, sample.power_mw / 1000.0, Segment::kStep});
    reader.last_sample_s = time_s;
  }
}

void SamplerCore::read_counter(std::size_t i) {
  GpuReader& reader = gpu_readers_[i];
  const double before_s = clock_->now_s();
  uint64_t counter_mj = 0;
  try {
    counter_mj = driver_call(i, "energy counter", before_s, [&] { return gpus_[i]->total_energy_mj(); });
  } catch (const DeviceError& e) {
    if (e.code() == DeviceErrc::kDeviceLost) {
      reader.failure = e.what();
      reader.failed_at_s = before_s;
      return;  // published with the next tick's samples
    }
    reader.counter_usable = false;  // keep integrating power, uncalibrated
    std::lock_guard lock(mutex_);
    gpu_tracks_[i].scale = 1.0;
    gpu_tracks_[i].counter_note = fmt::format("energy counter failed at t={:.3f} s ({}); uncalibrated since",
                                              before_s - started_at_s_, e.what());
    return;
  }
  const double after_s = clock_->now_s();
  counter_reads_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  // Paired with the power integral once the data reaches the read: power
  // samples arrive a little after the moment they describe.
  gpu_tracks_[i].pending_counters.push_back({0.5 * (before_s + after_s), counter_mj / 1000.0, 0.0});
}

void SamplerCore::pair_counters_locked(GpuTrack& track) {
  bool added = false;
  while (!track.pending_counters.empty() && !track.points.empty() &&
         track.pending_counters.front().time_s <= track.points.back().time_s) {
    CounterPoint point = track.pending_counters.front();
    track.pending_counters.pop_front();
    point.integral_j = integral_at(track.points, point.time_s);
    // A counter that went back was restarted (driver reload, GPU reset):
    // what it said before no longer lines up with what it says now.
    if (!track.counters.empty() && point.counter_j < track.counters.back().counter_j) track.counters.clear();
    track.counters.push_back(point);
    added = true;
  }
  if (!added) return;
  const double newest_s = track.counters.back().time_s;
  while (track.counters.front().time_s < newest_s - options_.calibration_span_s) track.counters.pop_front();
  recalibrate_locked(track);
}

void SamplerCore::recalibrate_locked(GpuTrack& track) const {
  const auto& c = track.counters;
  if (c.size() < 3 || c.back().time_s - c.front().time_s < options_.min_calibration_span_s) return;
  double mean_x = 0, mean_y = 0;
  for (const auto& p : c) {
    mean_x += p.integral_j;
    mean_y += p.counter_j;
  }
  mean_x /= static_cast<double>(c.size());
  mean_y /= static_cast<double>(c.size());
  double sxy = 0, sxx = 0;
  for (const auto& p : c) {
    sxy += (p.integral_j - mean_x) * (p.counter_j - mean_y);
    sxx += (p.integral_j - mean_x) * (p.integral_j - mean_x);
  }
  if (sxx <= 0) return;
  const double slope = sxy / sxx;
  track.scale = (slope >= kMinScale && slope <= kMaxScale) ? slope : 1.0;
}

void SamplerCore::sample_cpu(std::size_t i) {
  CpuEnergyZone& zone = *cpu_zones_[i];
  {
    std::lock_guard lock(mutex_);
    if (cpu_tracks_[i].failure) return;
  }
  const double time_s = clock_->now_s();
  uint64_t raw_uj = 0;
  try {
    raw_uj = zone.energy_uj();
  } catch (const DeviceError& e) {
    std::lock_guard lock(mutex_);
    cpu_tracks_[i].failure = e.what();
    cpu_tracks_[i].failed_at_s = time_s;
    return;
  }
  TimelineSample sample;
  sample.time_s = time_s;
  sample.device = static_cast<uint32_t>(gpus_.size() + i);
  {
    std::lock_guard lock(mutex_);
    CpuTrack& track = cpu_tracks_[i];
    double energy_j = 0.0;
    if (!track.points.empty()) {
      const CpuPoint& last = track.points.back();
      if (time_s <= last.time_s) return;
      energy_j = last.energy_j + counter_delta_uj(track.last_raw_uj, raw_uj, zone.max_energy_range_uj()) * 1e-6;
      sample.power_w = (energy_j - last.energy_j) / (time_s - last.time_s);
    }
    track.last_raw_uj = raw_uj;
    track.points.push_back({time_s, energy_j});
    if (track.points.size() == 1) return;  // no power yet from a single reading
  }
  timeline_.add(sample);
}

void SamplerCore::trim_locked(double now_s) {
  const double keep_from_s = std::min(pinned_since_s_.load(), now_s - options_.history_s);
  // Keep the last point before keep_from_s: it anchors interpolation there.
  for (auto& track : gpu_tracks_) {
    while (track.points.size() > 2 && track.points[1].time_s <= keep_from_s) {
      track.points.pop_front();
      track.trimmed = true;
    }
  }
  for (auto& track : cpu_tracks_) {
    while (track.points.size() > 2 && track.points[1].time_s <= keep_from_s) track.points.pop_front();
  }
}

double SamplerCore::scaled_integral_j(const GpuTrack& track, double time_s) {
  return track.scale * integral_at(track.points, time_s);
}

double SamplerCore::integral_at(const std::deque<PowerPoint>& points, double time_s) {
  if (points.empty()) return 0.0;
  // The newest point first: most edges are past it.
  const PowerPoint& last = points.back();
  if (time_s >= last.time_s) return last.integral_j + last.power_w * (time_s - last.time_s);
  const PowerPoint& first = points.front();
  if (time_s <= first.time_s) return first.integral_j - first.power_w * (first.time_s - time_s);
  // First point after time_s: its segment says how power ran up to it.
  auto after = first_point_after(points, time_s);
  const PowerPoint& a = *(after - 1);
  const PowerPoint& b = *after;
  const double dt = time_s - a.time_s;
  if (b.segment == Segment::kStep) return a.integral_j + b.power_w * dt;
  const double power_at_t = a.power_w + (b.power_w - a.power_w) * dt / (b.time_s - a.time_s);
  return a.integral_j + 0.5 * (a.power_w + power_at_t) * dt;
}

std::vector<ObservedPower> SamplerCore::observed_power(std::size_t gpu, double begin_s, double end_s) const {
  std::vector<ObservedPower> out;
  std::lock_guard lock(mutex_);
  const GpuTrack& track = gpu_tracks_.at(gpu);
  const auto& points = track.points;
  // The first point at or after begin_s: a sample there covers the span
  // from the point before it, which must not start before begin_s.
  auto it = std::lower_bound(points.begin(), points.end(), begin_s,
                             [](const PowerPoint& p, double t) { return p.time_s < t; });
  for (; it != points.end() && it->time_s <= end_s; ++it) {
    const double power_w = track.scale * it->power_w;
    if (it->segment == Segment::kLinear) {
      out.push_back({it->time_s, it->time_s, power_w});
    } else if (it != points.begin() && std::prev(it)->time_s >= begin_s) {
      out.push_back({std::prev(it)->time_s, it->time_s, power_w});
    }
  }
  return out;
}

EnergyEstimate SamplerCore::gpu_energy(std::size_t gpu, double begin_s, double end_s) const {
  const std::optional<HungCall> hung = hung_call();
  std::lock_guard lock(mutex_);
  if (!anchors_) return gpu_energy_locked(gpu, begin_s, end_s, nullptr, hung);
  const AnchorLookups anchors = anchors_->window(gpu, begin_s, end_s);
  return gpu_energy_locked(gpu, begin_s, end_s, &anchors, hung);
}

EnergyEstimate SamplerCore::cpu_energy(std::size_t zone, double begin_s, double end_s) const {
  const std::optional<HungCall> hung = hung_call();
  std::lock_guard lock(mutex_);
  return cpu_energy_locked(zone, begin_s, end_s, hung);
}

void SamplerCore::energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                       std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted) const {
  gpus.clear();
  cpu_zones.clear();
  bool end_pending_everywhere = end_just_noted && anchors_ != nullptr;
  for (std::size_t i = 0; end_pending_everywhere && i < gpu_tracks_.size(); ++i) {
    end_pending_everywhere = anchors_->awaits_reads(i);
  }
  const std::optional<HungCall> hung = hung_call();
  std::lock_guard lock(mutex_);
  if (end_pending_everywhere) {
    for (std::size_t i = 0; i < gpu_tracks_.size(); ++i) {
      EnergyEstimate estimate = gpu_energy_locked(i, begin_s, end_s, nullptr, hung);
      if (!estimate.problem) estimate.settled = false;  // the end's reads are to come
      gpus.push_back(std::move(estimate));
    }
  } else {
    if (anchors_) anchors_->windows(begin_s, end_s, anchor_lookups_);
    for (std::size_t i = 0; i < gpu_tracks_.size(); ++i) {
      gpus.push_back(gpu_energy_locked(i, begin_s, end_s, anchors_ ? &anchor_lookups_[i] : nullptr, hung));
    }
  }
  for (std::size_t i = 0; i < cpu_tracks_.size(); ++i) cpu_zones.push_back(cpu_energy_locked(i, begin_s, end_s, hung));
}

EnergyEstimate SamplerCore::gpu_energy_locked(std::size_t gpu, double begin_s, double end_s,
                                              const AnchorLookups* anchors, const std::optional<HungCall>& hung) const {
  const GpuTrack& track = gpu_tracks_.at(gpu);
  EnergyEstimate estimate;
  estimate.scale = track.scale;
  estimate.method = track.method;
  estimate.needs_data_until_s = end_s;
  const double covered_s =
      track.points.empty() ? -std::numeric_limits<double>::infinity() : track.points.back().time_s;
  estimate.settled = covered_s >= end_s;
  if (track.failure && end_s > track.failed_at_s) {
    // Nothing is known past the failure: count up to the last good point.
    estimate.problem = fmt::format("{}: energy after t={:.3f} s is missing ({})", gpus_[gpu]->label(),
                                   track.failed_at_s - started_at_s_, *track.failure);
    end_s = track.points.empty() ? begin_s : std::min(end_s, covered_s);
    begin_s = std::min(begin_s, end_s);
    estimate.settled = true;  // nothing more will come
  } else if (track.trimmed && begin_s < track.points.front().time_s) {
    estimate.problem = fmt::format("{}: history before t={:.3f} s is no longer held (kept {:.0f} s after windows end)",
                                   gpus_[gpu]->label(), track.points.front().time_s - started_at_s_,
                                   options_.history_s);
  } else if (hung && !estimate.settled) {
    // The data that would settle it waits behind a hung call: say so.
    estimate.problem = hung_problem(gpus_[gpu]->label(), gpu, *hung, covered_s);
  }
  estimate.energy_j = scaled_integral_j(track, end_s) - scaled_integral_j(track, begin_s);
  if (anchors == nullptr || estimate.problem) return estimate;
  using Status = CounterAnchors::Status;
  const auto& [begin, end] = *anchors;
  if (begin.status == Status::kPending || end.status == Status::kPending) {
    estimate.settled = false;  // a counter read for an edge is still to come
    estimate.needs_data_until_s = std::max({end_s, begin.pending_until_s, end.pending_until_s});
    return estimate;
  }
  if (begin.status != Status::kReady || end.status != Status::kReady) return estimate;
  const AnchoredEnergy at_begin = anchored_energy(track, begin, begin_s);
  const AnchoredEnergy at_end = anchored_energy(track, end, end_s);
  // Both edges on the same anchors: the counter cancels, the samples remain.
  if (!at_begin.trusted || !at_end.trusted || at_begin.anchors_used == at_end.anchors_used) return estimate;
  estimate.energy_j = at_end.counter_j - at_begin.counter_j;
  estimate.needs_data_until_s = std::max(end_s, at_end.needs_data_until_s);
  estimate.settled = covered_s >= estimate.needs_data_until_s;
  estimate.counter_anchored = true;
  return estimate;
}

SamplerCore::AnchoredEnergy SamplerCore::anchored_energy(const GpuTrack& track, const CounterAnchors::Lookup& anchors,
                                                 double time_s) const {
  // From a step before the edge, the samples add the stretch up to it; from a
  // step after, they take the stretch back. A load change inside a stretch is
  // where samples err (each averages only part of its interval), so the side
  // whose samples vary least is used; with both steady, the counter's change
  // across the two steps is shared out in proportion to the samples.
  const auto error_bound_j = [&](double from_s, double to_s) {
    return power_range_w(track.points, from_s, to_s) * (to_s - from_s);
  };
  constexpr double kSteadyJ = 0.5;
  // Beyond what samples that miss a load switch inside the step can be off
  // by (a few joules on an H100), short of a whole step's energy.
  constexpr double kStepMismatchJ = 6.0;
  constexpr double kStepMismatchShare = 0.5;
  AnchoredEnergy result;
  const std::optional<CounterAnchor>& before = anchors.before;
  const std::optional<CounterAnchor>& after = anchors.after;
  // The sample integral at the edge and at each anchor's step, once each.
  const double at_edge_j = scaled_integral_j(track, time_s);
  const double at_before_j = before ? scaled_integral_j(track, before->step_s) : 0.0;
  const double at_after_j = after ? scaled_integral_j(track, after->step_s) : 0.0;
  const double from_before_j = before ? before->counter_j + (at_edge_j - at_before_j) : 0.0;
  const double from_after_j = after ? after->counter_j - (at_after_j - at_edge_j) : 0.0;
  if (before && after) {
    // The counter's change across the edge's step must be that step's energy
    // by the samples too: a read taken one step off (the grid wrong by more
    // than the margin) shows here as a whole step too much or too little.
    const double step_samples_j = at_after_j - at_before_j;
    const double step_counter_j = after->counter_j - before->counter_j;
    if (std::fabs(step_counter_j - step_samples_j) > kStepMismatchJ + kStepMismatchShare * step_samples_j) {
      result.trusted = false;
      return result;
    }
    const double bound_before_j = error_bound_j(before->step_s, time_s);
    const double bound_after_j = error_bound_j(time_s, after->step_s);
    result.needs_data_until_s = after->step_s;
    result.anchors_used = {before->step_s, after->step_s};
    if (bound_before_j <= kSteadyJ && bound_after_j <= kSteadyJ) {
      const double share = step_samples_j > 0 ? (at_edge_j - at_before_j) / step_samples_j : 0.0;
      result.counter_j = before->counter_j + share * (after->counter_j - before->counter_j);
    } else if (bound_before_j <= bound_after_j) {
      result.counter_j = from_before_j;
      result.anchors_used = {before->step_s, before->step_s};
    } else {
      result.counter_j = from_after_j;
      result.anchors_used = {after->step_s, after->step_s};
    }
  } else if (before) {
    result.counter_j = from_before_j;
    result.needs_data_until_s = time_s;
    result.anchors_used = {before->step_s, before->step_s};
  } else {
    result.counter_j = from_after_j;
    result.needs_data_until_s = after->step_s;
    result.anchors_used = {after->step_s, after->step_s};
  }
  return result;
}

double SamplerCore::power_range_w(const std::deque<PowerPoint>& points, double from_s, double to_s) {
  // Every point whose segment overlaps [from_s, to_s]: the first after
  // from_s up to and including the first at or after to_s.
  auto it = first_point_after(points, from_s);
  if (it == points.end()) return 0.0;
  double low_w = it->power_w, high_w = it->power_w;
  for (; it != points.end(); ++it) {
    low_w = std::min(low_w, it->power_w);
    high_w = std::max(high_w, it->power_w);
    if (it->time_s >= to_s) break;
  }
  return high_w - low_w;
}

EnergyEstimate SamplerCore::cpu_energy_locked(std::size_t zone, double begin_s, double end_s,
                                              const std::optional<HungCall>& hung) const {
  const CpuTrack& track = cpu_tracks_.at(zone);
  EnergyEstimate estimate;
  if (track.failure && end_s > track.failed_at_s) {
    estimate.problem = fmt::format("{}: energy after t={:.3f} s is missing ({})", cpu_zones_[zone]->label(),
                                   track.failed_at_s - started_at_s_, *track.failure);
  } else if (hung && (track.points.empty() || track.points.back().time_s < end_s)) {
    estimate.problem = hung_problem(cpu_zones_[zone]->label(), gpus_.size(), *hung,
                                    track.points.empty() ? started_at_s_ : track.points.back().time_s);
  }
  const auto& p = track.points;
  if (p.size() < 2) return estimate;
  auto energy_at = [&](double t) {
    // Linear between readings; past the ends, continue at the nearest rate.
    auto after = first_point_after(p, t);
    if (after == p.begin()) after = p.begin() + 1;
    if (after == p.end()) after = p.end() - 1;
    const CpuPoint& a = *(after - 1);
    const CpuPoint& b = *after;
    return a.energy_j + (b.energy_j - a.energy_j) * (t - a.time_s) / (b.time_s - a.time_s);
  };
  estimate.settled = track.failure.has_value() || p.back().time_s >= end_s;
  if (track.failure) end_s = std::min(end_s, p.back().time_s);
  estimate.energy_j = std::max(0.0, energy_at(end_s) - energy_at(std::min(begin_s, end_s)));
  return estimate;
}

double SamplerCore::gpu_scale(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  return gpu_tracks_.at(gpu).scale;
}

GpuEnergyMethod SamplerCore::gpu_method(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  return gpu_tracks_.at(gpu).method;
}

std::string SamplerCore::gpu_method_description(std::size_t gpu) const {
  const Gpu& device = *gpus_.at(gpu);
  std::lock_guard lock(mutex_);
  const GpuTrack& track = gpu_tracks_[gpu];
  std::string text = track.method == GpuEnergyMethod::kPowerSamples
                         ? sample_period_words(device.power_sample_period_s())
                         : fmt::format("{} read every {:.0f} ms", device.power_reading_source(),
                                       1e3 * options_.interval_s);
  if (!device.has_energy_counter() || options_.counter_interval_s <= 0) {
    text += ", no energy counter";
  } else if (track.counter_note) {
    text += ", " + *track.counter_note;
  } else if (track.counters.size() < 3) {
    // Said as a count, not "pending": read after a short run it is final.
    text += fmt::format(", not counter-calibrated ({} of the 3 counter readings calibration needs)",
                        track.counters.size());
  } else {
    text += fmt::format(", counter-calibrated x{:.4f}", track.scale);
  }
  if (track.method_note) text += "; " + *track.method_note;
  if (anchors_) {
    // Anchored, or no longer and why (a counter that failed or never stepped).
    const std::string note = anchors_->describe(gpu);
    if (anchors_->anchored(gpu) || note.find("windows not anchored:") == 0) text += "; " + note;
  }
  return text;
}

double SamplerCore::covered_until_s() const {
  std::lock_guard lock(mutex_);
  return covered_until_locked();
}

double SamplerCore::covered_until_locked() const {
  double covered_s = std::numeric_limits<double>::infinity();
  for (const auto& track : gpu_tracks_) {
    if (track.failure) continue;  // nothing more will come
    covered_s = std::min(covered_s, track.points.empty() ? -std::numeric_limits<double>::infinity()
                                                         : track.points.back().time_s);
  }
  for (const auto& track : cpu_tracks_) {
    if (track.failure) continue;
    covered_s = std::min(covered_s, track.points.empty() ? -std::numeric_limits<double>::infinity()
                                                         : track.points.back().time_s);
  }
  return covered_s;
}

void SamplerCore::pin_history(double since_s) {
  pinned_since_s_.store(since_s);
  if (anchors_) anchors_->keep_from(since_s);
}

SamplerStats SamplerCore::stats() const {
  SamplerStats stats;
  stats.ticks = ticks_.load();
  stats.counter_reads = counter_reads_.load();
  stats.sample_drains = sample_drains_.load();
  stats.sample_gaps = sample_gaps_.load();
  if (anchors_) stats.anchors = anchors_->stats();
  stats.thread_cpu_s = thread_cpu_s_.load();
  stats.running_s = started_ ? clock_->now_s() - started_at_s_ : 0.0;
  stats.left_hung_thread = left_hung_thread_.load();
  return stats;
}

// The handle: everything forwards to the core.

Sampler::Sampler(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
                 std::shared_ptr<const Clock> clock, SamplerOptions options)
    : core_(std::make_shared<SamplerCore>(std::move(gpus), std::move(cpu_zones), std::move(clock), options)) {}

Sampler::~Sampler() {
  try {
    core_->stop();
  } catch (const std::exception&) {
    // A failing timeline stream must not terminate the process from a
    // destructor; stop() called explicitly reports it.
  }
}

void Sampler::start() { core_->start(); }
void Sampler::stop() { core_->stop(); }
void Sampler::sample_now() { core_->sample_now(); }
EnergyEstimate Sampler::gpu_energy(std::size_t gpu, double begin_s, double end_s) const {
  return core_->gpu_energy(gpu, begin_s, end_s);
}
EnergyEstimate Sampler::cpu_energy(std::size_t zone, double begin_s, double end_s) const {
  return core_->cpu_energy(zone, begin_s, end_s);
}
void Sampler::energies(double begin_s, double end_s, std::vector<EnergyEstimate>& gpus,
                       std::vector<EnergyEstimate>& cpu_zones, bool end_just_noted) const {
  core_->energies(begin_s, end_s, gpus, cpu_zones, end_just_noted);
}
std::vector<ObservedPower> Sampler::observed_power(std::size_t gpu, double begin_s, double end_s) const {
  return core_->observed_power(gpu, begin_s, end_s);
}
double Sampler::gpu_scale(std::size_t gpu) const { return core_->gpu_scale(gpu); }
GpuEnergyMethod Sampler::gpu_method(std::size_t gpu) const { return core_->gpu_method(gpu); }
std::string Sampler::gpu_method_description(std::size_t gpu) const { return core_->gpu_method_description(gpu); }
double Sampler::covered_until_s() const { return core_->covered_until_s(); }
bool Sampler::wait_settled(double begin_s, double end_s, double timeout_s) {
  return core_->wait_settled(begin_s, end_s, timeout_s);
}
void Sampler::note_window_edge(double time_s) { core_->note_window_edge(time_s); }
void Sampler::prepare_counter_anchors() { core_->prepare_counter_anchors(); }
void Sampler::poll_counter_anchors() { core_->poll_counter_anchors(); }
void Sampler::pin_history(double since_s) { core_->pin_history(since_s); }
Timeline& Sampler::timeline() { return core_->timeline(); }
const Timeline& Sampler::timeline() const { return core_->timeline(); }
SamplerStats Sampler::stats() const { return core_->stats(); }
const std::vector<std::shared_ptr<Gpu>>& Sampler::gpus() const { return core_->gpus(); }
const std::vector<std::shared_ptr<CpuEnergyZone>>& Sampler::cpu_zones() const { return core_->cpu_zones(); }
const SamplerOptions& Sampler::options() const { return core_->options(); }
const Clock& Sampler::clock() const { return core_->clock(); }
std::shared_ptr<const Clock> Sampler::shared_clock() const { return core_->shared_clock(); }

double sampling_interval_s(double interval_ms, const std::string& name) {
  if (!(interval_ms >= kMinSamplingIntervalMs && interval_ms <= kMaxSamplingIntervalMs)) {
    throw UsageError(fmt::format("{}: {} is outside [{}, {}] (milliseconds)", name, interval_ms,
                                 kMinSamplingIntervalMs, kMaxSamplingIntervalMs));
  }
  return interval_ms / 1000.0;
}

}  // namespace joule
