// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule simulate --html`: one self-contained HTML page of a simulation, as
// in the Zeus paper's figures: energy and time relative to Default per
// workload (at the end and over the whole sequence), cumulative regret per
// recurrence, and each policy's search path over (batch size, power limit).
#pragma once

#include <string>
#include <vector>

#include "joule/simulate/comparison.h"

namespace joule {

// `warning`, when given, is framed at the top where no reader misses it
// (made-up workloads: --synthetic).
std::string render_simulation_report(const std::string& title, const std::string& subtitle,
                                     const std::vector<SimulationSet>& sets, const std::string& warning = "");

}  // namespace joule
