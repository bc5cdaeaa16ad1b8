// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A fake librocm_smi64.so.1 for tests: the ROCm SMI functions joule uses,
// compiled against the real 5.2 header (<rocm_smi/rocm_smi.h>, Debian's
// librocm-smi-dev) so the compiler checks the ABI, over scripted devices read
// from the file named by $JOULE_FAKE_ROCM_SMI_CONFIG. The scripted-device core
// (config grammar, power profiles, exact energy, wall or virtual time, errors,
// hangs, log, persistence) is tests/fake_gpu, shared with the fake NVML; this
// file is ROCm SMI's ABI and its sources only.
//
// Config, one directive per line ('#' starts a comment):
//   version 5.2.3                   (rsmi_version_get; default 5.2.3)
//   set_log /path/to/log            (or $JOULE_FAKE_ROCM_SMI_LOG)
//   persist /path/to/settings       (caps and clock settings survive the process:
//                                    read at init, written at each set)
//   init_error code=8               (rsmi_init fails with this rsmi_status_t;
//                                    default RSMI_STATUS_INIT_ERROR)
//   clock virtual                   (or "clock wall", the default; see Time)
//   device name="AMD Instinct MI300X" power_w=300 limit_w=750 min_limit_w=0
//          max_limit_w=750 default_limit_w=750 idle_w=0 util_gpu=80 util_mem=40
//          temp_c=55 junction_temp_c=65 mem_temp_c=60 edge_temp=1
//          mem_used_mib=1024 mem_total_mib=196608 device_id=0x74a1
//          unique_id=0x1234 (or none) pci=0000:c1:00.0 (default: bus 0x18 + index)
//          energy_resolution_uj=15.3 energy_update_ms=1 energy_phase_ms=0
//          energy_reset_ms=-1 counter_bits=64
//          power_ave_window_ms=0 power_update_ms=0 current_socket_power=1
//          sys_clocks_mhz=500,1300,2100 mem_clocks_mhz=900,1300 sys_mhz=2100
//          mem_mhz=1300 clocks=1 settable=1
//          (and the power profile keys: pulse_w, pulse_period_ms,
//          profile=random seed= min_phase_ms= max_phase_ms=, profile_file=)
//   error function=rsmi_dev_power_ave_get device=0 code=2 after_calls=3 after_ms=0
//   hang function=rsmi_dev_energy_count_get device=0 after_calls=3 after_ms=0 seconds=2 times=1
//   process device=0 pid=4242 used_mib=512 start_ms=0 end_ms=5000
//
// The defaults above (an MI300X-like device: 750 W, 192 GiB, the clock lists,
// a 15.3 uJ counter tick updated every 1 ms) are the fake's own choices, close
// to what public AMD documentation describes for MI200/MI300 parts; none is a
// measured fact.
//
// Power profile and energy: as the fake NVML's (tests/fake_nvml/fake_nvml.cc):
// constant power_w, a pulse, random phases or a profile file, every level
// capped by the power cap in force; the energy E(t) is the exact integral,
// continuous across cap and clock changes, and every source derives from it.
//
// Sources (t: the fake's time; tau: t rounded down to a power_update_ms tick,
// or t itself when power_update_ms=0):
//   rsmi_dev_energy_count_get  E at the last energy_update_ms tick (ticks at
//       energy_phase_ms + k * energy_update_ms), in whole counter ticks of
//       energy_resolution_uj (floored), modulo 2^counter_bits (64, or 32 to
//       see the counter wrap: at 15.3 uJ it wraps every ~65.7 kJ, ~88 s at
//       750 W); counter_resolution is energy_resolution_uj; the timestamp (ns)
//       is that tick's time (see Time). energy_reset_ms=R restarts the count
//       from 0 at R, as a driver reload does.
//   rsmi_dev_power_ave_get  (sensor 0; uW) p(tau), or with
//       power_ave_window_ms=W the trailing mean (E(tau) - E(tau - W)) / W
//       (the mean since 0 while tau < W): the firmware's average.
//   rsmi_dev_current_socket_power_get  (uW) p(tau), the point value; a ROCm 6
//       function (not in the 5.2 header, declared below), NOT_SUPPORTED on a
//       device with current_socket_power=0 (an MI250X has none); the "old"
//       build (JOULE_FAKE_ROCM_SMI_OLD, a ROCm 5 library) does not export it.
//
// Power cap: rsmi_dev_power_cap_get/_default_get/_range_get and _set, in uW,
// sensor 0 only (another sensor: NOT_SUPPORTED); a cap outside
// [min_limit_w, max_limit_w] is INVALID_ARGS; settable=0 makes every set call
// PERMISSION (a caller without root).
//
// Clocks: rsmi_dev_gpu_clk_freq_get(RSMI_CLK_TYPE_SYS or _MEM) lists
// sys_clocks_mhz / mem_clocks_mhz (ascending, in Hz, as the library reports
// pp_dpm levels) with the current level: the highest level at or below both
// the configured current clock (sys_mhz/mem_mhz, default the highest) and the
// clock the settings hold. The settings:
//   rsmi_dev_gpu_clk_freq_set(type, bitmask)  allows only the levels whose bit
//       is set (bits past the list ignored; none left: INVALID_ARGS) and puts
//       the device in perf level MANUAL, as the library does;
//   rsmi_dev_clk_range_set(min_mhz, max_mhz, type)  holds that clock within
//       [min, max] (both within the list's lowest and highest, else
//       INVALID_ARGS); MANUAL too;
//   rsmi_dev_perf_level_set(_v1)  AUTO clears every mask and range (the
//       reset); LOW and HIGH hold the lowest / highest levels; MANUAL keeps
//       the masks; the other levels are NOT_SUPPORTED here.
// The clock held is the highest allowed level, clamped into the range; at a
// fraction f of the highest core level and m of the highest memory level the
// power above idle_w scales as the fake NVML's (tests/fake_gpu/fake_gpu.h),
// and joule_fake_rocm_smi_relative_speed(index) tells test programs how much
// slower their work runs. clocks=0 makes every clock set call NOT_SUPPORTED.
//
// Other queries: rsmi_dev_busy_percent_get (util_gpu),
// rsmi_dev_memory_busy_percent_get (util_mem), rsmi_dev_temp_metric_get
// (RSMI_TEMP_CURRENT only, millidegrees: EDGE temp_c, unless edge_temp=0 as on
// an MI300X; JUNCTION junction_temp_c, default temp_c; MEMORY mem_temp_c, when
// given), rsmi_dev_memory_usage_get / _total_get (VRAM and VIS_VRAM; GTT
// NOT_SUPPORTED), rsmi_dev_name_get, rsmi_dev_id_get (device_id),
// rsmi_dev_unique_id_get (unique_id; "none": NOT_SUPPORTED),
// rsmi_dev_pci_id_get (the BDFID of pci).
//
// Processes: rsmi_compute_process_info_get lists each pid running (start_ms <=
// t < end_ms) on any device once, its vram_usage the sum of its used_mib over
// the devices (used_mib=na counts 0); rsmi_compute_process_gpus_get(pid)
// lists its devices (NOT_FOUND for a pid not running); both follow the
// header's count protocol (a NULL array asks for the count; too small an
// array: filled, and INSUFFICIENT_SIZE). Error and hang rules match these
// process-wide calls with device -1 only ("*" or the function name, no device=).
//
// Calls before rsmi_init (or after rsmi_shut_down, which ends the session at
// once, whatever the count of inits) answer RSMI_STATUS_INIT_ERROR; a device
// index past the devices RSMI_STATUS_INVALID_ARGS; a NULL output pointer
// RSMI_STATUS_INVALID_ARGS. A broken config makes rsmi_init fail with
// RSMI_STATUS_UNKNOWN_ERROR and print why on stderr.
//
// Set calls are logged before they take effect (a process killed in between
// leaves a logged call that did not happen, never a change the log lacks),
// one line each: the function, device=N, its arguments, and " result=invalid",
// " result=not_supported" or " result=permission" when refused:
//   rsmi_dev_power_cap_set device=0 sensor=0 cap_uw=500000000
//   rsmi_dev_gpu_clk_freq_set device=0 clk=sys mask=0x6
//   rsmi_dev_clk_range_set device=0 clk=sys min_mhz=500 max_mhz=1300
//   rsmi_dev_perf_level_set device=0 level=auto
//
// Time, errors, hangs: as the fake NVML's. The wall clock runs from the first
// rsmi_init (which also records CLOCK_REALTIME: the energy timestamp is
// realtime at init + the tick's time, in ns); with "clock virtual" time is 0
// at the first rsmi_init and moves only by
//   extern "C" void joule_fake_rocm_smi_set_time_s(double seconds);
// and timestamps are the tick's virtual ns. An error rule fires after that
// many successful calls and/or ms and keeps firing: a lost device is
//   error function=* device=1 code=10 after_ms=5000   (RSMI_STATUS_NOT_FOUND)
// A hang rule blocks each call due for `seconds` of wall time (or until
//   extern "C" void joule_fake_rocm_smi_release_hangs(void);
// which tests call before they end); joule_fake_rocm_smi_hung_calls() counts
// the calls blocked now. The exported helpers are found with
// dlopen(path, RTLD_NOW | RTLD_NOLOAD) and dlsym.

#include <rocm_smi/rocm_smi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "fake_gpu/fake_gpu.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

#ifndef JOULE_FAKE_ROCM_SMI_OLD
// ROCm 6's current socket power (MI300), not in the 5.2 header: the shape of
// its power queries, in uW.
extern "C" rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t dv_ind, uint64_t* socket_power);
#endif

namespace {

namespace fg = joule::fake_gpu;

// A clock range set by rsmi_dev_clk_range_set; max_mhz 0: none.
struct ClockRange {
  unsigned long long min_mhz = 0, max_mhz = 0;
};

// One clock domain (core or memory): its levels and what the settings allow.
struct ClockDomain {
  std::vector<unsigned> levels_mhz;  // ascending
  unsigned configured_mhz = 0;       // the clock it runs at when nothing holds it lower
  std::uint64_t mask = ~0ULL;        // allowed levels (bit i: levels_mhz[i])
  ClockRange range;

  std::uint64_t all_levels() const {
    return levels_mhz.size() >= 64 ? ~0ULL : (1ULL << levels_mhz.size()) - 1;
  }
};

struct Device : fg::ScriptedDevice {
  std::uint16_t device_id = 0x74a1;
  bool has_unique_id = true;
  std::uint64_t unique_id = 0;
  std::uint64_t bdfid = 0;
  float energy_resolution_uj = 15.3f;
  double energy_update_ms = 1.0, energy_phase_ms = 0.0, energy_reset_ms = -1.0;
  unsigned counter_bits = 64;
  double power_ave_window_ms = 0.0, power_update_ms = 0.0;
  bool socket_power = true;
  bool edge_temp = true;
  unsigned junction_temp_c = 40;
  int mem_temp_c = -1;  // < 0: no memory sensor
  bool clock_control = true, settable = true;
  ClockDomain sys, mem;
  rsmi_dev_perf_level_t perf_level = RSMI_DEV_PERF_LEVEL_AUTO;
};

struct State : fg::Script {
  std::string version = "5.2.3";
  std::vector<Device> devices;
};

State& state() {
  static State s;
  return s;
}

// "0000:c1:00.0" or "00000000:C1:00.0" -> the library's BDFID: domain << 32 |
// bus << 8 | device << 3 | function. False when it is not such a string.
bool parse_bdfid(const std::string& pci, std::uint64_t& bdfid) {
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  char tail = 0;
  if (std::sscanf(pci.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &function, &tail) != 4) return false;
  if (bus > 0xff || dev > 0x1f || function > 7) return false;
  bdfid = (static_cast<std::uint64_t>(domain) << 32) | (bus << 8) | (dev << 3) | function;
  return true;
}

std::string configure_clocks(ClockDomain& domain, const fg::Pairs& kv, const char* list_key, const char* mhz_key,
                             std::vector<unsigned> fallback) {
  if (auto error = fg::parse_clock_list(kv, list_key, domain.levels_mhz); !error.empty()) return error;
  if (domain.levels_mhz.empty()) domain.levels_mhz = std::move(fallback);
  if (domain.levels_mhz.size() > RSMI_MAX_NUM_FREQUENCIES) {
    return std::string(list_key) + " lists more than " + std::to_string(RSMI_MAX_NUM_FREQUENCIES) + " levels";
  }
  domain.configured_mhz = static_cast<unsigned>(fg::number_or(kv, mhz_key, domain.levels_mhz.back()));
  domain.mask = domain.all_levels();
  return "";
}

// One device line: the shared keys (fake_gpu), then ROCm SMI's own.
std::string configure_device(Device& d, std::size_t index, const fg::Pairs& kv, const std::string& config_path,
                             const std::string& where) {
  auto num = [&](const char* key, double fallback) { return fg::number_or(kv, key, fallback); };
  d.name = "AMD Instinct MI300X";
  d.limits = {750'000'000, 0, 750'000'000, 750'000'000};
  d.mem_total = 192ull << 30;
  if (auto error = fg::configure_device(d, index, kv, 1, config_path, where); !error.empty()) return error;
  if (!parse_bdfid(d.pci_bus_id, d.bdfid)) {
    return where + ": pci must be domain:bus:device.function, not '" + d.pci_bus_id + "'";
  }
  d.device_id = static_cast<std::uint16_t>(num("device_id", 0x74a1));
  const std::string unique = kv.count("unique_id") ? kv.at("unique_id") : "";
  d.has_unique_id = unique != "none";
  d.unique_id = d.has_unique_id && !unique.empty() ? std::strtoull(unique.c_str(), nullptr, 0)
                                                    : 0x5a17'0000'0000'0000ULL + index;
  d.energy_resolution_uj = static_cast<float>(num("energy_resolution_uj", 15.3));
  d.energy_update_ms = num("energy_update_ms", 1.0);
  d.energy_phase_ms = num("energy_phase_ms", 0.0);
  d.energy_reset_ms = num("energy_reset_ms", -1.0);
  d.counter_bits = static_cast<unsigned>(num("counter_bits", 64));
  if (!(d.energy_resolution_uj > 0)) return where + ": energy_resolution_uj must be > 0";
  if (d.counter_bits != 32 && d.counter_bits != 64) return where + ": counter_bits must be 32 or 64";
  d.power_ave_window_ms = num("power_ave_window_ms", 0.0);
  d.power_update_ms = num("power_update_ms", 0.0);
  d.socket_power = num("current_socket_power", 1) != 0;
  d.edge_temp = num("edge_temp", 1) != 0;
  d.junction_temp_c = static_cast<unsigned>(num("junction_temp_c", d.temp_c));
  d.mem_temp_c = static_cast<int>(num("mem_temp_c", -1));
  d.clock_control = num("clocks", 1) != 0;
  d.settable = num("settable", 1) != 0;
  if (auto error = configure_clocks(d.sys, kv, "sys_clocks_mhz", "sys_mhz", {500, 1300, 2100}); !error.empty()) {
    return where + ": " + error;
  }
  if (auto error = configure_clocks(d.mem, kv, "mem_clocks_mhz", "mem_mhz", {900, 1300}); !error.empty()) {
    return where + ": " + error;
  }
  return "";
}

// ---- clocks and power ----

// The levels the perf level and mask allow (never none: a mask leaves one at least).
std::uint64_t allowed_levels(const Device& d, const ClockDomain& c) {
  const std::uint64_t all = c.all_levels();
  switch (d.perf_level) {
    case RSMI_DEV_PERF_LEVEL_LOW: return 1;
    case RSMI_DEV_PERF_LEVEL_HIGH: return 1ULL << (c.levels_mhz.size() - 1);
    case RSMI_DEV_PERF_LEVEL_MANUAL: return c.mask & all;
    default: return all;
  }
}

// The clock the settings hold: the highest allowed level, clamped into the range.
unsigned held_mhz(const Device& d, const ClockDomain& c) {
  const std::uint64_t allowed = allowed_levels(d, c);
  unsigned mhz = c.levels_mhz.front();
  for (std::size_t i = 0; i < c.levels_mhz.size(); ++i) {
    if (allowed & (1ULL << i)) mhz = c.levels_mhz[i];
  }
  if (c.range.max_mhz != 0) {
    mhz = static_cast<unsigned>(std::clamp<unsigned long long>(mhz, c.range.min_mhz, c.range.max_mhz));
  }
  return mhz;
}

// The level reported current: the highest at or below both the configured
// clock and the held one (the lowest when none is).
std::uint32_t current_level(const Device& d, const ClockDomain& c) {
  const unsigned running_mhz = std::min(c.configured_mhz, held_mhz(d, c));
  std::uint32_t level = 0;
  for (std::size_t i = 0; i < c.levels_mhz.size(); ++i) {
    if (c.levels_mhz[i] <= running_mhz) level = static_cast<std::uint32_t>(i);
  }
  return level;
}

double fraction(const Device& d, const ClockDomain& c) {
  return static_cast<double>(held_mhz(d, c)) / c.levels_mhz.back();
}

fg::Draw draw_of(const Device& d) {
  return {d.limits.cap_w(), d.idle_w, fg::clock_power_scale(fraction(d, d.sys), fraction(d, d.mem))};
}

std::uint64_t to_uw(double w) { return static_cast<std::uint64_t>(std::llround(std::max(w, 0.0) * 1e6)); }

// ---- persistence ----

void load_persisted(State& s) {
  for (const auto& [index, f] : fg::load_persisted(s)) {
    if (index >= s.devices.size() || f.size() < 8) continue;
    Device& d = s.devices[index];
    d.limits.limit_uw = f[0];
    d.perf_level = static_cast<rsmi_dev_perf_level_t>(f[1]);
    d.sys.mask = f[2];
    d.mem.mask = f[3];
    d.sys.range = {f[4], f[5]};
    d.mem.range = {f[6], f[7]};
  }
}

void save_persisted(const State& s) {
  std::vector<std::vector<unsigned long long>> fields;
  for (const Device& d : s.devices) {
    fields.push_back({d.limits.limit_uw, static_cast<unsigned long long>(d.perf_level), d.sys.mask, d.mem.mask,
                      d.sys.range.min_mhz, d.sys.range.max_mhz, d.mem.range.min_mhz, d.mem.range.max_mhz});
  }
  fg::save_persisted(s, fields);
}

// The device's settings from now on: a new era of its power, persisted.
void settings_changed(State& s, Device& d) {
  d.power.change(s.now_s(), draw_of(d));
  save_persisted(s);
}

// Logs a set call (fake_gpu's format) and returns rc.
rsmi_status_t log_set_call(const State& s, const char* function, std::uint32_t device, const std::string& fields,
                           rsmi_status_t rc) {
  const char* refusal = rc == RSMI_STATUS_SUCCESS         ? ""
                        : rc == RSMI_STATUS_NOT_SUPPORTED ? "not_supported"
                        : rc == RSMI_STATUS_PERMISSION    ? "permission"
                                                          : "invalid";
  fg::log_set_call(s, function, static_cast<int>(device), fields, refusal);
  return rc;
}

const char* clock_name(rsmi_clk_type_t type) {
  if (type == RSMI_CLK_TYPE_SYS) return "sys";
  return type == RSMI_CLK_TYPE_MEM ? "mem" : "other";
}

ClockDomain* domain_of(Device& d, rsmi_clk_type_t type) {
  if (type == RSMI_CLK_TYPE_SYS) return &d.sys;
  if (type == RSMI_CLK_TYPE_MEM) return &d.mem;
  return nullptr;
}

}  // namespace

// Each device call: hangs first (holding no lock), then the session, the
// index and injected errors.
#define FAKE_DEVICE_CALL()                                                                      \
  fg::hang_if_due(state(), __func__, static_cast<int>(dv_ind));                                 \
  State& s = state();                                                                           \
  std::lock_guard lock(s.mutex);                                                                \
  if (!s.initialised) return RSMI_STATUS_INIT_ERROR;                                            \
  if (static_cast<std::uint32_t>(dv_ind) >= s.devices.size()) return RSMI_STATUS_INVALID_ARGS;  \
  Device* d = &s.devices[static_cast<std::uint32_t>(dv_ind)];                                   \
  if (auto rc = fg::injected(s, __func__, static_cast<int>(dv_ind)); rc != 0) return static_cast<rsmi_status_t>(rc)

// The process-wide calls: device -1.
#define FAKE_SYSTEM_CALL()                                       \
  fg::hang_if_due(state(), __func__, -1);                        \
  State& s = state();                                            \
  std::lock_guard lock(s.mutex);                                 \
  if (!s.initialised) return RSMI_STATUS_INIT_ERROR;             \
  if (auto rc = fg::injected(s, __func__, -1); rc != 0) return static_cast<rsmi_status_t>(rc)

FAKE_API void joule_fake_rocm_smi_release_hangs(void) { state().hangs_released.store(true); }

FAKE_API int joule_fake_rocm_smi_hung_calls(void) { return state().calls_hung_now.load(); }

FAKE_API void joule_fake_rocm_smi_set_time_s(double seconds) {
  fg::set_virtual_time(state(), seconds, "fake ROCm SMI");
}

// The speed of work on device `index` relative to the device unrestricted,
// under its clock settings; -1 before rsmi_init or for no such device.
FAKE_API double joule_fake_rocm_smi_relative_speed(unsigned index) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised || index >= s.devices.size()) return -1.0;
  const Device& d = s.devices[index];
  return fg::clock_relative_speed(fraction(d, d.sys), fraction(d, d.mem));
}

FAKE_API rsmi_status_t rsmi_init(uint64_t /*init_flags*/) {
  State& s = state();
  auto read_config = [&s] {
    s.version = "5.2.3";
    fg::load_config_with_devices(s, "JOULE_FAKE_ROCM_SMI_CONFIG", "JOULE_FAKE_ROCM_SMI_LOG",
                                 {RSMI_STATUS_INIT_ERROR, RSMI_STATUS_UNKNOWN_ERROR}, s.devices, "version", s.version,
                                 configure_device);
    load_persisted(s);
  };
  auto start_devices = [&s] {
    for (Device& d : s.devices) d.power.start(draw_of(d));
  };
  return static_cast<rsmi_status_t>(
      fg::init_session(s, "fake ROCm SMI", RSMI_STATUS_UNKNOWN_ERROR, read_config, start_devices));
}

FAKE_API rsmi_status_t rsmi_shut_down(void) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.initialised = false;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_version_get(rsmi_version_t* version) {
  if (version == nullptr) return RSMI_STATUS_INVALID_ARGS;
  State& s = state();
  std::lock_guard lock(s.mutex);
  unsigned major = 0, minor = 0, patch = 0;
  std::sscanf(s.version.c_str(), "%u.%u.%u", &major, &minor, &patch);
  *version = {major, minor, patch, "fake"};
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_status_string(rsmi_status_t status, const char** status_string) {
  if (status_string == nullptr) return RSMI_STATUS_INVALID_ARGS;
  switch (status) {
    case RSMI_STATUS_SUCCESS: *status_string = "RSMI_STATUS_SUCCESS: the call succeeded"; break;
    case RSMI_STATUS_INVALID_ARGS: *status_string = "RSMI_STATUS_INVALID_ARGS: invalid arguments"; break;
    case RSMI_STATUS_NOT_SUPPORTED: *status_string = "RSMI_STATUS_NOT_SUPPORTED: not supported on this device"; break;
    case RSMI_STATUS_PERMISSION: *status_string = "RSMI_STATUS_PERMISSION: permission denied"; break;
    case RSMI_STATUS_INIT_ERROR: *status_string = "RSMI_STATUS_INIT_ERROR: ROCm SMI is not initialised"; break;
    case RSMI_STATUS_NOT_FOUND: *status_string = "RSMI_STATUS_NOT_FOUND: not found"; break;
    case RSMI_STATUS_INSUFFICIENT_SIZE: *status_string = "RSMI_STATUS_INSUFFICIENT_SIZE: buffer too small"; break;
    case RSMI_STATUS_BUSY: *status_string = "RSMI_STATUS_BUSY: busy"; break;
    default: *status_string = "RSMI_STATUS_UNKNOWN_ERROR: an unknown error occurred"; break;
  }
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_num_monitor_devices(uint32_t* num_devices) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initialised) return RSMI_STATUS_INIT_ERROR;
  if (num_devices == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *num_devices = static_cast<uint32_t>(s.devices.size());
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_name_get(uint32_t dv_ind, char* name, size_t len) {
  FAKE_DEVICE_CALL();
  if (name == nullptr || len == 0) return RSMI_STATUS_INVALID_ARGS;
  std::snprintf(name, len, "%s", d->name.c_str());
  return d->name.size() < len ? RSMI_STATUS_SUCCESS : RSMI_STATUS_INSUFFICIENT_SIZE;
}

FAKE_API rsmi_status_t rsmi_dev_id_get(uint32_t dv_ind, uint16_t* id) {
  FAKE_DEVICE_CALL();
  if (id == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *id = d->device_id;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv_ind, uint64_t* id) {
  FAKE_DEVICE_CALL();
  if (!d->has_unique_id) return RSMI_STATUS_NOT_SUPPORTED;
  if (id == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *id = d->unique_id;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv_ind, uint64_t* bdfid) {
  FAKE_DEVICE_CALL();
  if (bdfid == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *bdfid = d->bdfid;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv_ind, uint64_t* power, float* counter_resolution,
                                                 uint64_t* timestamp) {
  FAKE_DEVICE_CALL();
  if (power == nullptr || counter_resolution == nullptr || timestamp == nullptr) return RSMI_STATUS_INVALID_ARGS;
  const double tick_s = fg::counter_tick_s(s.now_s(), d->energy_update_ms, d->energy_phase_ms);
  const double counted_uj = d->power.counter_energy_j(tick_s, d->energy_reset_ms) * 1e6;
  // Whole ticks, floored; a value a hair below a whole tick (float noise of
  // an exact integral) counts as that tick.
  const auto ticks = static_cast<std::uint64_t>(fg::floor_tolerant(counted_uj / d->energy_resolution_uj));
  *power = d->counter_bits == 64 ? ticks : ticks & ((1ULL << d->counter_bits) - 1);
  *counter_resolution = d->energy_resolution_uj;
  const double epoch_ns = s.virtual_clock ? 0.0 : static_cast<double>(s.realtime_at_init_us) * 1000.0;
  *timestamp = static_cast<std::uint64_t>(std::llround(epoch_ns + tick_s * 1e9));
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv_ind, uint32_t sensor_ind, uint64_t* power) {
  FAKE_DEVICE_CALL();
  if (sensor_ind != 0) return RSMI_STATUS_NOT_SUPPORTED;
  if (power == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *power = to_uw(d->power.sensor_power_w(s.now_s(), d->power_update_ms, d->power_ave_window_ms));
  return RSMI_STATUS_SUCCESS;
}

#ifndef JOULE_FAKE_ROCM_SMI_OLD
FAKE_API rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t dv_ind, uint64_t* socket_power) {
  FAKE_DEVICE_CALL();
  if (!d->socket_power) return RSMI_STATUS_NOT_SUPPORTED;
  if (socket_power == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *socket_power = to_uw(d->power.sensor_power_w(s.now_s(), d->power_update_ms, 0.0));
  return RSMI_STATUS_SUCCESS;
}
#endif

FAKE_API rsmi_status_t rsmi_dev_power_cap_get(uint32_t dv_ind, uint32_t sensor_ind, uint64_t* cap) {
  FAKE_DEVICE_CALL();
  if (sensor_ind != 0) return RSMI_STATUS_NOT_SUPPORTED;
  if (cap == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *cap = d->limits.limit_uw;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_power_cap_default_get(uint32_t dv_ind, uint64_t* default_cap) {
  FAKE_DEVICE_CALL();
  if (default_cap == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *default_cap = d->limits.default_uw;
  return RSMI_STATUS_SUCCESS;
}

// Note the order: max before min, as the header has it.
FAKE_API rsmi_status_t rsmi_dev_power_cap_range_get(uint32_t dv_ind, uint32_t sensor_ind, uint64_t* max,
                                                    uint64_t* min) {
  FAKE_DEVICE_CALL();
  if (sensor_ind != 0) return RSMI_STATUS_NOT_SUPPORTED;
  if (max == nullptr || min == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *max = d->limits.max_uw;
  *min = d->limits.min_uw;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_power_cap_set(uint32_t dv_ind, uint32_t sensor_ind, uint64_t cap) {
  FAKE_DEVICE_CALL();
  const std::string fields = "sensor=" + std::to_string(sensor_ind) + " cap_uw=" + std::to_string(cap);
  if (sensor_ind != 0) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_NOT_SUPPORTED);
  if (!d->settable) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_PERMISSION);
  if (!d->limits.allows(cap)) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_INVALID_ARGS);
  log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_SUCCESS);  // before it takes effect
  d->limits.limit_uw = cap;
  settings_changed(s, *d);
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv_ind, uint32_t* busy_percent) {
  FAKE_DEVICE_CALL();
  if (busy_percent == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *busy_percent = d->util_gpu;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_memory_busy_percent_get(uint32_t dv_ind, uint32_t* busy_percent) {
  FAKE_DEVICE_CALL();
  if (busy_percent == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *busy_percent = d->util_mem;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv_ind, uint32_t sensor_type,
                                                rsmi_temperature_metric_t metric, int64_t* temperature) {
  FAKE_DEVICE_CALL();
  long long celsius = -1;
  if (sensor_type == RSMI_TEMP_TYPE_EDGE && d->edge_temp) celsius = d->temp_c;
  if (sensor_type == RSMI_TEMP_TYPE_JUNCTION) celsius = d->junction_temp_c;
  if (sensor_type == RSMI_TEMP_TYPE_MEMORY) celsius = d->mem_temp_c;
  if (metric != RSMI_TEMP_CURRENT || celsius < 0) return RSMI_STATUS_NOT_SUPPORTED;
  if (temperature == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *temperature = celsius * 1000;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t* total) {
  FAKE_DEVICE_CALL();
  if (mem_type != RSMI_MEM_TYPE_VRAM && mem_type != RSMI_MEM_TYPE_VIS_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
  if (total == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *total = d->mem_total;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t* used) {
  FAKE_DEVICE_CALL();
  if (mem_type != RSMI_MEM_TYPE_VRAM && mem_type != RSMI_MEM_TYPE_VIS_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
  if (used == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *used = d->mem_used;
  return RSMI_STATUS_SUCCESS;
}

// ---- clocks ----

FAKE_API rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv_ind, rsmi_clk_type_t clk_type, rsmi_frequencies_t* f) {
  FAKE_DEVICE_CALL();
  const ClockDomain* c = domain_of(*d, clk_type);
  if (c == nullptr) return RSMI_STATUS_NOT_SUPPORTED;
  if (f == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *f = {};
  f->num_supported = static_cast<uint32_t>(c->levels_mhz.size());
  f->current = current_level(*d, *c);
  for (std::size_t i = 0; i < c->levels_mhz.size(); ++i) f->frequency[i] = c->levels_mhz[i] * 1'000'000ULL;
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_gpu_clk_freq_set(uint32_t dv_ind, rsmi_clk_type_t clk_type, uint64_t freq_bitmask) {
  FAKE_DEVICE_CALL();
  char fields[96];
  std::snprintf(fields, sizeof fields, "clk=%s mask=0x%llx", clock_name(clk_type),
                static_cast<unsigned long long>(freq_bitmask));
  ClockDomain* c = domain_of(*d, clk_type);
  if (c == nullptr || !d->clock_control) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_NOT_SUPPORTED);
  if (!d->settable) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_PERMISSION);
  // Bits past the levels are ignored, as the header says; none left is no level at all.
  if ((freq_bitmask & c->all_levels()) == 0) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_INVALID_ARGS);
  log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_SUCCESS);
  c->mask = freq_bitmask & c->all_levels();
  d->perf_level = RSMI_DEV_PERF_LEVEL_MANUAL;
  settings_changed(s, *d);
  return RSMI_STATUS_SUCCESS;
}

FAKE_API rsmi_status_t rsmi_dev_clk_range_set(uint32_t dv_ind, uint64_t minclkvalue, uint64_t maxclkvalue,
                                              rsmi_clk_type_t clkType) {
  FAKE_DEVICE_CALL();
  const std::string fields = std::string("clk=") + clock_name(clkType) + " min_mhz=" + std::to_string(minclkvalue) +
                             " max_mhz=" + std::to_string(maxclkvalue);
  ClockDomain* c = domain_of(*d, clkType);
  if (c == nullptr || !d->clock_control) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_NOT_SUPPORTED);
  if (!d->settable) return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_PERMISSION);
  if (minclkvalue > maxclkvalue || minclkvalue < c->levels_mhz.front() || maxclkvalue > c->levels_mhz.back()) {
    return log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_INVALID_ARGS);
  }
  log_set_call(s, __func__, dv_ind, fields, RSMI_STATUS_SUCCESS);
  c->range = {minclkvalue, maxclkvalue};
  d->perf_level = RSMI_DEV_PERF_LEVEL_MANUAL;
  settings_changed(s, *d);
  return RSMI_STATUS_SUCCESS;
}

namespace {

const char* perf_level_name(rsmi_dev_perf_level_t level) {
  switch (level) {
    case RSMI_DEV_PERF_LEVEL_AUTO: return "auto";
    case RSMI_DEV_PERF_LEVEL_LOW: return "low";
    case RSMI_DEV_PERF_LEVEL_HIGH: return "high";
    case RSMI_DEV_PERF_LEVEL_MANUAL: return "manual";
    default: return nullptr;
  }
}

rsmi_status_t set_perf_level(State& s, Device& d, const char* function, std::uint32_t device,
                             rsmi_dev_perf_level_t level) {
  const char* name = perf_level_name(level);
  const std::string fields = "level=" + (name ? std::string(name) : std::to_string(static_cast<unsigned>(level)));
  if (level > RSMI_DEV_PERF_LEVEL_LAST) return log_set_call(s, function, device, fields, RSMI_STATUS_INVALID_ARGS);
  if (name == nullptr || !d.clock_control) return log_set_call(s, function, device, fields, RSMI_STATUS_NOT_SUPPORTED);
  if (!d.settable) return log_set_call(s, function, device, fields, RSMI_STATUS_PERMISSION);
  log_set_call(s, function, device, fields, RSMI_STATUS_SUCCESS);
  if (level == RSMI_DEV_PERF_LEVEL_AUTO) {  // the reset: every mask and range cleared
    for (ClockDomain* c : {&d.sys, &d.mem}) {
      c->mask = c->all_levels();
      c->range = {};
    }
  }
  d.perf_level = level;
  settings_changed(s, d);
  return RSMI_STATUS_SUCCESS;
}

}  // namespace

FAKE_API rsmi_status_t rsmi_dev_perf_level_set(int32_t dv_ind, rsmi_dev_perf_level_t perf_lvl) {
  FAKE_DEVICE_CALL();
  return set_perf_level(s, *d, __func__, static_cast<std::uint32_t>(dv_ind), perf_lvl);
}

FAKE_API rsmi_status_t rsmi_dev_perf_level_set_v1(uint32_t dv_ind, rsmi_dev_perf_level_t perf_lvl) {
  FAKE_DEVICE_CALL();
  return set_perf_level(s, *d, __func__, dv_ind, perf_lvl);
}

FAKE_API rsmi_status_t rsmi_dev_perf_level_get(uint32_t dv_ind, rsmi_dev_perf_level_t* perf) {
  FAKE_DEVICE_CALL();
  if (perf == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *perf = d->perf_level;
  return RSMI_STATUS_SUCCESS;
}

// ---- processes ----

namespace {

// The pids running now, each once, in the order first met, with their VRAM
// summed over the devices.
std::vector<rsmi_process_info_t> running_processes(const State& s) {
  const double now = s.now_s();
  std::vector<rsmi_process_info_t> running;
  for (const Device& d : s.devices) {
    for (const fg::ScriptedProcess& p : fg::running_processes(d, now)) {
      auto same = std::find_if(running.begin(), running.end(), [&](const auto& r) { return r.process_id == p.pid; });
      if (same == running.end()) {
        running.push_back({p.pid, 0, 0, 0, 0});
        same = running.end() - 1;
      }
      same->vram_usage += p.used_bytes;
    }
  }
  return running;
}

// The header's count protocol: a NULL array asks for the count; otherwise
// as many as fit, their count, and INSUFFICIENT_SIZE when some did not.
template <typename T>
rsmi_status_t write_list(const std::vector<T>& items, T* out, uint32_t* count) {
  if (count == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (out == nullptr) {
    *count = static_cast<uint32_t>(items.size());
    return RSMI_STATUS_SUCCESS;
  }
  const std::size_t written = std::min<std::size_t>(*count, items.size());
  std::copy_n(items.begin(), written, out);
  *count = static_cast<uint32_t>(written);
  return written < items.size() ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

}  // namespace

FAKE_API rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t* procs, uint32_t* num_items) {
  FAKE_SYSTEM_CALL();
  return write_list(running_processes(s), procs, num_items);
}

FAKE_API rsmi_status_t rsmi_compute_process_info_by_pid_get(uint32_t pid, rsmi_process_info_t* proc) {
  FAKE_SYSTEM_CALL();
  if (proc == nullptr) return RSMI_STATUS_INVALID_ARGS;
  for (const rsmi_process_info_t& p : running_processes(s)) {
    if (p.process_id == pid) {
      *proc = p;
      return RSMI_STATUS_SUCCESS;
    }
  }
  return RSMI_STATUS_NOT_FOUND;
}

FAKE_API rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t* dv_indices, uint32_t* num_devices) {
  FAKE_SYSTEM_CALL();
  const double now = s.now_s();
  std::vector<uint32_t> devices;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const auto& processes = s.devices[i].processes;
    if (std::any_of(processes.begin(), processes.end(),
                    [&](const fg::ScriptedProcess& p) { return p.pid == pid && p.running_at(now); })) {
      devices.push_back(static_cast<uint32_t>(i));
    }
  }
  if (devices.empty()) return RSMI_STATUS_NOT_FOUND;
  return write_list(devices, dv_indices, num_devices);
}
