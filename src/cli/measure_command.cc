// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <chrono>
#include <optional>
#include <sstream>
#include <thread>
#include <ctime>
#include <map>
#include <random>
#include <sys/utsname.h>

#include "cli/commands.h"
#include "cli/report.h"
#include "joule/carbon/emissions_csv.h"
#include "joule/control/devices.h"
#include "joule/common/child_process.h"
#include "joule/common/output_file.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"

#ifdef JOULE_HAVE_MPI
#include <nlohmann/json.hpp>

#include "joule/cluster/mpi_monitor.h"
#endif

namespace joule::cli {

namespace {

SampledFields parse_fields(const std::vector<std::string>& names) {
  SampledFields fields;
  for (const auto& name : names) {
    if (name == "util") {
      fields.utilization = true;
    } else if (name == "clock") {
      fields.sm_clock = true;
    } else if (name == "temp") {
      fields.temperature = true;
    } else if (name == "mem") {
      fields.memory_used = true;
    } else if (name == "cap") {
      fields.power_cap = true;
    } else {
      throw UsageError(fmt::format("--sample: unknown field '{}' (expected util, clock, temp, mem or cap)", name));
    }
  }
  return fields;
}

std::vector<unsigned> parse_gpu_list(const std::string& text) {
  std::vector<unsigned> indices;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || item[0] == '-' || value > 1024) {
      throw UsageError(fmt::format("--gpus: '{}' is not a GPU index (expected a list such as 0,2)", item));
    }
    indices.push_back(static_cast<unsigned>(value));
  }
  if (indices.empty()) throw UsageError("--gpus: empty list (expected indices such as 0,2)");
  return indices;
}

// The carbon and cost basis of the flags, checked before the command runs;
// none when no flag asks for figures.
std::optional<carbon::Basis> carbon_basis_of(const MeasureOptions& options) {
  const carbon::Settings settings = options.carbon.settings();
  if (!settings.any() && options.emissions_csv.empty()) {
    if (settings.pue != 1.0 || !settings.currency.empty() || settings.table_path) {
      throw UsageError("--pue, --currency and --carbon-table go with --carbon-region, --carbon-intensity, --price or "
                       "--emissions-csv");
    }
    return std::nullopt;
  }
  return carbon::resolve(settings);
}

std::string random_uuid() {
  std::random_device device;
  std::mt19937_64 random((static_cast<uint64_t>(device()) << 32) ^ device());
  const uint64_t high = (random() & ~0xF000ULL) | 0x4000ULL;                       // version 4
  const uint64_t low = (random() & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant 10
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xFFFF, high & 0xFFFF,
                     low >> 48, low & 0xFFFFFFFFFFFFULL);
}

std::string first_field(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return value;
  }
  return "";
}

// One row of CodeCarbon's emissions.csv for the run: what joule knows, in
// CodeCarbon's units (energies in kWh with the PUE in them, as CodeCarbon
// counts them; powers in W; emissions in kg).
std::map<std::string, std::string> emissions_row(const MeasureReport& report, const carbon::Basis& basis) {
  std::map<std::string, std::string> row;
  const auto number = [](double x) { return fmt::format("{:.12g}", x); };
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  row["timestamp"] = stamp;
  row["project_name"] = "joule";
  row["run_id"] = random_uuid();
  row["duration"] = number(report.elapsed_s);
  double power_w[3] = {0, 0, 0}, energy_j[3] = {0, 0, 0};  // cpu, gpu, ram
  bool has[3] = {false, false, false};
  std::map<std::string, int> gpu_models;
  int gpus = 0;
  for (const auto& d : report.devices) {
    const int k = d.kind == "gpu" ? 1 : (d.kind == "dram" ? 2 : 0);
    power_w[k] += d.avg_power_w;
    energy_j[k] += d.energy_j;
    has[k] = true;
    if (d.kind == "gpu") {
      ++gpus;
      ++gpu_models[d.name];
    }
  }
  const char* power_names[3] = {"cpu_power", "gpu_power", "ram_power"};
  const char* energy_names[3] = {"cpu_energy", "gpu_energy", "ram_energy"};
  for (int k = 0; k < 3; ++k) {
    if (!has[k]) continue;
    row[power_names[k]] = number(power_w[k]);
    row[energy_names[k]] = number(energy_j[k] / carbon::kJoulesPerKwh * basis.pue);
  }
  const double energy_kwh = report.total_energy_j / carbon::kJoulesPerKwh * basis.pue;
  row["energy_consumed"] = number(energy_kwh);
  if (basis.g_per_kwh) {
    const double kg = energy_kwh * *basis.g_per_kwh / 1000.0;
    row["emissions"] = number(kg);
    row["emissions_rate"] = number(report.elapsed_s > 0 ? kg / report.elapsed_s : 0.0);
  }
  row["country_iso_code"] = basis.country_iso3;
  row["country_name"] = basis.country_name;
  if (basis.region_kind == "us-state") {
    std::string state = basis.region_name;
    for (auto& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    row["region"] = state;
  } else if (basis.region_kind == "cloud") {
    const auto colon = basis.region.find(':');
    row["cloud_provider"] = basis.region.substr(0, colon);
    row["cloud_region"] = basis.region.substr(colon + 1);
    row["on_cloud"] = "Y";
  }
  struct utsname uts {};
  if (uname(&uts) == 0) row["os"] = fmt::format("{}-{}-{}", uts.sysname, uts.release, uts.machine);
  row["cpu_count"] = std::to_string(std::thread::hardware_concurrency());
  row["cpu_model"] = first_field("/proc/cpuinfo", "model name");
  row["gpu_count"] = std::to_string(gpus);
  std::string models;
  for (const auto& [name, count] : gpu_models) models += fmt::format("{}{} x {}", models.empty() ? "" : ", ", count, name);
  row["gpu_model"] = models;
  const std::string mem_kb = first_field("/proc/meminfo", "MemTotal");
  if (!mem_kb.empty()) row["ram_total_size"] = number(std::strtod(mem_kb.c_str(), nullptr) / (1024.0 * 1024.0));
  row["tracking_mode"] = "machine";
  row["pue"] = number(basis.pue);
  return row;
}

// Waits for the measured command (ChildProcess: a stop signal goes to its
// whole process group, SIGKILL after kill_grace_s). The command's exit
// status, as a shell reports it; but a command a stop signal ended, or that
// was killed after it, ends joule as the stop signal would have (128 +
// signal: 143 for SIGTERM, not the 137 of the SIGKILL that followed it). A
// command that caught the signal and exited keeps its status.
int exit_status_of(ChildProcess& child, double kill_grace_s) {
  const int status = child.wait_forwarding_signals(kill_grace_s);
  return child.stop_signal() != 0 && status > 128 ? 128 + child.stop_signal() : status;
}

}  // namespace

DiscoveryOptions CommonOptions::discovery() const {
  DiscoveryOptions options;
  options.backend = parse_gpu_backend(backend);
  options.sim_spec = sim_spec;
  return options;
}

Devices CommonOptions::open_devices() const {
  Devices devices = discover_devices(discovery());
  if (!gpus.empty()) select_gpus(devices, parse_gpu_list(gpus));
  return devices;
}

MonitorOptions monitor_options_of(const MeasureOptions& options) {
  MonitorOptions monitor_options;
  monitor_options.sampler.interval_s = sampling_interval_s(options.interval_ms, "--interval-ms");
  monitor_options.sampler.counter_interval_s = options.counter_interval_ms / 1000.0;
  monitor_options.sampler.fields = parse_fields(options.sample_fields);
  return monitor_options;
}

void write_report(const std::string& text, bool json, std::optional<OutputFile>& output) {
  if (output) {
    output->stream() << text;
    output->commit();
  } else {
    // The human report goes to stderr so the command's own stdout stays clean
    // for pipes; --json is meant for programs and goes to stdout.
    (json ? std::cout : std::cerr) << text;
  }
}

#ifdef JOULE_HAVE_MPI
namespace {

constexpr double kSettleTimeoutS = 1.0;  // the leaders' wait for their devices' data past the end edge

// Where the ranks fell out of step (a node died or hangs), MPI_Finalize
// could wait for ever: the job ends with MPI_Abort instead, as soon as rank
// 0 has written what it has. Rank 0 needs at most the reports' wait (the
// settling and one timeout) after its own edge; the other ranks print their
// own node's part (in case rank 0 is the one missing) and give rank 0 that
// long and one timeout more before they end the job themselves.
[[noreturn]] void abort_out_of_step(const cluster::MpiMonitor& monitor, double timeout_s) {
  if (monitor.rank() != 0) {
    if (const auto& own = monitor.last_node_report()) {
      cluster::ClusterReport part;
      part.window = "command (this node's part: the job's ranks fell out of step)";
      part.nodes = {*own};
      std::cerr << cluster::to_text(part) << std::flush;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(kSettleTimeoutS + 2 * timeout_s));
  }
  std::cerr << fmt::format("joule measure --mpi: rank {} ends the job: some rank did not reach the window's end "
                           "within {:g} s\n",
                           monitor.rank(), timeout_s);
  std::cout.flush();  // _Exit and MPI_Abort flush nothing
  std::cerr.flush();
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

}  // namespace

// Every rank runs the command; each node's lowest rank measures the node's
// devices (those its ranks may use); rank 0 writes the job's report (per
// node, per device, total).
int run_measure_mpi(const CommonOptions& common, const MeasureOptions& options,
                    const std::optional<carbon::Basis>& basis) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    throw Error("--mpi: MPI_Init failed (is this running under mpirun or srun?)");
  }
  int exit_status = 0;
  {
    const auto open_node_monitor = [&](const std::string& node, const std::optional<std::vector<std::string>>& job_gpus) {
      Devices devices = common.open_devices();
      if (job_gpus && common.gpus.empty()) cluster::keep_job_gpus(devices, *job_gpus);  // --gpus wins
      auto monitor = std::make_unique<Monitor>(devices, monitor_options_of(options));
      if (!options.timeline_path.empty()) {
        monitor->timeline().stream_csv_to(cluster::node_file_path(options.timeline_path, node));
      }
      return monitor;
    };
    cluster::MpiMonitor cluster_monitor(MPI_COMM_WORLD, open_node_monitor, {options.mpi_timeout_s});
    std::optional<OutputFile> output;
    if (cluster_monitor.rank() == 0 && !options.output_path.empty()) output.emplace(options.output_path);
    try {
      cluster_monitor.begin_window("command");
    } catch (const Error& e) {
      std::cerr << "joule measure --mpi: " << e.what() << '\n';
      abort_out_of_step(cluster_monitor, options.mpi_timeout_s);
    }
    ChildProcess child = ChildProcess::spawn(options.command);
    exit_status = exit_status_of(child, options.kill_grace_s);
    const auto report = cluster_monitor.end_window("command", kSettleTimeoutS);
    if (report) {
      nlohmann::json json = cluster::to_json(*report);
      json["command"] = options.command;
      // The report names the command, as joule measure's does on one node.
      cluster::ClusterReport shown = *report;
      shown.window = fmt::format("{}", fmt::join(options.command, " "));
      std::string text = cluster::to_text(shown);
      if (basis) {
        // The job's total: of the nodes that reported (a missing node's energy is not in it).
        const carbon::Footprint footprint = carbon::footprint(*basis, report->total_energy_j());
        json["carbon"] = carbon_json(*basis, footprint);
        text += carbon_text(*basis, footprint);
        if (!report->missing_nodes.empty()) text += "joule: carbon and cost: of the nodes that reported only\n";
      }
      write_report(options.json ? json.dump(2) + "\n" : text, options.json, output);
    }
    if (cluster_monitor.timed_out()) abort_out_of_step(cluster_monitor, options.mpi_timeout_s);
  }
  MPI_Finalize();
  return exit_status;
}
#endif

int run_measure(const CommonOptions& common, const MeasureOptions& options) {
  if (options.command.empty()) {
    throw UsageError("measure: no command given (usage: joule measure [OPTIONS] -- CMD [ARGS...])");
  }
  // Carbon flags and the emissions file are checked before the command runs.
  const std::optional<carbon::Basis> basis = carbon_basis_of(options);
  if (!options.emissions_csv.empty()) carbon::check_emissions_csv(options.emissions_csv);
  if (options.mpi) {
    if (!options.emissions_csv.empty()) throw UsageError("--emissions-csv: not supported with --mpi yet");
#ifdef JOULE_HAVE_MPI
    return run_measure_mpi(common, options, basis);
#else
    throw UsageError(
        "--mpi: this joule was built without MPI; install an MPI (Debian: libopenmpi-dev) and build joule again "
        "(docs/install.md)");
#endif
  }
  std::optional<OutputFile> output;
  if (!options.output_path.empty()) output.emplace(options.output_path);

  const Devices devices = common.open_devices();
  Monitor monitor(devices, monitor_options_of(options));
  if (!options.timeline_path.empty()) {
    try {
      monitor.timeline().stream_csv_to(options.timeline_path);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }

  monitor.begin_window("command");
  ChildProcess child = ChildProcess::spawn(options.command);
  const int exit_status = exit_status_of(child, options.kill_grace_s);
  // The run's last instants are covered by the driver's power samples about
  // one sample period later: wait for them (the sampling thread reads them).
  Measurement measurement = monitor.end_window_settled("command");
  monitor.stop();
  // A driver call that hung within the settle timeout is only known once
  // stop() gives up on it: computed again, the report names what is missing.
  if (!measurement.settled) measurement = monitor.refresh(measurement);

  MeasureReport report = build_report(options.command, exit_status, devices, monitor, measurement);
  if (basis) {
    report.carbon_basis = basis;
    report.carbon = carbon::footprint(*basis, report.total_energy_j);
  }
  write_report(options.json ? to_json(report).dump(2) + "\n" : to_text(report), options.json, output);
  if (basis && !options.emissions_csv.empty()) {
    carbon::append_emissions_csv(options.emissions_csv, emissions_row(report, *basis));
  }
  return exit_status;
}

}  // namespace joule::cli
