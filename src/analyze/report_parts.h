// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The sweep report's parts that its files share (private to analyze): the
// page and its tables in report.cc, the charts in report_charts.cc.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "joule/analyze/report.h"
#include "joule/analyze/sweep_analysis.h"

namespace joule {

// A setting's value as a number; none where it is not one.
std::optional<double> number(const std::map<std::string, std::string>& config, const std::string& key);

// Labels in natural order: runs of digits compare as numbers, so that
// "batch_size=64" comes before "batch_size=128" (legends, groups, tables).
bool natural_less(const std::string& l, const std::string& r);

// The scaling fits in their groups' natural order ("batch_size=64" before "batch_size=128").
std::vector<ScalingFit> sorted_scaling(const SweepAnalysis& a);

// The configuration every saving is measured against: the first
// configuration's baseline as the analysis defines it.
std::size_t reference_of(const SweepAnalysis& a);

// The eta values picking each configuration: "eta 0.25-1", "eta 0, 1".
std::map<std::size_t, std::string> eta_ranges(const SweepAnalysis& a);

// Time and energy against each swept setting, speed-up and energy against
// GPU count, then the Pareto front (figures for the page's chart grid).
std::string setting_and_pareto_charts(const SweepAnalysis& a);

// One small chart of power over time per configuration (its first
// successful run), at most kMaxTimelines.
std::string timeline_charts(const std::vector<SweepRun>& runs, const std::vector<PowerPoint>& timelines);

}  // namespace joule
