// `joule report`: one self-contained HTML file with inline SVG plots of a
// sweep: time and energy against power limit, speed-up and energy against GPU
// count (log-log, with the fitted line), the energy-time Pareto front, and
// power timelines.
#pragma once

#include <string>
#include <vector>

#include "joule/analyze/sweep_analysis.h"

namespace joule {

std::string render_report(const std::string& title, const std::vector<SweepRun>& runs, const SweepAnalysis& analysis,
                          const std::vector<PowerPoint>& timelines);

}  // namespace joule
