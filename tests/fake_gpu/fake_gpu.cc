// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "fake_gpu/fake_gpu.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace joule::fake_gpu {

long long floor_tolerant(double x) { return static_cast<long long>(std::floor(x + 1e-9)); }

double last_tick_s(double t_s, double period_ms) {
  if (period_ms <= 0) return t_s;
  return static_cast<double>(floor_tolerant(t_s * 1000.0 / period_ms)) * period_ms / 1000.0;
}

double counter_tick_s(double t_s, double update_ms, double phase_ms) {
  const double phase_s = update_ms > 0 ? phase_ms / 1000.0 : 0.0;
  return std::max(0.0, last_tick_s(t_s - phase_s, update_ms) + phase_s);
}

Pairs parse_pairs(const std::string& rest) {
  Pairs pairs;
  std::size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && std::isspace(static_cast<unsigned char>(rest[i]))) ++i;
    if (i >= rest.size()) break;
    const std::size_t eq = rest.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = rest.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < rest.size() && rest[i] == '"') {
      const std::size_t close = rest.find('"', i + 1);
      value = rest.substr(i + 1, close - i - 1);
      i = close == std::string::npos ? rest.size() : close + 1;
    } else {
      const std::size_t end = rest.find_first_of(" \t", i);
      value = rest.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end == std::string::npos ? rest.size() : end;
    }
    pairs[key] = value;
  }
  return pairs;
}

double number_or(const Pairs& kv, const char* key, double fallback) {
  auto it = kv.find(key);
  return it == kv.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
}

std::string parse_clock_list(const Pairs& kv, const char* key, std::vector<unsigned>& out) {
  if (!kv.count(key)) return "";
  std::stringstream items(kv.at(key));
  std::string item;
  while (std::getline(items, item, ',')) {
    char* end = nullptr;
    const unsigned long mhz = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || mhz == 0 || (!out.empty() && mhz <= out.back())) {
      return std::string(key) + " must list ascending positive MHz, not '" + kv.at(key) + "'";
    }
    out.push_back(static_cast<unsigned>(mhz));
  }
  return "";
}

double Draw::operator()(double level_w) const {
  const double shaped_w = level_w > idle_w ? idle_w + (level_w - idle_w) * scale : level_w;
  return std::min(shaped_w, cap_w);
}

namespace {
constexpr double kMemoryPowerShare = 0.15, kMemoryBoundShare = 0.2;
}  // namespace

double clock_power_scale(double f, double m) { return f * f * f * (1.0 - kMemoryPowerShare * (1.0 - m)); }

double clock_relative_speed(double f, double m) { return 1.0 / (1.0 / f + kMemoryBoundShare * (1.0 / m - 1.0)); }

// ---- PowerProfile ----

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a tiny PRNG with a fixed definition,
// so a seed gives the same profile on every platform and compiler (the
// <random> distributions are implementation-defined).
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

PowerProfile PowerProfile::repeating(std::vector<Segment> segments, double period_s) {
  PowerProfile p;
  p.segments_ = std::move(segments);
  p.end_s_ = period_s;
  p.repeats_ = true;
  return p;
}

PowerProfile PowerProfile::random(std::uint64_t seed, double first_w, double second_w, long long min_phase_ms,
                                  long long max_phase_ms) {
  PowerProfile p;
  p.repeats_ = false;
  p.segments_.clear();
  p.end_s_ = 0.0;
  p.rng_state_ = seed;
  p.phase_levels_w_[0] = first_w;
  p.phase_levels_w_[1] = second_w;
  p.min_phase_ms_ = min_phase_ms;
  p.max_phase_ms_ = max_phase_ms;
  p.cover(0.0);
  return p;
}

double PowerProfile::level_w(double t_s, const Draw& draw) {
  const double x = position_s(t_s, nullptr);
  return draw(segments_[segment_index(x)].level_w);
}

double PowerProfile::energy_j(double t_s, const Draw& draw) {
  if (t_s <= 0) return 0.0;
  double whole_periods = 0;
  const double x = position_s(t_s, &whole_periods);
  const std::vector<double>& cumulative = cumulative_j(draw);
  const std::size_t i = segment_index(x);
  const double within = cumulative[i] + (x - segments_[i].start_s) * draw(segments_[i].level_w);
  return whole_periods * cumulative.back() + within;
}

// Where t_s falls in the table: its phase within the period (whole periods
// before it in *whole_periods), or t_s itself once random phases cover it.
double PowerProfile::position_s(double t_s, double* whole_periods) {
  t_s = std::max(t_s, 0.0);
  if (!repeats_) {
    cover(t_s);
    if (whole_periods != nullptr) *whole_periods = 0;
    return t_s;
  }
  const double periods = std::floor(t_s / end_s_);
  if (whole_periods != nullptr) *whole_periods = periods;
  return std::clamp(t_s - periods * end_s_, 0.0, end_s_);
}

// Random profile: draws phases until the table reaches past t_s. Phases are
// whole milliseconds, so their boundaries are exact in seconds too.
void PowerProfile::cover(double t_s) {
  while (static_cast<double>(end_ms_) / 1000.0 <= t_s) {
    const auto span = static_cast<std::uint64_t>(max_phase_ms_ - min_phase_ms_ + 1);
    // The modulo bias is below 2^-50 for any sensible span.
    const long long phase_ms = min_phase_ms_ + static_cast<long long>(splitmix64(rng_state_) % span);
    segments_.push_back({static_cast<double>(end_ms_) / 1000.0, phase_levels_w_[segments_.size() % 2]});
    end_ms_ += phase_ms;
    end_s_ = static_cast<double>(end_ms_) / 1000.0;
  }
}

// The last segment starting at or before x.
std::size_t PowerProfile::segment_index(double x) const {
  const auto after = std::upper_bound(segments_.begin(), segments_.end(), x,
                                      [](double t, const Segment& s) { return t < s.start_s; });
  return after == segments_.begin() ? 0 : static_cast<std::size_t>(after - segments_.begin()) - 1;
}

double PowerProfile::segment_end_s(std::size_t i) const {
  return i + 1 < segments_.size() ? segments_[i + 1].start_s : end_s_;
}

// Energy under draw at each segment's start, plus one at the table's end.
// Appending random phases leaves every sum valid (the old end is the new
// phase's start), so the table is only extended.
const std::vector<double>& PowerProfile::cumulative_j(const Draw& draw) {
  std::vector<double>& sums = cumulative_by_draw_[draw];
  if (sums.empty()) sums.push_back(0.0);
  while (sums.size() < segments_.size() + 1) {
    const std::size_t i = sums.size() - 1;
    sums.push_back(sums[i] + (segment_end_s(i) - segments_[i].start_s) * draw(segments_[i].level_w));
  }
  return sums;
}

// ---- ScriptedPower ----

namespace {

// Reads a profile file ("duration_ms power_w" per line) into one period of
// segments. Returns an error naming the file and line, or "".
std::string read_profile_file(const std::string& path, std::vector<Segment>& segments, double& period_s) {
  std::ifstream in(path);
  if (!in) return "cannot open profile_file " + path;
  double start_ms = 0.0;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream words(line);
    double duration_ms = 0, power_w = 0;
    std::string extra;
    if (!(words >> duration_ms >> power_w) || (words >> extra) || !std::isfinite(duration_ms) ||
        !std::isfinite(power_w) || duration_ms <= 0 || power_w < 0) {
      return path + " line " + std::to_string(number) +
             ": expected 'duration_ms power_w' (duration > 0, power >= 0), got '" + line + "'";
    }
    segments.push_back({start_ms / 1000.0, power_w});
    start_ms += duration_ms;
  }
  if (segments.empty()) return path + ": no segments (expected lines 'duration_ms power_w')";
  period_s = start_ms / 1000.0;
  return "";
}

}  // namespace

std::string ScriptedPower::configure(const Pairs& kv, const std::string& config_path, const std::string& where) {
  const double power_w = number_or(kv, "power_w", 100.0);
  const double pulse_w = number_or(kv, "pulse_w", -1.0);  // < 0: no pulse
  const double pulse_period_ms = number_or(kv, "pulse_period_ms", 0.0);
  const bool random = kv.count("profile") != 0;
  if (random && kv.at("profile") != "random") return where + ": unknown profile '" + kv.at("profile") + "'";
  if (kv.count("profile_file") != 0) {
    if (random) return where + ": profile_file and profile=random exclude each other";
    std::filesystem::path file = kv.at("profile_file");
    if (file.is_relative()) file = std::filesystem::path(config_path).parent_path() / file;
    std::vector<Segment> segments;
    double period_s = 0;
    if (auto error = read_profile_file(file.string(), segments, period_s); !error.empty()) return error;
    profile_ = PowerProfile::repeating(std::move(segments), period_s);
  } else if (random) {
    const auto min_ms = static_cast<long long>(number_or(kv, "min_phase_ms", 150));
    const auto max_ms = static_cast<long long>(number_or(kv, "max_phase_ms", 2500));
    if (pulse_w < 0) return where + ": profile=random needs pulse_w (the first phase's power)";
    if (min_ms <= 0 || max_ms < min_ms) return where + ": profile=random needs 0 < min_phase_ms <= max_phase_ms";
    const std::uint64_t seed = kv.count("seed") ? std::strtoull(kv.at("seed").c_str(), nullptr, 0) : 1;
    profile_ = PowerProfile::random(seed, pulse_w, power_w, min_ms, max_ms);
  } else if (pulse_w >= 0 && pulse_period_ms > 0) {
    const double period_s = pulse_period_ms / 1000.0;
    profile_ = PowerProfile::repeating({{0.0, power_w}, {period_s / 2, pulse_w}}, period_s);
  } else {
    profile_ = PowerProfile::constant(power_w);
  }
  return "";
}

void ScriptedPower::start(const Draw& draw) { eras_ = {{0.0, 0.0, draw}}; }

void ScriptedPower::change(double now_s, const Draw& draw) {
  const double now = std::max(now_s, eras_.back().start_s);
  eras_.push_back({now, energy_j(now), draw});
}

// The era in force at t_s (the last one starting at or before it).
const ScriptedPower::Era& ScriptedPower::era_at(double t_s) const {
  const auto after = std::upper_bound(eras_.begin(), eras_.end(), t_s,
                                      [](double t, const Era& era) { return t < era.start_s; });
  return after == eras_.begin() ? eras_.front() : *(after - 1);
}

double ScriptedPower::power_at_w(double t_s) { return profile_.level_w(t_s, era_at(t_s).draw); }

bool ScriptedPower::capped_at(double t_s) {
  Draw unlimited = era_at(t_s).draw;
  unlimited.cap_w = Draw{}.cap_w;
  return profile_.level_w(t_s, unlimited) > power_at_w(t_s);
}

double ScriptedPower::energy_j(double t_s) {
  if (t_s < 0) return power_at_w(0.0) * t_s;
  const Era era = era_at(t_s);
  return era.energy_j_at_start + profile_.energy_j(t_s, era.draw) - profile_.energy_j(era.start_s, era.draw);
}

double ScriptedPower::mean_power_w(double to_s, double span_s) {
  if (span_s <= 0) return power_at_w(to_s);
  return (energy_j(to_s) - energy_j(to_s - span_s)) / span_s;
}

double ScriptedPower::sensor_power_w(double t_s, double update_ms, double window_ms) {
  const double tau_s = last_tick_s(t_s, update_ms);
  if (window_ms <= 0) return power_at_w(tau_s);
  return mean_power_w(tau_s, std::min(window_ms / 1000.0, tau_s));
}

double ScriptedPower::counter_energy_j(double tick_s, double reset_ms) {
  double counted_j = energy_j(tick_s);
  if (reset_ms >= 0 && tick_s >= reset_ms / 1000.0) counted_j -= energy_j(reset_ms / 1000.0);
  return counted_j;
}

// ---- devices ----

void PowerLimits::configure(const Pairs& kv, std::uint64_t unit_uw) {
  // Whole units, truncated, as the library reports them.
  const double per_w = 1e6 / static_cast<double>(unit_uw);
  auto read = [&](const char* key, std::uint64_t fallback_uw) {
    const double w = number_or(kv, key, static_cast<double>(fallback_uw) / 1e6);
    return static_cast<std::uint64_t>(w * per_w) * unit_uw;
  };
  max_uw = read("max_limit_w", max_uw);
  min_uw = read("min_limit_w", min_uw);
  default_uw = read("default_limit_w", max_uw);
  limit_uw = read("limit_w", default_uw);
}

std::string configure_device(ScriptedDevice& d, std::size_t index, const Pairs& kv, std::uint64_t limit_unit_uw,
                             const std::string& config_path, const std::string& where) {
  auto num = [&](const char* key, double fallback) { return number_or(kv, key, fallback); };
  if (kv.count("name")) d.name = kv.at("name");
  char pci[32];
  std::snprintf(pci, sizeof pci, "00000000:%02zX:00.0", 0x18 + index);
  d.pci_bus_id = kv.count("pci") ? kv.at("pci") : pci;
  d.limits.configure(kv, limit_unit_uw);
  d.util_gpu = static_cast<unsigned>(num("util_gpu", d.util_gpu));
  d.util_mem = static_cast<unsigned>(num("util_mem", d.util_mem));
  d.idle_w = num("idle_w", 0);
  d.temp_c = static_cast<unsigned>(num("temp_c", d.temp_c));
  d.mem_used = static_cast<unsigned long long>(num("mem_used_mib", 0)) << 20;
  d.mem_total = static_cast<unsigned long long>(num("mem_total_mib", static_cast<double>(d.mem_total >> 20))) << 20;
  if (d.mem_used > d.mem_total) return where + ": mem_used_mib exceeds mem_total_mib";
  return d.power.configure(kv, config_path, where);
}

// ---- the script ----

void Script::clear() {
  loaded = false;
  load_error.clear();
  init_error = 0;
  set_log.clear();
  persist.clear();
  errors.clear();
  hangs.clear();
  virtual_clock = false;
}

double Script::now_s() const {
  if (virtual_clock) return virtual_now_s;
  return std::chrono::duration<double>(Clock::now() - init_time).count();
}

void Script::start_clock() {
  init_time = Clock::now();
  realtime_at_init_us = realtime_now_us();
  virtual_now_s = 0.0;
}

void Script::arm_hangs() {
  any_hang_rules.store(!hangs.empty());
  hangs_released.store(false);  // a new config's hangs are armed again
}

unsigned long long realtime_now_us() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL + static_cast<unsigned long long>(ts.tv_nsec) / 1000;
}

namespace {

std::string process_directive(const Pairs& kv, const DeviceLookup& device_at, const std::string& where) {
  const auto index = static_cast<std::size_t>(number_or(kv, "device", 0));
  ScriptedDevice* device = device_at(index);
  if (device == nullptr) return where + ": process names device " + std::to_string(index) + ", not defined above";
  ScriptedProcess p;
  p.pid = static_cast<unsigned>(number_or(kv, "pid", 0));
  const std::string used = kv.count("used_mib") ? kv.at("used_mib") : "0";
  char* end = nullptr;
  const double used_mib = std::strtod(used.c_str(), &end);
  if (used != "na" && (end == used.c_str() || *end != '\0' || !(used_mib >= 0))) {
    return where + ": process used_mib must be a number >= 0 or na, not '" + used + "'";
  }
  p.used_known = used != "na";
  p.used_bytes = p.used_known ? static_cast<unsigned long long>(used_mib * 1024 * 1024) : 0;
  const std::string kind = kv.count("kind") ? kv.at("kind") : "compute";
  if (kind != "compute" && kind != "graphics" && kind != "both") {
    return where + ": process kind must be compute, graphics or both, not '" + kind + "'";
  }
  p.compute = kind != "graphics";
  p.graphics = kind != "compute";
  p.start_s = number_or(kv, "start_ms", 0) / 1000.0;
  p.end_s = kv.count("end_ms") ? number_or(kv, "end_ms", 0) / 1000.0 : 1e300;
  if (kv.count("sm_util")) {
    const double percent = number_or(kv, "sm_util", -1);
    if (!(percent >= 0 && percent <= 100)) return where + ": process sm_util must be a percentage, 0 to 100";
    p.sm_util_percent = static_cast<unsigned>(percent);
  }
  device->processes.push_back(p);
  return "";
}

std::string process_dir_directive(const Pairs& kv, const DeviceLookup& device_at, const std::string& where) {
  const auto index = static_cast<std::size_t>(number_or(kv, "device", 0));
  ScriptedDevice* device = device_at(index);
  if (device == nullptr) return where + ": process_dir names device " + std::to_string(index) + ", not defined above";
  if (!kv.count("path") || kv.at("path").empty()) return where + ": process_dir needs path=DIR";
  device->process_dir = kv.at("path");
  return "";
}

std::string hang_directive(Script& s, const Pairs& kv, const std::string& where) {
  HangRule rule;
  rule.function = kv.count("function") ? kv.at("function") : "*";
  rule.device = static_cast<int>(number_or(kv, "device", -1));
  rule.after_calls = static_cast<long>(number_or(kv, "after_calls", 0));
  rule.after_ms = number_or(kv, "after_ms", 0);
  const std::string seconds = kv.count("seconds") ? kv.at("seconds") : "forever";
  rule.seconds = seconds == "forever" ? -1.0 : std::strtod(seconds.c_str(), nullptr);
  rule.times = static_cast<long>(number_or(kv, "times", -1));
  if (seconds != "forever" && !(rule.seconds >= 0)) {
    return where + ": hang seconds must be a number >= 0 or forever, not '" + seconds + "'";
  }
  s.hangs.push_back(rule);
  return "";
}

void error_directive(Script& s, const Pairs& kv, const Codes& codes) {
  ErrorRule rule;
  rule.function = kv.count("function") ? kv.at("function") : "*";
  rule.device = static_cast<int>(number_or(kv, "device", -1));
  rule.code = static_cast<std::int64_t>(number_or(kv, "code", static_cast<double>(codes.injected_error)));
  rule.after_calls = static_cast<long>(number_or(kv, "after_calls", 0));
  rule.after_ms = number_or(kv, "after_ms", 0);
  s.errors.push_back(rule);
}

// One directive shared by every fake: returns an error, "", or kUnknownDirective.
std::string shared_directive(Script& s, const std::string& directive, const std::string& rest, const Pairs& kv,
                             const Codes& codes, const DeviceLookup& device_at, const std::string& where) {
  if (directive == "set_log") {
    std::istringstream(rest) >> s.set_log;
  } else if (directive == "persist") {
    std::istringstream(rest) >> s.persist;
  } else if (directive == "init_error") {
    s.init_error = static_cast<std::int64_t>(number_or(kv, "code", static_cast<double>(codes.init_error)));
  } else if (directive == "clock") {
    std::string mode;
    std::istringstream(rest) >> mode;
    if (mode != "virtual" && mode != "wall") return where + ": clock must be 'virtual' or 'wall', not '" + mode + "'";
    s.virtual_clock = mode == "virtual";
  } else if (directive == "process") {
    return process_directive(kv, device_at, where);
  } else if (directive == "process_dir") {
    return process_dir_directive(kv, device_at, where);
  } else if (directive == "hang") {
    return hang_directive(s, kv, where);
  } else if (directive == "error") {
    error_directive(s, kv, codes);
  } else {
    return kUnknownDirective;
  }
  return "";
}

}  // namespace

std::vector<ScriptedProcess> running_processes(const ScriptedDevice& device, double t_s) {
  std::vector<ScriptedProcess> running;
  for (const ScriptedProcess& p : device.processes) {
    if (p.running_at(t_s)) running.push_back(p);
  }
  if (device.process_dir.empty()) return running;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(device.process_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name.size() > 9) continue;
    if (!std::filesystem::exists("/proc/" + name)) continue;
    ScriptedProcess p;
    p.pid = static_cast<unsigned>(std::stoul(name));
    running.push_back(p);
  }
  return running;
}

void load_config(Script& s, const char* config_env, const char* log_env, const Codes& codes,
                 const DirectiveHandler& handler, const DeviceLookup& device_at) {
  if (s.loaded) return;
  s.loaded = true;
  const char* path = std::getenv(config_env);
  if (const char* log = std::getenv(log_env)) s.set_log = log;
  if (path == nullptr) {
    s.load_error = std::string(config_env) + " is not set";
    return;
  }
  std::ifstream in(path);
  if (!in) {
    s.load_error = std::string("cannot open ") + path;
    return;
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = std::string(path) + " line " + std::to_string(number);
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string directive;
    if (!(words >> directive)) continue;
    std::string rest;
    std::getline(words, rest);
    const ConfigLine parsed{directive, rest, parse_pairs(rest), where, path};
    std::string error = shared_directive(s, directive, rest, parsed.kv, codes, device_at, where);
    if (error == kUnknownDirective) error = handler(parsed);
    if (error == kUnknownDirective) error = "unknown directive '" + directive + "' in " + path;
    if (!error.empty()) {
      s.load_error = error;
      return;
    }
  }
}

std::int64_t injected(Script& s, const char* function, int device) {
  for (auto& rule : s.errors) {
    if (rule.function != "*" && rule.function != function) continue;
    if (rule.device >= 0 && rule.device != device) continue;
    const bool time_due = s.now_s() * 1000.0 >= rule.after_ms;
    const bool calls_due = rule.calls[device] >= rule.after_calls;
    if (time_due && calls_due) return rule.code;
    ++rule.calls[device];
  }
  return 0;
}

namespace {

// How long (function, device) must block now by the hang rules: 0 for not
// at all, < 0 until released. Counts the calls before a rule is due.
double hang_due_s(Script& s, const char* function, int device) {
  if (!s.any_hang_rules.load(std::memory_order_relaxed)) return 0.0;
  std::lock_guard lock(s.mutex);
  if (!s.initialised || s.hangs_released.load()) return 0.0;
  for (HangRule& rule : s.hangs) {
    if (rule.function != "*" && rule.function != function) continue;
    if (rule.device >= 0 && rule.device != device) continue;
    if (rule.times == 0) continue;
    const bool time_due = s.now_s() * 1000.0 >= rule.after_ms;
    if (!time_due || rule.calls[device] < rule.after_calls) {
      ++rule.calls[device];
      continue;
    }
    if (rule.times > 0) --rule.times;
    return rule.seconds < 0 ? -1.0 : std::max(rule.seconds, 1e-9);
  }
  return 0.0;
}

}  // namespace

void hang_if_due(Script& s, const char* function, int device) {
  const double hang_s = hang_due_s(s, function, device);
  if (hang_s == 0.0) return;
  const auto until = Clock::now() + std::chrono::duration<double>(hang_s < 0 ? 1e9 : hang_s);
  s.calls_hung_now.fetch_add(1);
  while (!s.hangs_released.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  s.calls_hung_now.fetch_sub(1);
}

void append_log(const Script& s, const std::string& line) {
  if (s.set_log.empty()) return;
  if (FILE* f = std::fopen(s.set_log.c_str(), "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

void log_set_call(const Script& s, const std::string& function, int device, const std::string& fields,
                  const std::string& refusal) {
  append_log(s, function + " device=" + std::to_string(device) + (fields.empty() ? "" : " ") + fields +
                    (refusal.empty() ? "" : " result=" + refusal) + "\n");
}

std::int64_t init_session(Script& s, const char* who, std::int64_t broken_config_code,
                          const std::function<void()>& read_config, const std::function<void()>& start_devices) {
  std::lock_guard lock(s.mutex);
  if (!s.initialised) {
    // Each first init (re)reads the config, so one test process can open
    // differently scripted devices one after another.
    s.clear();
    read_config();
    s.arm_hangs();
  }
  if (!s.load_error.empty()) {
    std::fprintf(stderr, "%s: %s\n", who, s.load_error.c_str());
    return broken_config_code;
  }
  if (s.init_error != 0) return s.init_error;
  if (!s.initialised) {
    s.start_clock();
    start_devices();
  }
  s.initialised = true;
  return 0;
}

void set_virtual_time(Script& s, double seconds, const char* who) {
  std::lock_guard lock(s.mutex);
  if (!s.initialised || !s.virtual_clock) {
    std::fprintf(stderr, "%s: setting the time needs an initialised library and 'clock virtual' in the config\n", who);
    std::abort();
  }
  s.virtual_now_s = seconds;
}

std::map<std::size_t, std::vector<unsigned long long>> load_persisted(const Script& s) {
  std::map<std::size_t, std::vector<unsigned long long>> fields_by_device;
  if (s.persist.empty()) return fields_by_device;
  std::ifstream in(s.persist);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::size_t index = 0;
    if (!(fields >> index)) continue;
    std::vector<unsigned long long> values;
    for (unsigned long long v = 0; fields >> v;) values.push_back(v);
    fields_by_device[index] = std::move(values);
  }
  return fields_by_device;
}

void save_persisted(const Script& s, const std::vector<std::vector<unsigned long long>>& fields_by_device) {
  if (s.persist.empty()) return;
  const std::string temporary = s.persist + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (std::size_t i = 0; i < fields_by_device.size(); ++i) {
      out << i;
      for (unsigned long long v : fields_by_device[i]) out << ' ' << v;
      out << '\n';
    }
  }
  std::rename(temporary.c_str(), s.persist.c_str());
}

}  // namespace joule::fake_gpu
