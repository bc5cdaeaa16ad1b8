// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Numbers as people read them in reports: SI prefixes with a unit ("4.92 kJ",
// "250 W", "1.2 MJ"), durations in s/min/h, energy also in Wh/kWh, and the
// 1-2-5 tick values a chart axis is labelled with.
#pragma once

#include <string>
#include <vector>

namespace joule {

// `value` with an SI prefix (n, µ, m, k, M, G, T) and `unit`, to `significant`
// digits (a measurement's precision: "3.10 kJ"): (4920, "J") -> "4.92 kJ",
// (0.25, "s") -> "250 ms". Seconds take no positive prefix; numbers without a
// unit take one only from 10^4 ((0.8, "") -> "0.800", (4.05e6, "") -> "4.05M").
// Never in e-notation.
std::string format_si(double value, const std::string& unit, int significant = 3);

// An axis tick: format_si to 3 digits without trailing zeros ("1.2 MJ", "2 kJ").
std::string format_tick(double value, const std::string& unit);

// The one unit an axis's ticks share, with the SI prefix that suits its
// largest tick (the same prefix format_si gives it): ticks read as plain
// numbers (tick / scale) and the axis title names the unit once, "time (ms)".
struct AxisUnit {
  double scale = 1;        // a tick's value / scale is the number shown
  std::string unit = {};   // "ms", "kJ", "W"; empty for plain numbers
};
AxisUnit axis_unit(const std::vector<double>& ticks, const std::string& unit);

// A duration in s (ms below 1 s), min (from 2 min) or h (from 2 h): "16.0 s",
// "3.50 min", "2.10 h".
std::string format_duration(double seconds);

// Energy in Wh below 1 kWh, else kWh: 667 J -> "0.185 Wh", 7.2 MJ -> "2.00 kWh".
std::string format_watt_hours(double joules);

// A plain number to `significant` digits without e-notation or trailing
// zeros: 1.19 -> "1.19", 2 -> "2", 0.000185 -> "0.000185".
std::string format_plain(double value, int significant = 3);

// Tick values for an axis over [low, high]: multiples of a 1, 2 or 5 step
// (times a power of ten) so that about `target` ticks fall in the range;
// whole numbers only when `integer` (GPU counts). Ends at the multiples
// just inside the range; at least one tick.
std::vector<double> linear_ticks(double low, double high, int target = 5, bool integer = false);

// Ticks for a log axis over [low, high] (both > 0): powers of ten, with 2x
// and 5x between them when fewer than three powers fall in the range; for an
// integer axis powers of two; a linear 1-2-5 set when the range is too narrow
// for either to give two ticks.
std::vector<double> log_ticks(double low, double high, bool integer = false);

}  // namespace joule
