// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule report`: one self-contained HTML file about a sweep. At the top a
// summary in plain words (the best configuration per objective and what it
// saves against the baseline); then the configurations as a sortable table;
// charts with error bars from the repeats: time and energy against each
// swept setting (power limit first, the baseline marked), speed-up and energy
// against GPU count with the fitted scaling, the energy-time Pareto front
// with its points labelled and the eta picks marked; power timelines per
// configuration with the run's power limit drawn; the fits and eta choices
// as tables. Runs whose configuration names a node (a grid key "node" or
// "host") get a section per node when there is more than one. Given a carbon
// basis (joule report --carbon-region/--carbon-intensity/--price), the
// configurations table adds each one's CO2e and cost per run.
#pragma once

#include <string>
#include <vector>

#include "joule/analyze/sweep_analysis.h"
#include "joule/carbon/carbon.h"

namespace joule {

std::string render_report(const std::string& title, const std::vector<SweepRun>& runs, const SweepAnalysis& analysis,
                          const std::vector<PowerPoint>& timelines,
                          const std::optional<carbon::Basis>& carbon = std::nullopt);

}  // namespace joule
