// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>

#include <iostream>

#include "cli/commands.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/control/devices.h"
#include "joule/error.h"
#include "joule/sweep/sweep.h"

namespace joule::cli {

namespace {

// "runs.csv" -> "runs.nodes.csv": the per-node rows beside the runs.
std::string nodes_csv_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + ".nodes";
  return path.substr(0, dot) + ".nodes" + path.substr(dot);
}

void export_csvs(const std::string& store, const std::string& path) {
  export_sweep_csv(store, path);
  const std::string nodes = nodes_csv_path(path);
  const int rows = export_sweep_nodes_csv(store, nodes);
  std::cout << fmt::format("joule sweep: wrote {} (a row per run) and {} (a row per node of each run: {} rows) from {}\n",
                           path, nodes, rows, store);
  // The files hold what the store holds; a run whose stored numbers cannot
  // be used is named, as analyze and the report name it.
  for (const SweepRun& run : load_sweep_runs(store)) {
    if (run.damaged) std::cerr << fmt::format("joule sweep: run {} is {}\n", run.id, run.error);
  }
}

}  // namespace

int run_sweep_command(const CommonOptions& common, const SweepCommandOptions& o) {
  const SweepConfig config = SweepConfig::load(o.config_path);
  const std::string store = o.store_path.empty() ? config.store_path : o.store_path;
  if (!o.export_path.empty() && o.export_only) {
    export_csvs(store, o.export_path);
    return 0;
  }
  SweepOptions options;
  options.no_control = o.no_control;
  options.retry_failed = o.retry_failed;
  options.progress = isatty(STDERR_FILENO);
  options.store_override = o.store_path;
  options.kill_grace_s = o.kill_grace_s;  // else the config's
  options.discovery = common.discovery();  // across nodes: passed on to each node's joule measure
  const SweepPlan plan = plan_sweep(config, store, o.retry_failed);
  if (o.dry_run) {
    // The GPUs a real sweep would use: settings they cannot take are refused
    // now, as the sweep itself would refuse them (across nodes the GPUs are
    // the nodes', unknown here).
    if (!config.across_nodes()) check_grid_on_gpus(config, discover_devices(options.discovery).gpus);
    for (const SweepPoint& point : plan.to_run) {
      std::cout << fmt::format("{} repeat {}: {}\n", point.config_key(), point.repeat,
                               described_command(config, point, options, store, "{id}"));
    }
    std::cout << fmt::format("joule sweep: {} (dry run: nothing ran)\n", plan.describe(store));
    return 0;
  }
  std::cerr << fmt::format("joule sweep: {}\n", plan.describe(store));
  if (static_cast<long long>(plan.to_run.size()) > kConfirmRunsAbove && !o.yes) {
    throw UsageError(fmt::format("sweep: {} runs to run is more than {}: pass --yes to start them (each second a run "
                                 "takes adds {}; --dry-run lists them; a smaller grid or fewer repeats needs no --yes)",
                                 plan.to_run.size(), kConfirmRunsAbove, rough_duration(plan.to_run.size())));
  }
  const SweepSummary s = run_sweep(config, options);
  std::cout << fmt::format("joule sweep: {} runs in the grid; {} ran ({} failed), {} already in {}", s.total, s.ran,
                           s.failed, s.skipped, store);
  if (s.failed_kept > 0) {
    std::cout << fmt::format(" ({} of them failed before: kept, --retry-failed runs them again)", s.failed_kept);
  }
  if (s.simulated) std::cout << "; on SIMULATED GPUs: the energies are joule's model, not measurements";
  std::cout << '\n';
  if (s.stopped_by_signal != 0) {
    const char* name = sigabbrev_np(s.stopped_by_signal);
    std::cerr << fmt::format("joule sweep: stopped by {}: the run going is recorded as interrupted and GPU settings "
                             "are restored; the same command resumes the sweep\n",
                             name ? std::string("SIG") + name : "signal " + std::to_string(s.stopped_by_signal));
    return 128 + s.stopped_by_signal;
  }
  if (!o.export_path.empty()) export_csvs(store, o.export_path);
  // 1 while any run of the grid has not succeeded, failures kept from before included.
  return s.failed + s.failed_kept > 0 ? 1 : 0;
}

}  // namespace joule::cli
