// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A fake libnvidia-ml.so.1 for tests: the NVML functions joule uses, with the
// same names and ABI, over scripted devices read from the file named by
// $JOULE_FAKE_NVML_CONFIG. Each device draws power along a scripted profile
// and exposes it through the sources a real H100 (driver 580) has, each with
// its own lag; set-calls are appended to a log file; errors can be injected
// per function and device.
//
// Config, one directive per line ('#' starts a comment):
//   driver_version 580.00.00
//   set_log /path/to/log            (or $JOULE_FAKE_NVML_LOG)
//   persist /path/to/limits         (power limits survive the process, like a
//                                    real GPU's do: read at init, written at each set)
//   init_error code=9               (nvmlInit fails with this code)
//   clock virtual                   (or "clock wall", the default; see Time)
//   device name="NVIDIA H100" arch=9 power_w=300 limit_w=700 min_limit_w=200
//          max_limit_w=700 default_limit_w=700 util_gpu=80 util_mem=40
//          sm_mhz=1980 mem_mhz=2619 temp_c=55 mem_used_mib=1024 instant_power=1
//          pci=00000000:18:00.0 (default: bus 0x18 + index)
//          energy_update_ms=100 energy_call_ms=4 pulse_w=500 pulse_period_ms=200
//          instant_offset_w=20 power_update_ms=100 usage_window_ms=1000
//          sample_ms=20 sample_buffer=100 sample_latency_ms=0 sample_prefill=0
//          energy_phase_ms=0 sample_cover_ms=20
//          max_sm_mhz=1980 min_sm_mhz=210 sm_step_mhz=15 mem_clocks_mhz=1593,2619
//          idle_w=60 clocks=1 locked_clocks=1
//   error function=nvmlDeviceGetPowerUsage device=0 code=15 after_calls=3 after_ms=0
//   hang function=nvmlDeviceGetTotalEnergyConsumption device=0 after_calls=3 after_ms=0 seconds=2 times=1
//   process device=0 pid=4242 used_mib=512 kind=compute start_ms=0 end_ms=5000
//
// Processes: listed by nvmlDevice{Compute,Graphics}RunningProcesses_v3 while
// start_ms <= t < end_ms (end_ms absent: until the end); kind is compute
// (default), graphics or both; used_mib=na makes the memory "not available",
// as a driver reports it to an unprivileged caller.
//
// Clocks: the supported SM clocks run from min_sm_mhz to max_sm_mhz (default:
// sm_mhz) in sm_step_mhz steps, the memory clocks are mem_clocks_mhz (default:
// mem_mhz alone); both lists are returned highest first, as a driver does.
// Locked clocks (nvmlDevice{Set,Reset}{Gpu,Memory}LockedClocks) and
// application clocks hold the clocks down; a request outside the lists is
// INVALID_ARGUMENT, clocks=0 makes every clock setting NOT_SUPPORTED and
// locked_clocks=0 the locked-clock calls only (a GPU with application clocks
// alone; the old-driver build lacks the locked-clock functions). Settings
// persist with the limits. A held SM clock at fraction f of the highest scales
// the power above idle_w by f^3 (the memory clock: see the clock model below),
// and joule_fake_nvml_relative_speed(index) tells test programs how much
// slower their work runs.
//
// Power profile (every level is capped by the power limit in force):
//   power_w=P                        constant P (default 100 W)
//   pulse_w=Q pulse_period_ms=T      P and Q alternating every T/2, P first
//   profile=random seed=N min_phase_ms=150 max_phase_ms=2500
//                                    Q (pulse_w) and P alternating, Q first, each
//                                    phase a whole number of ms drawn uniformly
//                                    from [min, max] by splitmix64(seed): the
//                                    same sequence on every platform
//   profile_file=PATH                lines "duration_ms power_w" ('#' comments),
//                                    played in order, then again from the start;
//                                    a relative PATH is read next to the config
// The energy E(t) is the exact integral of the capped profile, kept across
// limit changes, so every source below derives from one truth.
//
// Sources (t: the fake's time; tau: t rounded down to a power_update_ms tick,
// or t itself when power_update_ms=0):
//   nvmlDeviceGetTotalEnergyConsumption  E at the last energy_update_ms tick, in
//       whole mJ; each call keeps the CPU busy for energy_call_ms (not on a virtual clock).
//       energy_phase_ms=F puts the ticks at F + k * energy_update_ms (an H100's
//       steps have a phase of their own). energy_reset_ms=R restarts the
//       counter from 0 at R, as a driver reload or GPU reset does.
//   nvmlDeviceGetPowerUsage  p(tau), or with usage_window_ms=W the trailing mean
//       (E(tau) - E(tau - W)) / W (the mean since 0 while tau < W), as an H100
//       reports a one-second mean refreshed every 100 ms.
//   nvmlDeviceGetFieldValues field 186  p(tau) + instant_offset_w (instant_power=0:
//       not supported).
//   nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)  with sample_ms=S > 0: sample i
//       (i >= 1) at t_i = i * S holds the mean power over (t_i - S, t_i] in mW,
//       visible from t_i + sample_latency_ms on; the newest sample_buffer samples
//       are held. Without sample_ms the device has no buffer (NOT_SUPPORTED).
//       sample_cover_ms=C makes each sample the mean over only the last C ms of
//       its interval (an H100's samples scatter around the counter as if so).
//       sample_stamp_lead_ms=L stamps each sample L ms before its interval ends,
//       as an H100's are against its energy counter (joule corrects by 4.5 ms).
//       With sample_prefill=1 (wall clock only) the buffer is already full at
//       nvmlInit, as a real driver's is: samples i <= 0, before init, read the
//       power at time 0. Without it the first sample ends sample_ms after init.
//
// Time: by default the wall clock, from the first nvmlInit (which also records
// CLOCK_REALTIME: sample i is stamped realtime_at_init_us + t_i * 1e6). With
// "clock virtual" time starts at 0 at the first nvmlInit and moves only when
// the test calls
//   extern "C" void joule_fake_nvml_set_time_s(double seconds);
// (exported; get it with dlopen(path, RTLD_NOW | RTLD_NOLOAD) and dlsym). Then
// samples are stamped t_i * 1e6 (virtual microseconds), the energy call does
// not busy-wait, and error rules' after_ms count virtual time.
//
// An error rule (function "*" matches all; device -1 all devices) fires after
// that many successful calls and/or milliseconds, and then keeps firing, as a
// lost GPU does.
//
// A hang rule (same matching and after_calls/after_ms) makes each call due
// block for `seconds` of wall time (absent or "forever": until released),
// then go on as usual (a driver call that hung, then returned); times=N
// hangs only the first N calls due. A hung call holds no lock of the fake:
// other functions and devices keep answering. Tests release every hang, the
// ones blocked now and the ones to come (until a config is read again), with
//   extern "C" void joule_fake_nvml_release_hangs(void);
// (exported like joule_fake_nvml_set_time_s) before they end, so no thread
// stays blocked past the test; joule_fake_nvml_hung_calls() counts the calls
// blocked now.
//
// Built twice: as is, and with JOULE_FAKE_NVML_OLD_DRIVER, which leaves out
// the functions an old driver lacks (energy counter, field values,
// architecture, samples).

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "device/nvml/nvml_abi.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

using Clock = std::chrono::steady_clock;

// Floors x, treating values a hair below an integer as that integer: a time
// set exactly on a tick (0.3 s on a 100 ms grid) must land on that tick, not
// on the one before because 0.3 * 1000 / 100 came out as 2.9999999999999996.
long long floor_tolerant(double x) { return static_cast<long long>(std::floor(x + 1e-9)); }

// splitmix64 (Steele, Lea, Flood 2014): a tiny PRNG with a fixed definition,
// so a seed gives the same profile on every platform and compiler (the
// <random> distributions are implementation-defined).
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// How a level of the profile becomes the power drawn under the settings in
// force: the part above idle_w scaled by the clock locks (scale 1 when
// unlocked), then capped by the power limit.
struct Draw {
  double cap_w = 1e300;
  double idle_w = 0.0;
  double scale = 1.0;

  double operator()(double level_w) const {
    const double shaped_w = level_w > idle_w ? idle_w + (level_w - idle_w) * scale : level_w;
    return std::min(shaped_w, cap_w);
  }
  bool operator<(const Draw& o) const {
    return std::tie(cap_w, idle_w, scale) < std::tie(o.cap_w, o.idle_w, o.scale);
  }
};

struct Segment {
  double start_s;  // the segment lasts until the next one's start (or the table's end)
  double level_w;
};

// The power a device is asked to draw over time, before its limit caps it,
// as a table of segments: one period that repeats (constant, pulse, profile
// file), or random phases drawn lazily as time advances. Energy is exact:
// cumulative sums per segment (one table per cap) and a binary search.
class PowerProfile {
 public:
  PowerProfile() = default;  // constant 100 W

  static PowerProfile constant(double power_w) { return repeating({{0.0, power_w}}, 1.0); }

  static PowerProfile repeating(std::vector<Segment> segments, double period_s) {
    PowerProfile p;
    p.segments_ = std::move(segments);
    p.end_s_ = period_s;
    p.repeats_ = true;
    return p;
  }

  static PowerProfile random(std::uint64_t seed, double first_w, double second_w, long long min_phase_ms,
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

  double level_w(double t_s, const Draw& draw) {
    const double x = position_s(t_s, nullptr);
    return draw(segments_[segment_index(x)].level_w);
  }

  // Integral of draw(level) over [0, t_s].
  double energy_j(double t_s, const Draw& draw) {
    if (t_s <= 0) return 0.0;
    double whole_periods = 0;
    const double x = position_s(t_s, &whole_periods);
    const std::vector<double>& cumulative = cumulative_j(draw);
    const std::size_t i = segment_index(x);
    const double within = cumulative[i] + (x - segments_[i].start_s) * draw(segments_[i].level_w);
    return whole_periods * cumulative.back() + within;
  }

 private:
  // Where t_s falls in the table: its phase within the period (whole periods
  // before it in *whole_periods), or t_s itself once random phases cover it.
  double position_s(double t_s, double* whole_periods) {
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
  void cover(double t_s) {
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
  std::size_t segment_index(double x) const {
    const auto after = std::upper_bound(segments_.begin(), segments_.end(), x,
                                        [](double t, const Segment& s) { return t < s.start_s; });
    return after == segments_.begin() ? 0 : static_cast<std::size_t>(after - segments_.begin()) - 1;
  }

  double segment_end_s(std::size_t i) const { return i + 1 < segments_.size() ? segments_[i + 1].start_s : end_s_; }

  // Energy under draw at each segment's start, plus one at the table's end.
  // Appending random phases leaves every sum valid (the old end is the new
  // phase's start), so the table is only extended.
  const std::vector<double>& cumulative_j(const Draw& draw) {
    std::vector<double>& sums = cumulative_by_draw_[draw];
    if (sums.empty()) sums.push_back(0.0);
    while (sums.size() < segments_.size() + 1) {
      const std::size_t i = sums.size() - 1;
      sums.push_back(sums[i] + (segment_end_s(i) - segments_[i].start_s) * draw(segments_[i].level_w));
    }
    return sums;
  }

  std::vector<Segment> segments_{{0.0, 100.0}};
  double end_s_ = 1.0;  // the period (repeating) or how far phases are drawn (random)
  bool repeats_ = true;
  // Random profile only.
  std::uint64_t rng_state_ = 0;
  double phase_levels_w_[2] = {0.0, 0.0};
  long long min_phase_ms_ = 0, max_phase_ms_ = 0;
  long long end_ms_ = 0;
  std::map<Draw, std::vector<double>> cumulative_by_draw_;
};

// A stretch of time under one power limit and one set of clock locks:
// energy stays continuous across changes, and the past keeps the draw it had
// (samples and trailing means look back across changes).
struct LimitEra {
  double start_s;
  double energy_j_at_start;
  Draw draw;
};

// A clock lock as the fake holds it; max_mhz 0: unlocked.
struct FakeClockLock {
  unsigned min_mhz = 0, max_mhz = 0;
};

struct Device {
  std::string name = "Fake NVIDIA GPU";
  std::string uuid;
  unsigned arch = 9;
  PowerProfile profile;
  unsigned limit_mw = 300000, min_limit_mw = 100000, max_limit_mw = 300000, default_limit_mw = 300000;
  std::string pci_bus_id;
  unsigned util_gpu = 0, util_mem = 0, sm_mhz = 1000, mem_mhz = 2619, temp_c = 40;
  // Clocks: supported SM clocks min_sm_mhz..max_sm_mhz in sm_step_mhz steps;
  // supported memory clocks mem_clocks_mhz (ascending; its last is mem_mhz).
  unsigned max_sm_mhz = 1000, min_sm_mhz = 210, sm_step_mhz = 15;
  std::vector<unsigned> mem_clocks_mhz;
  bool clock_control = true;   // clocks=0: neither locked nor application clocks
  bool locked_clocks = true;   // locked_clocks=0: application clocks only (a pre-Volta GPU)
  double idle_w = 0.0;         // the power a clock lock does not scale
  FakeClockLock sm_lock, mem_lock;
  unsigned app_sm_mhz = 0, app_mem_mhz = 0;  // application clocks; 0: the default
  unsigned long long mem_used = 0, mem_total = 80ull << 30;
  bool instant_power = true;
  double instant_offset_w = 0.0;  // the instantaneous field reads this much above the power
  double energy_update_ms = 0.0;
  double energy_phase_ms = 0.0;
  double energy_reset_ms = -1.0;  // >= 0: the counter restarts from 0 then (a driver reload)
  double energy_call_ms = 0.0;
  double power_update_ms = 0.0;  // > 0: power usage and the instant field refresh at these ticks
  double usage_window_ms = 0.0;  // > 0: power usage is the trailing mean over this window
  double sample_ms = 0.0;        // > 0: the driver keeps a buffer of power samples this far apart
  unsigned sample_buffer = 100;  // how many samples the buffer holds
  double sample_latency_ms = 0.0;
  double sample_cover_ms = 0.0;  // > 0: a sample averages only the last this many ms of its interval
  double sample_stamp_lead_ms = 0.0;  // stamps this much before the interval ends (an H100: ~4.5 ms)
  bool sample_prefill = false;  // the buffer holds samples from before nvmlInit
  std::vector<LimitEra> eras;  // oldest first; set up at nvmlInit
  struct Process {
    unsigned pid = 0;
    unsigned long long used_bytes = 0;  // joule::nvml::kValueNotAvailable for "na"
    bool compute = true, graphics = false;
    double start_s = 0.0, end_s = 1e300;
  };
  std::vector<Process> processes;
};

struct ErrorRule {
  std::string function;
  int device = -1;
  nvmlReturn_t code = 999;
  long after_calls = 0;
  double after_ms = 0.0;
  std::map<int, long> calls;  // successful calls so far, per device
};

struct HangRule {
  std::string function;
  int device = -1;
  long after_calls = 0;
  double after_ms = 0.0;
  double seconds = -1.0;  // < 0: until released
  long times = -1;        // < 0: every call due
  std::map<int, long> calls;  // calls so far, per device, before the rule was due
};

struct State {
  std::mutex mutex;
  std::vector<HangRule> hangs;
  bool loaded = false;
  std::string load_error;
  bool initialised = false;
  nvmlReturn_t init_error = 0;
  std::string driver_version = "580.00.00-fake";
  std::string set_log;
  std::string persist;
  std::vector<Device> devices;
  std::vector<ErrorRule> errors;
  bool virtual_clock = false;
  double virtual_now_s = 0.0;
  // Taken together at the first nvmlInit: wall-mode time and sample stamps.
  Clock::time_point init_time;
  unsigned long long realtime_at_init_us = 0;
};

State& state() {
  static State s;
  return s;
}

// The fake's current time in seconds: since the first nvmlInit on the wall
// clock, or what the test last set on a virtual clock. Every source reads it.
double now_s() {
  const State& s = state();
  if (s.virtual_clock) return s.virtual_now_s;
  return std::chrono::duration<double>(Clock::now() - s.init_time).count();
}

unsigned long long realtime_now_us() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL + static_cast<unsigned long long>(ts.tv_nsec) / 1000;
}

// t_s rounded down to the last tick of a period_ms grid (t_s itself when
// the period is 0: the value follows time continuously).
double last_tick_s(double t_s, double period_ms) {
  if (period_ms <= 0) return t_s;
  return static_cast<double>(floor_tolerant(t_s * 1000.0 / period_ms)) * period_ms / 1000.0;
}

std::map<std::string, std::string> parse_pairs(const std::string& rest) {
  std::map<std::string, std::string> pairs;
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

using Pairs = std::map<std::string, std::string>;

double number_or(const Pairs& kv, const char* key, double fallback) {
  auto it = kv.find(key);
  return it == kv.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
}

// Builds the device's power profile from its keys. Returns an error or "".
std::string configure_profile(Device& d, const Pairs& kv, const std::string& config_path, const std::string& where) {
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
    d.profile = PowerProfile::repeating(std::move(segments), period_s);
  } else if (random) {
    const auto min_ms = static_cast<long long>(number_or(kv, "min_phase_ms", 150));
    const auto max_ms = static_cast<long long>(number_or(kv, "max_phase_ms", 2500));
    if (pulse_w < 0) return where + ": profile=random needs pulse_w (the first phase's power)";
    if (min_ms <= 0 || max_ms < min_ms) return where + ": profile=random needs 0 < min_phase_ms <= max_phase_ms";
    const std::uint64_t seed = kv.count("seed") ? std::strtoull(kv.at("seed").c_str(), nullptr, 0) : 1;
    d.profile = PowerProfile::random(seed, pulse_w, power_w, min_ms, max_ms);
  } else if (pulse_w >= 0 && pulse_period_ms > 0) {
    const double period_s = pulse_period_ms / 1000.0;
    d.profile = PowerProfile::repeating({{0.0, power_w}, {period_s / 2, pulse_w}}, period_s);
  } else {
    d.profile = PowerProfile::constant(power_w);
  }
  return "";
}

// "1593,2619": ascending whole MHz. Returns an error or "".
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

// Parses one device line. Returns an error or "".
std::string configure_device(Device& d, std::size_t index, const Pairs& kv, const std::string& config_path,
                             const std::string& where) {
  auto num = [&](const char* key, double fallback) { return number_or(kv, key, fallback); };
  d.name = kv.count("name") ? kv.at("name") : d.name;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-fake0000-0000-0000-0000-%012zu", index);
  d.uuid = kv.count("uuid") ? kv.at("uuid") : uuid;
  char pci[32];
  std::snprintf(pci, sizeof pci, "00000000:%02zX:00.0", 0x18 + index);
  d.pci_bus_id = kv.count("pci") ? kv.at("pci") : pci;
  d.arch = static_cast<unsigned>(num("arch", d.arch));
  d.max_limit_mw = static_cast<unsigned>(num("max_limit_w", d.max_limit_mw / 1000.0) * 1000);
  d.min_limit_mw = static_cast<unsigned>(num("min_limit_w", d.min_limit_mw / 1000.0) * 1000);
  d.default_limit_mw = static_cast<unsigned>(num("default_limit_w", d.max_limit_mw / 1000.0) * 1000);
  d.limit_mw = static_cast<unsigned>(num("limit_w", d.default_limit_mw / 1000.0) * 1000);
  d.util_gpu = static_cast<unsigned>(num("util_gpu", d.util_gpu));
  d.util_mem = static_cast<unsigned>(num("util_mem", d.util_mem));
  d.max_sm_mhz = static_cast<unsigned>(num("max_sm_mhz", num("sm_mhz", d.sm_mhz)));
  d.sm_mhz = static_cast<unsigned>(num("sm_mhz", d.max_sm_mhz));
  d.min_sm_mhz = static_cast<unsigned>(num("min_sm_mhz", std::min(d.min_sm_mhz, d.max_sm_mhz)));
  d.sm_step_mhz = static_cast<unsigned>(num("sm_step_mhz", d.sm_step_mhz));
  if (d.sm_step_mhz == 0 || d.min_sm_mhz > d.max_sm_mhz) {
    return where + ": clocks need sm_step_mhz > 0 and min_sm_mhz <= max_sm_mhz";
  }
  if (auto error = parse_clock_list(kv, "mem_clocks_mhz", d.mem_clocks_mhz); !error.empty()) return where + ": " + error;
  d.mem_mhz = static_cast<unsigned>(num("mem_mhz", d.mem_clocks_mhz.empty() ? d.mem_mhz : d.mem_clocks_mhz.back()));
  if (d.mem_clocks_mhz.empty()) d.mem_clocks_mhz = {d.mem_mhz};
  d.clock_control = num("clocks", 1) != 0;
  d.locked_clocks = num("locked_clocks", 1) != 0;
  d.idle_w = num("idle_w", 0);
  d.temp_c = static_cast<unsigned>(num("temp_c", d.temp_c));
  d.mem_used = static_cast<unsigned long long>(num("mem_used_mib", 0)) << 20;
  d.instant_power = num("instant_power", 1) != 0;
  d.instant_offset_w = num("instant_offset_w", 0);
  d.energy_update_ms = num("energy_update_ms", 0);
  d.energy_call_ms = num("energy_call_ms", 0);
  d.energy_phase_ms = num("energy_phase_ms", 0);
  d.energy_reset_ms = num("energy_reset_ms", -1);
  d.sample_cover_ms = num("sample_cover_ms", 0);
  d.power_update_ms = num("power_update_ms", 0);
  d.usage_window_ms = num("usage_window_ms", 0);
  d.sample_ms = num("sample_ms", 0);
  d.sample_buffer = static_cast<unsigned>(num("sample_buffer", d.sample_buffer));
  d.sample_latency_ms = num("sample_latency_ms", 0);
  d.sample_stamp_lead_ms = num("sample_stamp_lead_ms", 0);
  d.sample_prefill = num("sample_prefill", 0) != 0;
  if (d.sample_ms > 0 && d.sample_buffer == 0) return where + ": sample_buffer must be at least 1";
  return configure_profile(d, kv, config_path, where);
}

// Reads the config at nvmlInit. A broken config makes nvmlInit
// fail loudly: a test must never run against devices it did not describe.
void load_config(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  const char* path = std::getenv("JOULE_FAKE_NVML_CONFIG");
  if (const char* log = std::getenv("JOULE_FAKE_NVML_LOG")) s.set_log = log;
  if (path == nullptr) {
    s.load_error = "JOULE_FAKE_NVML_CONFIG is not set";
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
    const auto kv = parse_pairs(rest);
    if (directive == "driver_version") {
      std::istringstream(rest) >> s.driver_version;
    } else if (directive == "set_log") {
      std::istringstream(rest) >> s.set_log;
    } else if (directive == "persist") {
      std::istringstream(rest) >> s.persist;
    } else if (directive == "init_error") {
      s.init_error = static_cast<nvmlReturn_t>(number_or(kv, "code", 9));
    } else if (directive == "clock") {
      std::string mode;
      std::istringstream(rest) >> mode;
      if (mode != "virtual" && mode != "wall") {
        s.load_error = where + ": clock must be 'virtual' or 'wall', not '" + mode + "'";
        return;
      }
      s.virtual_clock = mode == "virtual";
    } else if (directive == "device") {
      Device d;
      if (auto error = configure_device(d, s.devices.size(), kv, path, where); !error.empty()) {
        s.load_error = error;
        return;
      }
      s.devices.push_back(std::move(d));
    } else if (directive == "process") {
      const auto device = static_cast<std::size_t>(number_or(kv, "device", 0));
      if (device >= s.devices.size()) {
        s.load_error = where + ": process names device " + std::to_string(device) + ", not defined above";
        return;
      }
      Device::Process p;
      p.pid = static_cast<unsigned>(number_or(kv, "pid", 0));
      const std::string used = kv.count("used_mib") ? kv.at("used_mib") : "0";
      char* end = nullptr;
      const double used_mib = std::strtod(used.c_str(), &end);
      if (used != "na" && (end == used.c_str() || *end != '\0' || !(used_mib >= 0))) {
        s.load_error = where + ": process used_mib must be a number >= 0 or na, not '" + used + "'";
        return;
      }
      p.used_bytes = used == "na" ? joule::nvml::kValueNotAvailable
                                  : static_cast<unsigned long long>(used_mib * 1024 * 1024);
      const std::string kind = kv.count("kind") ? kv.at("kind") : "compute";
      if (kind != "compute" && kind != "graphics" && kind != "both") {
        s.load_error = where + ": process kind must be compute, graphics or both, not '" + kind + "'";
        return;
      }
      p.compute = kind != "graphics";
      p.graphics = kind != "compute";
      p.start_s = number_or(kv, "start_ms", 0) / 1000.0;
      p.end_s = kv.count("end_ms") ? number_or(kv, "end_ms", 0) / 1000.0 : 1e300;
      s.devices[device].processes.push_back(p);
    } else if (directive == "hang") {
      HangRule rule;
      rule.function = kv.count("function") ? kv.at("function") : "*";
      rule.device = static_cast<int>(number_or(kv, "device", -1));
      rule.after_calls = static_cast<long>(number_or(kv, "after_calls", 0));
      rule.after_ms = number_or(kv, "after_ms", 0);
      const std::string seconds = kv.count("seconds") ? kv.at("seconds") : "forever";
      rule.seconds = seconds == "forever" ? -1.0 : std::strtod(seconds.c_str(), nullptr);
      rule.times = static_cast<long>(number_or(kv, "times", -1));
      if (seconds != "forever" && !(rule.seconds >= 0)) {
        s.load_error = where + ": hang seconds must be a number >= 0 or forever, not '" + seconds + "'";
        return;
      }
      s.hangs.push_back(rule);
    } else if (directive == "error") {
      ErrorRule rule;
      rule.function = kv.count("function") ? kv.at("function") : "*";
      rule.device = static_cast<int>(number_or(kv, "device", -1));
      rule.code = static_cast<nvmlReturn_t>(number_or(kv, "code", 999));
      rule.after_calls = static_cast<long>(number_or(kv, "after_calls", 0));
      rule.after_ms = number_or(kv, "after_ms", 0);
      s.errors.push_back(rule);
    } else {
      s.load_error = "unknown directive '" + directive + "' in " + path;
      return;
    }
  }
  for (const Device& d : s.devices) {
    // Virtual stamps are t_i * 1e6: samples before 0 would have none.
    if (d.sample_prefill && s.virtual_clock) s.load_error = std::string(path) + ": sample_prefill needs 'clock wall'";
  }
}

// The limit era in force at t_s (the last one starting at or before it).
const LimitEra& era_at(const Device& d, double t_s) {
  const auto after = std::upper_bound(d.eras.begin(), d.eras.end(), t_s,
                                      [](double t, const LimitEra& era) { return t < era.start_s; });
  return after == d.eras.begin() ? d.eras.front() : *(after - 1);
}

// The clock model, the simulated GPU's (include/joule/device/sim.h): an SM
// clock held at a fraction f of the highest scales the dynamic power (above
// idle_w) by f^3 and the speed by f; a memory clock held at a fraction m saves
// kMemoryPowerShare * (1 - m) of the dynamic power and stretches the
// memory-bound share of the work.
constexpr double kMemoryPowerShare = 0.15, kMemoryBoundShare = 0.2;

unsigned held_sm_mhz(const Device& d) {
  unsigned mhz = d.max_sm_mhz;
  if (d.sm_lock.max_mhz != 0) mhz = std::min(mhz, d.sm_lock.max_mhz);
  if (d.app_sm_mhz != 0) mhz = std::min(mhz, d.app_sm_mhz);
  return mhz;
}

unsigned held_mem_mhz(const Device& d) {
  unsigned mhz = d.mem_mhz;
  if (d.mem_lock.max_mhz != 0) mhz = std::min(mhz, d.mem_lock.max_mhz);
  if (d.app_mem_mhz != 0) mhz = std::min(mhz, d.app_mem_mhz);
  return mhz;
}

double sm_fraction(const Device& d) { return d.max_sm_mhz ? static_cast<double>(held_sm_mhz(d)) / d.max_sm_mhz : 1.0; }
double mem_fraction(const Device& d) { return d.mem_mhz ? static_cast<double>(held_mem_mhz(d)) / d.mem_mhz : 1.0; }

Draw draw_of(const Device& d) {
  const double f = sm_fraction(d), m = mem_fraction(d);
  return {d.limit_mw / 1000.0, d.idle_w, f * f * f * (1.0 - kMemoryPowerShare * (1.0 - m))};
}

double relative_speed(const Device& d) {
  return 1.0 / (1.0 / sm_fraction(d) + kMemoryBoundShare * (1.0 / mem_fraction(d) - 1.0));
}

// Power the device draws at t_s, under the limit in force then.
double power_at_w(Device& d, double t_s) { return d.profile.level_w(t_s, era_at(d, t_s).draw); }

// Energy since init at t_s: exact, continuous across limit changes. Before
// init (only prefilled samples look there) the device drew its power at 0.
double energy_j(Device& d, double t_s) {
  if (t_s < 0) return power_at_w(d, 0.0) * t_s;
  const LimitEra era = era_at(d, t_s);
  return era.energy_j_at_start + d.profile.energy_j(t_s, era.draw) - d.profile.energy_j(era.start_s, era.draw);
}

// Mean power over (to_s - span_s, to_s]; the point value for an empty span.
double mean_power_w(Device& d, double to_s, double span_s) {
  if (span_s <= 0) return power_at_w(d, to_s);
  return (energy_j(d, to_s) - energy_j(d, to_s - span_s)) / span_s;
}

// nvmlDeviceGetPowerUsage: the power at the last update tick, or the mean
// over the trailing window (since 0 while the window reaches before it).
double power_usage_w(Device& d, double t_s) {
  const double tau_s = last_tick_s(t_s, d.power_update_ms);
  if (d.usage_window_ms <= 0) return power_at_w(d, tau_s);
  return mean_power_w(d, tau_s, std::min(d.usage_window_ms / 1000.0, tau_s));
}

unsigned to_mw(double w) { return static_cast<unsigned>(std::lround(std::max(w, 0.0) * 1000.0)); }

#ifndef JOULE_FAKE_NVML_OLD_DRIVER  // what only the newer functions use

// Field 186: an unlagged point sample, refreshed at the update ticks.
double instant_power_w(Device& d, double t_s) {
  return power_at_w(d, last_tick_s(t_s, d.power_update_ms)) + d.instant_offset_w;
}

// The driver's sample buffer at t_s: samples first..last (inclusive; none
// when last < first). Sample i ends at i * sample_ms and is held once it is
// visible (after the latency) and among the newest sample_buffer.
struct HeldSamples {
  long long first = 1, last = 0;
};

HeldSamples held_samples(const Device& d, double t_s) {
  HeldSamples held;
  held.last = floor_tolerant((t_s - d.sample_latency_ms / 1000.0) * 1000.0 / d.sample_ms);
  held.first = held.last - static_cast<long long>(d.sample_buffer) + 1;
  if (!d.sample_prefill) held.first = std::max(1LL, held.first);
  return held;
}

// Sample i's stamp; i <= 0 (prefilled) only on the wall clock, whose stamps
// stay positive.
unsigned long long sample_timestamp_us(const State& s, const Device& d, long long i) {
  const long long epoch_us = s.virtual_clock ? 0 : static_cast<long long>(s.realtime_at_init_us);
  return static_cast<unsigned long long>(epoch_us + std::llround((static_cast<double>(i) * d.sample_ms -
                                                                  d.sample_stamp_lead_ms) * 1000.0));
}

// Sample i's value: the mean power over its interval, in mW.
unsigned sample_value_mw(Device& d, long long i) {
  const double end_s = static_cast<double>(i) * d.sample_ms / 1000.0;
  const double span_ms = d.sample_cover_ms > 0 ? std::min(d.sample_cover_ms, d.sample_ms) : d.sample_ms;
  return to_mw(mean_power_w(d, end_s, span_ms / 1000.0));
}

void busy_wait_ms(double ms) {
  const auto until = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (Clock::now() < until) {
  }
}
#endif

// Returns the injected error for (function, device), or success. Counts the
// successful call otherwise.
nvmlReturn_t injected(const char* function, int device) {
  State& s = state();
  for (auto& rule : s.errors) {
    if (rule.function != "*" && rule.function != function) continue;
    if (rule.device >= 0 && rule.device != device) continue;
    const bool time_due = now_s() * 1000.0 >= rule.after_ms;
    const bool calls_due = rule.calls[device] >= rule.after_calls;
    if (time_due && calls_due) return rule.code;
    ++rule.calls[device];
  }
  return 0;
}

void load_persisted(State& s) {
  if (s.persist.empty()) return;
  // Per line: index, limit, then the clock settings (0: none), as a GPU keeps
  // them until reset.
  std::ifstream in(s.persist);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::size_t index = 0;
    unsigned limit_mw = 0;
    if (!(fields >> index >> limit_mw) || index >= s.devices.size()) continue;
    Device& d = s.devices[index];
    d.limit_mw = limit_mw;
    fields >> d.sm_lock.min_mhz >> d.sm_lock.max_mhz >> d.mem_lock.min_mhz >> d.mem_lock.max_mhz >> d.app_mem_mhz >>
        d.app_sm_mhz;
  }
}

void save_persisted(const State& s) {
  if (s.persist.empty()) return;
  const std::string temporary = s.persist + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (std::size_t i = 0; i < s.devices.size(); ++i) {
      const Device& d = s.devices[i];
      out << i << ' ' << d.limit_mw;
      // Clock settings only when there are any: "index limit" stays the line of a GPU without.
      if (d.sm_lock.max_mhz || d.mem_lock.max_mhz || d.app_mem_mhz || d.app_sm_mhz) {
        out << ' ' << d.sm_lock.min_mhz << ' ' << d.sm_lock.max_mhz << ' ' << d.mem_lock.min_mhz << ' '
            << d.mem_lock.max_mhz << ' ' << d.app_mem_mhz << ' ' << d.app_sm_mhz;
      }
      out << '\n';
    }
  }
  std::rename(temporary.c_str(), s.persist.c_str());
}

// Applies the device's settings from now on: a new era, persisted. A virtual
// clock set back before the last change cannot rewrite history, so such a
// change counts from that change.
void start_era(State& s, Device& d) {
  const double now = std::max(now_s(), d.eras.back().start_s);
  d.eras.push_back({now, energy_j(d, now), draw_of(d)});
  save_persisted(s);
}

// Starts each device's energy at 0 under its limit, at the first nvmlInit.
void start_energy_accounting(State& s) {
  for (Device& d : s.devices) d.eras = {{0.0, 0.0, draw_of(d)}};
}

Device* lookup(nvmlDevice_t handle) {
  State& s = state();
  const auto index = reinterpret_cast<std::uintptr_t>(handle);
  if (index == 0 || index > s.devices.size()) return nullptr;
  return &s.devices[index - 1];
}

int index_of(nvmlDevice_t handle) { return static_cast<int>(reinterpret_cast<std::uintptr_t>(handle)) - 1; }

void append_log(const std::string& line) {
  const std::string& path = state().set_log;
  if (path.empty()) return;
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

// Hangs: released by joule_fake_nvml_release_hangs; counted
// while blocked. Atomics, not the state mutex: a blocked call holds no lock.
std::atomic<bool> hangs_released{false};
std::atomic<int> calls_hung_now{0};
std::atomic<bool> any_hang_rules{false};  // so that calls pay nothing without them

// How long (function, device) must block now by the hang rules: 0 for not
// at all, < 0 until released. Counts the calls before a rule is due.
double hang_due_s(const char* function, int device) {
  if (!any_hang_rules.load(std::memory_order_relaxed)) return 0.0;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised || hangs_released.load()) return 0.0;
  for (HangRule& rule : s.hangs) {
    if (rule.function != "*" && rule.function != function) continue;
    if (rule.device >= 0 && rule.device != device) continue;
    if (rule.times == 0) continue;
    const bool time_due = now_s() * 1000.0 >= rule.after_ms;
    if (!time_due || rule.calls[device] < rule.after_calls) {
      ++rule.calls[device];
      continue;
    }
    if (rule.times > 0) --rule.times;
    return rule.seconds < 0 ? -1.0 : std::max(rule.seconds, 1e-9);
  }
  return 0.0;
}

// Blocks the calling thread as a hung driver call does (wall time, in
// slices, so that a release ends it at once).
void hang_if_due(const char* function, int device) {
  const double hang_s = hang_due_s(function, device);
  if (hang_s == 0.0) return;
  const auto until = Clock::now() + std::chrono::duration<double>(hang_s < 0 ? 1e9 : hang_s);
  calls_hung_now.fetch_add(1);
  while (!hangs_released.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  calls_hung_now.fetch_sub(1);
}

}  // namespace

// Ends every hang, now and to come, until the next config is read (the
// first nvmlInit after every nvmlShutdown).
FAKE_API void joule_fake_nvml_release_hangs(void) { hangs_released.store(true); }

// How many calls are blocked by hang rules now.
FAKE_API int joule_fake_nvml_hung_calls(void) { return calls_hung_now.load(); }

#define FAKE_DEVICE_CALL(function)                                         \
  hang_if_due(function, index_of(device));                                 \
  State& s = state();                                                      \
  std::lock_guard lock(s.mutex);                                           \
  if (!s.initialised) return 1; /* NVML_ERROR_UNINITIALIZED */             \
  Device* d = lookup(device);                                              \
  if (d == nullptr) return 2; /* NVML_ERROR_INVALID_ARGUMENT */            \
  if (nvmlReturn_t rc = injected(function, index_of(device)); rc != 0) return rc

// Sets the virtual clock (config "clock virtual"). Misuse is a broken test:
// it aborts rather than letting the test run on a clock it did not expect.
FAKE_API void joule_fake_nvml_set_time_s(double seconds) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised || !s.virtual_clock) {
    std::fprintf(stderr, "fake NVML: joule_fake_nvml_set_time_s needs nvmlInit and 'clock virtual' in the config\n");
    std::abort();
  }
  s.virtual_now_s = seconds;
}

FAKE_API nvmlReturn_t nvmlInit_v2(void) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised) {
    // Each first init (re)reads the config, so one test process can open
    // differently scripted devices one after another.
    s.loaded = false;
    s.load_error.clear();
    s.init_error = 0;
    s.set_log.clear();
    s.persist.clear();
    s.devices.clear();
    s.errors.clear();
    s.hangs.clear();
    s.virtual_clock = false;
    load_config(s);
    load_persisted(s);
    any_hang_rules.store(!s.hangs.empty());
    hangs_released.store(false);  // a new config's hangs are armed again
  }
  if (!s.load_error.empty()) {
    std::fprintf(stderr, "fake NVML: %s\n", s.load_error.c_str());
    return 999;
  }
  if (s.init_error != 0) return s.init_error;
  if (!s.initialised) {
    s.init_time = Clock::now();
    s.realtime_at_init_us = realtime_now_us();
    s.virtual_now_s = 0.0;
    start_energy_accounting(s);
  }
  s.initialised = true;
  return 0;
}

FAKE_API nvmlReturn_t nvmlShutdown(void) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.initialised = false;
  return 0;
}

FAKE_API const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

FAKE_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::snprintf(version, length, "%s", state().driver_version.c_str());
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised) return 1;
  *count = static_cast<unsigned>(s.devices.size());
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised) return 1;
  if (index >= s.devices.size()) return 2;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(index) + 1);
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_DEVICE_CALL("nvmlDeviceGetName");
  std::snprintf(name, length, "%s", d->name.c_str());
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_DEVICE_CALL("nvmlDeviceGetUUID");
  std::snprintf(uuid, length, "%s", d->uuid.c_str());
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPciInfo_v3");
  *pci = {};
  std::snprintf(pci->busId, sizeof pci->busId, "%s", d->pci_bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", d->pci_bus_id.c_str() + (d->pci_bus_id.size() > 12 ? 4 : 0));
  return 0;
}

#ifndef JOULE_FAKE_NVML_OLD_DRIVER
FAKE_API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) {
  FAKE_DEVICE_CALL("nvmlDeviceGetArchitecture");
  *arch = d->arch;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy_mj) {
  double call_ms = 0;
  {
    FAKE_DEVICE_CALL("nvmlDeviceGetTotalEnergyConsumption");
    if (d->arch < 5) return 3;  // pre-Volta: no counter
    // A virtual clock does not move while the CPU is busy, so waiting would
    // only slow the test down.
    call_ms = s.virtual_clock ? 0.0 : d->energy_call_ms;
  }
  // Like the real call: slow, busy on the CPU (an H100 spends ~3.8 ms of CPU
  // per call), and the value only moves at each update tick.
  if (call_ms > 0) busy_wait_ms(call_ms);
  State& s = state();
  std::lock_guard lock(s.mutex);
  Device* d = lookup(device);
  if (!s.initialised || d == nullptr) return 1;  // shut down while busy
  const double phase_s = d->energy_update_ms > 0 ? d->energy_phase_ms / 1000.0 : 0.0;
  const double tick_s = std::max(0.0, last_tick_s(now_s() - phase_s, d->energy_update_ms) + phase_s);
  // Rounded, not truncated: float noise (29999.999999 mJ) must not lose a mJ
  // of an exact integral.
  double counted_j = energy_j(*d, tick_s);
  if (d->energy_reset_ms >= 0 && tick_s >= d->energy_reset_ms / 1000.0) counted_j -= energy_j(*d, d->energy_reset_ms / 1000.0);
  *energy_mj = static_cast<unsigned long long>(std::llround(counted_j * 1000.0));
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  FAKE_DEVICE_CALL("nvmlDeviceGetFieldValues");
  for (int i = 0; i < count; ++i) {
    if (values[i].fieldId == 186 && d->instant_power) {
      values[i].nvmlReturn = 0;
      values[i].valueType = 1;  // unsigned int
      values[i].value.uiVal = to_mw(instant_power_w(*d, now_s()));
    } else {
      values[i].nvmlReturn = 3;
    }
  }
  return 0;
}

// The driver's power sample buffer: samples newer than last_seen_us, oldest
// first, at most *count of them; with samples == NULL, the capacity.
FAKE_API nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, int type, unsigned long long last_seen_us,
                                           int* value_type, unsigned int* count, nvmlSample_t* samples) {
  FAKE_DEVICE_CALL("nvmlDeviceGetSamples");
  if (type != joule::nvml::kTotalPowerSamples || d->sample_ms <= 0) return joule::nvml::kErrorNotSupported;
  if (count == nullptr || value_type == nullptr) return joule::nvml::kErrorInvalidArgument;
  *value_type = joule::nvml::kValueTypeUnsignedInt;
  if (samples == nullptr) {
    *count = d->sample_buffer;
    return joule::nvml::kSuccess;
  }
  if (*count == 0) return joule::nvml::kErrorInvalidArgument;  // as NVML: a buffer of no samples
  const HeldSamples held = held_samples(*d, now_s());
  unsigned written = 0;
  for (long long i = held.first; i <= held.last && written < *count; ++i) {
    const unsigned long long timestamp_us = sample_timestamp_us(s, *d, i);
    if (timestamp_us <= last_seen_us) continue;
    samples[written].timeStamp = timestamp_us;
    samples[written].sampleValue.uiVal = sample_value_mw(*d, i);
    ++written;
  }
  if (written == 0) return joule::nvml::kErrorNotFound;
  *count = written;
  return joule::nvml::kSuccess;
}
#endif

FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerUsage");
  *power_mw = to_mw(power_usage_w(*d, now_s()));
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerManagementLimit");
  *limit_mw = d->limit_mw;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int* min_mw,
                                                                   unsigned int* max_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerManagementLimitConstraints");
  *min_mw = d->min_limit_mw;
  *max_mw = d->max_limit_mw;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerManagementDefaultLimit");
  *limit_mw = d->default_limit_mw;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  FAKE_DEVICE_CALL("nvmlDeviceGetUtilizationRates");
  utilization->gpu = d->util_gpu;
  utilization->memory = d->util_mem;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int clock_type, unsigned int* clock_mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceGetClockInfo");
  if (clock_type == joule::nvml::kClockSm) {
    *clock_mhz = std::min(d->sm_mhz, held_sm_mhz(*d));
  } else if (clock_type == joule::nvml::kClockMem) {
    *clock_mhz = held_mem_mhz(*d);
  } else {
    return joule::nvml::kErrorNotSupported;
  }
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp_c) {
  FAKE_DEVICE_CALL("nvmlDeviceGetTemperature");
  if (sensor != 0) return 2;
  *temp_c = d->temp_c;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_DEVICE_CALL("nvmlDeviceGetMemoryInfo");
  memory->total = d->mem_total;
  memory->used = d->mem_used;
  memory->free = d->mem_total - d->mem_used;
  return 0;
}

namespace {

// The _v3 list protocol: with room for fewer than the processes running, the
// count needed and NVML_ERROR_INSUFFICIENT_SIZE; else the list.
nvmlReturn_t list_processes(const Device& d, bool graphics, unsigned int* count, nvmlProcessInfo_t* infos) {
  const double now = now_s();
  std::vector<nvmlProcessInfo_t> running;
  for (const Device::Process& p : d.processes) {
    if ((graphics ? p.graphics : p.compute) && p.start_s <= now && now < p.end_s) {
      running.push_back({p.pid, p.used_bytes, 0xffffffffu, 0xffffffffu});
    }
  }
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(running.size());
  if (room < running.size()) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::copy(running.begin(), running.end(), infos);
  return 0;
}

}  // namespace

FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                              nvmlProcessInfo_t* infos) {
  FAKE_DEVICE_CALL("nvmlDeviceGetComputeRunningProcesses_v3");
  return list_processes(*d, /*graphics=*/false, count, infos);
}

FAKE_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                               nvmlProcessInfo_t* infos) {
  FAKE_DEVICE_CALL("nvmlDeviceGetGraphicsRunningProcesses_v3");
  return list_processes(*d, /*graphics=*/true, count, infos);
}

FAKE_API nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceSetPowerManagementLimit");
  char line[160];
  if (limit_mw < d->min_limit_mw || limit_mw > d->max_limit_mw) {
    std::snprintf(line, sizeof line, "nvmlDeviceSetPowerManagementLimit device=%d limit_mw=%u result=invalid\n",
                  index_of(device), limit_mw);
    append_log(line);
    return 2;
  }
  // Logged before it takes effect (and persists): a process killed in
  // between leaves a logged call that did not happen, never a change the log
  // lacks, so the log's last call per GPU bounds what the GPU holds.
  std::snprintf(line, sizeof line, "nvmlDeviceSetPowerManagementLimit device=%d limit_mw=%u\n", index_of(device),
                limit_mw);
  append_log(line);
  d->limit_mw = limit_mw;
  start_era(s, *d);
  return 0;
}

namespace {

// The list protocol of the supported-clock calls: with room for fewer, the
// count needed and NVML_ERROR_INSUFFICIENT_SIZE. Highest first, as a driver lists them.
nvmlReturn_t list_clocks(std::vector<unsigned> ascending, unsigned int* count, unsigned int* clocks_mhz) {
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(ascending.size());
  if (room < ascending.size()) return 7;
  std::copy(ascending.rbegin(), ascending.rend(), clocks_mhz);
  return 0;
}

bool supports_memory_clock(const Device& d, unsigned mhz) {
  return std::find(d.mem_clocks_mhz.begin(), d.mem_clocks_mhz.end(), mhz) != d.mem_clocks_mhz.end();
}

// Logs a set-call ("name device=N fields[ result=...]") and returns rc.
nvmlReturn_t log_set_call(const char* function, nvmlDevice_t device, const std::string& fields, nvmlReturn_t rc) {
  const char* result = rc == 0 ? "" : rc == 3 ? " result=not_supported" : " result=invalid";
  append_log(std::string(function) + " device=" + std::to_string(index_of(device)) + (fields.empty() ? "" : " ") +
             fields + result + "\n");
  return rc;
}

}  // namespace

FAKE_API nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count,
                                                          unsigned int* clocks_mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceGetSupportedMemoryClocks");
  return list_clocks(d->mem_clocks_mhz, count, clocks_mhz);
}

FAKE_API nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memory_mhz,
                                                            unsigned int* count, unsigned int* clocks_mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceGetSupportedGraphicsClocks");
  if (!supports_memory_clock(*d, memory_mhz)) return joule::nvml::kErrorNotFound;
  std::vector<unsigned> clocks;
  for (unsigned mhz = d->min_sm_mhz; mhz < d->max_sm_mhz; mhz += d->sm_step_mhz) clocks.push_back(mhz);
  clocks.push_back(d->max_sm_mhz);
  return list_clocks(clocks, count, clocks_mhz);
}

FAKE_API nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t device, unsigned int memory_mhz,
                                                       unsigned int graphics_mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceSetApplicationsClocks");
  const std::string fields = "mem_mhz=" + std::to_string(memory_mhz) + " sm_mhz=" + std::to_string(graphics_mhz);
  if (!d->clock_control) return log_set_call("nvmlDeviceSetApplicationsClocks", device, fields, 3);
  if (!supports_memory_clock(*d, memory_mhz) || graphics_mhz < d->min_sm_mhz || graphics_mhz > d->max_sm_mhz) {
    return log_set_call("nvmlDeviceSetApplicationsClocks", device, fields, 2);
  }
  log_set_call("nvmlDeviceSetApplicationsClocks", device, fields, 0);  // before it takes effect, as above
  d->app_mem_mhz = memory_mhz;
  d->app_sm_mhz = graphics_mhz;
  start_era(s, *d);
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t device) {
  FAKE_DEVICE_CALL("nvmlDeviceResetApplicationsClocks");
  if (!d->clock_control) return log_set_call("nvmlDeviceResetApplicationsClocks", device, "", 3);
  log_set_call("nvmlDeviceResetApplicationsClocks", device, "", 0);  // before it takes effect, as above
  d->app_mem_mhz = d->app_sm_mhz = 0;
  start_era(s, *d);
  return 0;
}

#ifndef JOULE_FAKE_NVML_OLD_DRIVER  // locked clocks came with Volta-era drivers
namespace {

std::string range_fields(unsigned min_mhz, unsigned max_mhz) {
  return "min_mhz=" + std::to_string(min_mhz) + " max_mhz=" + std::to_string(max_mhz);
}

// Shared by the SM and memory locked-clock calls: refuse, or lock (max 0: reset).
nvmlReturn_t lock_clocks(State& s, Device& d, nvmlDevice_t device, const char* function, FakeClockLock& lock,
                         unsigned min_mhz, unsigned max_mhz, unsigned lowest_mhz, unsigned highest_mhz) {
  const bool reset = max_mhz == 0;
  const std::string fields = reset ? "" : range_fields(min_mhz, max_mhz);
  if (!d.clock_control || !d.locked_clocks) return log_set_call(function, device, fields, 3);
  if (!reset && (min_mhz > max_mhz || min_mhz < lowest_mhz || max_mhz > highest_mhz)) {
    return log_set_call(function, device, fields, 2);
  }
  log_set_call(function, device, fields, 0);  // before it takes effect, as the limit's
  lock = reset ? FakeClockLock{} : FakeClockLock{min_mhz, max_mhz};
  start_era(s, d);
  return 0;
}

}  // namespace

FAKE_API nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int min_mhz, unsigned int max_mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceSetGpuLockedClocks");
  return lock_clocks(s, *d, device, "nvmlDeviceSetGpuLockedClocks", d->sm_lock, min_mhz, std::max(max_mhz, 1u),
                     d->min_sm_mhz, d->max_sm_mhz);
}

FAKE_API nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  FAKE_DEVICE_CALL("nvmlDeviceResetGpuLockedClocks");
  return lock_clocks(s, *d, device, "nvmlDeviceResetGpuLockedClocks", d->sm_lock, 0, 0, 0, 0);
}

FAKE_API nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int min_mhz,
                                                       unsigned int max_mhz) {
  FAKE_DEVICE_CALL("nvmlDeviceSetMemoryLockedClocks");
  return lock_clocks(s, *d, device, "nvmlDeviceSetMemoryLockedClocks", d->mem_lock, min_mhz, std::max(max_mhz, 1u),
                     d->mem_clocks_mhz.front(), d->mem_clocks_mhz.back());
}

FAKE_API nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
  FAKE_DEVICE_CALL("nvmlDeviceResetMemoryLockedClocks");
  return lock_clocks(s, *d, device, "nvmlDeviceResetMemoryLockedClocks", d->mem_lock, 0, 0, 0, 0);
}
#endif

// The speed of work on device `index` relative to the device unlocked, under
// its clock settings (the clock model above), for test programs that stand
// in for training: they stretch their steps by it. -1 before nvmlInit or for
// no such device.
FAKE_API double joule_fake_nvml_relative_speed(unsigned index) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised || index >= s.devices.size()) return -1.0;
  return relative_speed(s.devices[index]);
}
