// A fake libnvidia-ml.so.1 for tests: the NVML functions joule uses, with the
// same names and ABI, over scripted devices read from the file named by
// $JOULE_FAKE_NVML_CONFIG. Energy advances with wall time; set-calls are
// appended to a log file; errors can be injected per function and device.
//
// Config, one directive per line ('#' starts a comment):
//   driver_version 580.00.00
//   set_log /path/to/log            (or $JOULE_FAKE_NVML_LOG)
//   persist /path/to/limits         (power limits survive the process, like a
//                                    real GPU's do: read at init, written at each set)
//   init_error code=9               (nvmlInit fails with this code)
//   device name="NVIDIA H100" arch=9 power_w=300 limit_w=700 min_limit_w=200
//          max_limit_w=700 default_limit_w=700 util_gpu=80 util_mem=40
//          sm_mhz=1980 temp_c=55 mem_used_mib=1024 instant_power=1
//          energy_update_ms=100 energy_call_ms=4 pulse_w=500 pulse_period_ms=200
//          instant_offset_w=20
//   error function=nvmlDeviceGetPowerUsage device=0 code=15 after_calls=3 after_ms=0
// A device draws power_w, capped by its limit; with pulse_w it alternates
// between power_w and pulse_w every half pulse period. The energy counter
// steps every energy_update_ms, like real hardware, and each call to it
// keeps the CPU busy for energy_call_ms. An error rule (function "*" matches all; device -1
// all devices) fires after that many successful calls and/or milliseconds,
// and then keeps firing, as a lost GPU does.
//
// Built twice: as is, and with JOULE_FAKE_NVML_OLD_DRIVER, which leaves out
// the functions an old driver lacks (energy counter, field values,
// architecture).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "device/nvml/nvml_abi.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

using Clock = std::chrono::steady_clock;

struct Device {
  std::string name = "Fake NVIDIA GPU";
  std::string uuid;
  unsigned arch = 9;
  double power_w = 100.0;
  double pulse_w = -1.0;  // < 0: no pulse
  double pulse_period_ms = 0.0;
  unsigned limit_mw = 300000, min_limit_mw = 100000, max_limit_mw = 300000, default_limit_mw = 300000;
  unsigned util_gpu = 0, util_mem = 0, sm_mhz = 1000, temp_c = 40;
  unsigned long long mem_used = 0, mem_total = 80ull << 30;
  bool instant_power = true;
  double instant_offset_w = 0.0;  // the instantaneous field reads this much above power usage
  double energy_update_ms = 0.0;
  double energy_call_ms = 0.0;
  // Energy accounting across limit changes.
  double energy_j_at_change = 0.0;
  double change_s = 0.0;
};

struct ErrorRule {
  std::string function;
  int device = -1;
  nvmlReturn_t code = 999;
  long after_calls = 0;
  double after_ms = 0.0;
  std::map<int, long> calls;  // successful calls so far, per device
};

struct State {
  std::mutex mutex;
  bool loaded = false;
  std::string load_error;
  bool initialised = false;
  nvmlReturn_t init_error = 0;
  std::string driver_version = "580.00.00-fake";
  std::string set_log;
  std::string persist;
  std::vector<Device> devices;
  std::vector<ErrorRule> errors;
  Clock::time_point init_time;
};

State& state() {
  static State s;
  return s;
}

double seconds_since_init() {
  return std::chrono::duration<double>(Clock::now() - state().init_time).count();
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
  while (std::getline(in, line)) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string directive;
    if (!(words >> directive)) continue;
    std::string rest;
    std::getline(words, rest);
    const auto kv = parse_pairs(rest);
    auto num = [&](const char* key, double fallback) {
      auto it = kv.find(key);
      return it == kv.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
    };
    if (directive == "driver_version") {
      std::istringstream(rest) >> s.driver_version;
    } else if (directive == "set_log") {
      std::istringstream(rest) >> s.set_log;
    } else if (directive == "persist") {
      std::istringstream(rest) >> s.persist;
    } else if (directive == "init_error") {
      s.init_error = static_cast<nvmlReturn_t>(num("code", 9));
    } else if (directive == "device") {
      Device d;
      const auto index = s.devices.size();
      d.name = kv.count("name") ? kv.at("name") : d.name;
      char uuid[64];
      std::snprintf(uuid, sizeof uuid, "GPU-fake0000-0000-0000-0000-%012zu", index);
      d.uuid = kv.count("uuid") ? kv.at("uuid") : uuid;
      d.arch = static_cast<unsigned>(num("arch", d.arch));
      d.power_w = num("power_w", d.power_w);
      d.pulse_w = num("pulse_w", d.pulse_w);
      d.pulse_period_ms = num("pulse_period_ms", d.pulse_period_ms);
      d.max_limit_mw = static_cast<unsigned>(num("max_limit_w", d.max_limit_mw / 1000.0) * 1000);
      d.min_limit_mw = static_cast<unsigned>(num("min_limit_w", d.min_limit_mw / 1000.0) * 1000);
      d.default_limit_mw = static_cast<unsigned>(num("default_limit_w", d.max_limit_mw / 1000.0) * 1000);
      d.limit_mw = static_cast<unsigned>(num("limit_w", d.default_limit_mw / 1000.0) * 1000);
      d.util_gpu = static_cast<unsigned>(num("util_gpu", d.util_gpu));
      d.util_mem = static_cast<unsigned>(num("util_mem", d.util_mem));
      d.sm_mhz = static_cast<unsigned>(num("sm_mhz", d.sm_mhz));
      d.temp_c = static_cast<unsigned>(num("temp_c", d.temp_c));
      d.mem_used = static_cast<unsigned long long>(num("mem_used_mib", 0)) << 20;
      d.instant_power = num("instant_power", 1) != 0;
      d.instant_offset_w = num("instant_offset_w", 0);
      d.energy_update_ms = num("energy_update_ms", 0);
      d.energy_call_ms = num("energy_call_ms", 0);
      s.devices.push_back(d);
    } else if (directive == "error") {
      ErrorRule rule;
      rule.function = kv.count("function") ? kv.at("function") : "*";
      rule.device = static_cast<int>(num("device", -1));
      rule.code = static_cast<nvmlReturn_t>(num("code", 999));
      rule.after_calls = static_cast<long>(num("after_calls", 0));
      rule.after_ms = num("after_ms", 0);
      s.errors.push_back(rule);
    } else {
      s.load_error = "unknown directive '" + directive + "' in " + path;
      return;
    }
  }
}

// Power a device draws at t seconds after init, under its current limit.
double level_w(const Device& d, double level) { return std::min(level, d.limit_mw / 1000.0); }

double power_at(const Device& d, double t) {
  if (d.pulse_w < 0 || d.pulse_period_ms <= 0) return level_w(d, d.power_w);
  const double period_s = d.pulse_period_ms / 1000.0;
  const double phase = std::fmod(t, period_s);
  return level_w(d, phase < period_s / 2 ? d.power_w : d.pulse_w);
}

// Integral of power from 0 to t at the current limit (closed form).
double energy_integral(const Device& d, double t) {
  if (d.pulse_w < 0 || d.pulse_period_ms <= 0) return level_w(d, d.power_w) * t;
  const double period_s = d.pulse_period_ms / 1000.0, half_s = period_s / 2;
  const double low = level_w(d, d.power_w), high = level_w(d, d.pulse_w);
  const double periods = std::floor(t / period_s);
  const double phase = t - periods * period_s;
  return periods * half_s * (low + high) + std::min(phase, half_s) * low + std::max(phase - half_s, 0.0) * high;
}

double energy_j(const Device& d, double t) {
  return d.energy_j_at_change + energy_integral(d, t) - energy_integral(d, d.change_s);
}

// Returns the injected error for (function, device), or success. Counts the
// successful call otherwise.
nvmlReturn_t injected(const char* function, int device) {
  State& s = state();
  for (auto& rule : s.errors) {
    if (rule.function != "*" && rule.function != function) continue;
    if (rule.device >= 0 && rule.device != device) continue;
    const bool time_due = seconds_since_init() * 1000.0 >= rule.after_ms;
    const bool calls_due = rule.calls[device] >= rule.after_calls;
    if (time_due && calls_due) return rule.code;
    ++rule.calls[device];
  }
  return 0;
}

void load_persisted(State& s) {
  if (s.persist.empty()) return;
  std::ifstream in(s.persist);
  std::size_t index = 0;
  unsigned limit_mw = 0;
  while (in >> index >> limit_mw) {
    if (index < s.devices.size()) s.devices[index].limit_mw = limit_mw;
  }
}

void save_persisted(const State& s) {
  if (s.persist.empty()) return;
  const std::string temporary = s.persist + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (std::size_t i = 0; i < s.devices.size(); ++i) out << i << ' ' << s.devices[i].limit_mw << '\n';
  }
  std::rename(temporary.c_str(), s.persist.c_str());
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

}  // namespace

#define FAKE_DEVICE_CALL(function)                                         \
  State& s = state();                                                      \
  std::lock_guard lock(s.mutex);                                           \
  if (!s.initialised) return 1; /* NVML_ERROR_UNINITIALIZED */             \
  Device* d = lookup(device);                                              \
  if (d == nullptr) return 2; /* NVML_ERROR_INVALID_ARGUMENT */            \
  if (nvmlReturn_t rc = injected(function, index_of(device)); rc != 0) return rc

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
    load_config(s);
    load_persisted(s);
  }
  if (!s.load_error.empty()) {
    std::fprintf(stderr, "fake NVML: %s\n", s.load_error.c_str());
    return 999;
  }
  if (s.init_error != 0) return s.init_error;
  if (!s.initialised) s.init_time = Clock::now();
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

#ifndef JOULE_FAKE_NVML_OLD_DRIVER
FAKE_API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) {
  FAKE_DEVICE_CALL("nvmlDeviceGetArchitecture");
  *arch = d->arch;
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy_mj) {
  double call_ms, update_ms;
  Device snapshot;
  {
    FAKE_DEVICE_CALL("nvmlDeviceGetTotalEnergyConsumption");
    if (d->arch < 5) return 3;  // pre-Volta: no counter
    call_ms = d->energy_call_ms;
    update_ms = d->energy_update_ms;
    snapshot = *d;
  }
  // Like the real call: slow, busy on the CPU (an H100 spends ~3.8 ms of CPU
  // per call), and the value only moves at each update tick.
  if (call_ms > 0) {
    const auto until = Clock::now() + std::chrono::duration<double, std::milli>(call_ms);
    while (Clock::now() < until) {
    }
  }
  double t = seconds_since_init();
  if (update_ms > 0) t = std::floor(t * 1000.0 / update_ms) * update_ms / 1000.0;
  *energy_mj = static_cast<unsigned long long>(energy_j(snapshot, t) * 1000.0);
  return 0;
}

FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  FAKE_DEVICE_CALL("nvmlDeviceGetFieldValues");
  for (int i = 0; i < count; ++i) {
    if (values[i].fieldId == 186 && d->instant_power) {
      values[i].nvmlReturn = 0;
      values[i].valueType = 1;  // unsigned int
      values[i].value.uiVal =
          static_cast<unsigned>(std::lround((power_at(*d, seconds_since_init()) + d->instant_offset_w) * 1000.0));
    } else {
      values[i].nvmlReturn = 3;
    }
  }
  return 0;
}
#endif

FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceGetPowerUsage");
  *power_mw = static_cast<unsigned>(std::lround(power_at(*d, seconds_since_init()) * 1000.0));
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
  if (clock_type != 1) return 3;
  *clock_mhz = d->sm_mhz;
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

FAKE_API nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit_mw) {
  FAKE_DEVICE_CALL("nvmlDeviceSetPowerManagementLimit");
  char line[160];
  if (limit_mw < d->min_limit_mw || limit_mw > d->max_limit_mw) {
    std::snprintf(line, sizeof line, "nvmlDeviceSetPowerManagementLimit device=%d limit_mw=%u result=invalid\n",
                  index_of(device), limit_mw);
    append_log(line);
    return 2;
  }
  const double now = seconds_since_init();
  d->energy_j_at_change = energy_j(*d, now);
  d->change_s = now;
  d->limit_mw = limit_mw;
  save_persisted(s);
  std::snprintf(line, sizeof line, "nvmlDeviceSetPowerManagementLimit device=%d limit_mw=%u\n", index_of(device),
                limit_mw);
  append_log(line);
  return 0;
}
