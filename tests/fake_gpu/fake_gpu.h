// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The scripted-device core the fake GPU libraries share (the fake NVML in
// tests/fake_nvml, the fake ROCm SMI in tests/fake_rocm_smi): the config
// grammar (one directive per line, key=value pairs), the power profiles and
// the exact energy under the limit and clocks in force, the wall or virtual
// clock, error and hang injection, the set-call log, process lists and
// settings persisted across processes. Each fake keeps only its library's ABI
// and the sources particular to it; the config keys documented here mean the
// same in both (each fake's header comment lists them with its own).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace joule::fake_gpu {

using Clock = std::chrono::steady_clock;
using Pairs = std::map<std::string, std::string>;

// Floors x, treating values a hair below an integer as that integer: a time
// set exactly on a tick (0.3 s on a 100 ms grid) must land on that tick, not
// on the one before because 0.3 * 1000 / 100 came out as 2.9999999999999996.
long long floor_tolerant(double x);

// t_s rounded down to the last tick of a period_ms grid (t_s itself when
// the period is 0: the value follows time continuously).
double last_tick_s(double t_s, double period_ms);

// The last tick of an energy counter updating every update_ms, its ticks at
// phase_ms + k * update_ms; never before 0.
double counter_tick_s(double t_s, double update_ms, double phase_ms);

// "key=value key2=\"quoted value\"" -> pairs.
Pairs parse_pairs(const std::string& rest);
double number_or(const Pairs& kv, const char* key, double fallback);

// "1593,2619" under `key`: ascending positive whole MHz appended to out.
// Returns an error or "" (also when the key is absent).
std::string parse_clock_list(const Pairs& kv, const char* key, std::vector<unsigned>& out);

// How a level of the profile becomes the power drawn under the settings in
// force: the part above idle_w scaled by the clock settings (scale 1 when
// unrestricted), then capped by the power limit.
struct Draw {
  double cap_w = 1e300;
  double idle_w = 0.0;
  double scale = 1.0;

  double operator()(double level_w) const;
  bool operator<(const Draw& o) const {
    return std::tie(cap_w, idle_w, scale) < std::tie(o.cap_w, o.idle_w, o.scale);
  }
};

// The clock model, the simulated GPU's (include/joule/device/sim.h): a core
// clock held at a fraction f of the highest scales the dynamic power (above
// idle_w) by f^3 and the speed by f; a memory clock held at a fraction m saves
// 15% * (1 - m) of the dynamic power and stretches the memory-bound 20% of
// the work.
double clock_power_scale(double core_fraction, double memory_fraction);
double clock_relative_speed(double core_fraction, double memory_fraction);

struct Segment {
  double start_s;  // the segment lasts until the next one's start (or the table's end)
  double level_w;
};

// The power a device is asked to draw over time, before its limit caps it,
// as a table of segments: one period that repeats (constant, pulse, profile
// file), or random phases drawn lazily as time advances. Energy is exact:
// cumulative sums per draw and a binary search.
class PowerProfile {
 public:
  PowerProfile() = default;  // constant 100 W

  static PowerProfile constant(double power_w) { return repeating({{0.0, power_w}}, 1.0); }
  static PowerProfile repeating(std::vector<Segment> segments, double period_s);
  // Levels first_w and second_w alternating, first_w first, each phase a
  // whole number of ms drawn uniformly from [min, max] by splitmix64(seed).
  static PowerProfile random(std::uint64_t seed, double first_w, double second_w, long long min_phase_ms,
                             long long max_phase_ms);

  double level_w(double t_s, const Draw& draw);
  // Integral of draw(level) over [0, t_s].
  double energy_j(double t_s, const Draw& draw);

 private:
  double position_s(double t_s, double* whole_periods);
  void cover(double t_s);
  std::size_t segment_index(double x) const;
  double segment_end_s(std::size_t i) const;
  const std::vector<double>& cumulative_j(const Draw& draw);

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

// A device's power and energy over time: one truth every source derives
// from. The profile is drawn under a sequence of eras, each a stretch of
// time under one limit and one set of clock settings; energy stays
// continuous across changes and the past keeps the draw it had (trailing
// means and samples look back across changes).
class ScriptedPower {
 public:
  // The profile from power_w, pulse_w/pulse_period_ms, profile=random
  // (seed, min_phase_ms, max_phase_ms) or profile_file (relative to the
  // config's folder). Returns an error naming `where`, or "".
  std::string configure(const Pairs& kv, const std::string& config_path, const std::string& where);

  // Energy 0 at time 0 under draw (at init).
  void start(const Draw& draw);
  // The draw from now_s on; a time before the last change (a virtual clock
  // set back) counts from that change: history is not rewritten.
  void change(double now_s, const Draw& draw);

  double power_at_w(double t_s);
  // Whether the power limit in force at t_s lowers the profile's level there.
  bool capped_at(double t_s);
  // Energy since 0 at t_s; before 0 (only prefilled samples look there) the
  // device drew its power at 0.
  double energy_j(double t_s);
  // Mean power over (to_s - span_s, to_s]; the point value for an empty span.
  double mean_power_w(double to_s, double span_s);
  // A power sensor refreshed every update_ms: the point value at the last
  // refresh or, with window_ms > 0, the mean over the window trailing it
  // (since 0 while the window reaches before it).
  double sensor_power_w(double t_s, double update_ms, double window_ms);
  // An energy counter's reading at tick_s: the energy since 0, or since
  // reset_ms once that has passed (reset_ms < 0: never reset).
  double counter_energy_j(double tick_s, double reset_ms);

 private:
  struct Era {
    double start_s;
    double energy_j_at_start;
    Draw draw;
  };
  const Era& era_at(double t_s) const;

  PowerProfile profile_;
  std::vector<Era> eras_{{0.0, 0.0, Draw{}}};
};

// Power limits in microwatts, read from limit_w, min_limit_w, max_limit_w,
// default_limit_w (default: max; limit default: default) in whole units of
// unit_uw (NVML's milliwatt, ROCm SMI's microwatt).
struct PowerLimits {
  std::uint64_t limit_uw = 300'000'000, min_uw = 100'000'000, max_uw = 300'000'000, default_uw = 300'000'000;

  void configure(const Pairs& kv, std::uint64_t unit_uw);
  bool allows(std::uint64_t uw) const { return uw >= min_uw && uw <= max_uw; }
  double cap_w() const { return static_cast<double>(limit_uw) / 1e6; }
};

struct ScriptedProcess {
  unsigned pid = 0;
  bool used_known = true;  // used_mib=na: the memory is "not available"
  unsigned long long used_bytes = 0;
  bool compute = true, graphics = false;
  double start_s = 0.0, end_s = 1e300;
  // sm_util=P: the SM utilisation, in percent, its per-process samples say; none: no sample.
  std::optional<unsigned> sm_util_percent;

  bool running_at(double t_s) const { return start_s <= t_s && t_s < end_s; }
};

// What every scripted device has, whatever its library: the fake's device
// type derives from it and adds its library's own.
struct ScriptedDevice {
  std::string name;
  std::string pci_bus_id;  // "00000000:18:00.0"
  ScriptedPower power;
  PowerLimits limits;
  double idle_w = 0.0;  // the power clock settings do not scale
  unsigned util_gpu = 0, util_mem = 0, temp_c = 40;
  unsigned long long mem_used = 0, mem_total = 80ull << 30;
  std::vector<ScriptedProcess> processes;
  // process_dir: each file named by a pid in this directory lists that
  // process (compute, no memory) while it runs: a test's task registers
  // itself as opening a CUDA context would (the Slurm accounting tests).
  std::string process_dir;
};

// The device's processes running at t_s: the scripted ones, then those its
// process_dir registers that are alive.
std::vector<ScriptedProcess> running_processes(const ScriptedDevice& device, double t_s);

// The keys every device line shares: name (d.name kept when absent), pci
// (default bus 0x18 + index), the limits, util_gpu, util_mem, temp_c,
// mem_used_mib, mem_total_mib, idle_w and the power profile. Returns an
// error naming `where`, or "".
std::string configure_device(ScriptedDevice& d, std::size_t index, const Pairs& kv, std::uint64_t limit_unit_uw,
                             const std::string& config_path, const std::string& where);

struct ErrorRule {
  std::string function;  // "*": every function
  int device = -1;       // -1: every device
  std::int64_t code = 0;
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

// The codes a fake's library answers with where the core decides.
struct Codes {
  std::int64_t init_error;     // init_error without code=
  std::int64_t injected_error; // error without code=
};

// The state every fake keeps beside its devices. Its mutex guards
// everything but the hang atomics: a hung call holds no lock.
struct Script {
  std::mutex mutex;
  bool loaded = false;
  std::string load_error;
  bool initialised = false;
  std::int64_t init_error = 0;
  std::string set_log;
  std::string persist;
  std::vector<ErrorRule> errors;
  std::vector<HangRule> hangs;
  bool virtual_clock = false;
  double virtual_now_s = 0.0;
  // Taken together at the first init: wall-mode time and realtime stamps.
  Clock::time_point init_time;
  unsigned long long realtime_at_init_us = 0;

  std::atomic<bool> hangs_released{false};
  std::atomic<int> calls_hung_now{0};
  std::atomic<bool> any_hang_rules{false};  // so that calls pay nothing without them

  // Forgets the last config (at the first init after a shutdown).
  void clear();
  // The fake's time in seconds: since the first init on the wall clock, or
  // what the test last set on a virtual clock.
  double now_s() const;
  // Starts the clock at 0 (at the first init).
  void start_clock();
  // Arms the hang rules just read.
  void arm_hangs();
};

unsigned long long realtime_now_us();

// One line of a config, as a fake's own directives see it.
struct ConfigLine {
  std::string directive;    // the first word
  std::string rest;         // the line after it
  Pairs kv;                 // rest's key=value pairs
  std::string where;        // "path line N", for errors
  std::string config_path;  // relative paths in the line are read next to it
};

// A fake's own directives and device lines: returns an error, or "" when
// handled, or kUnknownDirective.
inline const std::string kUnknownDirective = "\x01unknown";
using DirectiveHandler = std::function<std::string(const ConfigLine& line)>;
// The device at an index, nullptr past the devices read so far (for process lines).
using DeviceLookup = std::function<ScriptedDevice*(std::size_t)>;

// Reads the config named by $config_env ($log_env names the set-call log)
// into the script; the directives shared by every fake (set_log, persist,
// init_error, clock, error, hang, process) here, the rest through handler.
// A broken config leaves script.load_error set: the fake's init fails
// loudly, since a test must never run against devices it did not describe.
void load_config(Script& script, const char* config_env, const char* log_env, const Codes& codes,
                 const DirectiveHandler& handler, const DeviceLookup& device);

// load_config for a fake whose devices are kept in `devices` (Device derives
// from ScriptedDevice), read afresh: each device line is parsed by
// configure(device, index, kv, config_path, where), which returns an error or
// "", and appended; the line of version_directive sets version (its first
// word). Both fakes' own directives are just these.
template <typename Device, typename Configure>
void load_config_with_devices(Script& script, const char* config_env, const char* log_env, const Codes& codes,
                              std::vector<Device>& devices, const char* version_directive, std::string& version,
                              Configure configure) {
  devices.clear();
  auto handler = [&](const ConfigLine& line) -> std::string {
    if (line.directive == version_directive) {
      std::istringstream(line.rest) >> version;
      return "";
    }
    if (line.directive != "device") return kUnknownDirective;
    Device device;
    if (auto error = configure(device, devices.size(), line.kv, line.config_path, line.where); !error.empty()) {
      return error;
    }
    devices.push_back(std::move(device));
    return "";
  };
  auto device_at = [&devices](std::size_t i) -> ScriptedDevice* { return i < devices.size() ? &devices[i] : nullptr; };
  load_config(script, config_env, log_env, codes, handler, device_at);
}

// The injected error due for (function, device), or 0. Counts the call as
// successful otherwise. The caller holds the script's mutex.
std::int64_t injected(Script& script, const char* function, int device);

// Blocks the calling thread as a hung library call does, when a hang rule
// is due (wall time, in slices, so that a release ends it at once). Takes
// the script's mutex only to decide.
void hang_if_due(Script& script, const char* function, int device);

// Appends one line to the set-call log, if there is one.
void append_log(const Script& script, const std::string& line);

// Logs a set call, one line: "function device=N fields", then
// " result=<refusal>" when refused (refusal "": it was accepted). Both fakes
// log before a change takes effect: a process killed in between leaves a
// logged call that did not happen, never a change the log lacks.
void log_set_call(const Script& script, const std::string& function, int device, const std::string& fields,
                  const std::string& refusal);

// The library's init: at the first call after a shutdown (re)reads the
// config through read_config (which fills the script and the fake's
// devices), then starts time at 0 and the devices' energy through
// start_devices. Returns 0, the scripted init_error, or broken_config_code
// with the reason on stderr after `who` ("fake NVML").
std::int64_t init_session(Script& script, const char* who, std::int64_t broken_config_code,
                          const std::function<void()>& read_config, const std::function<void()>& start_devices);

// Sets a virtual clock. Misuse is a broken test: it aborts rather than
// letting the test run on a clock it did not expect.
void set_virtual_time(Script& script, double seconds, const char* who);

// Settings persisted across processes, as a real GPU keeps them until
// reset: one line per device, "index field...". Read at init, written
// (atomically, by rename) at each set.
std::map<std::size_t, std::vector<unsigned long long>> load_persisted(const Script& script);
void save_persisted(const Script& script, const std::vector<std::vector<unsigned long long>>& fields_by_device);

}  // namespace joule::fake_gpu
