#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
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
  options.progress = isatty(STDERR_FILENO);
  options.store_override = o.store_path;
  options.discovery = common.discovery();  // across nodes: passed on to each node's joule measure
  const SweepPlan plan = plan_sweep(config, store);
  if (o.dry_run) {
    for (const SweepPoint& point : plan.to_run) {
      std::cout << fmt::format("{} repeat {}: {}\n", point.config_key(), point.repeat,
                               described_command(config, point, options, store, "{id}"));
    }
    std::cout << fmt::format("joule sweep: {} (dry run: nothing ran)\n", plan.describe(store));
    return 0;
  }
  std::cerr << fmt::format("joule sweep: {}\n", plan.describe(store));
  const SweepSummary s = run_sweep(config, options);
  std::cout << fmt::format("joule sweep: {} runs in the grid; {} ran ({} failed), {} already in {}\n", s.total,
                           s.ran, s.failed, s.skipped, store);
  if (!o.export_path.empty()) export_csvs(store, o.export_path);
  return s.failed > 0 ? 1 : 0;
}

}  // namespace joule::cli
