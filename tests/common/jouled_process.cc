// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/jouled_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "joule/daemon/client.h"
#include "joule/error.h"

namespace joule::testing {

JouledProcess::JouledProcess(const JouledOptions& options) : driver(*options.driver) {
  if (options.others_reach_socket) chmod(dir.path().c_str(), 0755);
  const std::string gpus = std::string(kJouledGpu) + "\n" + kJouledGpu + "\n" + kJouledGpu + " limit_w=280\npersist " +
                           settings + "\n" + options.fake_extra;
  fake = driver.use(dir, gpus);
  write_file(config, R"({"socket": ")" + socket + R"(", "socket_mode": ")" + options.socket_mode +
                         R"(", "state_file": ")" + state + "\"" +
                         (options.config_extra.empty() ? "" : ", " + options.config_extra) + "}");
  if (!options.three_gpus) fake.library_path = "/nonexistent/" + driver.name + "-library.so.1";
  if (!options.rocm_config.empty()) {
    if (driver.backend == GpuBackend::kRocm) throw std::invalid_argument("rocm_config beside the fake ROCm SMI's GPUs");
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
  // Each library: the three GPUs' fake, rocm_config's, or nowhere.
  std::map<std::string, std::string> env = {{"JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
                                            {"JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1"}};
  env[driver.library_env] = fake.library_path;
  if (!rocm_fake.library_path.empty()) env["JOULE_ROCM_SMI_LIBRARY"] = rocm_fake.library_path;
  pid = start_process({JOULED_BINARY, "--config", config}, env, dir.file("out" + std::to_string(starts)),
                      dir.file("err" + std::to_string(starts)));
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

std::vector<std::string> JouledProcess::set_calls() const {
  return std::filesystem::exists(fake.log_path) ? read_lines(fake.log_path) : std::vector<std::string>{};
}

std::map<int, FakeDriver::HeldSettings> JouledProcess::held() const { return driver.persisted_settings(settings); }

}  // namespace joule::testing
