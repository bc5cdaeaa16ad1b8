// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The GPU interface every backend implements (nvml, rocm, sim). Readings use the
// units NVML uses natively (mW, mJ, MHz, degrees C, bytes); the measurement
// layer converts to joules and seconds at its public edge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "joule/error.h"

namespace joule {

// Everything a GPU backend may be able to read or change. A backend reports
// for each whether it works on a given device and, if not, why.
enum class GpuCapability {
  kEnergyCounter,     // cumulative energy since driver load (mJ), Volta and newer
  kPowerUsage,        // power draw as the driver reports it (mW)
  kInstantPower,      // instantaneous power field, where the driver has one
  kPowerSamples,      // the driver's buffer of timestamped power samples
  kPowerLimit,        // current power-management limit
  kLimitConstraints,  // smallest and largest settable limit
  kDefaultLimit,      // limit the GPU boots with
  kUtilization,       // GPU (SM) and memory utilisation, percent
  kSmClock,           // current SM clock
  kMemoryClock,       // current memory clock
  kTemperature,       // core temperature
  kMemoryUsed,        // device memory in use
  kRunningProcesses,  // the processes with a context on the GPU
  kSetPowerLimit,     // control: set a limit / restore the default
  kSupportedClocks,   // the SM and memory clocks the driver accepts
  kLockSmClock,       // control: lock the SM clock to a range / reset it
  kLockMemoryClock,   // control: lock the memory clock to a range / reset it
};

inline constexpr GpuCapability kAllGpuCapabilities[] = {
    GpuCapability::kEnergyCounter, GpuCapability::kPowerUsage,    GpuCapability::kInstantPower,
    GpuCapability::kPowerSamples,
    GpuCapability::kPowerLimit,    GpuCapability::kLimitConstraints, GpuCapability::kDefaultLimit,
    GpuCapability::kUtilization,   GpuCapability::kSmClock,       GpuCapability::kMemoryClock,
    GpuCapability::kTemperature,
    GpuCapability::kMemoryUsed,    GpuCapability::kRunningProcesses, GpuCapability::kSetPowerLimit,
    GpuCapability::kSupportedClocks, GpuCapability::kLockSmClock, GpuCapability::kLockMemoryClock,
};

const char* to_string(GpuCapability capability);

struct CapabilityStatus {
  GpuCapability capability;
  bool available = false;
  std::string reason;  // empty when available; otherwise why not, in words
};

struct PowerLimitRange {
  uint32_t min_mw = 0;
  uint32_t max_mw = 0;
};

// One entry of a driver's power-sample buffer: the mean power over the
// interval that ends at timestamp_us (since the previous sample).
struct PowerSample {
  uint64_t timestamp_us = 0;  // wall clock (CLOCK_REALTIME), as NVML stamps it
  uint32_t power_mw = 0;
};

// The clocks a privileged caller may lock: the SM (graphics) clock and the
// memory clock, as NVML's locked-clock calls name them.
enum class ClockDomain { kSm, kMemory };
inline constexpr ClockDomain kAllClockDomains[] = {ClockDomain::kSm, ClockDomain::kMemory};
const char* to_string(ClockDomain domain);  // "sm", "memory"
// The reverse of to_string; none for any other name.
std::optional<ClockDomain> clock_domain_from_string(std::string_view name);

// A clock lock: the driver keeps the domain's clock within [min_mhz, max_mhz]
// (under load it runs at the top, unless power or heat hold it lower). A clock
// cap is a lock whose floor is the lowest supported clock.
struct ClockLock {
  uint32_t min_mhz = 0;
  uint32_t max_mhz = 0;

  bool operator==(const ClockLock&) const = default;
};

struct Utilization {
  uint32_t gpu_percent = 0;
  uint32_t memory_percent = 0;
};

// A process with a context on a GPU (compute, graphics, or both).
struct GpuProcess {
  uint32_t pid = 0;
  // Device memory it holds; none where the driver will not say (e.g. to an
  // unprivileged caller, or under MIG).
  std::optional<uint64_t> used_memory_bytes;

  bool operator==(const GpuProcess&) const = default;
};

// What the driver sampled of each process's use of the GPU's streaming
// multiprocessors since a time (NVML's per-process utilisation): per
// process, the sum of its samples' SM utilisation in percent, and how many
// samples there were; and the newest sample's time, to ask from next.
struct ProcessUtilization {
  uint32_t pid = 0;
  double sm_percent_sum = 0.0;
  uint32_t samples = 0;
};
struct ProcessUtilizationSamples {
  std::vector<ProcessUtilization> processes;  // by pid, each once
  uint64_t newest_unix_us = 0;                // 0: no sample
};

// One GPU. Readings throw DeviceError (with the backend's own message) when
// they fail; probe_capabilities() says in advance which ones work.
class Gpu {
 public:
  virtual ~Gpu() = default;

  virtual unsigned index() const = 0;
  virtual std::string name() const = 0;
  virtual std::string uuid() const = 0;
  virtual std::string architecture() const = 0;  // "Hopper", "Volta", "CDNA3", ...
  virtual std::string backend() const = 0;       // "nvml", "rocm", "sim"
  // "00000000:18:00.0" (domain:bus:device.function), as NVML and
  // dcgm-exporter write it ("0000:C1:00.0" from ROCm SMI, as Linux writes
  // it); empty where the backend cannot tell.
  virtual std::string pci_bus_id() const { return {}; }
  virtual bool simulated() const = 0;

  // Checks every capability once (reads each value; never changes anything).
  virtual std::vector<CapabilityStatus> probe_capabilities() = 0;
  // Whether the energy counter works, as found when the device was opened.
  virtual bool has_energy_counter() const = 0;

  virtual uint64_t total_energy_mj() = 0;
  // How the energy counter moves, as the backend knows it: it advances about
  // every update_s (0: not known) and a read costs about read_cost_s of CPU
  // (0: not known). The window method (measure/counter_anchors.h) reads a
  // counter that advances every few ms and is cheap to read right after each
  // window edge; a slower one it pins by its step grid, which it measures.
  struct EnergyCounterTiming {
    double update_s = 0.0;
    double read_cost_s = 0.0;
  };
  virtual EnergyCounterTiming energy_counter_timing() const { return {}; }
  // The power reading taken once per sampler tick (for NVML: the driver's
  // power usage, or the instantaneous field when $JOULE_NVML_POWER_SOURCE=instant).
  virtual uint32_t power_mw() = 0;
  // What power_mw() reads, in words for reports: "power usage (trailing 1 s
  // mean)", "instantaneous power field", "model".
  virtual std::string power_reading_source() const = 0;

  // Whether the driver keeps timestamped power samples (read_power_samples),
  // as decided when the device was opened, and their typical spacing.
  virtual bool has_power_samples() const { return false; }
  virtual double power_sample_period_s() const { return 0.0; }
  // Appends the samples taken since the previous call, oldest first; the
  // first call returns what the driver still holds. Throws DeviceError.
  virtual void read_power_samples(std::vector<PowerSample>& out);
  virtual uint32_t power_limit_mw() = 0;
  virtual PowerLimitRange power_limit_range_mw() = 0;
  virtual uint32_t default_power_limit_mw() = 0;
  virtual Utilization utilization() = 0;
  virtual uint32_t sm_clock_mhz() = 0;
  // Throws DeviceError; the default says the backend cannot tell.
  virtual uint32_t memory_clock_mhz();
  virtual uint32_t temperature_c() = 0;
  // Whether the driver holds the clocks down now to keep the power at the
  // limit (NVML's clock-event reason "SW power cap"). Under the cap, what a
  // piece of work draws and what leaving it out saves can differ
  // (docs/attribution.md). Throws DeviceError; the default says the backend
  // cannot tell.
  virtual bool at_power_cap();
  virtual uint64_t memory_used_bytes() = 0;
  // The processes using the GPU now, by pid, each once. Throws DeviceError;
  // the default says the backend cannot tell.
  virtual std::vector<GpuProcess> running_processes();
  // The processes' SM utilisation sampled after since_unix_us (wall-clock
  // microseconds; 0: whatever the driver still holds). Throws DeviceError;
  // the default says the backend cannot tell.
  virtual ProcessUtilizationSamples process_utilization(uint64_t since_unix_us);

  // Control. Limits outside power_limit_range_mw() are refused before any
  // driver call, with a DeviceError(kInvalidArgument).
  virtual void set_power_limit_mw(uint32_t limit_mw) = 0;
  void restore_default_power_limit() { set_power_limit_mw(default_power_limit_mw()); }

  // The clocks the driver accepts for a domain, ascending and distinct (SM
  // clocks: those it accepts at the highest memory clock). Throws
  // DeviceError; the default says the backend cannot tell.
  virtual std::vector<uint32_t> supported_clocks_mhz(ClockDomain domain);
  // The lock in force on the domain as far as this object knows (the driver
  // has no call that reads a lock back: NVML backends report the lock they
  // applied, jouled's the lease it holds); none when unlocked.
  virtual std::optional<ClockLock> clock_lock_mhz(ClockDomain domain);
  // Locks the domain's clock. A lock with min_mhz > max_mhz or an end outside
  // the supported clocks is refused before any driver call, with
  // DeviceError(kInvalidArgument); the defaults say the backend cannot.
  virtual void lock_clock_mhz(ClockDomain domain, ClockLock lock);
  // Lets the driver choose the domain's clock again (the state after boot).
  virtual void reset_clock_lock(ClockDomain domain);

  // "gpu0 NVIDIA H100 80GB HBM3 (nvml)" style label used in reports.
  std::string label() const;
};

// A reading that may not work on this GPU: its value, or none when the
// driver refuses it (DeviceError). Other errors propagate.
template <typename Read>
auto try_read(Read read) -> std::optional<decltype(read())> {
  try {
    return read();
  } catch (const DeviceError&) {
    return std::nullopt;
  }
}

// Throws DeviceError(kInvalidArgument) naming the GPU when limit_mw lies
// outside range. Shared by every backend so all refuse alike.
void check_power_limit_in_range(const Gpu& gpu, uint32_t limit_mw, PowerLimitRange range);

// Throws DeviceError(kInvalidArgument) naming the GPU and domain when lock is
// empty or reaches outside the supported clocks (ascending, as
// supported_clocks_mhz returns them). Shared by every backend.
void check_clock_lock_in_range(const Gpu& gpu, ClockDomain domain, ClockLock lock,
                               const std::vector<uint32_t>& supported_mhz);

// The lock that caps the domain's clock at cap_mhz: from the lowest supported
// clock up to cap_mhz. Throws DeviceError like check_clock_lock_in_range.
ClockLock clock_cap_lock(Gpu& gpu, ClockDomain domain, uint32_t cap_mhz);

}  // namespace joule
