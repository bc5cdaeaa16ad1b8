// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Talking to jouled from a training process: a connection (its leases last
// as long as it does) and a Gpu that reads directly but changes limits
// through the daemon.
#pragma once

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "joule/device/gpu.h"

namespace joule::daemon {

class DaemonClient {
 public:
  // Connects; throws DeviceError(kDriver) naming the socket and the reason.
  // A reply not there within reply_timeout_s is an error, not a hang.
  explicit DaemonClient(std::string socket_path, double reply_timeout_s = 10.0);
  ~DaemonClient();
  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  // Sends a request ({"op": ..., ...}; version and id are added) and returns
  // the reply. A refusal throws DeviceError with the daemon's reason:
  // kNoPermission (not authorised), kInvalidArgument, kUnknown (busy, device).
  nlohmann::json call(nlohmann::json request);
  const std::string& socket_path() const { return socket_path_; }
  double reply_timeout_s() const { return reply_timeout_s_; }

 private:
  std::string socket_path_;
  double reply_timeout_s_;
  int fd_ = -1;
  uint64_t next_id_ = 1;
  std::string buffer_;
  std::mutex mutex_;
};

// Reads go to the wrapped GPU; power limits and clock locks are changed
// through jouled, which puts the old values back when this process's
// connection ends. The lock in force is jouled's (it applied it).
class DaemonControlledGpu final : public Gpu {
 public:
  DaemonControlledGpu(std::shared_ptr<Gpu> inner, std::shared_ptr<DaemonClient> client);

  unsigned index() const override { return inner_->index(); }
  std::string name() const override { return inner_->name(); }
  std::string uuid() const override { return inner_->uuid(); }
  std::string architecture() const override { return inner_->architecture(); }
  std::string backend() const override { return inner_->backend(); }
  std::string pci_bus_id() const override { return inner_->pci_bus_id(); }
  bool simulated() const override { return inner_->simulated(); }
  std::vector<CapabilityStatus> probe_capabilities() override;
  bool has_energy_counter() const override { return inner_->has_energy_counter(); }
  uint64_t total_energy_mj() override { return inner_->total_energy_mj(); }
  uint32_t power_mw() override { return inner_->power_mw(); }
  std::string power_reading_source() const override { return inner_->power_reading_source(); }
  bool has_power_samples() const override { return inner_->has_power_samples(); }
  double power_sample_period_s() const override { return inner_->power_sample_period_s(); }
  void read_power_samples(std::vector<PowerSample>& out) override { inner_->read_power_samples(out); }
  uint32_t power_limit_mw() override { return inner_->power_limit_mw(); }
  PowerLimitRange power_limit_range_mw() override { return inner_->power_limit_range_mw(); }
  uint32_t default_power_limit_mw() override { return inner_->default_power_limit_mw(); }
  Utilization utilization() override { return inner_->utilization(); }
  uint32_t sm_clock_mhz() override { return inner_->sm_clock_mhz(); }
  uint32_t memory_clock_mhz() override { return inner_->memory_clock_mhz(); }
  uint32_t temperature_c() override { return inner_->temperature_c(); }
  bool at_power_cap() override { return inner_->at_power_cap(); }
  uint64_t memory_used_bytes() override { return inner_->memory_used_bytes(); }
  std::vector<GpuProcess> running_processes() override { return inner_->running_processes(); }
  void set_power_limit_mw(uint32_t limit_mw) override;
  std::vector<uint32_t> supported_clocks_mhz(ClockDomain domain) override { return inner_->supported_clocks_mhz(domain); }
  std::optional<ClockLock> clock_lock_mhz(ClockDomain domain) override;
  void lock_clock_mhz(ClockDomain domain, ClockLock lock) override;
  void reset_clock_lock(ClockDomain domain) override;

 private:
  std::shared_ptr<Gpu> inner_;
  std::shared_ptr<DaemonClient> client_;
};

}  // namespace joule::daemon
