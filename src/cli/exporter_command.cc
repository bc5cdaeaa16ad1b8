// `joule exporter`: Prometheus metrics of every GPU and CPU zone, and each
// GPU's energy per job (include/joule/telemetry/energy_exporter.h).
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "joule/error.h"
#include "joule/telemetry/energy_exporter.h"
#include "joule/telemetry/metrics_server.h"

namespace joule::cli {

int run_exporter(const CommonOptions& common, const ExporterCliOptions& o) {
  auto [host, port] = parse_listen(o.listen);
  if (!(o.interval_s > 0)) throw UsageError("--interval-s must be > 0");
  // SIGINT/SIGTERM go to a thread of their own (sigwait): every thread
  // started below inherits them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const Devices devices = common.open_devices();
  ExporterOptions options;
  options.accounting_interval_s = o.interval_s;
  options.driver_version = devices.driver_version;
  options.jouled_socket = o.jouled_socket.value_or(daemon::configured_socket_path());
  EnergyExporter exporter(devices.gpus, devices.cpu_zones, std::make_shared<SteadyClock>(), options);
  MetricsServer server([&] { return exporter.metrics_text(); }, host, port);
  exporter.start();
  std::cerr << fmt::format("joule exporter: {} GPU{} ({}), {} CPU zone{}; jouled leases from {}; http://{}:{}/metrics\n",
                           devices.gpus.size(), devices.gpus.size() == 1 ? "" : "s", devices.gpu_backend,
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
