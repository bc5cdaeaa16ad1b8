// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/units_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace joule {

namespace {

// Removes the zeros after a decimal point ("2.50" -> "2.5", "3.00" -> "3").
std::string trim_zeros(std::string text) {
  if (text.find('.') == std::string::npos) return text;
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

// `value` to `significant` digits (more when it has more whole digits); the
// zeros that show the precision kept unless `trim`.
std::string fixed_significant(double value, int significant, bool trim) {
  if (value == 0.0) return "0";
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  const int decimals = std::max(0, significant - 1 - magnitude);
  std::string text = fmt::format("{:.{}f}", value, decimals);
  if (trim) text = trim_zeros(text);
  return text == "-0" ? "0" : text;
}

constexpr const char* kPrefixes[] = {"n", "\xC2\xB5", "m", "", "k", "M", "G", "T"};  // micro as UTF-8  // 10^-9 .. 10^12
constexpr int kUnprefixed = 3;

std::string si(double value, const std::string& unit, int significant, bool trim) {
  const std::string space = unit.empty() ? "" : " ";
  if (value == 0.0 || !std::isfinite(value)) return fixed_significant(value, significant, true) + space + unit;
  // Ratios and counts: "0.8", not "800m"; prefixes only for large counts ("4.05M").
  if (unit.empty() && std::fabs(value) < 1e4) return fixed_significant(value, significant, trim);
  int group = static_cast<int>(std::floor(std::log10(std::fabs(value)) / 3.0));
  // Seconds read better as "3600 s" than as "3.6 ks".
  if (unit == "s") group = std::min(group, 0);
  group = std::clamp(group, -kUnprefixed, static_cast<int>(std::size(kPrefixes)) - 1 - kUnprefixed);
  double scaled = value / std::pow(1000.0, group);
  // Rounding can carry into the next prefix: 999.7 -> "1000" -> "1 k".
  const double rounded = std::stod(fixed_significant(scaled, significant, false));
  if (std::fabs(rounded) >= 1000.0 && group + kUnprefixed + 1 < static_cast<int>(std::size(kPrefixes)) &&
      !(unit == "s" && group >= 0)) {
    ++group;
    scaled = rounded / 1000.0;
  }
  return fixed_significant(scaled, significant, trim) + space + kPrefixes[group + kUnprefixed] + unit;
}

}  // namespace

std::string format_plain(double value, int significant) { return fixed_significant(value, significant, true); }

std::string format_si(double value, const std::string& unit, int significant) {
  return si(value, unit, significant, false);
}

std::string format_tick(double value, const std::string& unit) { return si(value, unit, 3, true); }

AxisUnit axis_unit(const std::vector<double>& ticks, const std::string& unit) {
  double largest = 0;
  for (double t : ticks) {
    if (std::isfinite(t)) largest = std::max(largest, std::fabs(t));
  }
  // Counts and ratios keep format_tick's own rule; so does an axis at zero.
  if (unit.empty() || largest == 0.0) return {1.0, unit};
  int group = static_cast<int>(std::floor(std::log10(largest) / 3.0));
  if (unit == "s") group = std::min(group, 0);
  group = std::clamp(group, -kUnprefixed, static_cast<int>(std::size(kPrefixes)) - 1 - kUnprefixed);
  return {std::pow(1000.0, group), std::string(kPrefixes[group + kUnprefixed]) + unit};
}

std::string format_duration(double seconds) {
  const double size = std::fabs(seconds);
  if (size < 1.0) return format_si(seconds, "s");
  if (size < 120.0) return fixed_significant(seconds, 3, false) + " s";
  if (size < 7200.0) return fixed_significant(seconds / 60.0, 3, false) + " min";
  return fixed_significant(seconds / 3600.0, 3, false) + " h";
}

std::string format_watt_hours(double joules) {
  const double wh = joules / 3600.0;
  if (std::fabs(wh) < 1000.0) return fixed_significant(wh, 3, false) + " Wh";
  return fixed_significant(wh / 1000.0, 3, false) + " kWh";
}

std::vector<double> linear_ticks(double low, double high, int target, bool integer) {
  if (low > high) std::swap(low, high);
  if (!(high > low)) return {low};
  const double raw = (high - low) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normal = raw / magnitude;
  double step = (normal < 1.5 ? 1.0 : normal < 3.5 ? 2.0 : normal < 7.5 ? 5.0 : 10.0) * magnitude;
  if (integer) step = std::max(1.0, std::round(step));
  std::vector<double> ticks;
  const double first = std::ceil(low / step - 1e-9);
  for (double k = first; k * step <= high + step * 1e-9; k += 1.0) {
    const double tick = k * step;
    ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  if (ticks.empty()) ticks.push_back(integer ? std::round(low) : low);
  return ticks;
}

std::vector<double> log_ticks(double low, double high, bool integer) {
  if (low > high) std::swap(low, high);
  if (!(low > 0.0)) return linear_ticks(low, high, 5, integer);
  const double slack = 1e-9;
  auto inside = [&](double v) { return v >= low * (1 - slack) && v <= high * (1 + slack); };
  std::vector<double> ticks;
  if (integer) {
    for (double p = 1.0; p <= high * (1 + slack); p *= 2.0) {
      if (inside(p)) ticks.push_back(p);
    }
    // Every other power of two on wide ranges keeps the labels apart.
    while (ticks.size() > 8) {
      std::vector<double> thinned;
      for (std::size_t i = 0; i < ticks.size(); i += 2) thinned.push_back(ticks[i]);
      ticks = thinned;
    }
  } else {
    const int from = static_cast<int>(std::floor(std::log10(low))), to = static_cast<int>(std::ceil(std::log10(high)));
    for (int e = from; e <= to; ++e) {
      if (inside(std::pow(10.0, e))) ticks.push_back(std::pow(10.0, e));
    }
    if (ticks.size() < 3) {
      for (int e = from; e <= to; ++e) {
        for (double m : {2.0, 5.0}) {
          if (inside(m * std::pow(10.0, e))) ticks.push_back(m * std::pow(10.0, e));
        }
      }
      std::sort(ticks.begin(), ticks.end());
    }
  }
  // Less than a decade or so: plain 1-2-5 steps read better than two ticks.
  if (ticks.size() < (integer ? 2u : 3u)) return linear_ticks(low, high, 4, integer);
  return ticks;
}

}  // namespace joule
