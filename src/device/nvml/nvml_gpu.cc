// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "device/nvml/nvml_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <map>

#include "joule/device/nvml.h"

namespace joule {
namespace nvml {

namespace {

std::string architecture_name(unsigned int arch) {
  switch (arch) {
    case 2: return "Kepler";
    case 3: return "Maxwell";
    case 4: return "Pascal";
    case 5: return "Volta";
    case 6: return "Turing";
    case 7: return "Ampere";
    case 8: return "Ada";
    case 9: return "Hopper";
    case 10: return "Blackwell";
    default: return fmt::format("unknown ({})", arch);
  }
}

}  // namespace

NvmlGpu::NvmlGpu(std::shared_ptr<Library> library, unsigned index, nvmlDevice_t handle)
    : library_(std::move(library)), fn_(library_->fn()), index_(index), handle_(handle) {
  char buffer[kNameBufferSize] = {};
  if (fn_.nvmlDeviceGetName && fn_.nvmlDeviceGetName(handle_, buffer, sizeof buffer) == kSuccess) name_ = buffer;
  char uuid[kUuidBufferSize] = {};
  if (fn_.nvmlDeviceGetUUID && fn_.nvmlDeviceGetUUID(handle_, uuid, sizeof uuid) == kSuccess) uuid_ = uuid;
  nvmlPciInfo_t pci{};
  if (fn_.nvmlDeviceGetPciInfo_v3 && fn_.nvmlDeviceGetPciInfo_v3(handle_, &pci) == kSuccess) {
    pci_bus_id_.assign(pci.busId, strnlen(pci.busId, sizeof pci.busId));
  }
  unsigned int arch = kArchitectureUnknown;
  if (fn_.nvmlDeviceGetArchitecture && fn_.nvmlDeviceGetArchitecture(handle_, &arch) == kSuccess) {
    architecture_ = architecture_name(arch);
  }
  // Decide once which power and energy sources work, so the sampler's hot
  // path never pays for a failing call.
  try {
    total_energy_mj();
    has_energy_counter_ = true;
  } catch (const DeviceError&) {
  }
  // $JOULE_NVML_POWER_SOURCE chooses what the sampler integrates: the
  // driver's buffered power samples where it keeps them (the default), or one
  // reading per tick of power usage ("usage") or the instantaneous field
  // ("instant"). On an H100 (driver 580) the samples come about every 20 ms
  // and their integral follows the energy counter to ~0.4-0.8% over 0.5-1 s;
  // power usage is a trailing one-second mean and the instantaneous field a
  // point sample per 100 ms (docs/measurement.md).
  const char* env = std::getenv("JOULE_NVML_POWER_SOURCE");
  const std::string source = env != nullptr ? env : "";
  if (source == "instant") {
    try {
      instant_power_mw();
      use_instant_power_ = true;
    } catch (const DeviceError&) {
    }
  }
  if (source.empty() || source == "samples") detect_power_samples();
  // Against the energy counter's timeline, an H100's (driver 580) sample
  // stamps come ~4.5 ms before the interval each sample covers ends: the
  // counter differences over 0.2-1 s spans under pulsed and random loads
  // matched the sample integral best with the stamps moved 4-5 ms later
  // (bench/probes/counter_vs_samples.py; docs/measurement.md).
  const char* offset = std::getenv("JOULE_NVML_SAMPLE_OFFSET_MS");
  sample_offset_us_ = std::llround(1000.0 * (offset != nullptr ? std::strtod(offset, nullptr) : 4.5));
}

void NvmlGpu::detect_power_samples() {
  // The buffer exists when the driver answers the capacity query for this
  // GPU. What it holds now (a running driver's is full) gives the spacing;
  // a buffer still empty (a driver just loaded) gives it at the first reads.
  std::vector<PowerSample> held;
  try {
    if (power_sample_capacity() < 2) return;
    read_power_samples(held);  // learns the spacing from them
  } catch (const DeviceError&) {
    return;
  }
  last_sample_timestamp_us_ = 0;  // the first read still returns what the buffer holds
  has_power_samples_ = true;
}

void NvmlGpu::learn_sample_period(const std::vector<PowerSample>& samples, std::size_t first) {
  if (samples.size() < first + 2) return;
  std::vector<double> gaps_s;
  for (std::size_t i = first + 1; i < samples.size(); ++i) {
    gaps_s.push_back(static_cast<double>(samples[i].timestamp_us - samples[i - 1].timestamp_us) * 1e-6);
  }
  std::nth_element(gaps_s.begin(), gaps_s.begin() + gaps_s.size() / 2, gaps_s.end());
  power_sample_period_s_.store(gaps_s[gaps_s.size() / 2], std::memory_order_relaxed);
}

void NvmlGpu::check(nvmlReturn_t rc, const char* function) const {
  if (rc == kSuccess) return;
  throw DeviceError(errc_from_nvml(rc),
                    fmt::format("gpu{}: {} failed: {} (NVML error {})", index_, function,
                                library_->error_string(rc), rc));
}

template <typename Fn>
Fn NvmlGpu::require(Fn fn, const char* function) const {
  if (fn == nullptr) {
    throw DeviceError(DeviceErrc::kNotSupported,
                      fmt::format("gpu{}: the NVML library '{}' does not export {} (driver too old)", index_,
                                  library_->path(), function));
  }
  return fn;
}

#define JOULE_NVML_CALL(name, ...) check(require(fn_.name, #name)(handle_ __VA_OPT__(, ) __VA_ARGS__), #name)

uint64_t NvmlGpu::total_energy_mj() {
  unsigned long long energy_mj = 0;
  JOULE_NVML_CALL(nvmlDeviceGetTotalEnergyConsumption, &energy_mj);
  return energy_mj;
}

uint32_t NvmlGpu::power_usage_mw() {
  unsigned int power_mw = 0;
  JOULE_NVML_CALL(nvmlDeviceGetPowerUsage, &power_mw);
  return power_mw;
}

uint32_t NvmlGpu::instant_power_mw() {
  nvmlFieldValue_t field{};
  field.fieldId = kFieldPowerInstant;
  JOULE_NVML_CALL(nvmlDeviceGetFieldValues, 1, &field);
  check(field.nvmlReturn, "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)");
  return field.value.uiVal;
}

uint32_t NvmlGpu::power_mw() { return use_instant_power_ ? instant_power_mw() : power_usage_mw(); }

std::string NvmlGpu::power_reading_source() const {
  return use_instant_power_ ? "instantaneous power field" : "power usage";
}

unsigned NvmlGpu::power_sample_capacity() {
  int value_type = 0;
  unsigned int capacity = 0;
  JOULE_NVML_CALL(nvmlDeviceGetSamples, kTotalPowerSamples, 0ULL, &value_type, &capacity, nullptr);
  return capacity;
}

void NvmlGpu::read_power_samples(std::vector<PowerSample>& out) {
  if (sample_buffer_.empty()) sample_buffer_.resize(std::max(2U, power_sample_capacity()));
  int value_type = 0;
  unsigned int count = static_cast<unsigned int>(sample_buffer_.size());
  const nvmlReturn_t rc = require(fn_.nvmlDeviceGetSamples, "nvmlDeviceGetSamples")(
      handle_, kTotalPowerSamples, last_sample_timestamp_us_, &value_type, &count, sample_buffer_.data());
  if (rc == kErrorNotFound) return;  // nothing new since the last call
  check(rc, "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)");
  if (value_type != kValueTypeUnsignedInt) {
    throw DeviceError(DeviceErrc::kNotSupported,
                      fmt::format("gpu{}: power samples have value type {}, not unsigned int", index_, value_type));
  }
  count = std::min<unsigned int>(count, static_cast<unsigned int>(sample_buffer_.size()));
  // Oldest first, each once: the driver returns what is newer than the last
  // timestamp seen, but its order is not documented.
  std::sort(sample_buffer_.begin(), sample_buffer_.begin() + count,
            [](const nvmlSample_t& a, const nvmlSample_t& b) { return a.timeStamp < b.timeStamp; });
  const std::size_t first_new = out.size();
  for (unsigned int i = 0; i < count; ++i) {
    const nvmlSample_t& sample = sample_buffer_[i];
    if (sample.timeStamp <= last_sample_timestamp_us_) continue;
    out.push_back({static_cast<uint64_t>(static_cast<long long>(sample.timeStamp) + sample_offset_us_),
                   sample.sampleValue.uiVal});
    last_sample_timestamp_us_ = sample.timeStamp;
  }
  if (power_sample_period_s() <= 0) learn_sample_period(out, first_new);
}

uint32_t NvmlGpu::power_limit_mw() {
  unsigned int limit_mw = 0;
  JOULE_NVML_CALL(nvmlDeviceGetPowerManagementLimit, &limit_mw);
  return limit_mw;
}

PowerLimitRange NvmlGpu::power_limit_range_mw() {
  unsigned int min_mw = 0, max_mw = 0;
  JOULE_NVML_CALL(nvmlDeviceGetPowerManagementLimitConstraints, &min_mw, &max_mw);
  return {min_mw, max_mw};
}

uint32_t NvmlGpu::default_power_limit_mw() {
  unsigned int limit_mw = 0;
  JOULE_NVML_CALL(nvmlDeviceGetPowerManagementDefaultLimit, &limit_mw);
  return limit_mw;
}

Utilization NvmlGpu::utilization() {
  nvmlUtilization_t rates{};
  JOULE_NVML_CALL(nvmlDeviceGetUtilizationRates, &rates);
  return {rates.gpu, rates.memory};
}

uint32_t NvmlGpu::sm_clock_mhz() {
  unsigned int mhz = 0;
  JOULE_NVML_CALL(nvmlDeviceGetClockInfo, kClockSm, &mhz);
  return mhz;
}

uint32_t NvmlGpu::memory_clock_mhz() {
  unsigned int mhz = 0;
  JOULE_NVML_CALL(nvmlDeviceGetClockInfo, kClockMem, &mhz);
  return mhz;
}

uint32_t NvmlGpu::temperature_c() {
  unsigned int celsius = 0;
  JOULE_NVML_CALL(nvmlDeviceGetTemperature, kTemperatureGpu, &celsius);
  return celsius;
}

bool NvmlGpu::at_power_cap() {
  unsigned long long reasons = 0;
  if (fn_.nvmlDeviceGetCurrentClocksEventReasons) {
    JOULE_NVML_CALL(nvmlDeviceGetCurrentClocksEventReasons, &reasons);
  } else {
    JOULE_NVML_CALL(nvmlDeviceGetCurrentClocksThrottleReasons, &reasons);
  }
  return (reasons & kClocksEventSwPowerCap) != 0;
}

uint64_t NvmlGpu::memory_used_bytes() {
  nvmlMemory_t memory{};
  JOULE_NVML_CALL(nvmlDeviceGetMemoryInfo, &memory);
  return memory.used;
}

// NVML lists compute and graphics contexts apart; a process with both is in
// each. A list is read by asking its size first: it may grow between the two
// calls (a process starting), so a short buffer is retried a few times.
std::vector<GpuProcess> NvmlGpu::running_processes() {
  std::map<uint32_t, GpuProcess> by_pid;
  const auto read = [&](auto list, const char* function) {
    std::vector<nvmlProcessInfo_t> infos;
    for (int attempt = 0;; ++attempt) {
      unsigned int count = static_cast<unsigned int>(infos.size());
      const nvmlReturn_t rc = require(list, function)(handle_, &count, infos.data());
      if (rc == kErrorInsufficientSize && attempt < 3) {
        infos.resize(count + 8);  // room for a few that start meanwhile
        continue;
      }
      check(rc, function);
      infos.resize(count);
      break;
    }
    for (const nvmlProcessInfo_t& info : infos) {
      GpuProcess& p = by_pid[info.pid];
      p.pid = info.pid;
      if (info.usedGpuMemory != kValueNotAvailable) {
        p.used_memory_bytes = std::max(p.used_memory_bytes.value_or(0), uint64_t{info.usedGpuMemory});
      }
    }
  };
  read(fn_.nvmlDeviceGetComputeRunningProcesses_v3, "nvmlDeviceGetComputeRunningProcesses_v3");
  read(fn_.nvmlDeviceGetGraphicsRunningProcesses_v3, "nvmlDeviceGetGraphicsRunningProcesses_v3");
  std::vector<GpuProcess> out;
  for (auto& [pid, p] : by_pid) out.push_back(p);
  return out;
}

// Asked for the count first; the driver may add a sample between the calls,
// so a short buffer is retried a few times.
ProcessUtilizationSamples NvmlGpu::process_utilization(uint64_t since_unix_us) {
  const auto call = require(fn_.nvmlDeviceGetProcessUtilization, "nvmlDeviceGetProcessUtilization");
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (int attempt = 0;; ++attempt) {
    unsigned int count = static_cast<unsigned int>(samples.size());
    const nvmlReturn_t rc = call(handle_, samples.empty() ? nullptr : samples.data(), &count, since_unix_us);
    if (rc == kErrorNotFound) return {};  // no sample since then: nothing ran
    if (rc == kErrorInsufficientSize && attempt < 3) {
      samples.resize(count + 8);
      continue;
    }
    check(rc, "nvmlDeviceGetProcessUtilization");
    samples.resize(count);
    break;
  }
  std::map<uint32_t, ProcessUtilization> by_pid;
  ProcessUtilizationSamples out;
  for (const nvmlProcessUtilizationSample_t& sample : samples) {
    if (sample.timeStamp <= since_unix_us || sample.smUtil > 100) continue;  // old, or not a percentage
    ProcessUtilization& p = by_pid[sample.pid];
    p.pid = sample.pid;
    p.sm_percent_sum += sample.smUtil;
    ++p.samples;
    out.newest_unix_us = std::max<uint64_t>(out.newest_unix_us, sample.timeStamp);
  }
  for (auto& [pid, p] : by_pid) out.processes.push_back(p);
  return out;
}

void NvmlGpu::set_power_limit_mw(uint32_t limit_mw) {
  require(fn_.nvmlDeviceSetPowerManagementLimit, "nvmlDeviceSetPowerManagementLimit");
  check_power_limit_in_range(*this, limit_mw, power_limit_range_mw());
  JOULE_NVML_CALL(nvmlDeviceSetPowerManagementLimit, limit_mw);
}

template <typename Call>
std::vector<uint32_t> NvmlGpu::read_clock_list(Call call, const char* function) const {
  std::vector<unsigned int> clocks(64);
  for (int attempt = 0;; ++attempt) {
    unsigned int count = static_cast<unsigned int>(clocks.size());
    const nvmlReturn_t rc = call(&count, clocks.data());
    if (rc == kErrorInsufficientSize && attempt < 2) {
      clocks.resize(count);
      continue;
    }
    check(rc, function);
    clocks.resize(count);
    break;
  }
  return ascending_unique_mhz({clocks.begin(), clocks.end()});
}

std::vector<uint32_t> NvmlGpu::supported_clocks_mhz(ClockDomain domain) {
  auto memory = require(fn_.nvmlDeviceGetSupportedMemoryClocks, "nvmlDeviceGetSupportedMemoryClocks");
  auto memory_mhz = read_clock_list([&](unsigned int* n, unsigned int* c) { return memory(handle_, n, c); },
                                    "nvmlDeviceGetSupportedMemoryClocks");
  if (domain == ClockDomain::kMemory || memory_mhz.empty()) return memory_mhz;
  auto graphics = require(fn_.nvmlDeviceGetSupportedGraphicsClocks, "nvmlDeviceGetSupportedGraphicsClocks");
  return read_clock_list([&](unsigned int* n, unsigned int* c) { return graphics(handle_, memory_mhz.back(), n, c); },
                         "nvmlDeviceGetSupportedGraphicsClocks");
}

std::optional<ClockLock> NvmlGpu::clock_lock_mhz(ClockDomain domain) { return applied_locks_.get(domain); }

bool NvmlGpu::sm_locks_use_application_clocks() const {
  return fn_.nvmlDeviceSetGpuLockedClocks == nullptr && fn_.nvmlDeviceSetApplicationsClocks != nullptr;
}

void NvmlGpu::lock_clock_mhz(ClockDomain domain, ClockLock lock) {
  if (domain == ClockDomain::kMemory) {
    require(fn_.nvmlDeviceSetMemoryLockedClocks, "nvmlDeviceSetMemoryLockedClocks");
    check_clock_lock_in_range(*this, domain, lock, supported_clocks_mhz(domain));
    JOULE_NVML_CALL(nvmlDeviceSetMemoryLockedClocks, lock.min_mhz, lock.max_mhz);
  } else if (sm_locks_use_application_clocks()) {
    const auto sm_mhz = supported_clocks_mhz(ClockDomain::kSm);
    check_clock_lock_in_range(*this, domain, lock, sm_mhz);
    const auto memory_mhz = supported_clocks_mhz(ClockDomain::kMemory);
    const uint32_t target_mhz = *std::prev(std::upper_bound(sm_mhz.begin(), sm_mhz.end(), lock.max_mhz));
    JOULE_NVML_CALL(nvmlDeviceSetApplicationsClocks, memory_mhz.back(), target_mhz);
  } else {
    require(fn_.nvmlDeviceSetGpuLockedClocks, "nvmlDeviceSetGpuLockedClocks");
    check_clock_lock_in_range(*this, domain, lock, supported_clocks_mhz(domain));
    JOULE_NVML_CALL(nvmlDeviceSetGpuLockedClocks, lock.min_mhz, lock.max_mhz);
  }
  applied_locks_.set(domain, lock);
}

void NvmlGpu::reset_clock_lock(ClockDomain domain) {
  if (domain == ClockDomain::kMemory) {
    JOULE_NVML_CALL(nvmlDeviceResetMemoryLockedClocks);
  } else if (sm_locks_use_application_clocks()) {
    JOULE_NVML_CALL(nvmlDeviceResetApplicationsClocks);
  } else {
    JOULE_NVML_CALL(nvmlDeviceResetGpuLockedClocks);
  }
  applied_locks_.forget(domain);
}

#undef JOULE_NVML_CALL

std::vector<CapabilityStatus> NvmlGpu::probe_capabilities() {
  // Control cannot be probed without changing the GPU; report whether the
  // driver has the call, and that the change itself needs privileges.
  const bool sm_lock = fn_.nvmlDeviceSetGpuLockedClocks != nullptr || fn_.nvmlDeviceSetApplicationsClocks != nullptr;
  return probe_gpu_capabilities(
      *this,
      {.read_power_usage = [&] { power_usage_mw(); },
       .read_instant_power = [&] { instant_power_mw(); },
       .read_power_samples = [&] { power_sample_capacity(); },
       .set_power_limit = exported_capability(GpuCapability::kSetPowerLimit, "NVML",
                                              {{fn_.nvmlDeviceSetPowerManagementLimit != nullptr,
                                                "nvmlDeviceSetPowerManagementLimit"}}),
       .lock_sm_clock = {GpuCapability::kLockSmClock, sm_lock,
                         sm_lock ? "" : "not supported: the NVML library exports neither locked nor application clocks"},
       .lock_memory_clock = exported_capability(
           GpuCapability::kLockMemoryClock, "NVML",
           {{fn_.nvmlDeviceSetMemoryLockedClocks != nullptr, "nvmlDeviceSetMemoryLockedClocks"}})});
}

}  // namespace nvml

std::string nvml_library_path() {
  const char* path = std::getenv("JOULE_NVML_LIBRARY");
  return (path != nullptr && *path != '\0') ? path : "libnvidia-ml.so.1";
}

NvmlDevices open_nvml_gpus(const std::string& library_path) {
  auto library = nvml::Library::open(library_path);
  const auto& fn = library->fn();
  unsigned int count = 0;
  if (const auto rc = fn.nvmlDeviceGetCount_v2(&count); rc != nvml::kSuccess) {
    throw DeviceError(nvml::errc_from_nvml(rc),
                      fmt::format("nvmlDeviceGetCount failed: {}", library->error_string(rc)));
  }
  NvmlDevices devices;
  devices.library_path = library->path();
  devices.driver_version = library->driver_version();
  devices.missing_functions = library->missing_functions();
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    if (const auto rc = fn.nvmlDeviceGetHandleByIndex_v2(i, &handle); rc != nvml::kSuccess) {
      throw DeviceError(nvml::errc_from_nvml(rc), fmt::format("gpu{}: nvmlDeviceGetHandleByIndex failed: {}", i,
                                                              library->error_string(rc)));
    }
    devices.gpus.push_back(std::make_shared<nvml::NvmlGpu>(library, i, handle));
  }
  return devices;
}

}  // namespace joule
