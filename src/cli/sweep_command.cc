#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "joule/sweep/sweep.h"

namespace joule::cli {

int run_sweep_command(const CommonOptions& common, const SweepCommandOptions& o) {
  const SweepConfig config = SweepConfig::load(o.config_path);
  const std::string store = o.store_path.empty() ? config.store_path : o.store_path;
  if (!o.export_path.empty() && o.export_only) {
    export_sweep_csv(store, o.export_path);
    std::cout << fmt::format("joule sweep: wrote {} from {}\n", o.export_path, store);
    return 0;
  }
  const SweepPlan plan = plan_sweep(config, store);
  if (o.dry_run) {
    for (const SweepPoint& point : plan.to_run) {
      std::cout << fmt::format("{} repeat {}: {}\n", point.config_key(), point.repeat, run_command(config, point));
    }
    std::cout << fmt::format("joule sweep: {} (dry run: nothing ran)\n", plan.describe(store));
    return 0;
  }
  std::cerr << fmt::format("joule sweep: {}\n", plan.describe(store));
  SweepOptions options;
  options.no_control = o.no_control;
  options.progress = isatty(STDERR_FILENO);
  options.store_override = o.store_path;
  options.discovery = common.discovery();
  const SweepSummary s = run_sweep(config, options);
  std::cout << fmt::format("joule sweep: {} runs in the grid; {} ran ({} failed), {} already in {}\n", s.total, s.ran,
                           s.failed, s.skipped, store);
  if (!o.export_path.empty()) {
    export_sweep_csv(store, o.export_path);
    std::cout << fmt::format("joule sweep: wrote {}\n", o.export_path);
  }
  return s.failed > 0 ? 1 : 0;
}

}  // namespace joule::cli
