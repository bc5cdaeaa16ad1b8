// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A GPU's power history as the sampler keeps it (private to src/measure):
// points in time order, each with the running integral of power up to it,
// and the energy-counter readings paired with that integral to calibrate it.
// The queries here run at every window edge: they are inline so that the
// window path (window_energy.cc) and the reading side (sampler_reads.cc)
// both get them without a call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace joule::detail {

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
using PowerPoints = std::deque<PowerPoint>;

// An energy-counter reading and the power integral at the same instant.
struct CounterPoint {
  double time_s;
  double counter_j;
  double integral_j;  // power integral at time_s, filled once the data covers it
};

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

// Appends a point after the last, carrying the integral on by its segment.
// False (nothing added) when it is not later than the last: two ticks in
// the same instant of a virtual clock.
inline bool append_power_point(PowerPoints& points, double time_s, double power_w, Segment segment) {
  double integral_j = 0.0;
  if (!points.empty()) {
    const PowerPoint& last = points.back();
    if (time_s <= last.time_s) return false;
    const double dt_s = time_s - last.time_s;
    integral_j = last.integral_j + (segment == Segment::kStep ? power_w * dt_s : 0.5 * (last.power_w + power_w) * dt_s);
  }
  points.push_back({time_s, power_w, integral_j, segment});
  return true;
}

// The integral of power from the first point to time_s; before the first
// point and after the last, power continues at that point's.
inline double integral_at(const PowerPoints& points, double time_s) {
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

// Largest minus smallest power among the points that cover [from_s, to_s].
inline double power_range_w(const PowerPoints& points, double from_s, double to_s) {
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

// Drops points no longer needed from keep_from_s on, keeping the last one
// before it (it anchors interpolation there). True when any was dropped.
template <typename Points>
bool trim_points_before(Points& points, double keep_from_s) {
  bool dropped = false;
  while (points.size() > 2 && points[1].time_s <= keep_from_s) {
    points.pop_front();
    dropped = true;
  }
  return dropped;
}

// The least-squares slope of counter energy against the power integral
// over the readings held: the scale that calibrates the integral. None
// while there are fewer than three readings or they span less than
// min_span_s; 1 where the slope lies outside 0.5-2 (broken readings, not a
// biased sensor).
std::optional<double> calibration_scale(const std::deque<CounterPoint>& counters, double min_span_s);

}  // namespace joule::detail
