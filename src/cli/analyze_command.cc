// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "joule/common/output_file.h"
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
  std::optional<carbon::Basis> basis;
  const carbon::Settings carbon_settings = o.carbon.settings();
  if (carbon_settings.any()) {
    basis = carbon::resolve(carbon_settings);
  } else if (carbon_settings.pue != 1.0 || !carbon_settings.currency.empty() || carbon_settings.table_path) {
    throw UsageError("--pue, --currency and --carbon-table go with --carbon-region, --carbon-intensity or --price");
  }
  const auto runs = load_sweep_runs(o.store_path);
  const SweepAnalysis analysis = analyze_sweep(runs);
  const std::string html = render_report(o.title.empty() ? "joule sweep report: " + o.store_path : o.title, runs,
                                         analysis, load_power_timelines(o.store_path), basis);
  // Written beside and renamed when complete: a report that fails half-way
  // leaves no truncated page where a good one was.
  OutputFile out(o.output_path);
  out.stream() << html;
  out.commit();
  std::cout << fmt::format("joule report: wrote {} ({})\n", o.output_path, describe_counts(analysis.counts));
  return 0;
}

}  // namespace joule::cli
