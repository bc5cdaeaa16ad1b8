// Named measurement windows over a set of devices. begin_window/end_window
// only read the clock and what the Sampler already holds, so they cost
// microseconds, whatever the driver's energy call costs.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "joule/clock.h"
#include "joule/device/discovery.h"
#include "joule/measure/sampler.h"

namespace joule {

// Energy and time of one window. Vectors follow the Monitor's device order
// (gpus(), then package and DRAM zones in cpu_zones() order).
struct Measurement {
  std::string name;
  double begin_s = 0.0;  // on the monitor's clock
  double elapsed_s = 0.0;
  std::vector<double> gpu_energy_j;
  std::vector<double> cpu_package_energy_j;
  std::vector<double> dram_energy_j;
  // Devices that failed inside the window (their energy stops there).
  std::vector<std::string> warnings;

  double gpu_total_energy_j() const;
  double cpu_total_energy_j() const;  // packages + DRAM
  double total_energy_j() const;
};

struct MonitorOptions {
  SamplerOptions sampler;
  // Called before the clock is read at each window edge, e.g. a CUDA device
  // synchronise so that queued kernels are counted in the right window.
  std::function<void()> synchronize;
};

class Monitor {
 public:
  Monitor(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<std::shared_ptr<CpuEnergyZone>> cpu_zones,
          std::shared_ptr<const Clock> clock, MonitorOptions options = {});
  // All devices found by discovery, on the steady clock.
  explicit Monitor(const Devices& devices, MonitorOptions options = {});
  ~Monitor();

  // Windows may overlap and nest; names must be unique among open windows.
  // Throws UsageError for a duplicate or unknown name.
  void begin_window(const std::string& name);
  Measurement end_window(const std::string& name);
  bool window_open(const std::string& name) const;

  // Stops sampling (a final sample is taken); open windows can still end.
  void stop();

  Sampler& sampler() { return sampler_; }
  Timeline& timeline() { return sampler_.timeline(); }
  const std::vector<std::shared_ptr<Gpu>>& gpus() const { return sampler_.gpus(); }
  const std::vector<std::shared_ptr<CpuEnergyZone>>& cpu_zones() const { return sampler_.cpu_zones(); }

 private:
  struct OpenWindow {
    std::string name;
    double begin_s;
    bool closing = false;
  };
  void repin_locked();

  std::shared_ptr<const Clock> clock_;
  std::function<void()> synchronize_;
  Sampler sampler_;
  mutable std::mutex mutex_;
  std::vector<OpenWindow> open_;  // few at a time: a vector beats a map
};

}  // namespace joule
