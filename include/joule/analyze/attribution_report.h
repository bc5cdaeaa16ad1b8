// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The page of a window's per-region attribution (docs/attribution.md): per
// GPU, each region's share of the window's time beside its share of the
// energy (so a region that runs long at low power, or briefly at high power,
// shows where it moves), and the sortable table behind it, in the style of
// the sweep report.
#pragma once

#include <string>
#include <vector>

#include "joule/attribution/attribution.h"

namespace joule {

// gpu_labels: one per attribution ("GPU 0 (NVIDIA H100)"); empty: numbered.
std::string attribution_page(const std::string& title, const std::vector<attribution::Attribution>& gpus,
                             const std::vector<std::string>& gpu_labels = {});

}  // namespace joule
