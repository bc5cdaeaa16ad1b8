// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule exporter`: Prometheus metrics of every GPU and CPU zone, and each
// GPU's energy per job (include/joule/telemetry/energy_exporter.h).
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/number_options.h"
#include "joule/device/discovery.h"
#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/telemetry/energy_exporter.h"
#include "joule/telemetry/metrics_server.h"
#ifdef JOULE_HAVE_KUBELET
#include "joule/scheduler/pod_resources.h"
#else
#include "cli/absent_modules.h"
#endif

namespace joule::cli {
namespace {

// The exporter's GPUs: the drivers', or simulated ones only when asked for
// (--backend sim). `auto`, `nvml` and `rocm` all mean the drivers' (NVIDIA
// and AMD GPUs both), and drivers that cannot be used leave no GPU rather
// than ending the exporter: it keeps serving the CPU zones and says why
// (joule_nvml_up 0, joule_rocm_smi_up 0), so a node
// whose driver breaks shows as that, not as made-up watts or a dead target.
// Only the hardware: the exporter changes nothing, so no control path (and
// no connection to jouled) is set up.
struct ExporterDevices {
  Devices devices;
  std::map<unsigned, unsigned> vendor_index;  // joule index -> index among its vendor's GPUs
};

ExporterDevices open_exporter_devices(const CommonOptions& common) {
  DiscoveryOptions discovery = common.discovery();
  if (discovery.backend != GpuBackend::kSim) {
    if (!common.sim_spec.empty()) {
      throw UsageError(fmt::format("--sim '{}' describes simulated GPUs, which the exporter serves only with "
                                   "--backend sim (it never falls back to them)",
                                   common.sim_spec));
    }
    discovery.backend = GpuBackend::kAuto;
    discovery.auto_fallback = AutoFallback::kNoGpus;
  }
  ExporterDevices found{discover_hardware(discovery), {}};
  // A GPU's number among its vendor's (amd1 stays amd1 whatever --gpus keeps).
  for (const auto& gpu : found.devices.gpus) found.vendor_index[gpu->index()] = vendor_index(found.devices, *gpu);
  // No GPU to choose from is already said, and served; a selection of
  // none would only end the exporter.
  if (!common.gpus.empty() && found.devices.gpu_backend != "none") {
    select_gpus(found.devices, parse_gpu_indices(common.gpus));  // checked as parsed
  }
  return found;
}

// joule_gpu_library_info: each library discovery tried, with its version and
// why it gave no GPU (not the simulated GPUs', which use none).
std::vector<ExporterOptions::GpuLibrary> gpu_libraries(const Devices& devices) {
  if (devices.simulated()) return {};
  return {{"nvml", devices.nvml_library, devices.nvml_loaded ? devices.driver_version : "", devices.nvml_problem},
          {"rocm_smi", devices.rocm_library, devices.rocm_loaded ? devices.rocm_version : "", devices.rocm_problem}};
}

// The log's first line: what is served, loudly where it is not the driver's.
std::string describe_gpus(const Devices& devices) {
  if (devices.gpu_backend == "none") return fmt::format("NO GPU served: {}", devices.gpu_backend_reason);
  const std::string count = fmt::format("{} GPU{}", devices.gpus.size(), devices.gpus.size() == 1 ? "" : "s");
  if (devices.simulated()) {
    return fmt::format("{} SIMULATED (--backend sim): their readings are made up ({})", count, devices.gpu_backend_reason);
  }
  return fmt::format("{} ({})", count, devices.gpu_backend_reason);
}

// Which containers hold the GPUs, from the kubelet at --kubelet-socket
// (none without it); a build without gRPC refuses the option, saying why.
std::function<DeviceHolders()> kubelet_lister(const std::string& socket) {
  if (socket.empty()) return {};
#ifdef JOULE_HAVE_KUBELET
  auto client = std::make_shared<PodResourcesClient>(socket);
  return [client] { return client->list_gpu_holders(); };
#else
  throw UsageError(fmt::format("--kubelet-socket: this joule {}", absent_reason::kKubelet));
#endif
}

}  // namespace

int run_exporter(const CommonOptions& common, const ExporterCliOptions& o) {
  auto [host, port] = parse_listen(o.listen);
  if (!(o.interval_s > 0)) throw UsageError("--interval-s must be > 0");
  std::optional<carbon::Basis> carbon_basis;
  if (const carbon::Settings settings = o.carbon.settings(); settings.region || settings.g_per_kwh) {
    carbon_basis = carbon::resolve(settings);
  } else if (settings.pue != 1.0 || settings.table_path) {
    throw UsageError("--pue and --carbon-table go with --carbon-region or --carbon-intensity");
  }
  // SIGINT/SIGTERM go to a thread of their own (sigwait): every thread
  // started below inherits them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const ExporterDevices found = open_exporter_devices(common);
  const Devices& devices = found.devices;
  ExporterOptions options;
  options.vendor_index = found.vendor_index;
  options.gpu_libraries = gpu_libraries(devices);
  options.accounting_interval_s = o.interval_s;
  options.driver_version = devices.driver_version;
  options.jouled_socket = o.jouled_socket.value_or(daemon::configured_socket_path());
  options.gpu_backend = devices.gpu_backend;
  options.gpu_backend_reason = devices.gpu_backend_reason;
  if (!devices.simulated()) {
    options.nvml_up = devices.nvml_loaded;
    options.rocm_smi_up = devices.rocm_loaded;
  }
  options.log = [](const std::string& line) { std::cerr << "joule exporter: " << line << std::endl; };
  options.carbon = carbon_basis;
  options.ledger_path = o.ledger;
  options.list_gpu_holders = kubelet_lister(o.kubelet_socket);
  options.kubelet_socket = o.kubelet_socket;
  options.job_keep_s = o.keep_jobs_days * 86400.0;
  EnergyExporter exporter(devices.gpus, devices.cpu_zones, std::make_shared<SteadyClock>(), options);
  MetricsServer server([&] { return exporter.metrics_text(); }, host, port);
  server.serve_jobs([&](const std::string& job) { return exporter.jobs_json(job); });
  exporter.start();
  std::cerr << fmt::format("joule exporter: {}\n", describe_gpus(devices));
  if (carbon_basis) {
    std::cerr << fmt::format("joule exporter: CO2e per job at {:g} g CO2e/kWh x PUE {:g} ({})\n", *carbon_basis->g_per_kwh,
                             carbon_basis->pue, basis_description(*carbon_basis));
  }
  if (!o.kubelet_socket.empty()) {
    std::cerr << fmt::format("joule exporter: Kubernetes pods holding GPUs from {}\n", printable(o.kubelet_socket));
  }
  std::cerr << fmt::format("joule exporter: {} CPU zone{}; jouled leases from {}; http://{}:{}/metrics\n",
                           devices.cpu_zones.size(), devices.cpu_zones.size() == 1 ? "" : "s",
                           options.jouled_socket.empty() ? "nowhere" : options.jouled_socket, host, server.port());
  if (!o.port_file.empty()) std::ofstream(o.port_file) << server.port() << '\n';
  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    std::cerr << fmt::format("joule exporter: {} received, stopping\n", strsignal(signal_number));
    server.stop();
  });
  server.run();
  kill(getpid(), SIGTERM);  // run() also returns when the socket fails: wake the stopper
  stopper.join();
  exporter.stop();
  return 0;
}

}  // namespace joule::cli
