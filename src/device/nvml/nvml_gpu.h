// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// One GPU seen through NVML. Private to the nvml backend.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "device/gpu_backend.h"
#include "device/nvml/nvml_library.h"
#include "joule/device/gpu.h"

namespace joule::nvml {

class NvmlGpu final : public Gpu {
 public:
  NvmlGpu(std::shared_ptr<Library> library, unsigned index, nvmlDevice_t handle);

  unsigned index() const override { return index_; }
  std::string name() const override { return name_; }
  std::string uuid() const override { return uuid_; }
  std::string architecture() const override { return architecture_; }
  std::string backend() const override { return "nvml"; }
  std::string pci_bus_id() const override { return pci_bus_id_; }
  bool simulated() const override { return false; }

  std::vector<CapabilityStatus> probe_capabilities() override;
  bool has_energy_counter() const override { return has_energy_counter_; }

  uint64_t total_energy_mj() override;
  // Measured on an H100 (docs/measurement.md): a step every ~100 ms, ~3.8 ms
  // of CPU per read.
  EnergyCounterTiming energy_counter_timing() const override { return {0.1, 0.0038}; }
  uint32_t power_mw() override;
  std::string power_reading_source() const override;
  bool has_power_samples() const override { return has_power_samples_; }
  double power_sample_period_s() const override { return power_sample_period_s_.load(std::memory_order_relaxed); }
  void read_power_samples(std::vector<PowerSample>& out) override;
  uint32_t power_limit_mw() override;
  PowerLimitRange power_limit_range_mw() override;
  uint32_t default_power_limit_mw() override;
  Utilization utilization() override;
  uint32_t sm_clock_mhz() override;
  uint32_t memory_clock_mhz() override;
  uint32_t temperature_c() override;
  bool at_power_cap() override;
  uint64_t memory_used_bytes() override;
  std::vector<GpuProcess> running_processes() override;
  ProcessUtilizationSamples process_utilization(uint64_t since_unix_us) override;
  void set_power_limit_mw(uint32_t limit_mw) override;
  std::vector<uint32_t> supported_clocks_mhz(ClockDomain domain) override;
  std::optional<ClockLock> clock_lock_mhz(ClockDomain domain) override;
  // SM: the locked-clock call, or where the driver lacks it (before Volta)
  // application clocks at the highest supported clock within the lock (a
  // target clock, not a range). Memory: the locked-clock call only (Ampere on).
  void lock_clock_mhz(ClockDomain domain, ClockLock lock) override;
  void reset_clock_lock(ClockDomain domain) override;

  uint32_t power_usage_mw();
  uint32_t instant_power_mw();
  // Capacity of the driver's power-sample buffer (throws when it has none).
  unsigned power_sample_capacity();

 private:
  // Throws DeviceError for a failed call, with NVML's own message.
  void check(nvmlReturn_t rc, const char* function) const;
  // Decides whether the sampler can integrate the driver's power samples.
  void detect_power_samples();
  // Sets the sample period from the spacing of samples[first...], if two or more.
  void learn_sample_period(const std::vector<PowerSample>& samples, std::size_t first);
  // Throws DeviceError(kNotSupported) when the driver lacks function.
  template <typename Fn>
  Fn require(Fn fn, const char* function) const;
  // A supported-clock list, ascending; call(count, buffer) is the NVML call.
  template <typename Call>
  std::vector<uint32_t> read_clock_list(Call call, const char* function) const;
  bool sm_locks_use_application_clocks() const;

  std::shared_ptr<Library> library_;
  const FunctionTable& fn_;
  unsigned index_;
  nvmlDevice_t handle_;
  std::string name_ = "unknown NVIDIA GPU";
  std::string uuid_ = "unknown";
  std::string architecture_ = "unknown";
  std::string pci_bus_id_;
  bool has_energy_counter_ = false;
  bool use_instant_power_ = false;  // sample the instantaneous field, not power usage
  bool has_power_samples_ = false;
  // The median spacing of the samples, learned from the buffer (0 until two
  // samples have been seen). Read by other threads than the reader.
  std::atomic<double> power_sample_period_s_{0.0};
  uint64_t last_sample_timestamp_us_ = 0;  // newest buffered sample returned so far (driver's stamp)
  long long sample_offset_us_ = 0;         // added to the driver's stamps ($JOULE_NVML_SAMPLE_OFFSET_MS)
  std::vector<nvmlSample_t> sample_buffer_;
  AppliedClockLocks applied_locks_;  // NVML cannot read a lock back
};

}  // namespace joule::nvml
