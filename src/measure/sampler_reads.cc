// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A tick of the sampler: each device read once (power, the optional fields,
// the power-sample buffers when due, one energy counter in turn), published
// into the tracks under one lock, the counter paired with the integral to
// calibrate it, and the history trimmed to what windows may still ask for.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "joule/error.h"
#include "sampler_core.h"

namespace joule::detail {

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
    append_power_point(track.points, p.time_s, p.power_w, p.segment);
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
  optional_read(fields.power_cap, [&] { sample.power_capped = gpu.at_power_cap() ? 1 : 0; });
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
  if (const std::optional<double> scale = calibration_scale(track.counters, options_.min_calibration_span_s)) {
    track.scale = *scale;
  }
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
  for (auto& track : gpu_tracks_) {
    if (trim_points_before(track.points, keep_from_s)) track.trimmed = true;
  }
  for (auto& track : cpu_tracks_) trim_points_before(track.points, keep_from_s);
}

}  // namespace joule::detail
