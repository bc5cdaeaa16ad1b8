// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The one source of time in joule. Real runs use SteadyClock; simulation and
// tests use VirtualClock, which moves only when told to. Nothing outside this
// interface reads the system time.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>

namespace joule {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since an arbitrary, fixed origin; never goes backwards.
  virtual double now_s() const = 0;
  // True when time only moves by advance(); waits must not block on it.
  virtual bool is_virtual() const = 0;
  // This clock's time of a wall-clock timestamp in microseconds (CLOCK_REALTIME,
  // as drivers stamp their buffered samples).
  virtual double from_realtime_us(uint64_t realtime_us) const = 0;
  // The reverse: the wall-clock timestamp of this clock's time_s.
  virtual uint64_t to_realtime_us(double time_s) const = 0;
};

// Monotonic wall time (std::chrono::steady_clock), origin at process start.
class SteadyClock final : public Clock {
 public:
  double now_s() const override;
  bool is_virtual() const override { return false; }
  // Through the current offset between the wall clock and this one, so a
  // wall-clock step (NTP) moves only timestamps taken across it.
  double from_realtime_us(uint64_t realtime_us) const override;
  uint64_t to_realtime_us(double time_s) const override;
  // The process-wide instance.
  static std::shared_ptr<SteadyClock> instance();

 private:
  // The wall clock (microseconds) and this clock, read together.
  struct Now {
    double wall_us;
    double steady_s;
  };
  Now now_on_both() const;
};

// CPU time the calling thread has used, in seconds (for cost figures).
double this_thread_cpu_s();

// Time that advances only by explicit calls. Thread-safe.
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(double start_s = 0.0) : now_s_(start_s) {}
  double now_s() const override { return now_s_.load(std::memory_order_acquire); }
  bool is_virtual() const override { return true; }
  // A virtual clock is its own wall clock: microsecond timestamps are its
  // seconds x 1e6 (what test doubles of drivers stamp their samples with).
  double from_realtime_us(uint64_t realtime_us) const override { return static_cast<double>(realtime_us) * 1e-6; }
  uint64_t to_realtime_us(double time_s) const override { return static_cast<uint64_t>(std::llround(time_s * 1e6)); }
  void advance_s(double delta_s);
  void set_s(double time_s);

 private:
  std::atomic<double> now_s_;
};

}  // namespace joule
