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
//          sm_mhz=1980 mem_mhz=2619 temp_c=55 mem_used_mib=1024 mem_total_mib=81920 instant_power=1
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
//   process_dir device=0 path=/dir  (each file /dir/PID lists that live process)
//   (a process's sm_util=P: nvmlDeviceGetProcessUtilization gives it a sample
//    of P% every 100 ms while it runs, stamped like the power samples)
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
//
// The scripted-device core (config grammar, power profiles, exact energy,
// time, errors, hangs, log, persistence) is tests/fake_gpu, shared with the
// fake ROCm SMI; this file is NVML's ABI and its sources only.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "device/nvml/nvml_abi.h"
#include "fake_gpu/fake_gpu.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

namespace fg = joule::fake_gpu;

// A clock lock as the fake holds it; max_mhz 0: unlocked.
struct FakeClockLock {
  unsigned min_mhz = 0, max_mhz = 0;
};

struct Device : fg::ScriptedDevice {
  std::string uuid;
  unsigned arch = 9;
  unsigned sm_mhz = 1000, mem_mhz = 2619;
  // Clocks: supported SM clocks min_sm_mhz..max_sm_mhz in sm_step_mhz steps;
  // supported memory clocks mem_clocks_mhz (ascending; its last is mem_mhz).
  unsigned max_sm_mhz = 1000, min_sm_mhz = 210, sm_step_mhz = 15;
  std::vector<unsigned> mem_clocks_mhz;
  bool clock_control = true;   // clocks=0: neither locked nor application clocks
  bool locked_clocks = true;   // locked_clocks=0: application clocks only (a pre-Volta GPU)
  FakeClockLock sm_lock, mem_lock;
  unsigned app_sm_mhz = 0, app_mem_mhz = 0;  // application clocks; 0: the default
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

  unsigned limit_mw() const { return static_cast<unsigned>(limits.limit_uw / 1000); }
};

struct State : fg::Script {
  std::string driver_version = "580.00.00-fake";
  std::vector<Device> devices;
};

State& state() {
  static State s;
  return s;
}

// Parses one device line: the shared keys (fake_gpu), then NVML's own.
// Returns an error or "".
std::string configure_device(Device& d, std::size_t index, const fg::Pairs& kv, const std::string& config_path,
                             const std::string& where) {
  auto num = [&](const char* key, double fallback) { return fg::number_or(kv, key, fallback); };
  d.name = "Fake NVIDIA GPU";
  if (auto error = fg::configure_device(d, index, kv, 1000, config_path, where); !error.empty()) return error;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-fake0000-0000-0000-0000-%012zu", index);
  d.uuid = kv.count("uuid") ? kv.at("uuid") : uuid;
  d.arch = static_cast<unsigned>(num("arch", d.arch));
  d.max_sm_mhz = static_cast<unsigned>(num("max_sm_mhz", num("sm_mhz", d.sm_mhz)));
  d.sm_mhz = static_cast<unsigned>(num("sm_mhz", d.max_sm_mhz));
  d.min_sm_mhz = static_cast<unsigned>(num("min_sm_mhz", std::min(d.min_sm_mhz, d.max_sm_mhz)));
  d.sm_step_mhz = static_cast<unsigned>(num("sm_step_mhz", d.sm_step_mhz));
  if (d.sm_step_mhz == 0 || d.min_sm_mhz > d.max_sm_mhz) {
    return where + ": clocks need sm_step_mhz > 0 and min_sm_mhz <= max_sm_mhz";
  }
  if (auto error = fg::parse_clock_list(kv, "mem_clocks_mhz", d.mem_clocks_mhz); !error.empty()) {
    return where + ": " + error;
  }
  d.mem_mhz = static_cast<unsigned>(num("mem_mhz", d.mem_clocks_mhz.empty() ? d.mem_mhz : d.mem_clocks_mhz.back()));
  if (d.mem_clocks_mhz.empty()) d.mem_clocks_mhz = {d.mem_mhz};
  d.clock_control = num("clocks", 1) != 0;
  d.locked_clocks = num("locked_clocks", 1) != 0;
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
  return "";
}

// Reads the config at nvmlInit: the shared directives and device keys in
// fake_gpu, NVML's own (driver_version, device keys) here.
void load_config(State& s) {
  fg::load_config_with_devices(s, "JOULE_FAKE_NVML_CONFIG", "JOULE_FAKE_NVML_LOG", {9, 999}, s.devices,
                               "driver_version", s.driver_version, configure_device);
  if (!s.load_error.empty()) return;
  for (const Device& d : s.devices) {
    // Virtual stamps are t_i * 1e6: samples before 0 would have none.
    if (d.sample_prefill && s.virtual_clock) {
      s.load_error = std::string(std::getenv("JOULE_FAKE_NVML_CONFIG")) + ": sample_prefill needs 'clock wall'";
    }
  }
}

// The clock settings held (the clock model's fractions: fake_gpu.h).
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

fg::Draw draw_of(const Device& d) {
  return {d.limit_mw() / 1000.0, d.idle_w, fg::clock_power_scale(sm_fraction(d), mem_fraction(d))};
}

unsigned to_mw(double w) { return static_cast<unsigned>(std::lround(std::max(w, 0.0) * 1000.0)); }

#ifndef JOULE_FAKE_NVML_OLD_DRIVER  // what only the newer functions use

// Field 186: an unlagged point sample, refreshed at the update ticks.
double instant_power_w(Device& d, double t_s) {
  return d.power.sensor_power_w(t_s, d.power_update_ms, 0.0) + d.instant_offset_w;
}

// The driver's sample buffer at t_s: samples first..last (inclusive; none
// when last < first). Sample i ends at i * sample_ms and is held once it is
// visible (after the latency) and among the newest sample_buffer.
struct HeldSamples {
  long long first = 1, last = 0;
};

HeldSamples held_samples(const Device& d, double t_s) {
  HeldSamples held;
  held.last = fg::floor_tolerant((t_s - d.sample_latency_ms / 1000.0) * 1000.0 / d.sample_ms);
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
  return to_mw(d.power.mean_power_w(end_s, span_ms / 1000.0));
}

void busy_wait_ms(double ms) {
  const auto until = fg::Clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (fg::Clock::now() < until) {
  }
}
#endif

// Persisted per device: the limit, then the clock settings (0: none), as a
// GPU keeps them until reset.
void load_persisted(State& s) {
  for (const auto& [index, f] : fg::load_persisted(s)) {
    if (index >= s.devices.size() || f.empty()) continue;
    Device& d = s.devices[index];
    d.limits.limit_uw = f[0] * 1000;
    unsigned* clock_fields[] = {&d.sm_lock.min_mhz, &d.sm_lock.max_mhz, &d.mem_lock.min_mhz,
                                &d.mem_lock.max_mhz, &d.app_mem_mhz,    &d.app_sm_mhz};
    for (std::size_t i = 0; i < 6 && i + 1 < f.size(); ++i) *clock_fields[i] = static_cast<unsigned>(f[i + 1]);
  }
}

void save_persisted(const State& s) {
  std::vector<std::vector<unsigned long long>> fields;
  for (const Device& d : s.devices) {
    fields.push_back({d.limit_mw()});
    // Clock settings only when there are any: "index limit" stays the line of a GPU without.
    if (d.sm_lock.max_mhz || d.mem_lock.max_mhz || d.app_mem_mhz || d.app_sm_mhz) {
      fields.back().insert(fields.back().end(), {d.sm_lock.min_mhz, d.sm_lock.max_mhz, d.mem_lock.min_mhz,
                                                 d.mem_lock.max_mhz, d.app_mem_mhz, d.app_sm_mhz});
    }
  }
  fg::save_persisted(s, fields);
}

// Applies the device's settings from now on: a new era, persisted.
void start_era(State& s, Device& d) {
  d.power.change(s.now_s(), draw_of(d));
  save_persisted(s);
}

Device* lookup(nvmlDevice_t handle) {
  State& s = state();
  const auto index = reinterpret_cast<std::uintptr_t>(handle);
  if (index == 0 || index > s.devices.size()) return nullptr;
  return &s.devices[index - 1];
}

int index_of(nvmlDevice_t handle) { return static_cast<int>(reinterpret_cast<std::uintptr_t>(handle)) - 1; }

// Logs a set call (fake_gpu's format) and returns rc: 3 is refused as
// not_supported, any other failure as invalid.
nvmlReturn_t log_set_call(const char* function, nvmlDevice_t device, const std::string& fields, nvmlReturn_t rc) {
  fg::log_set_call(state(), function, index_of(device), fields, rc == 0 ? "" : rc == 3 ? "not_supported" : "invalid");
  return rc;
}

}  // namespace

// Ends every hang, now and to come, until the next config is read (the
// first nvmlInit after every nvmlShutdown).
FAKE_API void joule_fake_nvml_release_hangs(void) { state().hangs_released.store(true); }

// How many calls are blocked by hang rules now.
FAKE_API int joule_fake_nvml_hung_calls(void) { return state().calls_hung_now.load(); }

#define FAKE_DEVICE_CALL(function)                                         \
  fg::hang_if_due(state(), function, index_of(device));                    \
  State& s = state();                                                      \
  std::lock_guard lock(s.mutex);                                           \
  if (!s.initialised) return 1; /* NVML_ERROR_UNINITIALIZED */             \
  Device* d = lookup(device);                                              \
  if (d == nullptr) return 2; /* NVML_ERROR_INVALID_ARGUMENT */            \
  if (auto rc = fg::injected(s, function, index_of(device)); rc != 0) return static_cast<nvmlReturn_t>(rc)

// Sets the virtual clock (config "clock virtual"). Misuse is a broken test:
// it aborts rather than letting the test run on a clock it did not expect.
FAKE_API void joule_fake_nvml_set_time_s(double seconds) { fg::set_virtual_time(state(), seconds, "fake NVML"); }

FAKE_API nvmlReturn_t nvmlInit_v2(void) {
  State& s = state();
  auto read_config = [&s] {
    s.driver_version = "580.00.00-fake";
    load_config(s);
    load_persisted(s);
  };
  auto start_devices = [&s] {
    for (Device& d : s.devices) d.power.start(draw_of(d));
  };
  return static_cast<nvmlReturn_t>(fg::init_session(s, "fake NVML", 999, read_config, start_devices));
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
  const double tick_s = fg::counter_tick_s(s.now_s(), d->energy_update_ms, d->energy_phase_ms);
  // Rounded, not truncated: float noise (29999.999999 mJ) must not lose a mJ
  // of an exact integral.
  const double counted_j = d->power.counter_energy_j(tick_s, d->energy_reset_ms);
  *energy_mj = static_cast<unsigned long long>(std::llround(counted_j * 1000.0));
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  FAKE_DEVICE_CALL("nvmlDeviceGetFieldValues");
  for (int i = 0; i < count; ++i) {
    if (values[i].fieldId == 186 && d->instant_power) {
      values[i].nvmlReturn = 0;
      values[i].valueType = 1;  // unsigned int
      values[i].value.uiVal = to_mw(instant_power_w(*d, s.now_s()));
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
  const HeldSamples held = held_samples(*d, s.now_s());
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
  *power_mw = to_mw(d->power.sensor_power_w(s.now_s(), d->power_update_ms, d->usage_window_ms));
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerManagementLimit");
  *limit_mw = d->limit_mw();
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int* min_mw,
                                                                   unsigned int* max_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerManagementLimitConstraints");
  *min_mw = static_cast<unsigned>(d->limits.min_uw / 1000);
  *max_mw = static_cast<unsigned>(d->limits.max_uw / 1000);
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerManagementDefaultLimit");
  *limit_mw = static_cast<unsigned>(d->limits.default_uw / 1000);
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

// The clock-event reasons: the power cap's bit while the limit in force
// lowers the profile's level (no other reason is modelled).
FAKE_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_DEVICE_CALL("nvmlDeviceGetCurrentClocksThrottleReasons");
  *reasons = d->power.capped_at(s.now_s()) ? joule::nvml::kClocksEventSwPowerCap : 0;
  return 0;
}

#ifndef JOULE_FAKE_NVML_OLD_DRIVER  // the name drivers 535 and later give it
FAKE_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_DEVICE_CALL("nvmlDeviceGetCurrentClocksEventReasons");
  *reasons = d->power.capped_at(s.now_s()) ? joule::nvml::kClocksEventSwPowerCap : 0;
  return 0;
}
#endif

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
  const double now = state().now_s();
  std::vector<nvmlProcessInfo_t> running;
  for (const fg::ScriptedProcess& p : fg::running_processes(d, now)) {
    if (graphics ? p.graphics : p.compute) {
      const unsigned long long used_bytes = p.used_known ? p.used_bytes : joule::nvml::kValueNotAvailable;
      running.push_back({p.pid, used_bytes, 0xffffffffu, 0xffffffffu});
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

// Every 100 ms of the fake's time, a sample per running process with
// sm_util, those after lastSeen that the driver still holds (its last 10 s).
FAKE_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                                      unsigned int* count, unsigned long long last_seen_us) {
  FAKE_DEVICE_CALL("nvmlDeviceGetProcessUtilization");
  const double now = s.now_s();
  const long long epoch_us = s.virtual_clock ? 0 : static_cast<long long>(s.realtime_at_init_us);
  std::vector<nvmlProcessUtilizationSample_t> samples;
  const long long last_tick = static_cast<long long>(std::floor(now * 10.0));
  for (long long tick = std::max(1LL, last_tick - 99); tick <= last_tick; ++tick) {
    const double t = static_cast<double>(tick) / 10.0;
    const auto stamp = static_cast<unsigned long long>(epoch_us + std::llround(t * 1e6));
    if (stamp <= last_seen_us) continue;
    for (const fg::ScriptedProcess& p : d->processes) {
      if (p.sm_util_percent && p.running_at(t)) samples.push_back({p.pid, stamp, *p.sm_util_percent, 0, 0, 0});
    }
  }
  if (samples.empty()) return 6;  // NVML_ERROR_NOT_FOUND
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(samples.size());
  if (utilization == nullptr || room < samples.size()) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::copy(samples.begin(), samples.end(), utilization);
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceSetPowerManagementLimit");
  const std::string fields = "limit_mw=" + std::to_string(limit_mw);
  if (!d->limits.allows(limit_mw * 1000ULL)) return log_set_call("nvmlDeviceSetPowerManagementLimit", device, fields, 2);
  // Logged before it takes effect (and persists), so the log's last call per
  // GPU bounds what the GPU holds.
  log_set_call("nvmlDeviceSetPowerManagementLimit", device, fields, 0);
  d->limits.limit_uw = limit_mw * 1000ULL;
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
  const Device& d = s.devices[index];
  return fg::clock_relative_speed(sm_fraction(d), mem_fraction(d));
}
