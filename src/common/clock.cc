// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/clock.h"

#include <time.h>

#include <chrono>

#include "joule/error.h"

namespace joule {

namespace {
const std::chrono::steady_clock::time_point kProcessStart = std::chrono::steady_clock::now();
}  // namespace

double this_thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double SteadyClock::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
}

SteadyClock::Now SteadyClock::now_on_both() const {
  const auto wall_now = std::chrono::system_clock::now();
  const double steady_s = now_s();
  return {static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(wall_now.time_since_epoch()).count()),
          steady_s};
}

double SteadyClock::from_realtime_us(uint64_t realtime_us) const {
  const Now now = now_on_both();
  return now.steady_s - (now.wall_us - static_cast<double>(realtime_us)) * 1e-6;
}

uint64_t SteadyClock::to_realtime_us(double time_s) const {
  const Now now = now_on_both();
  return static_cast<uint64_t>(std::llround(now.wall_us - (now.steady_s - time_s) * 1e6));
}

std::shared_ptr<SteadyClock> SteadyClock::instance() {
  static const auto clock = std::make_shared<SteadyClock>();
  return clock;
}

void VirtualClock::advance_s(double delta_s) {
  if (delta_s < 0) throw Error("VirtualClock::advance_s: time cannot go backwards");
  double current = now_s_.load();
  while (!now_s_.compare_exchange_weak(current, current + delta_s)) {
  }
}

void VirtualClock::set_s(double time_s) {
  if (time_s < now_s()) throw Error("VirtualClock::set_s: time cannot go backwards");
  now_s_.store(time_s, std::memory_order_release);
}

}  // namespace joule
