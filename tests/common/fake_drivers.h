// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The fake GPU libraries as test parameters: a behaviour test (measure a
// command, sweep caps and clocks, the power-limit optimizer, windows, lost
// GPUs) runs once on the fake NVML and once on the fake ROCm SMI, written
// once against a FakeDriver (INSTANTIATE_TEST_SUITE_P over fake_drivers()).
//
// A test writes its device config in the grammar both fakes share
// (tests/fake_gpu/fake_gpu.h: device/error/hang/process/clock/persist lines,
// power_w, limit_w, min/max/default_limit_w, idle_w, util_*, temp_c,
// mem_used_mib, energy_update_ms, energy_reset_ms, the power profiles) plus
// a few words that stand for what differs, which config() translates:
//   device lines   get the driver's own GPU first (its name and how its
//                  sources behave: `device_keys`); the test's keys follow and
//                  win. The word `core_clocks` becomes the driver's core
//                  clock list (core_clocks_mhz below), `real_sources` the
//                  keys that give the device the sources (update steps,
//                  trailing means, sample buffers) of the driver's real GPU
//                  as docs/measurement.md and docs/devices.md describe them.
//   error / hang   function=@energy (the energy counter read),
//                  function=@power (the power reading joule samples),
//                  function=@set_power_limit, function=@processes (the
//                  running processes' listing; ROCm SMI lists every GPU's
//                  at once, so its rules take no device=); code=@lost (a GPU
//                  gone), code=@no_permission, code=@not_supported,
//                  code=@unknown.
// Anything else passes through unchanged.
#pragma once

#include <dlfcn.h>

#include <map>
#include <ostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/device/discovery.h"
#include "joule/device/gpu.h"

namespace joule::testing {

struct FakeLibrary {
  std::string config_path;
  std::string log_path;
  std::string library_path;
};

struct FakeDriver {
  std::string name;            // "nvml" | "rocm": the test-name suffix and --backend value
  GpuBackend backend;
  std::string library_env;     // the variable joule loads the library from
  std::string config_env;      // the fake's config and set-call log variables
  std::string log_env;
  std::string helper_prefix;   // the fake's exported test helpers: prefix + "set_time_s" ...
  std::string gpu_name;        // what a device line without name= is called
  std::string device_keys;     // put before each device line's own keys
  std::string real_source_keys;  // `real_sources`
  double counter_step_ms = 0;    // how often the energy counter moves with real_sources
  std::string extra_lines;     // appended to every config (a source the real GPU lacks)
  std::vector<unsigned> core_clocks_mhz;  // `core_clocks`: ascending
  std::map<std::string, std::string> words;  // "@energy" -> the driver's name for it

  // Writes config() of common_config into dir and points the fake at it (and
  // at a set-call log there) through this process's environment.
  FakeLibrary use(const TempDir& dir, const std::string& common_config) const;
  std::string config(const std::string& common_config) const;

  // The environment a joule process needs to see this fake alone: the
  // library's, config's and log's variables set, the other driver's library
  // pointed nowhere, no RAPL, no jouled, no JOULE_SIM (simulated_only_env()
  // otherwise).
  std::map<std::string, std::string> env(const FakeLibrary& fake) const;
  // Discovery options for this driver alone, its library the fake.
  void point_discovery(DiscoveryOptions& options, const FakeLibrary& fake) const;
  // The GPUs the fake lists, opened by the backend directly.
  std::vector<std::shared_ptr<Gpu>> open(const FakeLibrary& fake) const;

  // The set-call log lines the fake writes when joule sets device's power
  // limit to watts, locks its core clock to [the lowest level, cap_mhz], or
  // resets its clocks.
  std::vector<std::string> power_limit_log(int device, int watts) const;
  std::vector<std::string> clock_lock_log(int device, unsigned cap_mhz) const;
  std::vector<std::string> clock_reset_log(int device) const;

  // The device and watts of a power-limit set call in the fake's log
  // (power_limit_log's form, the call not refused); nullopt for other lines.
  std::optional<std::pair<int, double>> power_limit_set(const std::string& log_line) const;

  // What a device holds, as the fake keeps it across processes (its config's
  // `persist` file): the power limit, and whether any clock setting is held
  // (NVML: a locked or application clock; ROCm SMI: a perf level other than
  // auto, a level mask or a range).
  struct HeldSettings {
    double limit_w = 0.0;
    bool clocks_held = false;
  };
  // Per device in the persist file (a fake that never changed anything
  // writes none).
  std::map<int, HeldSettings> persisted_settings(const std::string& persist_path) const;

  // One of the fake's exported helpers ("set_time_s", "release_hangs",
  // "relative_speed"), from the copy of the library already loaded.
  template <typename Fn>
  Fn helper(const FakeLibrary& fake, const std::string& suffix) const {
    void* handle = dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) throw std::runtime_error(fake.library_path + " is not loaded");
    void* symbol = dlsym(handle, (helper_prefix + suffix).c_str());
    dlclose(handle);
    if (symbol == nullptr) throw std::runtime_error(helper_prefix + suffix + " not in " + fake.library_path);
    return reinterpret_cast<Fn>(symbol);
  }
};

const FakeDriver& fake_nvml_driver();
const FakeDriver& fake_rocm_smi_driver();
// Both, NVML first: the values to instantiate a parameterised suite with.
const std::vector<FakeDriver>& fake_drivers();

// How gtest prints a parameter (in failure messages): its name.
inline void PrintTo(const FakeDriver& driver, std::ostream* out) { *out << driver.name; }

// gtest's name for a parameter: the driver's name.
struct FakeDriverName {
  template <typename ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    return info.param.name;
  }
};

}  // namespace joule::testing
