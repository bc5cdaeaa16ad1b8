// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/control/devices.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "joule/daemon/client.h"
#include "joule/daemon/protocol.h"
#include "joule/error.h"

namespace joule {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : fallback;
}

// The driver libraries a direct change goes through, by name: "NVML" (NVIDIA
// GPUs), "ROCm SMI" (AMD GPUs) or both on a mixed node.
std::string driver_libraries(const Devices& devices) {
  if (devices.gpu_backend == "rocm") return "ROCm SMI";
  if (devices.gpu_backend == "nvml+rocm") return "NVML and ROCm SMI";
  if (devices.gpu_backend == "nvml") return "NVML";
  return "driver";  // no GPU ("none"): nothing would be called
}

// Decides how limits of real GPUs are changed and wraps them for jouled when
// that is the way.
void choose_control(Devices& devices, const DiscoveryOptions& options) {
  if (devices.simulated()) {
    devices.control_path = "simulated GPUs: limits change in the model only";
    return;
  }
  const std::string mode = options.control.empty() ? env_or("JOULE_CONTROL", "auto") : options.control;
  if (mode != "auto" && mode != "daemon" && mode != "direct") {
    throw UsageError(fmt::format("unknown control path '{}' (expected auto, daemon or direct)", mode));
  }
  const std::string socket = options.daemon_socket ? *options.daemon_socket
                                                   : env_or("JOULE_DAEMON_SOCKET", daemon::kDefaultSocketPath);
  struct stat st {};
  const bool socket_exists = !socket.empty() && stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  const bool root = geteuid() == 0;
  if (mode == "direct" || (mode == "auto" && (root || !socket_exists))) {
    if (root) {
      devices.control_path = fmt::format("direct {} calls (running as root)", driver_libraries(devices));
    } else if (mode == "direct") {
      devices.control_path = fmt::format("direct {} calls as uid {} (needs root)", driver_libraries(devices), geteuid());
    } else {
      devices.control_path = fmt::format("none: not root (uid {}) and no jouled socket at {}; limits can only be read",
                                         geteuid(), socket.empty() ? "(disabled)" : socket);
    }
    return;
  }
  auto client = std::make_shared<daemon::DaemonClient>(socket);  // throws with the reason
  for (auto& gpu : devices.gpus) gpu = std::make_shared<daemon::DaemonControlledGpu>(gpu, client);
  devices.control_path = fmt::format("jouled at {}{}", socket, root ? " (requested)" : " (this process is not root)");
}

}  // namespace

Devices discover_devices(const DiscoveryOptions& options) {
  Devices devices = discover_hardware(options);
  choose_control(devices, options);
  return devices;
}

}  // namespace joule
