// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// jouled: the one process that changes GPU settings, on behalf of training
// processes that ask over a Unix socket. See docs/daemon-protocol.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <iostream>

#include "daemon/server.h"
#include "joule/device/discovery.h"
#include "joule/error.h"
#include "joule/version.h"

namespace {

std::atomic<bool> g_stop{false};

void on_stop_signal(int) { g_stop.store(true); }

void log_line(const std::string& text) {
  const time_t now = time(nullptr);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", localtime(&now));
  std::cerr << stamp << " jouled: " << text << std::endl;
}

// The GPUs jouled controls: with `auto` (the default) every GPU NVML or ROCm
// SMI lists, so NVIDIA, AMD and mixed nodes alike; `nvml` or `rocm` that
// library alone. Never simulated ones unless asked: a daemon that changes
// power limits and restores them after a crash has no use for made-up GPUs,
// and one that started with none would hide a broken driver behind a running
// unit whose every request fails. So without a GPU it does not start (exit 1,
// saying what it tried and why each failed), which the service manager shows.
joule::Devices open_daemon_gpus(const std::string& backend) {
  joule::DiscoveryOptions discovery;
  discovery.backend = joule::parse_gpu_backend(backend);
  discovery.auto_fallback = joule::AutoFallback::kNoGpus;
  // The daemon changes settings itself, through the driver: the hardware
  // alone, no control path to choose.
  const auto not_starting = [](const std::string& why) {
    return joule::Error(fmt::format("not starting: no GPU to control ({}); jouled never uses simulated GPUs "
                                    "unless --backend sim is given",
                                    why));
  };
  joule::Devices devices;
  try {
    devices = joule::discover_hardware(discovery);
  } catch (const joule::DeviceError& e) {
    throw not_starting(e.what());
  }
  if (devices.gpus.empty()) throw not_starting(devices.gpu_backend_reason);
  return devices;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"jouled: changes GPU power limits for joule clients and restores them when they go away"};
  std::string config_path = "/etc/joule/jouled.conf";
  std::string socket_override, state_override, backend = "auto";
  bool check_config = false;
  app.add_option("-c,--config", config_path, "configuration file (default /etc/joule/jouled.conf)");
  app.add_option("--socket", socket_override, "listen here instead of the config's socket");
  app.add_option("--state-file", state_override, "state file instead of the config's");
  app.add_option("--backend", backend,
                 "auto (default: the GPUs NVML and ROCm SMI list, never simulated ones), nvml (NVIDIA only), rocm "
                 "(AMD only) or sim (for trying the daemon without GPUs)")
      ->check(CLI::IsMember({"auto", "nvml", "rocm", "sim"}));
  app.add_flag("--check-config", check_config, "validate the configuration, print it and exit");
  app.set_version_flag("--version", std::string("jouled ") + joule::version());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    joule::daemon::DaemonConfig config = joule::daemon::DaemonConfig::load(config_path);
    if (!socket_override.empty()) config.socket_path = socket_override;
    if (!state_override.empty()) config.state_path = state_override;
    if (check_config) {
      std::cout << fmt::format("{}: OK\n  socket {} (mode {:04o}{})\n  state file {}\n", config_path,
                               config.socket_path, config.socket_mode,
                               config.socket_group ? ", group " + *config.socket_group : "", config.state_path);
      for (const auto& rule : config.allow) {
        std::string gpus = "all GPUs";
        if (rule.gpus) {
          gpus = "GPUs";
          for (unsigned g : *rule.gpus) gpus += fmt::format(" {}", g);
        }
        std::cout << fmt::format("  allow {} {}: {}\n", rule.user ? "user" : "group",
                                 rule.user ? *rule.user : *rule.group, gpus);
      }
      if (config.allow.empty()) std::cout << "  allow: root only\n";
      return 0;
    }
    joule::Devices devices = open_daemon_gpus(backend);
    log_line(fmt::format("GPUs: {} ({})", devices.gpus.size(), devices.gpu_backend_reason));

    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    signal(SIGPIPE, SIG_IGN);

    joule::daemon::Server server(config, devices.gpus, log_line);
    server.recover();
    server.listen();
    server.run(g_stop);
    return 0;
  } catch (const joule::UsageError& e) {
    std::cerr << "jouled: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "jouled: error: " << e.what() << '\n';
    return 1;
  }
}
