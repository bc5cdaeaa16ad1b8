// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A sweep's runs across nodes: the launcher's command line (mpirun or srun
// around `joule measure --mpi` on every rank), the environment each node's
// ranks get, and the run's record from the job's report.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "joule/cluster/node_report.h"
#include "joule/common/child_process.h"
#include "joule/control/devices.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"
#include "sweep/run_parts.h"

extern char** environ;

namespace joule {

namespace {

// "0,1,...,count-1": the GPUs each node's ranks use (the first, as on one machine).
std::string first_gpus(int count) {
  std::string list;
  for (int i = 0; i < count; ++i) list += (i ? "," : "") + std::to_string(i);
  return list;
}

std::vector<std::string> measure_options_of(const DiscoveryOptions& discovery) {
  std::vector<std::string> out;
  if (discovery.backend == GpuBackend::kSim) out.insert(out.end(), {"--backend", "sim"});
  if (discovery.backend == GpuBackend::kNvml) out.insert(out.end(), {"--backend", "nvml"});
  if (discovery.backend == GpuBackend::kRocm) out.insert(out.end(), {"--backend", "rocm"});
  if (!discovery.sim_spec.empty()) out.insert(out.end(), {"--sim", discovery.sim_spec});
  return out;
}

// The variables that give a node's ranks their GPUs (the first
// ranks_per_node, as --gpus 0,..,K-1 picks them), set as a run on one machine
// gets them (visible_devices_env): CUDA_VISIBLE_DEVICES for NVIDIA GPUs,
// HIP_VISIBLE_DEVICES for AMD ones, each numbered by its vendor's runtime.
// The nodes are taken to be like the one the sweep runs on, whose GPUs say
// which vendors' variables to set. Where this machine has too few GPUs to go
// by (a login node), one vendor's: HIP_VISIBLE_DEVICES where its GPUs (or the
// sweep's --backend) are AMD alone, else CUDA_VISIBLE_DEVICES.
std::vector<std::pair<std::string, std::string>> node_visible_env(const DiscoveryOptions& discovery,
                                                                  int ranks_per_node) {
  DiscoveryOptions here = discovery;
  here.auto_fallback = AutoFallback::kNoGpus;  // a login node: no GPU, not simulated ones
  Devices node;
  try {
    node = discover_devices(here);
  } catch (const std::exception&) {
    // No GPU here to go by (the backend's library missing on a login node).
  }
  const std::size_t used = static_cast<std::size_t>(std::max(1, ranks_per_node));
  if (node.gpus.size() >= used) {
    return visible_devices_env(node, {node.gpus.begin(), node.gpus.begin() + static_cast<std::ptrdiff_t>(used)});
  }
  const bool amd_only = node.gpus.empty() ? discovery.backend == GpuBackend::kRocm
                                          : std::all_of(node.gpus.begin(), node.gpus.end(),
                                                        [](const auto& gpu) { return is_amd_gpu(*gpu); });
  return {{amd_only ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES", first_gpus(ranks_per_node)}};
}

// What the sweep sets in the launcher's environment for a run across nodes
// (mpirun forwards each with -x; srun passes the whole environment on).
std::vector<std::pair<std::string, std::string>> launcher_env(const SweepOptions& options, const NodeLayout& layout,
                                                              const std::string& counts_file) {
  std::vector<std::pair<std::string, std::string>> env = {{"JOULE_REPORT_FILE", counts_file}};
  for (auto& variable : node_visible_env(options.discovery, layout.ranks_per_node)) env.push_back(std::move(variable));
  if (!options.discovery.nvml_library.empty()) env.emplace_back("JOULE_NVML_LIBRARY", options.discovery.nvml_library);
  if (!options.discovery.rocm_library.empty()) env.emplace_back("JOULE_ROCM_SMI_LIBRARY", options.discovery.rocm_library);
  if (!options.discovery.powercap_root.empty()) env.emplace_back("JOULE_POWERCAP_ROOT", options.discovery.powercap_root);
  return env;
}

// The job's report that `joule measure --mpi` wrote (rank 0), into the run's
// totals and its node rows. Status: ok only with every node measured and
// the command's exit status 0.
void read_cluster_report(const nlohmann::json& report, int exit_code, sweep::RunRecord& record,
                         const std::string& where) {
  if (!report.is_object() || !report.contains("nodes") || !report["nodes"].is_array() ||
      !report.contains("missing_nodes") || !report["missing_nodes"].is_array()) {
    throw Error(fmt::format("{}: not a report of joule measure --mpi (no 'nodes' and 'missing_nodes' lists)", where));
  }
  std::vector<std::string> notes, short_nodes;
  record.elapsed_s = 0;
  record.gpu_energy_j = record.cpu_energy_j = record.dram_energy_j = 0;
  for (const auto& json : report["nodes"]) {
    cluster::NodeReport node;
    try {
      node = cluster::node_report_from_json(json);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
    sweep::NodeRecord row;
    row.node = node.node;
    for (const int rank : node.ranks) row.ranks += (row.ranks.empty() ? "" : ",") + std::to_string(rank);
    row.elapsed_s = node.elapsed_s;
    row.gpu_energy_j = node.energy_j("gpu");
    row.cpu_energy_j = node.energy_j("cpu_package");
    row.dram_energy_j = node.energy_j("dram");
    row.gpus = static_cast<int>(
        std::count_if(node.devices.begin(), node.devices.end(), [](const auto& d) { return d.kind == "gpu"; }));
    row.warnings = fmt::format("{}", fmt::join(node.warnings, "; "));
    for (const auto& d : node.devices) {
      if (d.kind == "gpu") record.devices += fmt::format("{}{}: {}", record.devices.empty() ? "" : ", ", node.node, d.name);
    }
    for (const auto& w : node.warnings) notes.push_back(fmt::format("node {}: {}", row.node, w));
    if (node.devices_failed) short_nodes.push_back(row.node);
    record.elapsed_s = std::max(record.elapsed_s, row.elapsed_s);
    record.gpu_energy_j += row.gpu_energy_j;
    record.cpu_energy_j += row.cpu_energy_j;
    record.dram_energy_j += row.dram_energy_j;
    record.node_rows.push_back(std::move(row));
  }
  std::vector<std::string> missing;
  for (const auto& m : report["missing_nodes"]) {
    if (!m.is_string()) throw Error(fmt::format("{}: 'missing_nodes' holds a {}, not a text", where, m.type_name()));
    missing.push_back(m.get<std::string>());
  }
  const double total_j = record.gpu_energy_j + record.cpu_energy_j + record.dram_energy_j;
  record.avg_power_w = record.elapsed_s > 0 ? total_j / record.elapsed_s : 0;
  std::vector<std::string> problems;
  for (const auto& m : missing) problems.push_back("node missing: " + m);
  for (const auto& n : short_nodes) {
    problems.push_back(fmt::format("node {} lost a device inside the window: its energy stops there", n));
  }
  if (missing.empty() && static_cast<int>(record.node_rows.size()) != record.nodes) {
    notes.push_back(fmt::format("launched for {} node{}, the ranks ran on {}", record.nodes,
                                record.nodes == 1 ? "" : "s", record.node_rows.size()));
  }
  // A job that lost a node usually fails too (joule measure --mpi ends it
  // with MPI_Abort once a node is missing): failed wins over partial.
  record.status = exit_code != 0 ? "failed" : missing.empty() && short_nodes.empty() ? "ok" : "partial";
  if (!missing.empty()) {
    problems.push_back(fmt::format("the totals cover {} of {} nodes", record.node_rows.size(),
                                   record.node_rows.size() + missing.size()));
  }
  problems.insert(problems.end(), notes.begin(), notes.end());
  record.error = fmt::format("{}", fmt::join(problems, "; "));
}

}  // namespace

std::vector<std::string> cluster_run_argv(const SweepConfig& config, const SweepPoint& point,
                                          const ClusterLaunch& launch) {
  const NodeLayout layout = node_layout(config, point);
  std::vector<std::string> argv;
  if (config.launcher == "srun") {
    argv = {"srun", "--nodes", std::to_string(layout.nodes), "--ntasks", std::to_string(layout.gpus),
            "--ntasks-per-node", std::to_string(layout.ranks_per_node)};
  } else if (config.launcher == "mpirun") {
    argv = {"mpirun", "-np", std::to_string(layout.gpus), "--map-by",
            fmt::format("ppr:{}:node", layout.ranks_per_node)};
    if (launch.as_root) argv.push_back("--allow-run-as-root");
    std::vector<std::string> names = {"JOULE_REPORT_FILE", "CUDA_VISIBLE_DEVICES"};
    for (const auto& name : launch.forwarded_env) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const auto& name : names) {
      argv.push_back("-x");
      argv.push_back(name);
    }
  } else {
    throw UsageError(fmt::format("{}: runs across nodes need launcher mpirun or srun, not {}", config.path,
                                 config.launcher));
  }
  // The user's options last: Open MPI takes the last --map-by, so they may
  // replace joule's placement.
  argv.insert(argv.end(), config.launcher_options.begin(), config.launcher_options.end());
  argv.insert(argv.end(), {launch.joule_binary, "measure", "--mpi", "--json", "--output", launch.report_path,
                           "--timeline", launch.timeline_path, "--sample", "util"});
  if (config.launcher == "mpirun") argv.insert(argv.end(), {"--gpus", first_gpus(layout.ranks_per_node)});
  argv.insert(argv.end(), launch.measure_options.begin(), launch.measure_options.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", fill_command(config, point)});
  return argv;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& word : argv) {
    const bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                                "0123456789_-+=/.,:@%") == std::string::npos;
    std::string quoted = plain ? word : "'";
    if (!plain) {
      for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
    }
    out += (out.empty() ? "" : " ") + quoted;
  }
  return out;
}

ClusterLaunch cluster_launch_of(const SweepOptions& options, const std::string& store_path, const std::string& run_id) {
  ClusterLaunch launch;
  launch.joule_binary = options.joule_binary;
  if (launch.joule_binary.empty()) {
    std::error_code ec;
    launch.joule_binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw Error(fmt::format("joule sweep: cannot find its own binary (/proc/self/exe): {}", ec.message()));
  }
  launch.report_path = fmt::format("{}.run{}.json", absolute_path(store_path), run_id);
  launch.timeline_path = fmt::format("{}.run{}.timeline.csv", absolute_path(store_path), run_id);
  launch.measure_options = measure_options_of(options.discovery);
  // joule's own settings (JOULE_SIM, JOULE_NVML_LIBRARY, JOULE_RANKS_PER_NODE, ...) reach every rank.
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (entry.rfind("JOULE_", 0) == 0 && eq != std::string::npos) launch.forwarded_env.push_back(entry.substr(0, eq));
  }
  for (const auto& [name, value] : launcher_env(options, NodeLayout{}, "")) launch.forwarded_env.push_back(name);
  std::sort(launch.forwarded_env.begin(), launch.forwarded_env.end());
  launch.forwarded_env.erase(std::unique(launch.forwarded_env.begin(), launch.forwarded_env.end()),
                             launch.forwarded_env.end());
  launch.as_root = geteuid() == 0;
  return launch;
}

std::string described_command(const SweepConfig& config, const SweepPoint& point, const SweepOptions& options,
                              const std::string& store_path, const std::string& run_id) {
  if (!config.across_nodes()) return run_command(config, point);
  return shell_join(cluster_run_argv(config, point, cluster_launch_of(options, store_path, run_id)));
}

// One run across nodes: the launcher starts `joule measure --mpi` on every
// rank; rank 0 writes the job's report beside the store.
sweep::RunRecord run_across_nodes(const SweepConfig& config, const SweepPoint& point, const SweepOptions& options,
                                  const std::string& store_path, long long id, double kill_grace_s) {
  sweep::RunRecord record;
  const NodeLayout layout = node_layout(config, point);
  record.nodes = layout.nodes;
  record.backend = sweep_simulates(options) ? "sim" : "nodes";  // the nodes' own, their report's device names
  try {
    const ClusterLaunch launch = cluster_launch_of(options, store_path, std::to_string(id));
    const std::vector<std::string> argv = cluster_run_argv(config, point, launch);
    record.command = shell_join(argv);
    const std::string counts_file = fmt::format("{}.run{}.counts", absolute_path(store_path), id);
    std::remove(counts_file.c_str());
    std::remove(launch.report_path.c_str());
    if (stop_signal() != 0) throw Error("not started");  // stopped while the run was being set up
    ChildProcess child = ChildProcess::spawn(argv, launcher_env(options, layout, counts_file));
    const int exit_code = wait_for_run(child, kill_grace_s);
    record.exit_code = exit_code;
    std::ifstream in(launch.report_path);
    if (!in) {
      record.status = "failed";
      record.error = fmt::format(
          "no report from the run's ranks at {} ({} exited with status {}; rank 0 writes it: is the store's "
          "directory on a filesystem every node shares?)",
          launch.report_path, config.launcher, exit_code);
    } else {
      nlohmann::json report;
      try {
        report = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("the run's report {} is not JSON: {}", launch.report_path, e.what()));
      }
      read_cluster_report(report, exit_code, record, fmt::format("the run's report {}", launch.report_path));
      std::remove(launch.report_path.c_str());
      read_node_timelines(launch.timeline_path, record);
    }
    read_counts(counts_file, record);
    std::remove(counts_file.c_str());
  } catch (const std::exception& e) {
    record.status = "failed";
    record.error = e.what();
  }
  note_stop(record);
  return record;
}

}  // namespace joule
