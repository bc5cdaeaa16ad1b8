// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The attribution's input checked and laid out for the fit (private to the
// attribution module): the options, the regions' intervals and the power
// observations, each refused with a UsageError that names what and where.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "joule/attribution/attribution.h"

namespace joule::attribution {

// The intervals of the fit: the exclusive ones sorted by beginning (they then
// also end in order, which the sweep relies on), and each concurrent region's
// calls merged into the time any of them ran (its column is whether it runs,
// not how many calls do), sorted by beginning.
struct Layout {
  std::vector<RegionInterval> exclusive;
  std::vector<RegionInterval> concurrent;
  std::vector<bool> is_concurrent;  // per region
};

// The window and the options: a finite window, energy and baseline, a
// confidence in (0, 1), a positive block.
void check_arguments(double begin_s, double end_s, double energy_j, const AttributionOptions& options);

// Every interval names a known region, is finite, ordered and inside the
// window; exclusive ones do not overlap; a region is concurrent in all its
// intervals or in none.
Layout checked_intervals(std::span<const RegionInterval> intervals, std::span<const std::string> names, double begin_s,
                         double end_s);

// Each group's regions as indices into names. UsageError naming the group
// as a `kind` ("total", "same-power group"): an empty or repeated name, no
// regions, a region named twice or one that names lacks.
std::vector<std::vector<std::size_t>> checked_region_groups(const std::vector<RegionGroup>& groups,
                                                            std::span<const std::string> names,
                                                            const std::string& kind);

// Per column of the fit (the regions, then idle) the unknown it is fitted
// with: the groups of same_power share one, every other column has its own;
// unknowns are numbered in the order of their first column (idle stays last).
// UsageError as checked_region_groups's, and for a region in two groups or a
// concurrent one.
struct Unknowns {
  std::vector<std::size_t> of_column;
  std::size_t count = 0;
};
Unknowns checked_same_power(const std::vector<RegionGroup>& groups, std::span<const std::string> names,
                            const Layout& layout);

// The observations' indices in order of beginning, after checking each
// (finite, a positive weight, inside the window).
std::vector<std::size_t> checked_order(std::span<const PowerObservation> observations, double begin_s, double end_s);

}  // namespace joule::attribution
