// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Regions reported together as one (AttributionOptions::totals: a module's
// forward and its backward): their energies added, and the sum's interval
// over the same bootstrap rounds as the parts'. Adding the parts' intervals
// would not give it: the parts' errors are correlated (they share the
// step's energy), and two regions the data cannot tell apart have a sum they
// can.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "joule/attribution/attribution.h"

namespace joule::attribution {

// Each total's regions as indices into names. UsageError naming the total:
// an empty or repeated name, no regions, a region named twice or one that
// names lacks.
std::vector<std::vector<std::size_t>> checked_totals(const std::vector<RegionTotal>& totals,
                                                     std::span<const std::string> names);

// The totals of a's regions (members from checked_totals): energies, GPU
// times and shares added, calls the most of its parts', the power the mean
// over their time; resolved where every part is. The interval is the central
// `confidence` of each round's sum, rounds[r][k] being region r's energy in
// round k (NaN where that round did not determine it; empty: no intervals).
std::vector<RegionEnergy> sum_regions(const Attribution& a, const std::vector<RegionTotal>& totals,
                                      const std::vector<std::vector<std::size_t>>& members,
                                      const std::vector<std::vector<double>>& rounds, double confidence);

}  // namespace joule::attribution
