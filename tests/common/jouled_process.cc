// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/jouled_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "joule/daemon/client.h"
#include "joule/error.h"

namespace joule::testing {

JouledProcess::JouledProcess(const JouledOptions& options) {
  if (options.others_reach_socket) chmod(dir.path().c_str(), 0755);
  fake = use_fake_nvml(dir, std::string(kFakeA40) + "\n" + kFakeA40 + "\n" + kFakeA40 + " limit_w=280\npersist " +
                                dir.file("gpu_limits") + "\n" + options.fake_extra);
  write_file(config, R"({"socket": ")" + socket + R"(", "socket_mode": ")" + options.socket_mode +
                         R"(", "state_file": ")" + state + "\"" +
                         (options.config_extra.empty() ? "" : ", " + options.config_extra) + "}");
  if (!options.nvml) fake.library_path = "/nonexistent/libnvidia-ml.so.1";
  if (!options.rocm_config.empty()) {
    rocm_fake = use_fake_rocm_smi(dir, options.rocm_config + "\npersist " + dir.file("amd_gpu_settings") + "\n");
  }
}

JouledProcess::~JouledProcess() {
  if (pid > 0) {
    kill(pid, SIGTERM);
    wait_process(pid, 10);
  }
}

void JouledProcess::start(bool wait) {
  const std::string rocm = rocm_fake.library_path.empty() ? "/nonexistent/librocm_smi64.so.1" : rocm_fake.library_path;
  pid = start_process({JOULED_BINARY, "--config", config},
                      {{"JOULE_NVML_LIBRARY", fake.library_path}, {"JOULE_ROCM_SMI_LIBRARY", rocm}},
                      dir.file("out" + std::to_string(starts)), dir.file("err" + std::to_string(starts)));
  ++starts;
  if (!wait) return;
  for (int i = 0; i < 500; ++i) {
    try {
      daemon::DaemonClient(socket).call({{"op", "state"}});
      return;
    } catch (const DeviceError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  FAIL() << "jouled did not come up: " << log();
}

void JouledProcess::kill_hard() {
  kill(pid, SIGKILL);
  wait_process(pid, 10);
  pid = -1;
}

int JouledProcess::stop() {
  kill(pid, SIGTERM);
  const int code = wait_process(pid, 10);
  pid = -1;
  return code;
}

std::string JouledProcess::log() const {
  std::string all;
  for (int i = 0; i < starts; ++i) all += read_file(dir.file("err" + std::to_string(i)));
  return all;
}

nlohmann::json JouledProcess::gpus() { return daemon::DaemonClient(socket).call({{"op", "state"}})["gpus"]; }

}  // namespace joule::testing
