#include "joule/measure/sampler.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "joule/error.h"

namespace joule {

namespace {

double thread_cpu_time_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
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

}  // namespace

Sampler::Sampler(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
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
  if (!(options_.interval_s >= 0.0005 && options_.interval_s <= 3600.0)) {
    throw UsageError(fmt::format("sampling interval {} s is outside 0.0005-3600 s", options_.interval_s));
  }
  if (options_.background_thread && clock_->is_virtual()) {
    throw UsageError("a sampler on a virtual clock cannot run a background thread; call sample_now()");
  }
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    gpu_readers_[i].fields = options_.fields;
    gpu_readers_[i].counter_usable = options_.counter_interval_s > 0 && gpus_[i]->has_energy_counter();
  }
}

Sampler::~Sampler() {
  try {
    stop();
  } catch (const std::exception&) {
    // A failing timeline stream must not terminate the process from a
    // destructor; stop() called explicitly reports it.
  }
}

void Sampler::start() {
  if (started_) return;
  started_ = true;
  started_at_s_ = clock_->now_s();
  sample_now();
  if (options_.background_thread) thread_ = std::thread([this] { run(); });
}

void Sampler::stop() {
  if (!started_) return;
  {
    std::lock_guard lock(wake_mutex_);
    if (stop_requested_) return;
    stop_requested_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  sample_now();  // a last sample at the stop time bounds every window
  timeline_.flush();
}

void Sampler::run() {
  // Absolute deadlines keep the rate exact; a tick that overruns skips the
  // deadlines it missed instead of bursting to catch up.
  double next_s = clock_->now_s() + options_.interval_s;
  std::unique_lock lock(wake_mutex_);
  while (!stop_requested_) {
    const double wait_s = next_s - clock_->now_s();
    if (wait_s > 0) {
      wake_.wait_for(lock, std::chrono::duration<double>(wait_s), [this] { return stop_requested_; });
      if (stop_requested_) break;
    }
    lock.unlock();
    sample_now();
    thread_cpu_s_.store(thread_cpu_time_s());
    lock.lock();
    next_s += options_.interval_s;
    const double now_s = clock_->now_s();
    if (next_s < now_s) next_s = now_s + options_.interval_s;
  }
}

void Sampler::sample_now() {
  std::lock_guard tick_lock(tick_mutex_);
  // Device calls happen without the track lock; results are then published
  // under one lock per tick, so readers (end_window) wait at most for that.
  batch_.clear();
  for (std::size_t i = 0; i < gpus_.size(); ++i) read_gpu(i);
  {
    std::lock_guard lock(mutex_);
    for (const auto& sample : batch_) {
      GpuTrack& track = gpu_tracks_[sample.device];
      double integral_j = 0.0;
      if (!track.points.empty()) {
        const PowerPoint& last = track.points.back();
        if (sample.time_s <= last.time_s) continue;  // two ticks in the same instant (virtual clock)
        integral_j = last.integral_j + 0.5 * (last.power_w + sample.power_w) * (sample.time_s - last.time_s);
      }
      track.points.push_back({sample.time_s, sample.power_w, integral_j});
    }
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      const GpuReader& reader = gpu_readers_[i];
      if (reader.failure && !gpu_tracks_[i].failure) {
        gpu_tracks_[i].failure = reader.failure;
        gpu_tracks_[i].failed_at_s = reader.failed_at_s;
      }
    }
  }
  timeline_.add(batch_);
  for (std::size_t i = 0; i < cpu_zones_.size(); ++i) sample_cpu(i);

  // At most one energy-counter read per counter interval, round robin over
  // the GPUs: each read costs milliseconds of CPU and delays this thread.
  const double now_s = clock_->now_s();
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
    trim_locked(now_s);
  }
  ticks_.fetch_add(1, std::memory_order_relaxed);
}

void Sampler::read_gpu(std::size_t i) {
  GpuReader& reader = gpu_readers_[i];
  if (reader.failure) return;
  Gpu& gpu = *gpus_[i];
  TimelineSample sample;
  sample.time_s = clock_->now_s();
  sample.device = static_cast<uint32_t>(i);
  try {
    sample.power_w = gpu.power_mw() / 1000.0;
  } catch (const DeviceError& e) {
    reader.failure = e.what();
    reader.failed_at_s = sample.time_s;
    return;
  }
  // An optional field that fails is dropped for this GPU, not retried each tick.
  auto optional_read = [](bool& wanted, auto read) {
    if (!wanted) return;
    try {
      read();
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
}

void Sampler::read_counter(std::size_t i) {
  GpuReader& reader = gpu_readers_[i];
  const double before_s = clock_->now_s();
  uint64_t counter_mj = 0;
  try {
    counter_mj = gpus_[i]->total_energy_mj();
  } catch (const DeviceError& e) {
    if (e.code() == DeviceErrc::kDeviceLost) {
      reader.failure = e.what();
      reader.failed_at_s = before_s;
      return;  // published with the next tick's samples
    }
    reader.counter_usable = false;  // keep integrating power, uncalibrated
    std::lock_guard lock(mutex_);
    gpu_tracks_[i].scale = 1.0;
    return;
  }
  const double after_s = clock_->now_s();
  counter_reads_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  GpuTrack& track = gpu_tracks_[i];
  const double read_s = 0.5 * (before_s + after_s);
  track.counters.push_back({integral_at(track.points, read_s), counter_mj / 1000.0, read_s});
  while (!track.counters.empty() && track.counters.front().time_s < read_s - options_.calibration_span_s) {
    track.counters.pop_front();
  }
  recalibrate_locked(track);
}

void Sampler::recalibrate_locked(GpuTrack& track) const {
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

void Sampler::sample_cpu(std::size_t i) {
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

void Sampler::trim_locked(double now_s) {
  const double keep_from_s = std::min(pinned_since_s_.load(), now_s - options_.history_s);
  // Keep the last point before keep_from_s: it anchors interpolation there.
  for (auto& track : gpu_tracks_) {
    while (track.points.size() > 2 && track.points[1].time_s <= keep_from_s) track.points.pop_front();
  }
  for (auto& track : cpu_tracks_) {
    while (track.points.size() > 2 && track.points[1].time_s <= keep_from_s) track.points.pop_front();
  }
}

double Sampler::integral_at(const std::deque<PowerPoint>& points, double time_s) {
  if (points.empty()) return 0.0;
  const PowerPoint& first = points.front();
  if (time_s <= first.time_s) return first.integral_j - first.power_w * (first.time_s - time_s);
  const PowerPoint& last = points.back();
  if (time_s >= last.time_s) return last.integral_j + last.power_w * (time_s - last.time_s);
  // First point after time_s; power is taken as linear between samples.
  auto after = std::upper_bound(points.begin(), points.end(), time_s,
                                [](double t, const PowerPoint& p) { return t < p.time_s; });
  const PowerPoint& a = *(after - 1);
  const PowerPoint& b = *after;
  const double dt = time_s - a.time_s;
  const double power_at_t = a.power_w + (b.power_w - a.power_w) * dt / (b.time_s - a.time_s);
  return a.integral_j + 0.5 * (a.power_w + power_at_t) * dt;
}

EnergyEstimate Sampler::gpu_energy(std::size_t gpu, double begin_s, double end_s) const {
  std::lock_guard lock(mutex_);
  const GpuTrack& track = gpu_tracks_.at(gpu);
  EnergyEstimate estimate;
  estimate.scale = track.scale;
  if (track.failure && end_s > track.failed_at_s) {
    // Nothing is known past the failure: count up to the last good sample.
    estimate.problem = fmt::format("{}: energy after t={:.3f} s is missing ({})", gpus_[gpu]->label(),
                                   track.failed_at_s - started_at_s_, *track.failure);
    end_s = track.points.empty() ? begin_s : std::min(end_s, track.points.back().time_s);
    begin_s = std::min(begin_s, end_s);
  }
  estimate.energy_j = track.scale * (integral_at(track.points, end_s) - integral_at(track.points, begin_s));
  return estimate;
}

EnergyEstimate Sampler::cpu_energy(std::size_t zone, double begin_s, double end_s) const {
  std::lock_guard lock(mutex_);
  const CpuTrack& track = cpu_tracks_.at(zone);
  EnergyEstimate estimate;
  if (track.failure && end_s > track.failed_at_s) {
    estimate.problem = fmt::format("{}: energy after t={:.3f} s is missing ({})", cpu_zones_[zone]->label(),
                                   track.failed_at_s - started_at_s_, *track.failure);
  }
  const auto& p = track.points;
  if (p.size() < 2) return estimate;
  auto energy_at = [&](double t) {
    // Linear between readings; past the ends, continue at the nearest rate.
    auto after = std::upper_bound(p.begin(), p.end(), t, [](double x, const CpuPoint& q) { return x < q.time_s; });
    if (after == p.begin()) after = p.begin() + 1;
    if (after == p.end()) after = p.end() - 1;
    const CpuPoint& a = *(after - 1);
    const CpuPoint& b = *after;
    return a.energy_j + (b.energy_j - a.energy_j) * (t - a.time_s) / (b.time_s - a.time_s);
  };
  if (track.failure) end_s = std::min(end_s, p.back().time_s);
  estimate.energy_j = std::max(0.0, energy_at(end_s) - energy_at(std::min(begin_s, end_s)));
  return estimate;
}

double Sampler::gpu_scale(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  return gpu_tracks_.at(gpu).scale;
}

void Sampler::pin_history(double since_s) { pinned_since_s_.store(since_s); }

SamplerStats Sampler::stats() const {
  SamplerStats stats;
  stats.ticks = ticks_.load();
  stats.counter_reads = counter_reads_.load();
  stats.thread_cpu_s = thread_cpu_s_.load();
  stats.running_s = started_ ? clock_->now_s() - started_at_s_ : 0.0;
  return stats;
}

}  // namespace joule
