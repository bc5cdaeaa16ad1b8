// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/fake_drivers.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "joule/device/nvml.h"
#include "joule/device/rocm.h"

namespace joule::testing {
namespace {

// An H100's SM clocks: 210-1980 MHz in 15 MHz steps.
std::vector<unsigned> h100_sm_clocks_mhz() {
  std::vector<unsigned> clocks;
  for (unsigned mhz = 210; mhz <= 1980; mhz += 15) clocks.push_back(mhz);
  return clocks;
}

FakeDriver make_nvml() {
  FakeDriver d;
  d.name = "nvml";
  d.backend = GpuBackend::kNvml;
  d.library_env = "JOULE_NVML_LIBRARY";
  d.config_env = "JOULE_FAKE_NVML_CONFIG";
  d.log_env = "JOULE_FAKE_NVML_LOG";
  d.helper_prefix = "joule_fake_nvml_";
  d.gpu_name = "NVIDIA H100 80GB HBM3";
  // The fake NVML's defaults are an H100's sources (driver 580).
  d.device_keys = "name=\"" + d.gpu_name + "\"";
  // An H100 as the fake plays it (docs/measurement.md): power samples every
  // 20 ms, counter steps of 100 ms, a one-second trailing power usage; a
  // counter read of 1 ms rather than 4 ms: the tests share two cores.
  d.real_source_keys =
      "energy_update_ms=100 energy_call_ms=1 power_update_ms=100 usage_window_ms=1000 sample_ms=20 sample_buffer=120 "
      "sample_latency_ms=1";
  d.counter_step_ms = 100;
  d.core_clocks_mhz = h100_sm_clocks_mhz();
  d.words = {{"@energy", "nvmlDeviceGetTotalEnergyConsumption"},
             {"@power", "nvmlDeviceGetPowerUsage"},
             {"@set_power_limit", "nvmlDeviceSetPowerManagementLimit"},
             {"@processes", "nvmlDeviceGetComputeRunningProcesses_v3"},
             {"@not_supported", "3"},   // NVML_ERROR_NOT_SUPPORTED
             {"@lost", "15"},           // NVML_ERROR_GPU_IS_LOST
             {"@no_permission", "4"},   // NVML_ERROR_NO_PERMISSION
             {"@unknown", "999"}};      // NVML_ERROR_UNKNOWN
  return d;
}

FakeDriver make_rocm() {
  FakeDriver d;
  d.name = "rocm";
  d.backend = GpuBackend::kRocm;
  d.library_env = "JOULE_ROCM_SMI_LIBRARY";
  d.config_env = "JOULE_FAKE_ROCM_SMI_CONFIG";
  d.log_env = "JOULE_FAKE_ROCM_SMI_LOG";
  d.helper_prefix = "joule_fake_rocm_smi_";
  d.gpu_name = "AMD Instinct MI300X";
  // An MI300X as docs/devices.md describes it: the energy counter in
  // 15.3 uJ ticks refreshed every 1 ms (the driver's cached value), the
  // current socket power and no average (extra_lines), a junction sensor and
  // no edge one.
  d.device_keys = "name=\"" + d.gpu_name +
                  "\" energy_resolution_uj=15.3 energy_update_ms=1 current_socket_power=1 edge_temp=0";
  d.extra_lines = "error function=rsmi_dev_power_ave_get code=2\n";  // RSMI_STATUS_NOT_SUPPORTED
  d.counter_step_ms = 1;
  // Not an MI300X's levels (its top one is 2100 MHz): levels holding the
  // H100 caps the tests name (990, 1485, 1980 MHz), so one expectation serves
  // both drivers. ROCm locks by level, so a few levels are what it lists.
  d.core_clocks_mhz = {500, 990, 1485, 1980};
  d.words = {{"@energy", "rsmi_dev_energy_count_get"},
             {"@power", "rsmi_dev_current_socket_power_get"},
             {"@set_power_limit", "rsmi_dev_power_cap_set"},
             {"@processes", "rsmi_compute_process_info_get"},  // every GPU's at once: rules without device=
             {"@not_supported", "2"},   // RSMI_STATUS_NOT_SUPPORTED
             {"@lost", "10"},           // RSMI_STATUS_NOT_FOUND (docs/devices.md: a lost GPU)
             {"@no_permission", "4"},   // RSMI_STATUS_PERMISSION
             {"@unknown", "6"}};        // RSMI_STATUS_INTERNAL_EXCEPTION
  return d;
}

std::string join_mhz(const std::vector<unsigned>& clocks) {
  std::string out;
  for (unsigned mhz : clocks) out += (out.empty() ? "" : ",") + std::to_string(mhz);
  return out;
}

// The device keys `core_clocks` stands for.
std::string core_clock_keys(const FakeDriver& d) {
  const auto& c = d.core_clocks_mhz;
  if (d.backend == GpuBackend::kNvml) {
    return "min_sm_mhz=" + std::to_string(c.front()) + " max_sm_mhz=" + std::to_string(c.back()) +
           " sm_step_mhz=" + std::to_string(c[1] - c[0]);
  }
  return "sys_clocks_mhz=" + join_mhz(c);
}

}  // namespace

const FakeDriver& fake_nvml_driver() {
  static const FakeDriver driver = make_nvml();
  return driver;
}

const FakeDriver& fake_rocm_smi_driver() {
  static const FakeDriver driver = make_rocm();
  return driver;
}

const std::vector<FakeDriver>& fake_drivers() {
  static const std::vector<FakeDriver> drivers = {fake_nvml_driver(), fake_rocm_smi_driver()};
  return drivers;
}

std::string FakeDriver::config(const std::string& common_config) const {
  std::istringstream in(common_config);
  std::string out, line;
  while (std::getline(in, line)) {
    std::istringstream words_in(line);
    std::string directive, word, translated;
    words_in >> directive;
    if (directive == "device") translated = "device " + device_keys;
    else translated = directive;
    while (words_in >> word) {
      if (directive == "device" && word == "core_clocks") word = core_clock_keys(*this);
      if (directive == "device" && word == "real_sources") word = real_source_keys;
      const std::size_t at = word.find('@');
      if (at != std::string::npos) {
        const auto it = words.find(word.substr(at));
        if (it == words.end()) throw std::invalid_argument("fake driver config: unknown word '" + word + "'");
        word = word.substr(0, at) + it->second;
      }
      translated += " " + word;
    }
    out += translated + "\n";
  }
  return out + extra_lines;
}

FakeLibrary FakeDriver::use(const TempDir& dir, const std::string& common_config) const {
  FakeLibrary fake;
  const std::string config_text = config(common_config);
  if (backend == GpuBackend::kNvml) {
    const FakeNvml nvml = use_fake_nvml(dir, config_text);
    fake = {nvml.config_path, nvml.log_path, nvml.library_path};
  } else {
    const FakeRocmSmi rocm = use_fake_rocm_smi(dir, config_text);
    fake = {rocm.config_path, rocm.log_path, rocm.library_path};
  }
  return fake;
}

std::map<std::string, std::string> FakeDriver::env(const FakeLibrary& fake) const {
  std::map<std::string, std::string> env = simulated_only_env();
  env[library_env] = fake.library_path;
  env[config_env] = fake.config_path;
  env[log_env] = fake.log_path;
  return env;
}

void FakeDriver::point_discovery(DiscoveryOptions& options, const FakeLibrary& fake) const {
  options.backend = backend;
  options.nvml_library = backend == GpuBackend::kNvml ? fake.library_path : "/nonexistent/libnvidia-ml.so.1";
  options.rocm_library = backend == GpuBackend::kRocm ? fake.library_path : "/nonexistent/librocm_smi64.so.1";
}

std::vector<std::shared_ptr<Gpu>> FakeDriver::open(const FakeLibrary& fake) const {
  if (backend == GpuBackend::kNvml) return open_nvml_gpus(fake.library_path).gpus;
  return open_rocm_smi_gpus(fake.library_path).gpus;
}

std::vector<std::string> FakeDriver::power_limit_log(int device, int watts) const {
  const std::string dev = std::to_string(device);
  if (backend == GpuBackend::kNvml) {
    return {"nvmlDeviceSetPowerManagementLimit device=" + dev + " limit_mw=" + std::to_string(watts * 1000LL)};
  }
  return {"rsmi_dev_power_cap_set device=" + dev + " sensor=0 cap_uw=" + std::to_string(watts * 1000000LL)};
}

std::vector<std::string> FakeDriver::clock_lock_log(int device, unsigned cap_mhz) const {
  const std::string dev = std::to_string(device);
  if (backend == GpuBackend::kNvml) {
    return {"nvmlDeviceSetGpuLockedClocks device=" + dev + " min_mhz=" + std::to_string(core_clocks_mhz.front()) +
            " max_mhz=" + std::to_string(cap_mhz)};
  }
  // ROCm SMI locks by level: every level from the lowest up to the cap.
  unsigned long long mask = 0;
  for (std::size_t i = 0; i < core_clocks_mhz.size(); ++i) {
    if (core_clocks_mhz[i] <= cap_mhz) mask |= 1ULL << i;
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", mask);
  return {"rsmi_dev_perf_level_set device=" + dev + " level=manual",
          "rsmi_dev_gpu_clk_freq_set device=" + dev + " clk=sys mask=" + hex};
}

std::vector<std::string> FakeDriver::clock_reset_log(int device) const {
  const std::string dev = std::to_string(device);
  if (backend == GpuBackend::kNvml) return {"nvmlDeviceResetGpuLockedClocks device=" + dev};
  return {"rsmi_dev_perf_level_set device=" + dev + " level=auto"};
}

std::optional<std::pair<int, double>> FakeDriver::power_limit_set(const std::string& log_line) const {
  if (log_line.find("result=") != std::string::npos) return std::nullopt;  // refused
  int device = -1;
  unsigned long long value = 0;
  if (backend == GpuBackend::kNvml) {
    if (std::sscanf(log_line.c_str(), "nvmlDeviceSetPowerManagementLimit device=%d limit_mw=%llu", &device, &value) == 2) {
      return std::make_pair(device, static_cast<double>(value) / 1e3);
    }
  } else if (std::sscanf(log_line.c_str(), "rsmi_dev_power_cap_set device=%d sensor=0 cap_uw=%llu", &device,
                         &value) == 2) {
    return std::make_pair(device, static_cast<double>(value) / 1e6);
  }
  return std::nullopt;
}

std::map<int, FakeDriver::HeldSettings> FakeDriver::persisted_settings(const std::string& persist_path) const {
  std::map<int, HeldSettings> held;
  for (const std::string& line : read_lines(persist_path)) {
    std::istringstream in(line);
    int device = -1;
    std::vector<unsigned long long> fields;
    in >> device;
    for (unsigned long long value = 0; in >> value;) fields.push_back(value);
    if (device < 0 || fields.empty()) continue;
    HeldSettings& settings = held[device];
    if (backend == GpuBackend::kNvml) {
      // limit_mw, then (when any clock was ever set) SM lock min, max, memory
      // lock min, max, application clocks memory, SM: 0 for none.
      settings.limit_w = static_cast<double>(fields[0]) / 1e3;
      for (std::size_t i = 1; i < fields.size(); ++i) settings.clocks_held |= fields[i] != 0;
    } else {
      // cap_uw, perf level (0: auto), the core and memory level masks, the
      // core and memory ranges (min, max; 0: none). A mask or range set puts
      // the GPU in perf level manual and auto clears them, so a perf level
      // other than auto is what holds a clock (the masks alone cannot say:
      // "every level" is all ones or the levels' count of them).
      settings.limit_w = static_cast<double>(fields[0]) / 1e6;
      settings.clocks_held = fields.size() > 1 && fields[1] != 0;
      for (std::size_t i = 4; i < fields.size(); ++i) settings.clocks_held |= fields[i] != 0;
    }
  }
  return held;
}

}  // namespace joule::testing
