// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "attribution/checked_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "joule/error.h"

namespace joule::attribution {
namespace {

std::string describe(const RegionInterval& v, std::span<const std::string> names) {
  return fmt::format("region '{}' [{:.9f}, {:.9f}) s", names[v.region], v.begin_s, v.end_s);
}

void check_interval(const RegionInterval& v, std::size_t i, std::span<const std::string> names, double begin_s,
                    double end_s) {
  if (v.region >= names.size())
    throw UsageError(fmt::format(
        "attribution: interval {} names region {}, an unknown region (there are {} region names)", i, v.region,
        names.size()));
  if (!std::isfinite(v.begin_s) || !std::isfinite(v.end_s))
    throw UsageError(fmt::format("attribution: interval {} of region '{}' is not finite: [{}, {}] s", i,
                                 names[v.region], v.begin_s, v.end_s));
  if (v.end_s < v.begin_s)
    throw UsageError(fmt::format("attribution: interval {}, {}, ends before it begins", i, describe(v, names)));
  if (v.begin_s < begin_s || v.end_s > end_s)
    throw UsageError(fmt::format("attribution: interval {}, {}, lies outside the window [{:.9f}, {:.9f}] s", i,
                                 describe(v, names), begin_s, end_s));
}

bool by_beginning(const RegionInterval& a, const RegionInterval& b) {
  return a.begin_s != b.begin_s ? a.begin_s < b.begin_s : a.end_s < b.end_s;
}

// Each region's overlapping or touching calls as one interval (sorted input).
std::vector<RegionInterval> merged_per_region(std::vector<RegionInterval> sorted, std::size_t regions) {
  std::vector<std::optional<std::size_t>> last(regions);  // per region, its latest piece in out
  std::vector<RegionInterval> out;
  for (const RegionInterval& v : sorted) {
    std::optional<std::size_t>& at = last[v.region];
    if (at && v.begin_s <= out[*at].end_s) {
      out[*at].end_s = std::max(out[*at].end_s, v.end_s);
    } else {
      at = out.size();
      out.push_back(v);
    }
  }
  return out;  // still sorted by beginning: a merge only moves ends
}

}  // namespace

void check_arguments(double begin_s, double end_s, double energy_j, const AttributionOptions& o) {
  if (!std::isfinite(begin_s) || !std::isfinite(end_s) || !(end_s > begin_s))
    throw UsageError(fmt::format("attribution: the window [{}, {}] s is not a finite span that ends after it begins",
                                 begin_s, end_s));
  if (!std::isfinite(energy_j) || energy_j < 0.0)
    throw UsageError(
        fmt::format("attribution: the window's energy {} J is not a finite, non-negative number", energy_j));
  if (o.baseline_w && !(std::isfinite(*o.baseline_w) && *o.baseline_w >= 0.0))
    throw UsageError(fmt::format("attribution: baseline_w {} W is not a finite, non-negative power", *o.baseline_w));
  if (o.bootstrap_rounds < 0)
    throw UsageError(fmt::format("attribution: bootstrap_rounds {} is negative", o.bootstrap_rounds));
  if (!(o.confidence > 0.0 && o.confidence < 1.0))
    throw UsageError(fmt::format("attribution: confidence {} is outside (0, 1)", o.confidence));
  if (!(std::isfinite(o.block_s) && o.block_s > 0.0))
    throw UsageError(fmt::format("attribution: block_s {} s is not a positive duration", o.block_s));
  if (o.power_ceiling_w && !(std::isfinite(*o.power_ceiling_w) && *o.power_ceiling_w > 0.0))
    throw UsageError(fmt::format("attribution: power_ceiling_w {} W is not a finite, positive power",
                                 *o.power_ceiling_w));
}

Layout checked_intervals(std::span<const RegionInterval> intervals, std::span<const std::string> names, double begin_s,
                         double end_s) {
  Layout layout;
  layout.is_concurrent.assign(names.size(), false);
  std::vector<std::optional<std::size_t>> first(names.size());  // per region, its first interval
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    const RegionInterval& v = intervals[i];
    check_interval(v, i, names, begin_s, end_s);
    if (!first[v.region]) {
      first[v.region] = i;
      layout.is_concurrent[v.region] = v.concurrent;
    } else if (layout.is_concurrent[v.region] != v.concurrent) {
      throw UsageError(fmt::format("attribution: region '{}' is concurrent in interval {} and not in interval {}: a "
                                   "region is one or the other",
                                   names[v.region], v.concurrent ? i : *first[v.region],
                                   v.concurrent ? *first[v.region] : i));
    }
    (v.concurrent ? layout.concurrent : layout.exclusive).push_back(v);
  }
  std::sort(layout.exclusive.begin(), layout.exclusive.end(), by_beginning);
  const std::vector<RegionInterval>& sorted = layout.exclusive;
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].begin_s < sorted[i - 1].end_s)
      throw UsageError(
          fmt::format("attribution: intervals overlap: {} and {} (leaf regions must be exclusive: split "
                      "nested ones into their own parts, or mark work on another stream concurrent)",
                      describe(sorted[i - 1], names), describe(sorted[i], names)));
  }
  std::sort(layout.concurrent.begin(), layout.concurrent.end(), by_beginning);
  layout.concurrent = merged_per_region(std::move(layout.concurrent), names.size());
  return layout;
}

std::vector<std::vector<std::size_t>> checked_region_groups(const std::vector<RegionGroup>& groups,
                                                            std::span<const std::string> names,
                                                            const std::string& kind) {
  std::vector<std::vector<std::size_t>> members;
  for (const RegionGroup& group : groups) {
    if (group.name.empty()) throw UsageError(fmt::format("attribution: a {} has no name", kind));
    const auto same_name = [&](const RegionGroup& other) { return other.name == group.name; };
    if (std::count_if(groups.begin(), groups.end(), same_name) > 1)
      throw UsageError(fmt::format("attribution: two {}s are named '{}'", kind, group.name));
    if (group.regions.empty()) throw UsageError(fmt::format("attribution: {} '{}' names no region", kind, group.name));
    std::vector<std::size_t> indices;
    for (const std::string& region : group.regions) {
      const auto at = std::find(names.begin(), names.end(), region);
      if (at == names.end())
        throw UsageError(fmt::format("attribution: {} '{}' names region '{}', which is not among the window's regions",
                                     kind, group.name, region));
      const auto index = static_cast<std::size_t>(at - names.begin());
      if (std::find(indices.begin(), indices.end(), index) != indices.end())
        throw UsageError(fmt::format("attribution: {} '{}' names region '{}' twice", kind, group.name, region));
      indices.push_back(index);
    }
    members.push_back(std::move(indices));
  }
  return members;
}

Unknowns checked_same_power(const std::vector<RegionGroup>& groups, std::span<const std::string> names,
                            const Layout& layout) {
  constexpr std::size_t kOwn = static_cast<std::size_t>(-1);
  const std::vector<std::vector<std::size_t>> members = checked_region_groups(groups, names, "same-power group");
  std::vector<std::size_t> group_of(names.size(), kOwn);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const std::size_t r : members[g]) {
      if (group_of[r] != kOwn)
        throw UsageError(fmt::format("attribution: region '{}' is in same-power groups '{}' and '{}': one at most",
                                     names[r], groups[group_of[r]].name, groups[g].name));
      if (layout.is_concurrent[r])
        throw UsageError(fmt::format("attribution: same-power group '{}' names region '{}', which is concurrent: it "
                                     "adds power to what runs with it and has no power of its own to share",
                                     groups[g].name, names[r]));
      group_of[r] = g;
    }
  }
  // A group's unknown is numbered at its first region; idle (the last
  // column) is never in a group, so it stays the last unknown.
  Unknowns unknowns;
  std::vector<std::size_t> unknown_of_group(groups.size(), kOwn);
  for (std::size_t column = 0; column <= names.size(); ++column) {
    const std::size_t g = column < names.size() ? group_of[column] : kOwn;
    if (g == kOwn) {
      unknowns.of_column.push_back(unknowns.count++);
    } else {
      if (unknown_of_group[g] == kOwn) unknown_of_group[g] = unknowns.count++;
      unknowns.of_column.push_back(unknown_of_group[g]);
    }
  }
  return unknowns;
}

std::vector<std::size_t> checked_order(std::span<const PowerObservation> observations, double begin_s, double end_s) {
  if (observations.empty()) throw UsageError("attribution: no power observations in the window");
  for (std::size_t i = 0; i < observations.size(); ++i) {
    const PowerObservation& o = observations[i];
    const auto what = [&] {
      return fmt::format("observation {} ([{:.9f}, {:.9f}] s, {} W, weight {})", i, o.begin_s, o.end_s, o.power_w,
                         o.weight);
    };
    if (!std::isfinite(o.begin_s) || !std::isfinite(o.end_s) || !std::isfinite(o.power_w) || !std::isfinite(o.weight))
      throw UsageError(fmt::format("attribution: {} is not finite", what()));
    if (!(o.weight > 0.0)) throw UsageError(fmt::format("attribution: {} has a weight that is not positive", what()));
    if (o.end_s < o.begin_s) throw UsageError(fmt::format("attribution: {} ends before it begins", what()));
    if (o.begin_s < begin_s || o.end_s > end_s)
      throw UsageError(
          fmt::format("attribution: {} lies outside the window [{:.9f}, {:.9f}] s", what(), begin_s, end_s));
  }
  std::vector<std::size_t> order(observations.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return observations[a].begin_s < observations[b].begin_s; });
  return order;
}

}  // namespace joule::attribution
