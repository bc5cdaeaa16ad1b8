// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A real jouled over a fake GPU library, in a temporary directory: three
// GPUs of the driver's (tests/common/fake_drivers.h; the fake NVML unless a
// test names the fake ROCm SMI) with limits 100-300 W (gpu2 not at its
// default, 280 W), the driver's core clocks and memory clocks 405 and
// 7251 MHz, their settings kept in a file across restarts as a driver keeps
// them across processes. Tests add lines to the fake's config (injected
// errors, in FakeDriver's grammar) and fields to jouled's config (access
// rules); a mixed node adds the fake ROCm SMI's own config after the fake
// NVML's GPUs.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/fake_drivers.h"
#include "common/test_support.h"

namespace joule::testing {

// The three GPUs' device lines, in FakeDriver's grammar.
inline constexpr const char* kJouledGpu = "device min_limit_w=100 max_limit_w=300 core_clocks mem_clocks_mhz=405,7251";
// The limits the three GPUs start at.
inline constexpr double kJouledGpuLimitsW[] = {300, 300, 280};

struct JouledOptions {
  const FakeDriver* driver = &fake_nvml_driver();  // whose fake holds the three GPUs
  std::string fake_extra;    // more lines of that fake's config (FakeDriver's grammar: @set_power_limit ...)
  bool three_gpus = true;    // false: no such fake on the node (only rocm_config's GPUs)
  // Non-empty (with the fake NVML as driver): the fake ROCm SMI's config,
  // AMD GPUs after the three (a mixed node) or alone; its caps kept across
  // restarts like the three GPUs' settings.
  std::string rocm_config;
  std::string config_extra;  // more JSON fields of jouled's config, e.g. R"("allow": [...])"
  std::string socket_mode = "0600";
  bool others_reach_socket = false;  // the directory open to other users ("nobody" clients)
};

class JouledProcess {
 public:
  explicit JouledProcess(const JouledOptions& options = {});
  ~JouledProcess();
  JouledProcess(const JouledProcess&) = delete;
  JouledProcess& operator=(const JouledProcess&) = delete;

  // Starts jouled; wait: until it answers on its socket (a killed one's
  // socket stays behind, so the file alone says nothing).
  void start(bool wait = true);
  void kill_hard();  // SIGKILL, reaped
  int stop();        // SIGTERM; its exit status
  std::string log() const;  // every start's stderr, in order
  nlohmann::json gpus();    // the "gpus" of its state reply
  // The three GPUs' driver's set-call log (empty before the first set call).
  std::vector<std::string> set_calls() const;
  // What the three GPUs hold now, as their fake keeps it across processes.
  std::map<int, FakeDriver::HeldSettings> held() const;

  const FakeDriver& driver;
  TempDir dir;
  FakeLibrary fake;       // the three GPUs' fake; library_path /nonexistent without them
  FakeRocmSmi rocm_fake;  // rocm_config's; library_path empty: none
  std::string settings = dir.file("gpu_settings");  // where the three GPUs' fake keeps their settings
  std::string socket = dir.file("jouled.sock");
  std::string config = dir.file("jouled.conf");
  std::string state = dir.file("jouled.state");
  pid_t pid = -1;
  int starts = 0;
};

}  // namespace joule::testing
