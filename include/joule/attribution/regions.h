// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Marks when the regions of a training step run, on a Monitor's clock, as
// the exclusive intervals attribute() fits. A region begun inside another
// pauses it until it ends, so an outer region's time is its own work only
// (a phase around modules, a block around a layer) and regions nest freely.
//
// begin()/end() take host instants: the optional synchronize (a CUDA device
// synchronise, as MonitorOptions::synchronize) makes them the GPU's too, at
// the cost of a sync per edge. begin_at()/end_at() take instants measured
// elsewhere (CUDA events on the GPU's clock, mapped to the monitor's; see
// joule.torch's GPU clock), in the order they happened. One recorder per
// training thread: it takes no lock.
//
// Concurrent regions (work on another stream beside the step: a DDP
// all-reduce) are recorded apart from the nesting: begin_concurrent_at/
// end_concurrent_at neither pause nor resume nested regions, may come in any
// order relative to the nested edges and to each other (a completion is
// seen late), and several calls of one region may be open at once (DDP's
// buckets). An end closes the earliest open call of its region; it may not
// precede it. Which call an end closes does not change the time the region
// ran (the time any of its calls ran), which is what attribute() fits.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "joule/attribution/attribution.h"
#include "joule/clock.h"

namespace joule::attribution {

class RegionRecorder {
 public:
  explicit RegionRecorder(std::shared_ptr<const Clock> clock, std::function<void()> synchronize = {});

  // end must name the innermost open region; UsageError otherwise.
  void begin(const std::string& name);
  void end(const std::string& name);
  // The same at time_s on the recorder's clock; an edge may not precede the
  // one before it (UsageError), nor be non-finite.
  void begin_at(const std::string& name, double time_s);
  void end_at(const std::string& name, double time_s);
  // A concurrent region's call (see above); a name is concurrent or nested,
  // not both (UsageError).
  void begin_concurrent_at(const std::string& name, double time_s);
  void end_concurrent_at(const std::string& name, double time_s);
  // The same now (after the synchronize, as begin()).
  void begin_concurrent(const std::string& name) { begin_concurrent_at(name, edge_now()); }
  void end_concurrent(const std::string& name) { end_concurrent_at(name, edge_now()); }
  bool is_concurrent(std::size_t region) const { return concurrent_.at(region); }

  // The clock its edges are on (the monitor's).
  double clock_s() const { return clock_->now_s(); }

  // Regions in order of first use (the indices of RegionInterval::region).
  const std::vector<std::string>& names() const { return names_; }
  // The ended intervals that overlap [begin_s, end_s], cut to it, in order of
  // beginning, the concurrent ones marked so; a piece cut at begin_s is a
  // resumed call (counted in the window it began in).
  std::vector<RegionInterval> intervals_within(double begin_s, double end_s) const;
  std::size_t open_regions() const { return open_.size(); }  // nested
  std::size_t open_concurrent_calls() const;
  // Forgets the intervals that ended before time_s (a long run, window by window).
  void forget_before(double time_s);

 private:
  struct Open {
    std::size_t region;
    double since_s;     // of the piece running now
    bool emitted;       // a piece of this call was recorded: later ones are resumed
  };
  double edge_now();
  void check_edge(const std::string& name, double time_s) const;
  void close_piece(Open& open, double now_s);
  // The region's index, made at its first use; a name keeps its kind.
  std::size_t region_of(const std::string& name, bool concurrent);

  std::shared_ptr<const Clock> clock_;
  std::function<void()> synchronize_;
  std::vector<std::string> names_;
  std::vector<bool> concurrent_;  // per region
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<Open> open_;                // innermost last
  double last_edge_s_ = -std::numeric_limits<double>::infinity();  // of the nested edges
  std::vector<RegionInterval> intervals_;  // ended pieces, in order of their end (and of their begin)
  std::vector<std::multiset<double>> open_calls_;      // per region, the beginnings of its open concurrent calls
  std::vector<RegionInterval> concurrent_intervals_;  // ended concurrent calls, in order of their end edge
};

}  // namespace joule::attribution
