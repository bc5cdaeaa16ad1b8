// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// One AMD GPU seen through ROCm SMI. Private to the rocm backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "device/gpu_backend.h"
#include "device/rocm/rocm_smi_library.h"
#include "joule/device/gpu.h"

namespace joule::rocm {

// What a read of the energy counter lower than the one before means. The
// counter may be 32 bits wide (it then wraps after 2^32 ticks: 65.7 kJ at
// 15.3 uJ a tick, about two minutes at 560 W) or 64 bits (it never wraps);
// either restarts from 0 when the driver reloads or the GPU resets.
enum class CounterDrop {
  kWrap,     // a 32-bit counter wrapped: count on past 2^32
  kRestart,  // it restarted: report the lower value, as NVML's counter does
};

// last_ticks and now_ticks (now < last) read elapsed_s apart (0: unknown)
// from a counter of resolution_uj a tick. A wrap needs last below 2^32, and
// the energy it implies (up to 2^32, then now) must be one the GPU can draw
// in that time: at most max_power_w. Right as long as a 32-bit counter is
// read at least once per wrap (the sampler reads it every few seconds).
CounterDrop classify_counter_drop(uint64_t last_ticks, uint64_t now_ticks, double elapsed_s, double resolution_uj,
                                  double max_power_w);

// The bound on a GPU's power where its power cap range is unknown.
inline constexpr double kUnknownMaxPowerW = 10'000.0;

// Which temperature sensor temperature_c() reads.
enum class TemperatureSensor { kJunction, kEdge };

class RocmGpu final : public Gpu {
 public:
  // index: joule's (unique on the node); device_index: ROCm SMI's dv_ind.
  RocmGpu(std::shared_ptr<Library> library, unsigned index, uint32_t device_index);

  unsigned index() const override { return index_; }
  std::string name() const override { return name_; }
  std::string uuid() const override { return uuid_; }
  std::string architecture() const override { return architecture_; }
  std::string backend() const override { return "rocm"; }
  std::string pci_bus_id() const override { return pci_bus_id_; }
  bool simulated() const override { return false; }

  std::vector<CapabilityStatus> probe_capabilities() override;
  bool has_energy_counter() const override { return has_energy_counter_; }

  // The energy counter in mJ (ticks x resolution): a 32-bit counter's wraps
  // added back; a restart (driver reload) goes back, as NVML's counter does.
  uint64_t total_energy_mj() override;
  // Not measured on AMD hardware: the 1 ms is a ROCm SMI maintainer's account
  // of the driver's refresh (docs/devices.md); the read's cost is unknown, so
  // the window method measures both before it relies on them.
  EnergyCounterTiming energy_counter_timing() const override { return {0.001, 0.0}; }
  uint32_t power_mw() override;
  std::string power_reading_source() const override;
  uint32_t power_limit_mw() override;
  PowerLimitRange power_limit_range_mw() override;
  uint32_t default_power_limit_mw() override;
  Utilization utilization() override;
  uint32_t sm_clock_mhz() override;
  uint32_t memory_clock_mhz() override;
  uint32_t temperature_c() override;
  uint64_t memory_used_bytes() override;
  std::vector<GpuProcess> running_processes() override;
  void set_power_limit_mw(uint32_t limit_mw) override;
  std::vector<uint32_t> supported_clocks_mhz(ClockDomain domain) override;
  std::optional<ClockLock> clock_lock_mhz(ClockDomain domain) override;
  // ROCm locks clocks by levels, not by a range: the lock enables exactly the
  // supported levels that lie within [min_mhz, max_mhz] (manual performance
  // level, then the level bitmask). A range holding no level is refused
  // before any driver call.
  void lock_clock_mhz(ClockDomain domain, ClockLock lock) override;
  // Back to the automatic performance level, which frees both domains; a lock
  // still held on the other domain is applied again.
  void reset_clock_lock(ClockDomain domain) override;

  uint32_t device_index() const { return device_index_; }
  // rsmi_dev_power_ave_get: the power averaged by the firmware (mW).
  uint32_t average_power_mw();
  // rsmi_dev_current_socket_power_get (ROCm 6 on): the current socket power (mW).
  uint32_t socket_power_mw();
  // The counter's resolution as the library last reported it (uJ per tick;
  // 0 until the counter has been read).
  double energy_resolution_uj() const;
  TemperatureSensor temperature_sensor() const { return temperature_sensor_; }

 private:
  // Throws DeviceError for a failed call, with ROCm SMI's own message. A call
  // that answered before and now fails as a vanished or silent sysfs file
  // does is a lost GPU (ROCm SMI has no status of its own for that).
  void check(rsmi_status_t status, const char* function) const;
  // Throws DeviceError(kNotSupported) when the library lacks function.
  template <typename Fn>
  Fn require(Fn fn, const char* function) const;
  rsmi_frequencies_t clock_levels(ClockDomain domain);
  void apply_lock(ClockDomain domain, ClockLock lock);
  int64_t temperature_millidegrees(TemperatureSensor sensor);

  std::shared_ptr<Library> library_;
  const FunctionTable& fn_;
  unsigned index_;
  uint32_t device_index_;
  std::string name_ = "unknown AMD GPU";
  std::string uuid_ = "unknown";
  std::string architecture_ = "unknown";
  std::string pci_bus_id_;
  bool has_energy_counter_ = false;
  bool use_socket_power_ = false;  // power_mw() reads the current socket power
  TemperatureSensor temperature_sensor_ = TemperatureSensor::kJunction;

  mutable std::mutex answered_mutex_;
  mutable std::set<std::string_view> answered_;  // functions that succeeded at least once

  // The energy counter, continued across wraps (read by several threads).
  mutable std::mutex energy_mutex_;
  bool energy_seen_ = false;
  uint64_t last_ticks_ = 0;
  uint64_t last_timestamp_ns_ = 0;  // the library's stamp of the last read
  std::chrono::steady_clock::time_point last_read_at_;
  uint64_t wrapped_ticks_ = 0;      // 2^32 per wrap seen since the last restart
  double resolution_uj_ = 0.0;
  // Bounds the power a wrap may imply: twice the largest power cap, or
  // kUnknownMaxPowerW where the cap range cannot be read.
  double max_power_w_ = 0.0;

  // ROCm SMI reads back only the enabled levels, not the range asked for.
  AppliedClockLocks applied_locks_;
};

// "CDNA2" for the MI200 series, "CDNA3" for MI300, "CDNA" for MI100, else
// "unknown", from the marketing name ROCm SMI reports.
std::string architecture_from_name(const std::string& name);

// ROCm SMI's BDF id as "DDDD:BB:DD.F".
std::string format_pci_bus_id(uint64_t bdfid);

}  // namespace joule::rocm
