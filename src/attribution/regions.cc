// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/regions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "joule/error.h"

namespace joule::attribution {

RegionRecorder::RegionRecorder(std::shared_ptr<const Clock> clock, std::function<void()> synchronize)
    : clock_(std::move(clock)), synchronize_(std::move(synchronize)) {
  if (!clock_) throw UsageError("RegionRecorder: no clock");
}

double RegionRecorder::edge_now() {
  if (synchronize_) synchronize_();
  return clock_->now_s();
}

void RegionRecorder::close_piece(Open& open, double now_s) {
  // Zero-length pieces (a region that only opened a nested one) carry nothing;
  // the first piece with time in it is the call, the others resume it.
  if (now_s <= open.since_s) return;
  intervals_.push_back({open.region, open.since_s, now_s, open.emitted});
  open.emitted = true;
}

void RegionRecorder::check_edge(const std::string& name, double time_s) const {
  if (!std::isfinite(time_s)) throw UsageError(fmt::format("region '{}': edge time {} is not finite", name, time_s));
  if (time_s < last_edge_s_) {
    throw UsageError(fmt::format("region '{}': edge at {:.9f} s precedes the edge before it ({:.9f} s)", name, time_s,
                                 last_edge_s_));
  }
}

void RegionRecorder::begin(const std::string& name) { begin_at(name, edge_now()); }

void RegionRecorder::end(const std::string& name) { end_at(name, edge_now()); }

std::size_t RegionRecorder::region_of(const std::string& name, bool concurrent) {
  auto [it, added] = index_.try_emplace(name, names_.size());
  if (added) {
    names_.push_back(name);
    concurrent_.push_back(concurrent);
    open_calls_.emplace_back();
  } else if (concurrent_[it->second] != concurrent) {
    throw UsageError(fmt::format("region '{}' was recorded as {} and now as {}: a region is one or the other", name,
                                 concurrent ? "nested" : "concurrent", concurrent ? "concurrent" : "nested"));
  }
  return it->second;
}

void RegionRecorder::begin_at(const std::string& name, double now_s) {
  check_edge(name, now_s);
  const std::size_t region = region_of(name, false);
  for (const Open& open : open_) {
    if (open.region == region) throw UsageError(fmt::format("region '{}' is already open", name));
  }
  if (!open_.empty()) close_piece(open_.back(), now_s);  // the outer region pauses
  open_.push_back({region, now_s, false});
  last_edge_s_ = now_s;
}

void RegionRecorder::begin_concurrent_at(const std::string& name, double time_s) {
  if (!std::isfinite(time_s))
    throw UsageError(fmt::format("concurrent region '{}': edge time {} is not finite", name, time_s));
  open_calls_[region_of(name, true)].insert(time_s);
}

void RegionRecorder::end_concurrent_at(const std::string& name, double time_s) {
  if (!std::isfinite(time_s))
    throw UsageError(fmt::format("concurrent region '{}': edge time {} is not finite", name, time_s));
  const auto it = index_.find(name);
  if (it == index_.end() || !concurrent_[it->second] || open_calls_[it->second].empty())
    throw UsageError(fmt::format("concurrent region '{}' has no open call to end", name));
  std::multiset<double>& open = open_calls_[it->second];
  const double begin_s = *open.begin();
  if (time_s < begin_s)
    throw UsageError(fmt::format("concurrent region '{}': end at {:.9f} s precedes its earliest open call's "
                                 "beginning ({:.9f} s)",
                                 name, time_s, begin_s));
  open.erase(open.begin());
  if (time_s > begin_s) concurrent_intervals_.push_back({it->second, begin_s, time_s, false, true});
}

std::size_t RegionRecorder::open_concurrent_calls() const {
  std::size_t n = 0;
  for (const auto& calls : open_calls_) n += calls.size();
  return n;
}

void RegionRecorder::end_at(const std::string& name, double now_s) {
  check_edge(name, now_s);
  if (open_.empty() || names_[open_.back().region] != name) {
    throw UsageError(open_.empty() ? fmt::format("region '{}' is not open", name)
                                   : fmt::format("region '{}' ended while '{}' inside it is open", name,
                                                 names_[open_.back().region]));
  }
  close_piece(open_.back(), now_s);
  open_.pop_back();
  if (!open_.empty()) open_.back().since_s = now_s;  // the outer region resumes
  last_edge_s_ = now_s;
}

namespace {

// Pieces end in order and never overlap: the first that ends after time_s.
std::vector<RegionInterval>::const_iterator first_ending_after(const std::vector<RegionInterval>& pieces,
                                                               double time_s) {
  return std::upper_bound(pieces.begin(), pieces.end(), time_s,
                          [](double t, const RegionInterval& v) { return t < v.end_s; });
}

// The piece of v within [begin_s, end_s), if any; cut at begin_s it resumes a call.
void add_cut(std::vector<RegionInterval>& out, RegionInterval v, double begin_s, double end_s) {
  if (v.begin_s < begin_s) {
    v.begin_s = begin_s;
    v.resumed = true;
  }
  v.end_s = std::min(v.end_s, end_s);
  if (v.end_s > v.begin_s) out.push_back(v);
}

}  // namespace

std::vector<RegionInterval> RegionRecorder::intervals_within(double begin_s, double end_s) const {
  std::vector<RegionInterval> out;
  auto it = first_ending_after(intervals_, begin_s);
  for (; it != intervals_.end() && it->begin_s < end_s; ++it) add_cut(out, *it, begin_s, end_s);
  if (concurrent_intervals_.empty()) return out;
  // Concurrent calls end in any order: a scan, then one merge by beginning.
  const auto nested = static_cast<std::ptrdiff_t>(out.size());
  for (const RegionInterval& v : concurrent_intervals_) {
    if (v.end_s > begin_s && v.begin_s < end_s) add_cut(out, v, begin_s, end_s);
  }
  const auto by_beginning = [](const RegionInterval& a, const RegionInterval& b) { return a.begin_s < b.begin_s; };
  std::sort(out.begin() + nested, out.end(), by_beginning);
  std::inplace_merge(out.begin(), out.begin() + nested, out.end(), by_beginning);
  return out;
}

void RegionRecorder::forget_before(double time_s) {
  intervals_.erase(intervals_.cbegin(), first_ending_after(intervals_, time_s));
  std::erase_if(concurrent_intervals_, [&](const RegionInterval& v) { return v.end_s <= time_s; });
}

}  // namespace joule::attribution
