// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "device/rocm/rocm_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "joule/device/rocm.h"

namespace joule {
namespace rocm {

namespace {

uint32_t mw_from_uw(uint64_t microwatts) { return static_cast<uint32_t>(microwatts / 1000); }

uint32_t mhz_from_hz(uint64_t hz) { return static_cast<uint32_t>((hz + 500'000) / 1'000'000); }

// The supported levels' clocks, ascending and each once.
std::vector<uint32_t> supported_mhz(const rsmi_frequencies_t& levels) {
  std::vector<uint32_t> levels_mhz;
  for (uint32_t i = 0; i < levels.num_supported; ++i) levels_mhz.push_back(mhz_from_hz(levels.frequency[i]));
  return ascending_unique_mhz(std::move(levels_mhz));
}

rsmi_clk_type_t clock_type(ClockDomain domain) {
  return domain == ClockDomain::kSm ? RSMI_CLK_TYPE_SYS : RSMI_CLK_TYPE_MEM;
}

// Statuses a call that used to work returns once the GPU is gone: its sysfs
// files vanish (ENOENT, reported as not supported), are not found, or stop
// answering (EIO, ENODEV and the like).
bool looks_lost(rsmi_status_t status) {
  switch (status) {
    case RSMI_STATUS_NOT_SUPPORTED:
    case RSMI_STATUS_NOT_FOUND:
    case RSMI_STATUS_FILE_ERROR:
    case RSMI_STATUS_UNEXPECTED_SIZE:
    case RSMI_STATUS_UNEXPECTED_DATA:
    case RSMI_STATUS_UNKNOWN_ERROR: return true;
    default: return false;
  }
}

}  // namespace

std::string architecture_from_name(const std::string& name) {
  // The first "MI" + number that starts a word: "AMD Instinct MI250X",
  // "Aldebaran/MI200 [Instinct MI250X/MI250]", "AMD Instinct MI300X".
  for (std::size_t at = name.find("MI"); at != std::string::npos; at = name.find("MI", at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(name[at - 1]))) continue;
    std::size_t end = at + 2;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end == at + 2) continue;
    const int series = std::atoi(name.c_str() + at + 2) / 100;
    if (series == 1) return "CDNA";
    if (series == 2) return "CDNA2";
    if (series == 3) return "CDNA3";
    return "unknown";
  }
  if (name.find("Aldebaran") != std::string::npos) return "CDNA2";
  if (name.find("Aqua Vanjaram") != std::string::npos) return "CDNA3";
  return "unknown";
}

std::string format_pci_bus_id(uint64_t bdfid) {
  // BDFID = domain << 32 | bus << 8 | device << 3 | function (rocm_smi.h).
  return fmt::format("{:04X}:{:02X}:{:02X}.{:X}", bdfid >> 32, (bdfid >> 8) & 0xff, (bdfid >> 3) & 0x1f,
                     bdfid & 0x7);
}

CounterDrop classify_counter_drop(uint64_t last_ticks, uint64_t now_ticks, double elapsed_s, double resolution_uj,
                                  double max_power_w) {
  constexpr uint64_t k32BitRange = uint64_t{1} << 32;
  if (last_ticks >= k32BitRange) return CounterDrop::kRestart;  // a wider counter: it never wraps
  const double wrapped_j = static_cast<double>(k32BitRange - last_ticks + now_ticks) * resolution_uj * 1e-6;
  if (elapsed_s > 0 && wrapped_j / elapsed_s > max_power_w) return CounterDrop::kRestart;
  return CounterDrop::kWrap;
}

RocmGpu::RocmGpu(std::shared_ptr<Library> library, unsigned index, uint32_t device_index)
    : library_(std::move(library)), fn_(library_->fn()), index_(index), device_index_(device_index) {
  char buffer[256] = {};
  if (fn_.rsmi_dev_name_get && fn_.rsmi_dev_name_get(device_index_, buffer, sizeof buffer) == RSMI_STATUS_SUCCESS &&
      buffer[0] != '\0') {
    name_ = buffer;
  }
  architecture_ = architecture_from_name(name_);
  uint64_t unique_id = 0;
  if (fn_.rsmi_dev_unique_id_get && fn_.rsmi_dev_unique_id_get(device_index_, &unique_id) == RSMI_STATUS_SUCCESS) {
    uuid_ = fmt::format("0x{:016x}", unique_id);
  }
  uint64_t bdfid = 0;
  if (fn_.rsmi_dev_pci_id_get && fn_.rsmi_dev_pci_id_get(device_index_, &bdfid) == RSMI_STATUS_SUCCESS) {
    pci_bus_id_ = format_pci_bus_id(bdfid);
  }
  try {
    max_power_w_ = 2e-3 * power_limit_range_mw().max_mw;
  } catch (const DeviceError&) {
  }
  if (!(max_power_w_ > 0)) max_power_w_ = kUnknownMaxPowerW;
  // Decide once which sources work, so the sampler's hot path never pays for
  // a failing call. Power: the firmware's average where the GPU has it, else
  // (MI300 under ROCm 6 reports no average) the current socket power.
  try {
    total_energy_mj();
    has_energy_counter_ = true;
  } catch (const DeviceError&) {
  }
  try {
    average_power_mw();
  } catch (const DeviceError&) {
    try {
      socket_power_mw();
      use_socket_power_ = true;
    } catch (const DeviceError&) {
    }
  }
  try {
    temperature_millidegrees(TemperatureSensor::kJunction);
  } catch (const DeviceError&) {
    try {
      temperature_millidegrees(TemperatureSensor::kEdge);
      temperature_sensor_ = TemperatureSensor::kEdge;
    } catch (const DeviceError&) {
    }
  }
}

void RocmGpu::check(rsmi_status_t status, const char* function) const {
  std::lock_guard lock(answered_mutex_);
  if (status == RSMI_STATUS_SUCCESS) {
    answered_.insert(function);
    return;
  }
  const bool lost = looks_lost(status) && answered_.count(function) > 0;
  throw DeviceError(lost ? DeviceErrc::kDeviceLost : errc_from_rsmi(status),
                    fmt::format("gpu{}: {} failed: {} (ROCm SMI status {}{})", index_, function,
                                library_->status_string(status), static_cast<unsigned>(status),
                                lost ? "; it answered before, so the GPU is taken as lost" : ""));
}

template <typename Fn>
Fn RocmGpu::require(Fn fn, const char* function) const {
  if (fn == nullptr) {
    throw DeviceError(DeviceErrc::kNotSupported,
                      fmt::format("gpu{}: the ROCm SMI library '{}' does not export {} (ROCm too old)", index_,
                                  library_->path(), function));
  }
  return fn;
}

#define JOULE_RSMI_CALL(name, ...) \
  check(require(fn_.name, #name)(device_index_ __VA_OPT__(, ) __VA_ARGS__), #name)

uint64_t RocmGpu::total_energy_mj() {
  uint64_t ticks = 0, timestamp_ns = 0;
  float resolution_uj = 0;
  JOULE_RSMI_CALL(rsmi_dev_energy_count_get, &ticks, &resolution_uj, &timestamp_ns);
  if (!(resolution_uj > 0) || !std::isfinite(resolution_uj)) {
    throw DeviceError(DeviceErrc::kNotSupported,
                      fmt::format("gpu{}: rsmi_dev_energy_count_get reports a counter resolution of {} uJ",
                                  index_, resolution_uj));
  }
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(energy_mutex_);
  if (energy_seen_ && ticks < last_ticks_) {
    // The library's stamps give the time between the reads; where they do
    // not move, this process's clock does.
    const double elapsed_s =
        timestamp_ns > last_timestamp_ns_
            ? static_cast<double>(timestamp_ns - last_timestamp_ns_) * 1e-9
            : std::chrono::duration<double>(now - last_read_at_).count();
    if (classify_counter_drop(last_ticks_, ticks, elapsed_s, resolution_uj, max_power_w_) == CounterDrop::kWrap) {
      wrapped_ticks_ += uint64_t{1} << 32;
    } else {
      wrapped_ticks_ = 0;
    }
  }
  energy_seen_ = true;
  last_ticks_ = ticks;
  last_timestamp_ns_ = timestamp_ns;
  last_read_at_ = now;
  resolution_uj_ = resolution_uj;
  return static_cast<uint64_t>(static_cast<long double>(wrapped_ticks_ + ticks) * resolution_uj / 1000.0L);
}

double RocmGpu::energy_resolution_uj() const {
  std::lock_guard lock(energy_mutex_);
  return resolution_uj_;
}

uint32_t RocmGpu::average_power_mw() {
  uint64_t microwatts = 0;
  JOULE_RSMI_CALL(rsmi_dev_power_ave_get, 0, &microwatts);
  return mw_from_uw(microwatts);
}

uint32_t RocmGpu::socket_power_mw() {
  uint64_t microwatts = 0;
  JOULE_RSMI_CALL(rsmi_dev_current_socket_power_get, &microwatts);
  return mw_from_uw(microwatts);
}

uint32_t RocmGpu::power_mw() { return use_socket_power_ ? socket_power_mw() : average_power_mw(); }

std::string RocmGpu::power_reading_source() const {
  return use_socket_power_ ? "current socket power" : "average power";
}

uint32_t RocmGpu::power_limit_mw() {
  uint64_t microwatts = 0;
  JOULE_RSMI_CALL(rsmi_dev_power_cap_get, 0, &microwatts);
  return mw_from_uw(microwatts);
}

PowerLimitRange RocmGpu::power_limit_range_mw() {
  uint64_t max_uw = 0, min_uw = 0;
  JOULE_RSMI_CALL(rsmi_dev_power_cap_range_get, 0, &max_uw, &min_uw);  // maximum first
  return {mw_from_uw(min_uw), mw_from_uw(max_uw)};
}

uint32_t RocmGpu::default_power_limit_mw() {
  uint64_t microwatts = 0;
  JOULE_RSMI_CALL(rsmi_dev_power_cap_default_get, &microwatts);
  return mw_from_uw(microwatts);
}

Utilization RocmGpu::utilization() {
  uint32_t busy = 0, memory_busy = 0;
  JOULE_RSMI_CALL(rsmi_dev_busy_percent_get, &busy);
  JOULE_RSMI_CALL(rsmi_dev_memory_busy_percent_get, &memory_busy);
  return {busy, memory_busy};
}

rsmi_frequencies_t RocmGpu::clock_levels(ClockDomain domain) {
  rsmi_frequencies_t levels{};
  JOULE_RSMI_CALL(rsmi_dev_gpu_clk_freq_get, clock_type(domain), &levels);
  if (levels.num_supported > RSMI_MAX_NUM_FREQUENCIES) {
    throw DeviceError(DeviceErrc::kUnknown, fmt::format("gpu{}: rsmi_dev_gpu_clk_freq_get reports {} {} clock levels "
                                                        "(at most {} fit)",
                                                        index_, levels.num_supported, to_string(domain),
                                                        RSMI_MAX_NUM_FREQUENCIES));
  }
  return levels;
}

uint32_t RocmGpu::sm_clock_mhz() {
  const rsmi_frequencies_t levels = clock_levels(ClockDomain::kSm);
  if (levels.current >= levels.num_supported) {
    throw DeviceError(DeviceErrc::kUnknown, fmt::format("gpu{}: the current sm clock level {} is not among its {}",
                                                        index_, levels.current, levels.num_supported));
  }
  return mhz_from_hz(levels.frequency[levels.current]);
}

uint32_t RocmGpu::memory_clock_mhz() {
  const rsmi_frequencies_t levels = clock_levels(ClockDomain::kMemory);
  if (levels.current >= levels.num_supported) {
    throw DeviceError(DeviceErrc::kUnknown, fmt::format("gpu{}: the current memory clock level {} is not among its {}",
                                                        index_, levels.current, levels.num_supported));
  }
  return mhz_from_hz(levels.frequency[levels.current]);
}

int64_t RocmGpu::temperature_millidegrees(TemperatureSensor sensor) {
  int64_t millidegrees = 0;
  const uint32_t type = sensor == TemperatureSensor::kJunction ? RSMI_TEMP_TYPE_JUNCTION : RSMI_TEMP_TYPE_EDGE;
  JOULE_RSMI_CALL(rsmi_dev_temp_metric_get, type, RSMI_TEMP_CURRENT, &millidegrees);
  return millidegrees;
}

uint32_t RocmGpu::temperature_c() {
  const int64_t millidegrees = temperature_millidegrees(temperature_sensor_);
  return millidegrees <= 0 ? 0 : static_cast<uint32_t>((millidegrees + 500) / 1000);
}

uint64_t RocmGpu::memory_used_bytes() {
  uint64_t used = 0;
  JOULE_RSMI_CALL(rsmi_dev_memory_usage_get, RSMI_MEM_TYPE_VRAM, &used);
  return used;
}

// ROCm SMI lists the compute processes of every GPU at once; each one's
// GPUs tell which are on this one. Its VRAM figure is the process's total over
// all its GPUs, so it is given only where the process uses this GPU alone.
std::vector<GpuProcess> RocmGpu::running_processes() {
  auto list = require(fn_.rsmi_compute_process_info_get, "rsmi_compute_process_info_get");
  auto gpus_of = require(fn_.rsmi_compute_process_gpus_get, "rsmi_compute_process_gpus_get");
  std::vector<rsmi_process_info_t> infos(16);
  for (int attempt = 0;; ++attempt) {
    uint32_t count = static_cast<uint32_t>(infos.size());
    const rsmi_status_t status = list(infos.data(), &count);
    if (status == RSMI_STATUS_INSUFFICIENT_SIZE && attempt < 3) {
      infos.resize(std::max<std::size_t>(count, infos.size() * 2) + 8);  // room for a few that start meanwhile
      continue;
    }
    check(status, "rsmi_compute_process_info_get");
    infos.resize(std::min<std::size_t>(count, infos.size()));
    break;
  }
  std::vector<GpuProcess> out;
  std::vector<uint32_t> devices(64);
  for (const rsmi_process_info_t& info : infos) {
    uint32_t count = static_cast<uint32_t>(devices.size());
    const rsmi_status_t status = gpus_of(info.process_id, devices.data(), &count);
    if (status == RSMI_STATUS_NOT_FOUND) continue;  // it ended since it was listed
    check(status, "rsmi_compute_process_gpus_get");
    count = std::min<uint32_t>(count, static_cast<uint32_t>(devices.size()));
    const auto end = devices.begin() + count;
    if (std::find(devices.begin(), end, device_index_) == end) continue;
    if (std::any_of(out.begin(), out.end(), [&](const GpuProcess& p) { return p.pid == info.process_id; })) continue;
    GpuProcess process{info.process_id, std::nullopt};
    if (count == 1) process.used_memory_bytes = info.vram_usage;
    out.push_back(process);
  }
  std::sort(out.begin(), out.end(), [](const GpuProcess& a, const GpuProcess& b) { return a.pid < b.pid; });
  return out;
}

void RocmGpu::set_power_limit_mw(uint32_t limit_mw) {
  require(fn_.rsmi_dev_power_cap_set, "rsmi_dev_power_cap_set");
  check_power_limit_in_range(*this, limit_mw, power_limit_range_mw());
  JOULE_RSMI_CALL(rsmi_dev_power_cap_set, 0, uint64_t{limit_mw} * 1000);
}

std::vector<uint32_t> RocmGpu::supported_clocks_mhz(ClockDomain domain) {
  return supported_mhz(clock_levels(domain));
}

std::optional<ClockLock> RocmGpu::clock_lock_mhz(ClockDomain domain) { return applied_locks_.get(domain); }

void RocmGpu::apply_lock(ClockDomain domain, ClockLock lock) {
  require(fn_.rsmi_dev_perf_level_set, "rsmi_dev_perf_level_set");
  require(fn_.rsmi_dev_gpu_clk_freq_set, "rsmi_dev_gpu_clk_freq_set");
  const rsmi_frequencies_t levels = clock_levels(domain);
  check_clock_lock_in_range(*this, domain, lock, supported_mhz(levels));
  // The levels in the driver's own order: bit i enables level i.
  uint64_t mask = 0;
  for (uint32_t i = 0; i < levels.num_supported; ++i) {
    const uint32_t mhz = mhz_from_hz(levels.frequency[i]);
    if (mhz >= lock.min_mhz && mhz <= lock.max_mhz) mask |= uint64_t{1} << i;
  }
  if (mask == 0) {
    throw DeviceError(DeviceErrc::kInvalidArgument,
                      fmt::format("gpu{}: {} clock lock {}-{} MHz holds none of the supported levels (ROCm locks "
                                  "clocks by levels)",
                                  index_, to_string(domain), lock.min_mhz, lock.max_mhz));
  }
  check(fn_.rsmi_dev_perf_level_set(static_cast<int32_t>(device_index_), RSMI_DEV_PERF_LEVEL_MANUAL),
        "rsmi_dev_perf_level_set");
  JOULE_RSMI_CALL(rsmi_dev_gpu_clk_freq_set, clock_type(domain), mask);
}

void RocmGpu::lock_clock_mhz(ClockDomain domain, ClockLock lock) {
  apply_lock(domain, lock);
  applied_locks_.set(domain, lock);
}

void RocmGpu::reset_clock_lock(ClockDomain domain) {
  require(fn_.rsmi_dev_perf_level_set, "rsmi_dev_perf_level_set");
  check(fn_.rsmi_dev_perf_level_set(static_cast<int32_t>(device_index_), RSMI_DEV_PERF_LEVEL_AUTO),
        "rsmi_dev_perf_level_set");
  const ClockDomain other_domain = domain == ClockDomain::kSm ? ClockDomain::kMemory : ClockDomain::kSm;
  if (const auto other = applied_locks_.forget(domain)) apply_lock(other_domain, *other);
}

#undef JOULE_RSMI_CALL

std::vector<CapabilityStatus> RocmGpu::probe_capabilities() {
  // Control cannot be probed without changing the GPU; report whether the
  // library has the calls (the change itself needs root).
  const ExportedFunctions lock_calls = {{fn_.rsmi_dev_perf_level_set != nullptr, "rsmi_dev_perf_level_set"},
                                        {fn_.rsmi_dev_gpu_clk_freq_set != nullptr, "rsmi_dev_gpu_clk_freq_set"}};
  return probe_gpu_capabilities(
      *this,
      {.read_power_usage = [&] { average_power_mw(); },
       .read_instant_power = [&] { socket_power_mw(); },
       .read_power_samples =
           [] {
             throw DeviceError(DeviceErrc::kNotSupported, "ROCm SMI keeps no buffer of timestamped power samples");
           },
       .set_power_limit = exported_capability(GpuCapability::kSetPowerLimit, "ROCm SMI",
                                              {{fn_.rsmi_dev_power_cap_set != nullptr, "rsmi_dev_power_cap_set"}}),
       .lock_sm_clock = exported_capability(GpuCapability::kLockSmClock, "ROCm SMI", lock_calls),
       .lock_memory_clock = exported_capability(GpuCapability::kLockMemoryClock, "ROCm SMI", lock_calls)});
}

}  // namespace rocm

std::string rocm_smi_library_path() {
  const char* path = std::getenv("JOULE_ROCM_SMI_LIBRARY");
  return (path != nullptr && *path != '\0') ? path : "librocm_smi64.so.1";
}

RocmDevices open_rocm_smi_gpus(const std::string& library_path, unsigned first_index) {
  auto library = rocm::Library::open(library_path);
  uint32_t count = 0;
  if (const rsmi_status_t status = library->fn().rsmi_num_monitor_devices(&count); status != RSMI_STATUS_SUCCESS) {
    throw DeviceError(rocm::errc_from_rsmi(status),
                      fmt::format("rsmi_num_monitor_devices failed: {}", library->status_string(status)));
  }
  RocmDevices devices;
  devices.library_path = library->path();
  devices.library_version = library->version();
  devices.missing_functions = library->missing_functions();
  for (uint32_t i = 0; i < count; ++i) {
    devices.gpus.push_back(std::make_shared<rocm::RocmGpu>(library, first_index + i, i));
  }
  return devices;
}

}  // namespace joule
