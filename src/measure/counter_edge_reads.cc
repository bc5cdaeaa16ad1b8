// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A fast counter (updates every few ms, cheap to read) read right after
// each window edge instead of on a grid: the runs of reads that place its
// updates, the edge's value from them, and the counter's restarts (epochs).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "counter_anchors_tuning.h"
#include "joule/error.h"
#include "joule/measure/counter_anchors.h"

namespace joule {

CounterAnchors::Lookup CounterAnchors::edge_anchor_locked(const GpuState& g, double edge_s) const {
  // Taken for this edge alone: the value at the edge itself, no samples to add.
  Lookup result;
  const auto it = std::lower_bound(g.anchors.begin(), g.anchors.end(), edge_s,
                                   [](const Anchor& a, double t) { return a.step_s < t; });
  if (it != g.anchors.end() && it->step_s == edge_s) {
    result.before = CounterAnchor{it->step_s, it->counter_j, it->epoch};
    result.status = Status::kReady;
  }
  return result;
}

void CounterAnchors::plan_edge_reads_locked(GpuState& g, double now_s) {
  // Each new edge pays for its reads, or keeps its integral: when the ration
  // is spent, or when it was seen too late for its first update to be near.
  for (const double edge_s : g.waiting) {
    if (now_s - edge_s > kEdgeReadLatenessS) {
      edges_missed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    refill_tokens_locked(g, now_s);
    if (g.tokens < 1.0) {
      rationed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    g.tokens -= 1.0;
    g.read_edges.insert(std::upper_bound(g.read_edges.begin(), g.read_edges.end(), edge_s), edge_s);
  }
  g.waiting.clear();
  // A run of reads that places no two updates (the counter stopped moving,
  // or reads came too far apart) gives its edges up.
  if (g.previous && now_s - g.edge_scan_from_s > kEdgeScanPeriods * g.period_s + kEdgeReadLatenessS) {
    edges_missed_.fetch_add(g.read_edges.size(), std::memory_order_relaxed);
    g.read_edges.clear();
  }
  if (g.read_edges.empty()) {
    g.previous.reset();
    g.last_update.reset();
  }
}

void CounterAnchors::apply_edge_read_locked(GpuState& g, const Read& read, bool& made) {
  if (g.mode != Mode::kEdgeReads) return;
  const std::optional<Read> previous = g.previous;
  g.previous = read;
  learn_read_duration(g, read);
  // Lower than the read before, in this run or the last one: restarted
  // (driver reload, GPU reset). The run goes on from this read in a new
  // epoch; the anchors held keep theirs (windows before the restart stay
  // anchored: this GPU may have no samples to fall back on).
  const bool restarted = g.last_read_mj && read.counter_mj < *g.last_read_mj;
  g.last_read_mj = read.counter_mj;
  if (restarted) {
    start_epoch_locked(g);
    g.last_update.reset();
    g.edge_scan_from_s = read.begin_s;
    return;
  }
  if (!previous) {
    g.edge_scan_from_s = read.begin_s;
    return;
  }
  if (read.counter_mj == previous->counter_mj) return;
  // An update between two reads less than a period apart is the only one
  // between them, placed at the midpoint (as a search places a step): to
  // within half their spacing, 1/32 of a period when the reads come as
  // planned, up to half a period where the thread could not read that often.
  if (read.mid_s() - previous->mid_s() > kMaxPlacingSpacing * g.period_s) {
    g.last_update.reset();
    return;
  }
  const double update_s = 0.5 * (previous->mid_s() + read.mid_s());
  const double counter_j = static_cast<double>(read.counter_mj) / 1000.0;
  if (g.last_update) {
    // The edges before the previous update: its value, less the counter's
    // rate over the interval after it times the stretch from the edge.
    // The rate over the run's updates since the first after the edge: each
    // placed to within half the reads' spacing, so the span must be at least
    // the stretch back to the edge (a late edge waits for more updates), or
    // the rate's error, times that stretch, would outweigh the placement's.
    const auto [first_s, first_j] = *g.last_update;
    const double span_s = update_s - first_s;
    const double rate_w = (counter_j - first_j) / span_s;
    note_update_locked(g, PlacedUpdate{first_s, first_j, rate_w}, PlacedUpdate{update_s, counter_j, rate_w});
    std::size_t served = 0;
    for (; served < g.read_edges.size() && g.read_edges[served] <= first_s && first_s - g.read_edges[served] <= span_s;
         ++served) {
      const double edge_s = g.read_edges[served];
      const auto at = std::lower_bound(g.anchors.begin(), g.anchors.end(), edge_s,
                                       [](const Anchor& a, double t) { return a.step_s < t; });
      if (at == g.anchors.end() || at->step_s != edge_s) {
        g.anchors.insert(at, Anchor{0, edge_s, first_j - rate_w * (first_s - edge_s), g.epoch, kNoGrid});
        anchors_made_.fetch_add(1, std::memory_order_relaxed);
        made = true;
      }
    }
    g.read_edges.erase(g.read_edges.begin(), g.read_edges.begin() + static_cast<std::ptrdiff_t>(served));
    if (served > 0) g.edge_scan_from_s = read.begin_s;  // progress: the run may go on
    // Edges after the first update start from this one; earlier ones still
    // waiting (late) keep the first, for a longer span.
    if (!g.read_edges.empty() && g.read_edges.front() <= first_s) return;
  }
  g.last_update = {update_s, counter_j};
  if (g.read_edges.empty()) {
    g.previous.reset();
    g.last_update.reset();
  }
}

void CounterAnchors::start_epoch_locked(GpuState& g) {
  ++g.epoch;
  g.restarts.push_back(Restart{g.epoch, g.epoch_last, std::nullopt});
  g.epoch_last.reset();
  relocks_.fetch_add(1, std::memory_order_relaxed);
}

void CounterAnchors::note_update_locked(GpuState& g, const PlacedUpdate& first, const PlacedUpdate& latest) {
  if (!g.restarts.empty() && g.restarts.back().epoch == g.epoch && g.restarts.back().from) {
    // The stretch from the old epoch's last update to this epoch's first has
    // no counter value that spans it (the restart lies inside): taken at the
    // mean of the counter's rates on either side, only where short, as a
    // grid anchor is bridged to its edge by samples only this far. A load
    // change inside it is this bridge's error; beyond, windows across the
    // restart keep their samples.
    Restart& restart = g.restarts.back();
    const double gap_s = first.time_s - restart.from->time_s;
    if (gap_s <= options_.max_distance_s) {
      const double gap_j = 0.5 * (restart.from->rate_w + first.rate_w) * gap_s;
      restart.offset_j = restart.from->counter_j + gap_j - first.counter_j;
    }
    restart.from.reset();  // decided, on the epoch's first rate
  }
  g.epoch_last = latest;
}

std::optional<double> CounterAnchors::epoch_offset_j(const GpuState& g, int64_t from, int64_t to) {
  const int64_t low = std::min(from, to);
  const int64_t high = std::max(from, to);
  double offset_j = 0.0;
  int64_t bridged = 0;
  for (const Restart& restart : g.restarts) {
    if (restart.epoch <= low || restart.epoch > high) continue;
    if (!restart.offset_j) return std::nullopt;
    offset_j += *restart.offset_j;
    ++bridged;
  }
  if (bridged != high - low) return std::nullopt;  // a restart between them no longer held
  return from <= to ? offset_j : -offset_j;
}

}  // namespace joule
