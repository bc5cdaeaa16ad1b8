// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/attribution/gpu_edge_clock.h"

#include <algorithm>
#include <limits>

#include "joule/error.h"

namespace joule::attribution {

GpuEdgeClock::GpuEdgeClock(RegionRecorder& recorder, GpuEvents& events, GpuEdgeClockOptions options)
    : recorder_(recorder), events_(events), options_(options) {
  if (options_.anchor_tries < 1 || options_.drain_every < 1) {
    throw UsageError("GpuEdgeClock: anchor_tries and drain_every must be at least 1");
  }
  anchor();
}

void GpuEdgeClock::edge(Kind kind, const std::string& name) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const GpuEvents::Event event = take_event();
  events_.record(event);
  pending_.push_back({kind, name, event});
  if (pending_.size() >= options_.drain_every) read_passed(false);
}

void GpuEdgeClock::end_and_begin(const std::string& ended, const std::string& begun) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const GpuEvents::Event event = take_event();
  events_.record(event);
  pending_.push_back({Kind::kEnd, ended, event});  // link() gives the second the first's instant
  pending_.push_back({Kind::kBegin, begun, event});
  if (pending_.size() >= options_.drain_every) read_passed(false);
}

template <typename Edges>
bool GpuEdgeClock::insert_end_before_last(Edges& edges, const std::string& name) {
  // Concurrent edges after it stay after it: their order does not matter.
  for (auto it = edges.end(); it != edges.begin();) {
    --it;
    if (concurrent(it->kind)) continue;
    auto end = *it;  // its event (pending) or its instant (read): both edges share it
    end.kind = Kind::kEnd;
    end.name = name;
    edges.insert(it, std::move(end));
    return true;
  }
  return false;
}

bool GpuEdgeClock::end_before_last(const std::string& name) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return insert_end_before_last(pending_, name) || insert_end_before_last(read_, name);
}

void GpuEdgeClock::flush() {
  const std::lock_guard<std::mutex> lock(mutex_);
  events_.synchronize();
  read_passed(true);
  anchor();
  std::vector<Read> read;
  read.swap(read_);
  for (const Read& r : read) hand_over(r);
}

void GpuEdgeClock::hand_over(const Read& read) {
  double at_s = to_clock_s(read.gpu_s);
  switch (read.kind) {
    case Kind::kBeginConcurrent:
      open_concurrent_[read.name].insert(at_s);
      recorder_.begin_concurrent_at(read.name, at_s);
      return;
    case Kind::kEndConcurrent: {
      // On the GPU an end follows its begin (the communication waits for the
      // stream it began on), but chained float milliseconds may put it a
      // hair before: never before the earliest open call's.
      std::multiset<double>& open = open_concurrent_[read.name];
      if (!open.empty()) {
        at_s = std::max(at_s, *open.begin());
        open.erase(open.begin());
      }
      recorder_.end_concurrent_at(read.name, at_s);
      return;
    }
    case Kind::kBegin:
    case Kind::kEnd:
      if (at_s < last_edge_s_) {  // the line between anchors put it a hair before the edge before
        ++reordered_edges_;
        at_s = last_edge_s_;
      }
      last_edge_s_ = at_s;
      if (read.kind == Kind::kBegin) {
        recorder_.begin_at(read.name, at_s);
      } else {
        recorder_.end_at(read.name, at_s);
      }
  }
}

void GpuEdgeClock::read_passed(bool wait) {
  // In order: all of them, or up to the first the GPU has not reached.
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    const std::optional<double> gpu_s = link(p.event, wait);
    if (!gpu_s) return;
    read_.push_back({p.kind, std::move(p.name), *gpu_s});
    pending_.pop_front();
  }
}

std::optional<double> GpuEdgeClock::link(GpuEvents::Event event, bool wait) {
  const auto [previous, previous_s] = *chain_;
  if (previous == event) return previous_s;  // two edges at one instant (end_before_last)
  // One call per event read: asking whether it was reached first would
  // double the runtime calls of a drain (bench/README.md section 16p).
  const std::optional<double> elapsed_s =
      wait ? std::optional<double>(events_.elapsed_s(previous, event)) : events_.elapsed_if_reached_s(previous, event);
  if (!elapsed_s) return std::nullopt;
  const double gpu_s = previous_s + *elapsed_s;
  pool_.push_back(previous);
  chain_ = {event, gpu_s};
  return gpu_s;
}

void GpuEdgeClock::anchor() {
  events_.synchronize();
  std::optional<GpuEvents::Event> best;
  double best_before_s = 0.0, best_after_s = std::numeric_limits<double>::infinity();
  for (int i = 0; i < options_.anchor_tries; ++i) {
    const GpuEvents::Event event = take_event();
    const double before_s = recorder_.clock_s();
    events_.record(event);
    events_.synchronize();
    const double after_s = recorder_.clock_s();
    if (after_s - before_s < best_after_s - best_before_s) {
      if (best) pool_.push_back(*best);
      best = event;
      best_before_s = before_s;
      best_after_s = after_s;
    } else {
      pool_.push_back(event);
    }
  }
  const double gpu_s = chain_ ? *link(*best, true) : 0.0;
  chain_ = {*best, gpu_s};
  anchor_gpu_s_.push_back(gpu_s);
  anchor_clock_s_.push_back(0.5 * (best_before_s + best_after_s));
  anchor_half_s_.push_back(0.5 * (best_after_s - best_before_s));
}

GpuEvents::Event GpuEdgeClock::take_event() {
  if (pool_.empty()) return events_.create();
  const GpuEvents::Event event = pool_.back();
  pool_.pop_back();
  return event;
}

double GpuEdgeClock::to_clock_s(double gpu_s) const {
  // The line through the anchors on either side (the last two past the end).
  if (anchor_gpu_s_.size() == 1) return anchor_clock_s_[0] + (gpu_s - anchor_gpu_s_[0]);
  const auto after = std::upper_bound(anchor_gpu_s_.begin(), anchor_gpu_s_.end(), gpu_s);
  const auto i = std::clamp<std::size_t>(static_cast<std::size_t>(after - anchor_gpu_s_.begin()), 1,
                                         anchor_gpu_s_.size() - 1);
  const double g0 = anchor_gpu_s_[i - 1], g1 = anchor_gpu_s_[i];
  const double h0 = anchor_clock_s_[i - 1], h1 = anchor_clock_s_[i];
  return h0 + (gpu_s - g0) * (g1 > g0 ? (h1 - h0) / (g1 - g0) : 1.0);
}

double GpuEdgeClock::uncertainty_s() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return *std::max_element(anchor_half_s_.begin(), anchor_half_s_.end());
}

double GpuEdgeClock::drift_ppm() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (anchor_gpu_s_.size() < 2) return 0.0;
  const double gpu_s = anchor_gpu_s_.back() - anchor_gpu_s_.front();
  const double clock_s = anchor_clock_s_.back() - anchor_clock_s_.front();
  return gpu_s > 0 ? 1e6 * (clock_s / gpu_s - 1.0) : 0.0;
}

}  // namespace joule::attribution
