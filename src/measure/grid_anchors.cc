// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Anchors on the grid: which step intervals an edge's reads go to, the
// reads made into anchors (and those taken before the grid was known, kept
// until it places them), and the anchors around a window's edges.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "counter_anchors_tuning.h"
#include "joule/error.h"
#include "joule/measure/counter_anchors.h"

namespace joule {

bool CounterAnchors::has_anchor(const GpuState& g, int64_t step) {
  const auto it = std::lower_bound(g.anchors.begin(), g.anchors.end(), step,
                                   [](const Anchor& a, int64_t s) { return a.step < s; });
  return it != g.anchors.end() && it->step == step;
}

void CounterAnchors::plan_edges_locked(GpuState& g, double now_s) {
  // Edges get no anchor while the grid is sought (that takes a few hundred
  // ms: their windows keep the samples, without waiting), nor when they
  // waited too long for a check of the grid.
  if (g.mode == Mode::kSearch) {
    g.waiting.clear();
    return;
  }
  g.waiting.erase(std::remove_if(g.waiting.begin(), g.waiting.end(),
                                 [&](double edge_s) { return now_s - edge_s > options_.max_distance_s; }),
                  g.waiting.end());
  // Reads whose interval passed unread (the thread was held up) are dropped:
  // the edge's other side, or the samples, stand in.
  g.planned.erase(std::remove_if(g.planned.begin(), g.planned.end(),
                                 [&](int64_t step) { return now_s > latest_read_s(g, step); }),
                  g.planned.end());
  std::size_t still_waiting = 0;
  int64_t last_before = std::numeric_limits<int64_t>::min();
  for (const double edge_s : g.waiting) {
    const auto before = step_at_or_before(g, edge_s);
    if (grid_error_s(g, before + 1) > options_.margin_s) {
      if (g.mode == Mode::kLocked) g.next_check_step = std::min(g.next_check_step, readable_from(g, now_s) + 1);
      g.waiting[still_waiting++] = edge_s;  // waits for a check of the grid
      continue;
    }
    if (before == last_before) continue;  // planned for an earlier edge in the same step
    last_before = before;
    // Both steps around the edge, the nearer first. When the ration runs
    // short, the farther side waits for a spare read: one stays in reserve for
    // the next edge's nearer side, so every edge keeps an anchor while edges
    // come no faster than the ration.
    const bool after_nearer = step_time(g, before + 1) - edge_s < edge_s - step_time(g, before);
    bool nearer = true;
    for (const int64_t step : {after_nearer ? before + 1 : before, after_nearer ? before : before + 1}) {
      const double tokens_needed = nearer ? 1.0 : 2.0;
      nearer = false;
      if (now_s > latest_read_s(g, step) || has_anchor(g, step) ||
          std::binary_search(g.planned.begin(), g.planned.end(), step)) {
        continue;
      }
      refill_tokens_locked(g, now_s);
      if (g.tokens < tokens_needed) {
        rationed_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      g.tokens -= 1.0;
      g.planned.insert(std::upper_bound(g.planned.begin(), g.planned.end(), step), step);
    }
  }
  g.waiting.resize(still_waiting);

}

void CounterAnchors::plan_every_step_locked(GpuState& g, double now_s) {
  if (g.mode != Mode::kLocked && g.mode != Mode::kCheck) return;  // a fast counter, or no grid yet
  // The next interval and the one after, so that a read is planned while
  // the one before it runs; a grid not known to the margin there waits for
  // its check (a read in the wrong interval would be discarded anyway).
  const int64_t first = readable_from(g, now_s);
  for (const int64_t step : {first, first + 1}) {
    if (grid_error_s(g, step + 1) > options_.margin_s) break;
    if (has_anchor(g, step) || std::binary_search(g.planned.begin(), g.planned.end(), step)) continue;
    g.planned.insert(std::upper_bound(g.planned.begin(), g.planned.end(), step), step);
  }
}

void CounterAnchors::apply_anchor_read_locked(GpuState& g, int64_t step, const Read& read, bool& made) {
  g.planned.erase(std::remove(g.planned.begin(), g.planned.end(), step), g.planned.end());
  if (g.mode == Mode::kOff || g.mode == Mode::kSearch) return;  // the grid was lost meanwhile
  learn_read_duration(g, read);
  const bool inside = read.begin_s >= step_time(g, step) + options_.margin_s - 1e-9 &&
                      read.end_s <= step_time(g, step + 1) - 0.5 * options_.margin_s;
  if (!inside) {  // held up: the read may have seen the next step
    held_up_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!insert_anchor_locked(g, step, static_cast<double>(read.counter_mj) / 1000.0)) {
    g.anchors.clear();
    start_search_locked(g, true);
    return;
  }
  made = true;
}

bool CounterAnchors::insert_anchor_locked(GpuState& g, int64_t step, double counter_j) {
  // In time order: the current grid's anchors carry its times (see
  // refresh_anchor_times_locked), anchors of earlier grids lie before them.
  const double step_s = step_time(g, step);
  auto after = std::upper_bound(g.anchors.begin(), g.anchors.end(), step_s,
                                [](double t, const Anchor& a) { return t < a.step_s; });
  const bool repeated = after != g.anchors.begin() && std::prev(after)->grid == g.grid &&
                        std::prev(after)->step == step && std::prev(after)->counter_j == counter_j;
  const bool consistent = repeated || ((after == g.anchors.begin() || std::prev(after)->counter_j < counter_j) &&
                                       (after == g.anchors.end() || after->counter_j > counter_j));
  if (!consistent) return false;
  if (!repeated) g.anchors.insert(after, Anchor{step, step_s, counter_j, g.epoch, g.grid});
  anchors_made_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void CounterAnchors::refresh_anchor_times_locked(GpuState& g) {
  // An anchor's step time comes from the grid as refined since it was read,
  // not as it stood then: a young grid is off by up to the margin, and a
  // window whose two edges took their step times from the grid at different
  // ages paid the difference in full (1-3% of a 0.4 s window on a loaded CPU,
  // where reads are slow and placements loose). On one grid both edges err
  // alike, and a constant error cancels out of a window.
  for (Anchor& a : g.anchors) {
    if (a.grid == g.grid) a.step_s = step_time(g, a.step);
  }
}

void CounterAnchors::want_early_reads_locked(GpuState& g, double edge_s) {
  // Only while the grid is unknown and no search of this GPU is reading;
  // never for a GPU whose windows cannot use a grid.
  if (g.mode != Mode::kSearch || g.previous || !g.grid_allowed) return;
  const auto near = [&](double t) { return std::abs(t - edge_s) <= kEarlyReadCoverS; };
  if (std::any_of(g.early_due_s.begin(), g.early_due_s.end(), near) ||
      std::any_of(g.unplaced.begin(), g.unplaced.end(), [&](const Read& r) { return near(r.begin_s); })) {
    return;
  }
  constexpr std::size_t kMaxDue = 16;
  for (const double due_s : {edge_s, edge_s + kEarlyReadSpacingS}) {
    if (g.early_due_s.size() >= kMaxDue) break;
    g.early_due_s.insert(std::upper_bound(g.early_due_s.begin(), g.early_due_s.end(), due_s), due_s);
  }
}

void CounterAnchors::keep_unplaced_locked(GpuState& g, const Read& read) {
  // A search reads back to back: of the reads that see one value, one every
  // 20 ms is enough for one of them to lie clear of the steps.
  if (!g.unplaced.empty() && g.unplaced.back().counter_mj == read.counter_mj &&
      read.begin_s - g.unplaced.back().begin_s < 0.02) {
    return;
  }
  if (g.unplaced.size() >= kMaxUnplacedReads) g.unplaced.erase(g.unplaced.begin());
  g.unplaced.push_back(read);
}

int CounterAnchors::place_unplaced_locked(GpuState& g, double now_s) {
  if (g.unplaced.empty() || (g.mode != Mode::kLocked && g.mode != Mode::kCheck)) return 0;
  int made = 0;
  std::size_t kept = 0;
  for (const Read& read : g.unplaced) {
    const int64_t step = step_at_or_before(g, read.begin_s);
    // Wait until the grid knows the step about as well as a read places one
    // (a young grid may be off by up to the margin: a read near a step could
    // be given the wrong one; its checks narrow that within seconds).
    const double error_s = std::max(grid_error_s(g, step), grid_error_s(g, step + 1));
    if (error_s > placement_error_s(g) + 0.001) {
      if (now_s - read.end_s < options_.history_s) g.unplaced[kept++] = read;
      continue;
    }
    // Clear of both steps, as an anchor read must be; else of no use.
    const bool inside = read.begin_s >= step_time(g, step) + options_.margin_s &&
                        read.end_s <= step_time(g, step + 1) - std::max(0.5 * options_.margin_s, error_s + 0.001);
    if (inside && insert_anchor_locked(g, step, static_cast<double>(read.counter_mj) / 1000.0)) ++made;
  }
  g.unplaced.resize(kept);
  return made;
}

void CounterAnchors::trim_locked(GpuState& g, double now_s) {
  const double keep_from_s = std::min(now_s - options_.history_s, keep_from_s_.load() - options_.max_distance_s);
  while (!g.anchors.empty() && g.anchors.front().step_s < keep_from_s) g.anchors.pop_front();
  // A restart is kept while anchors from before it are: windows may pair them.
  while (!g.restarts.empty() && (g.anchors.empty() || g.restarts.front().epoch <= g.anchors.front().epoch)) {
    g.restarts.pop_front();
  }
}

CounterAnchors::Lookup CounterAnchors::lookup_locked(const GpuState& g, double edge_s) const {
  Lookup result;
  const bool edge_reads = g.mode == Mode::kEdgeReads;
  // Reads behind a hung one will not come in time: what is there is all.
  if (stopped_ || read_hung()) return edge_reads ? edge_anchor_locked(g, edge_s) : anchors_around_locked(g, edge_s);
  // Pending: noted but not yet taken (the newest edges, at the back), or
  // waiting for the grid, or with a read planned for a step around it.
  const bool noted = g.mode != Mode::kOff && std::find(inbox_.rbegin(), inbox_.rend(), edge_s) != inbox_.rend();
  if (noted || std::binary_search(g.waiting.begin(), g.waiting.end(), edge_s)) {
    result.status = Status::kPending;
    result.pending_until_s = edge_s + g.period_s;
    return result;
  }
  if (edge_reads) {
    if (std::binary_search(g.read_edges.begin(), g.read_edges.end(), edge_s)) {
      result.status = Status::kPending;
      result.pending_until_s = edge_s + kEdgeReadLatenessS + 2 * g.period_s;
      return result;
    }
    return edge_anchor_locked(g, edge_s);
  }
  if (g.mode != Mode::kOff && g.mode != Mode::kSearch) {
    const auto before = step_at_or_before(g, edge_s);
    if (std::binary_search(g.planned.begin(), g.planned.end(), before) ||
        std::binary_search(g.planned.begin(), g.planned.end(), before + 1)) {
      result.status = Status::kPending;
      result.pending_until_s = step_time(g, before + 1);
      return result;
    }
  }
  return anchors_around_locked(g, edge_s);
}

CounterAnchors::Lookup CounterAnchors::anchors_around_locked(const GpuState& g, double edge_s) const {
  Lookup result;
  // The anchors on either side, whichever edges they were read for.
  const auto after = std::upper_bound(g.anchors.begin(), g.anchors.end(), edge_s,
                                      [](double t, const Anchor& a) { return t < a.step_s; });
  if (after != g.anchors.end() && after->step_s - edge_s <= options_.max_distance_s) {
    result.after = CounterAnchor{after->step_s, after->counter_j, after->epoch};
  }
  if (after != g.anchors.begin() && edge_s - std::prev(after)->step_s <= options_.max_distance_s) {
    result.before = CounterAnchor{std::prev(after)->step_s, std::prev(after)->counter_j, std::prev(after)->epoch};
  }
  result.status = result.before || result.after ? Status::kReady : Status::kNone;
  return result;
}

std::pair<CounterAnchors::Lookup, CounterAnchors::Lookup> CounterAnchors::window_locked(const GpuState& g,
                                                                                        double begin_s,
                                                                                        double end_s) const {
  std::pair<Lookup, Lookup> edges{lookup_locked(g, begin_s), lookup_locked(g, end_s)};
  // One epoch (always, on a counter read by grid: its anchors go at a restart).
  if (g.restarts.empty()) return edges;
  auto& [begin, end] = edges;
  if (begin.status != Status::kReady || end.status != Status::kReady) return edges;
  const auto epoch_of = [](const Lookup& lookup) { return lookup.before ? lookup.before->epoch : lookup.after->epoch; };
  const int64_t begin_epoch = epoch_of(begin);
  const std::optional<double> offset_j = epoch_offset_j(g, begin_epoch, epoch_of(end));
  if (!offset_j) {  // no bridge across the restart: the samples
    begin = Lookup{};
    end = Lookup{};
    return edges;
  }
  for (std::optional<CounterAnchor>* anchor : {&end.before, &end.after}) {
    if (!*anchor) continue;
    (*anchor)->counter_j += *offset_j;
    (*anchor)->epoch = begin_epoch;
  }
  return edges;
}

std::pair<CounterAnchors::Lookup, CounterAnchors::Lookup> CounterAnchors::window(std::size_t gpu, double begin_s,
                                                                                 double end_s) const {
  std::lock_guard lock(mutex_);
  return window_locked(gpus_.at(gpu), begin_s, end_s);
}

std::vector<CounterAnchor> CounterAnchors::anchors_within(std::size_t gpu, double begin_s, double end_s) const {
  std::lock_guard lock(mutex_);
  const GpuState& g = gpus_.at(gpu);
  std::vector<CounterAnchor> out;
  auto it = std::lower_bound(g.anchors.begin(), g.anchors.end(), begin_s,
                             [](const Anchor& a, double t) { return a.step_s < t; });
  for (; it != g.anchors.end() && it->step_s <= end_s; ++it) {
    if (!out.empty() && it->epoch != out.front().epoch) break;  // a restart: values from another origin
    out.push_back(CounterAnchor{it->step_s, it->counter_j, it->epoch});
  }
  return out;
}

void CounterAnchors::windows(double begin_s, double end_s, std::vector<std::pair<Lookup, Lookup>>& out) const {
  out.clear();
  std::lock_guard lock(mutex_);
  for (const GpuState& g : gpus_) out.push_back(window_locked(g, begin_s, end_s));
}

}  // namespace joule
