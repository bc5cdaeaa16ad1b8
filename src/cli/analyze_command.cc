#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "joule/version.h"
#include "joule/analyze/report.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/error.h"

namespace joule::cli {

int run_analyze(const AnalyzeOptions& o) {
  const auto runs = load_sweep_runs(o.store_path);
  const SweepAnalysis analysis = analyze_sweep(runs, o.max_power_w);
  if (o.json) {
    nlohmann::json out = to_json(analysis);
    out["joule_version"] = version();
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << to_text(analysis);
  }
  return 0;
}

int run_report(const ReportOptions& o) {
  const auto runs = load_sweep_runs(o.store_path);
  const SweepAnalysis analysis = analyze_sweep(runs);
  const std::string html = render_report(o.title.empty() ? "joule sweep report: " + o.store_path : o.title, runs,
                                         analysis, load_power_timelines(o.store_path));
  std::ofstream out(o.output_path, std::ios::trunc);
  if (!out) throw UsageError(fmt::format("cannot write '{}': {}", o.output_path, std::strerror(errno)));
  out << html;
  out.flush();
  if (!out) throw Error(fmt::format("error writing '{}'", o.output_path));
  std::cout << fmt::format("joule report: wrote {} ({} runs)\n", o.output_path, runs.size());
  return 0;
}

}  // namespace joule::cli
