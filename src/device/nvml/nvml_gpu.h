// One GPU seen through NVML. Private to the nvml backend.
#pragma once

#include <memory>

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
  bool simulated() const override { return false; }

  std::vector<CapabilityStatus> probe_capabilities() override;
  bool has_energy_counter() const override { return has_energy_counter_; }

  uint64_t total_energy_mj() override;
  uint32_t power_mw() override;
  uint32_t power_limit_mw() override;
  PowerLimitRange power_limit_range_mw() override;
  uint32_t default_power_limit_mw() override;
  Utilization utilization() override;
  uint32_t sm_clock_mhz() override;
  uint32_t temperature_c() override;
  uint64_t memory_used_bytes() override;
  void set_power_limit_mw(uint32_t limit_mw) override;

  uint32_t power_usage_mw();
  uint32_t instant_power_mw();

 private:
  // Throws DeviceError for a failed call, with NVML's own message.
  void check(nvmlReturn_t rc, const char* function) const;
  // Throws DeviceError(kNotSupported) when the driver lacks function.
  template <typename Fn>
  Fn require(Fn fn, const char* function) const;

  std::shared_ptr<Library> library_;
  const FunctionTable& fn_;
  unsigned index_;
  nvmlDevice_t handle_;
  std::string name_ = "unknown NVIDIA GPU";
  std::string uuid_ = "unknown";
  std::string architecture_ = "unknown";
  bool has_energy_counter_ = false;
  bool use_instant_power_ = false;  // sample the instantaneous field, not power usage
};

}  // namespace joule::nvml
