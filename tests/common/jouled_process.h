// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A real jouled over the fake libnvidia-ml.so.1 (and, where a test asks, the
// fake librocm_smi64.so.1), in a temporary directory:
// three A40s (gpu2 not at its default limit, 280 W), the fake's limits kept
// in a file across restarts as a driver keeps them across processes. Tests
// add lines to the fake's config (injected errors) and fields to jouled's
// config (access rules).
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/test_support.h"

namespace joule::testing {

// SM clocks 210-1740 MHz in 15 MHz steps, memory clocks 405 and 7251 MHz.
inline constexpr const char* kFakeA40 =
    "device name=\"NVIDIA A40\" min_limit_w=100 max_limit_w=300 max_sm_mhz=1740 min_sm_mhz=210 sm_step_mhz=15 "
    "mem_clocks_mhz=405,7251";
// The limits the fake's three A40s start at.
inline constexpr double kFakeA40LimitsW[] = {300, 300, 280};

struct JouledOptions {
  std::string fake_extra;    // more lines of the fake's config
  bool nvml = true;          // the fake NVML's three A40s (false: no NVML on the node)
  // Non-empty: the fake ROCm SMI's config, AMD GPUs after the A40s (a mixed
  // node) or alone; its caps kept across restarts like the A40s' limits.
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

  TempDir dir;
  FakeNvml fake;
  FakeRocmSmi rocm_fake;  // library_path empty: no ROCm SMI on the node
  std::string socket = dir.file("jouled.sock");
  std::string config = dir.file("jouled.conf");
  std::string state = dir.file("jouled.state");
  pid_t pid = -1;
  int starts = 0;
};

}  // namespace joule::testing
