// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The sampler's lifecycle: start, the sampling thread's schedule, stop
// (bounded where a driver call hangs), and waiting for a window to settle.
#include "sampler_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "joule/error.h"

namespace joule::detail {

namespace {

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

}  // namespace

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

std::vector<CounterAnchor> SamplerCore::counter_values(std::size_t gpu, double begin_s, double end_s) const {
  if (gpu >= gpus_.size()) throw UsageError(fmt::format("counter values: GPU {} does not exist", gpu));
  if (!anchors_) return {};
  return anchors_->anchors_within(gpu, begin_s, end_s);
}

void SamplerCore::poll_counter_anchors() {
  if (anchors_) anchors_->poll();
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

}  // namespace joule::detail
