// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Samples taken by the Sampler: one row per device per tick. Kept in memory
// up to a capacity (oldest dropped first) and optionally streamed to CSV as
// they arrive, so long runs lose nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace joule {

struct TimelineSample {
  double time_s = 0.0;
  uint32_t device = 0;  // index into Timeline::device_names()
  // Optional, beside device where the row has room (a million rows held):
  // 1 where the driver held the clocks at the power cap (Gpu::at_power_cap),
  // 0 where not, negative when not sampled or not readable.
  int8_t power_capped = -1;
  double power_w = 0.0;
  // Optional fields; negative when not sampled or not readable.
  int32_t gpu_util_percent = -1;
  int32_t memory_util_percent = -1;
  int32_t sm_clock_mhz = -1;
  int32_t temperature_c = -1;
  int64_t memory_used_bytes = -1;
};

class Timeline {
 public:
  explicit Timeline(std::vector<std::string> device_names, std::size_t capacity = 1'000'000);

  // Opens path now (so a bad path fails before any work starts), writes the
  // header, then appends every later sample. Throws Error naming the path.
  void stream_csv_to(const std::string& path);
  void flush();

  void add(const TimelineSample& sample);
  void add(const std::vector<TimelineSample>& samples);  // one lock for a whole tick
  std::vector<TimelineSample> samples() const;
  // The newest sample of a device, if any (a copy of one row, not of the
  // whole timeline: what a scrape of the exporter reads).
  std::optional<TimelineSample> latest(uint32_t device) const;
  std::size_t size() const;
  // Samples pushed out of memory by the capacity (still in the CSV stream).
  uint64_t dropped() const;
  const std::vector<std::string>& device_names() const { return device_names_; }

  // Largest power of device among held samples in (begin_s, end_s] and the
  // last sample at or before begin_s.
  std::optional<double> peak_power_w(uint32_t device, double begin_s, double end_s) const;
  // The share of device's held samples in (begin_s, end_s] taken at the power
  // cap, among those whose cap state was read; none where none was.
  std::optional<double> power_capped_share(uint32_t device, double begin_s, double end_s) const;

  static const char* csv_header();
  void write_csv(std::ostream& out) const;
  // Writes every held sample to path. Throws Error naming the path.
  void write_csv(const std::string& path) const;

 private:
  std::string csv_row(const TimelineSample& sample) const;
  void add_locked(const TimelineSample& sample);

  std::vector<std::string> device_names_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<TimelineSample> samples_;
  std::vector<std::optional<TimelineSample>> latest_;  // by device
  uint64_t dropped_ = 0;
  std::ofstream stream_;
  std::string stream_path_;
};

}  // namespace joule
