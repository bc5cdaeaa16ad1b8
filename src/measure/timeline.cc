// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/measure/timeline.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "joule/error.h"

namespace joule {

Timeline::Timeline(std::vector<std::string> device_names, std::size_t capacity)
    : device_names_(std::move(device_names)), capacity_(capacity) {}

const char* Timeline::csv_header() {
  return "time_s,device,power_w,gpu_util_percent,memory_util_percent,sm_clock_mhz,temperature_c,memory_used_bytes,"
         "power_capped";
}

std::string Timeline::csv_row(const TimelineSample& s) const {
  auto optional = [](int64_t value) { return value < 0 ? std::string() : std::to_string(value); };
  return fmt::format("{:.6f},{},{:.3f},{},{},{},{},{},{}\n", s.time_s,
                     s.device < device_names_.size() ? device_names_[s.device] : "?", s.power_w,
                     optional(s.gpu_util_percent), optional(s.memory_util_percent), optional(s.sm_clock_mhz),
                     optional(s.temperature_c), optional(s.memory_used_bytes), optional(s.power_capped));
}

void Timeline::stream_csv_to(const std::string& path) {
  std::lock_guard lock(mutex_);
  stream_.open(path, std::ios::out | std::ios::trunc);
  if (!stream_) {
    throw Error(fmt::format("cannot write timeline file '{}': {}", path, std::strerror(errno)));
  }
  stream_path_ = path;
  stream_ << csv_header() << '\n';
  for (const auto& sample : samples_) stream_ << csv_row(sample);
}

void Timeline::flush() {
  std::lock_guard lock(mutex_);
  if (!stream_.is_open()) return;
  stream_.flush();
  if (!stream_) throw Error(fmt::format("error writing timeline file '{}'", stream_path_));
}

void Timeline::add(const TimelineSample& sample) {
  std::lock_guard lock(mutex_);
  add_locked(sample);
}

void Timeline::add(const std::vector<TimelineSample>& samples) {
  std::lock_guard lock(mutex_);
  for (const auto& sample : samples) add_locked(sample);
}

void Timeline::add_locked(const TimelineSample& sample) {
  if (stream_.is_open()) stream_ << csv_row(sample);
  if (sample.device >= latest_.size()) latest_.resize(sample.device + 1);
  latest_[sample.device] = sample;
  samples_.push_back(sample);
  if (samples_.size() > capacity_) {
    samples_.pop_front();
    ++dropped_;
  }
}

std::optional<TimelineSample> Timeline::latest(uint32_t device) const {
  std::lock_guard lock(mutex_);
  return device < latest_.size() ? latest_[device] : std::nullopt;
}

std::vector<TimelineSample> Timeline::samples() const {
  std::lock_guard lock(mutex_);
  return {samples_.begin(), samples_.end()};
}

std::size_t Timeline::size() const {
  std::lock_guard lock(mutex_);
  return samples_.size();
}

uint64_t Timeline::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

std::optional<double> Timeline::peak_power_w(uint32_t device, double begin_s, double end_s) const {
  std::lock_guard lock(mutex_);
  // The last sample at or before begin_s stands for the power at the start,
  // so a window shorter than the sampling interval still has a peak.
  std::optional<double> peak, at_begin;
  for (const auto& s : samples_) {
    if (s.device != device || s.time_s > end_s) continue;
    if (s.time_s <= begin_s) {
      at_begin = s.power_w;
    } else if (!peak || s.power_w > *peak) {
      peak = s.power_w;
    }
  }
  if (at_begin && (!peak || *at_begin > *peak)) peak = at_begin;
  return peak;
}

std::optional<double> Timeline::power_capped_share(uint32_t device, double begin_s, double end_s) const {
  std::lock_guard lock(mutex_);
  std::size_t read = 0, capped = 0;
  for (const auto& s : samples_) {
    if (s.device != device || s.time_s <= begin_s || s.time_s > end_s || s.power_capped < 0) continue;
    ++read;
    capped += s.power_capped > 0 ? 1 : 0;
  }
  if (read == 0) return std::nullopt;
  return static_cast<double>(capped) / static_cast<double>(read);
}

void Timeline::write_csv(std::ostream& out) const {
  std::lock_guard lock(mutex_);
  out << csv_header() << '\n';
  for (const auto& sample : samples_) out << csv_row(sample);
}

void Timeline::write_csv(const std::string& path) const {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot write timeline file '{}': {}", path, std::strerror(errno)));
  write_csv(out);
  out.flush();
  if (!out) throw Error(fmt::format("error writing timeline file '{}'", path));
}

}  // namespace joule
