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

void RegionRecorder::begin_at(const std::string& name, double now_s) {
  check_edge(name, now_s);
  auto [it, added] = index_.try_emplace(name, names_.size());
  if (added) names_.push_back(name);
  for (const Open& open : open_) {
    if (open.region == it->second) throw UsageError(fmt::format("region '{}' is already open", name));
  }
  if (!open_.empty()) close_piece(open_.back(), now_s);  // the outer region pauses
  open_.push_back({it->second, now_s, false});
  last_edge_s_ = now_s;
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

}  // namespace

std::vector<RegionInterval> RegionRecorder::intervals_within(double begin_s, double end_s) const {
  std::vector<RegionInterval> out;
  auto it = first_ending_after(intervals_, begin_s);
  for (; it != intervals_.end() && it->begin_s < end_s; ++it) {
    RegionInterval piece = *it;
    if (piece.begin_s < begin_s) {
      piece.begin_s = begin_s;
      piece.resumed = true;
    }
    piece.end_s = std::min(piece.end_s, end_s);
    if (piece.end_s > piece.begin_s) out.push_back(piece);
  }
  return out;
}

void RegionRecorder::forget_before(double time_s) {
  intervals_.erase(intervals_.cbegin(), first_ending_after(intervals_, time_s));
}

}  // namespace joule::attribution
