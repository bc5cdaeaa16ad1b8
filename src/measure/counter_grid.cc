// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Finding a GPU's energy-counter step grid (a search of back-to-back reads)
// and keeping it true (checks at predicted steps, a fit over the checks
// held, a new search after two misses): counter_anchors.h says why.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "counter_anchors_tuning.h"
#include "joule/error.h"
#include "joule/measure/counter_anchors.h"

namespace joule {

void CounterAnchors::start_search_locked(GpuState& g, bool again) {
  // The grid failed its checks: its anchors past the last step a check
  // confirmed may belong to steps that moved; those up to it keep their
  // times (windows across the search stay anchored at their older edge).
  if (!g.locks.empty()) {
    const int64_t confirmed = g.locks.back().step;
    std::erase_if(g.anchors, [&](const Anchor& a) { return a.grid == g.grid && a.step > confirmed; });
  }
  g.mode = Mode::kSearch;
  ++g.grid;  // the grid found next numbers its steps afresh
  g.previous.reset();
  g.found_steps_s.clear();
  g.scan_until_s = std::numeric_limits<double>::quiet_NaN();  // set by the first read
  g.locks.clear();
  g.failed_checks = 0;
  g.unplaced.clear();  // the steps moved: reads placed on the new grid only
  g.note = "finding the energy counter's steps";
  // Reads planned on the old grid are void; their edges are planned again.
  g.planned.clear();
  if (again) relocks_.fetch_add(1, std::memory_order_relaxed);
}

double CounterAnchors::placement_error_s(const GpuState& g) { return 0.5 * g.read_s + kPlacementSlackS; }

int64_t CounterAnchors::step_at_or_before(const GpuState& g, double time_s) {
  return static_cast<int64_t>(std::floor((time_s - g.origin_s) / g.period_s));
}

bool CounterAnchors::read_held_up(const GpuState& g, const Read& read) {
  return g.read_s > 0 && read.duration_s() > kHeldUpReadFactor * g.read_s + kHeldUpReadSlackS;
}

void CounterAnchors::learn_read_duration(GpuState& g, const Read& read) {
  // A held-up read counts as twice the usual at most: one long stall must not
  // make every read look prompt, while a driver that got slower for good is
  // followed within a few dozen reads.
  const double duration_s = g.read_s > 0 ? std::min(read.duration_s(), 2 * g.read_s) : read.duration_s();
  g.read_s = g.read_s > 0 ? 0.8 * g.read_s + 0.2 * duration_s : duration_s;  // 0: not known yet
}

double CounterAnchors::check_half_width_s(const GpuState& g, int64_t step) const {
  return grid_error_s(g, step) + 0.001;
}

double CounterAnchors::check_start_s(const GpuState& g, int64_t step) const {
  // The scan's first read must take its value before the window around the
  // predicted step opens, wherever in the read the driver takes it.
  return step_time(g, step) - check_half_width_s(g, step) - g.read_s - 0.002;
}

double CounterAnchors::latest_read_s(const GpuState& g, int64_t step) const {
  return step_time(g, step + 1) - options_.margin_s - g.read_s;
}

int64_t CounterAnchors::readable_from(const GpuState& g, double time_s) const {
  int64_t step = step_at_or_before(g, time_s);
  if (time_s > latest_read_s(g, step)) ++step;
  return step;
}

bool CounterAnchors::brought_up_locked(const GpuState& g) const {
  if (g.mode == Mode::kOff || g.mode == Mode::kEdgeReads) return true;
  if (g.mode == Mode::kSearch || g.locks.empty()) return false;
  return grid_error_s(g, g.locks.back().step + kUncheckedSteps) <= options_.margin_s;
}

bool CounterAnchors::scan_in_flight_locked() const {
  return std::any_of(gpus_.begin(), gpus_.end(), [](const GpuState& g) {
    return (g.mode == Mode::kSearch || g.mode == Mode::kCheck) && g.previous.has_value();
  });
}

bool CounterAnchors::checking_locked(const GpuState& g, double now_s) const {
  // While edges come, and until the checks are recheck_every_s apart (a
  // grid refined once is cheap to confirm after an idle spell).
  const int64_t built_steps = static_cast<int64_t>(options_.recheck_every_s / g.period_s);
  return now_s - g.last_edge_s <= options_.keep_locked_s || g.locks.back().step - g.locks.front().step < built_steps;
}

double CounterAnchors::grid_error_s(const GpuState& g, int64_t step) const {
  if (g.locks.empty()) return std::numeric_limits<double>::infinity();
  const int64_t first = g.locks.front().step;
  const int64_t last = g.locks.back().step;
  const int64_t outside = step > last ? step - last : (step < first ? first - step : 0);
  return placement_error_s(g) + static_cast<double>(outside) * g.period_error_s;
}

void CounterAnchors::advance_grid_state_locked(GpuState& g, double now_s) {
  if (g.mode == Mode::kSearch) {
    if (now_s > g.scan_until_s) {  // false while NaN: the search has not started
      // No two steps seen: another reader holding the driver, a stalled
      // counter. The search pauses (twice as long each time, up to
      // kMaxSearchPauseS) and starts over; meanwhile edges keep the sample
      // integral without waiting, as during a search, and the next GPU may
      // search.
      const double pause_s = std::min(kMaxSearchPauseS, kFirstSearchPauseS * std::ldexp(1.0, g.failed_searches));
      ++g.failed_searches;
      g.search_after_s = now_s + pause_s;
      g.previous.reset();
      g.found_steps_s.clear();
      g.scan_until_s = std::numeric_limits<double>::quiet_NaN();
      g.waiting.clear();
      if (searching_gpu_ == static_cast<std::size_t>(&g - gpus_.data())) searching_gpu_ = kNoGpu;
      g.note = fmt::format(
          "windows not anchored yet: the energy counter did not show two steps within {:.1f} s ({} {}); searching "
          "again in {:.0f} s",
          2 * options_.max_period_s, g.failed_searches, g.failed_searches == 1 ? "search" : "searches", pause_s);
      return;
    }
  }
  if (g.mode == Mode::kCheck && !g.previous && now_s > g.check_from_s + 0.001) {
    // Another GPU held the scan when this check was due: a later step.
    g.mode = Mode::kLocked;
    g.next_check_step = g.check_step + 1;
  }
  if (g.mode == Mode::kCheck && now_s > g.scan_until_s) {
    // The step was not where predicted: twice, and the grid is sought anew.
    if (++g.failed_checks >= 2) {
      start_search_locked(g, true);
    } else {
      g.mode = Mode::kLocked;
      g.next_check_step = g.check_step + 1;
    }
  }
}

void CounterAnchors::plan_check_locked(GpuState& g, double now_s) {
  // Re-check the grid where its error would reach the margin, while in use.
  if (g.mode == Mode::kLocked && checking_locked(g, now_s)) {
    int64_t check = g.next_check_step;
    double half_width_s = check_half_width_s(g, check);
    if (now_s > step_time(g, check) - 0.5 * half_width_s - g.read_s) {  // too late for this step: a later one
      check = readable_from(g, now_s + half_width_s) + 1;
      half_width_s = check_half_width_s(g, check);
      g.next_check_step = check;
    }
    if (half_width_s > 0.3 * g.period_s) {
      start_search_locked(g, true);
    } else if (now_s >= check_start_s(g, check)) {
      g.mode = Mode::kCheck;
      g.check_step = check;
      g.check_from_s = step_time(g, check) - half_width_s - g.read_s;
      g.scan_until_s = step_time(g, check) + half_width_s + g.read_s;
      g.previous.reset();
    }
  }
}

void CounterAnchors::apply_grid_read_locked(GpuState& g, const Read& read, double now_s) {
  const std::optional<Read> previous = g.previous;
  if (!previous && g.mode == Mode::kSearch) g.scan_until_s = read.begin_s + 2 * options_.max_period_s + 0.05;
  if (g.mode == Mode::kSearch) {
    keep_unplaced_locked(g, read);
    g.early_due_s.clear();  // the search's own reads serve its edges
  }
  const bool read_was_held_up = read_held_up(g, read);
  g.previous = read;
  g.previous->held_up = read_was_held_up;
  learn_read_duration(g, read);
  if (!previous || read.counter_mj == previous->counter_mj) return;
  // A counter declared fast is placed only between reads close enough that
  // no two of its declared updates fit between them (else the period comes
  // out long).
  const double max_gap_s =
      g.edge_reads_allowed ? std::min(kMaxReadGap, kMaxPlacingSpacing * g.device->energy_counter_timing().update_s)
                           : kMaxReadGap;
  const bool stepped = read.counter_mj > previous->counter_mj;
  const bool held_up = read.begin_s - previous->end_s > max_gap_s || previous->held_up || read_was_held_up;
  const bool placed = stepped && !held_up;
  const double step_s = 0.5 * (previous->mid_s() + read.mid_s());
  if (g.mode == Mode::kSearch) {
    if (!placed) {
      g.found_steps_s.clear();  // two steps found must be neighbours
      return;
    }
    g.found_steps_s.push_back(step_s);
    if (g.found_steps_s.size() < 2) return;
    const double period_s = g.found_steps_s[1] - g.found_steps_s[0];
    if (period_s < kMinPeriod || !g.grid_allowed) {
      settle_mode_after_search_locked(g, period_s, read);
      return;
    }
    g.origin_s = g.found_steps_s[0];
    g.period_s = period_s;
    g.locks = {{0, g.found_steps_s[0]}, {1, g.found_steps_s[1]}};
    g.period_error_s = 2 * placement_error_s(g);
    g.mode = Mode::kLocked;
    g.failed_searches = 0;
    schedule_check_locked(g);
    return;
  }
  if (g.mode != Mode::kCheck) return;
  const int64_t step = std::llround((step_s - g.origin_s) / g.period_s);
  if (placed && step == g.check_step) {
    g.locks.push_back({step, step_s});
    fit_grid_locked(g);
    g.failed_checks = 0;
    g.mode = Mode::kLocked;
    schedule_check_locked(g);
  } else if (stepped && held_up && step == g.check_step) {
    // The step came where predicted but went by unplaced (the thread was
    // held up): no verdict on the grid, a later step is checked.
    g.mode = Mode::kLocked;
    g.next_check_step = g.check_step + 1;
  } else {
    g.scan_until_s = now_s - 1.0;  // a failed check; plan_locked decides what next
  }
}

void CounterAnchors::fit_grid_locked(GpuState& g) {
  while (g.locks.size() > kMaxLockPoints ||
         (g.locks.size() > 2 && g.locks.back().time_s - g.locks.front().time_s > kLockPointSpan)) {
    g.locks.pop_front();
  }
  double mean_k = 0, mean_t = 0;
  for (const LockPoint& p : g.locks) {
    mean_k += static_cast<double>(p.step);
    mean_t += p.time_s;
  }
  mean_k /= static_cast<double>(g.locks.size());
  mean_t /= static_cast<double>(g.locks.size());
  double skt = 0, skk = 0;
  for (const LockPoint& p : g.locks) {
    const double dk = static_cast<double>(p.step) - mean_k;
    skt += dk * (p.time_s - mean_t);
    skk += dk * dk;
  }
  if (skk <= 0) return;
  g.period_s = skt / skk;
  g.origin_s = mean_t - g.period_s * mean_k;
  g.period_error_s =
      2 * placement_error_s(g) / static_cast<double>(std::max<int64_t>(1, g.locks.back().step - g.locks.front().step));
  refresh_anchor_times_locked(g);
}

void CounterAnchors::schedule_check_locked(GpuState& g) {
  // The next check where the predicted error would reach the margin (less
  // the check's own slack), but at least every recheck_every_s.
  const double room_s = std::max(0.0, options_.margin_s - placement_error_s(g) - 0.001);
  const auto most = static_cast<int64_t>(std::max(1.0, options_.recheck_every_s / g.period_s));
  const auto steps = std::clamp<int64_t>(static_cast<int64_t>(room_s / g.period_error_s), 1, most);
  g.next_check_step = g.locks.back().step + steps;
  g.note = fmt::format("windows anchored to energy-counter steps every {:.3f} ms", 1e3 * g.period_s);
}

void CounterAnchors::settle_mode_after_search_locked(GpuState& g, double period_s, const Read& read) {
  g.period_s = period_s;
  if (period_s < kMinPeriod && g.edge_reads_allowed && g.read_s <= kMaxEdgeReadShare * period_s) {
    // The search's reads go on as the run of reads for the edges that came
    // during it (the first window's begin, when no Monitor brought the GPU
    // up): its second update is the run's last.
    g.mode = Mode::kEdgeReads;
    g.previous = read;
    g.last_update = std::make_pair(g.found_steps_s[1], static_cast<double>(read.counter_mj) / 1000.0);
    g.edge_scan_from_s = read.begin_s;
    g.last_read_mj = read.counter_mj;
    g.found_steps_s.clear();
    g.unplaced.clear();
    g.early_due_s.clear();
    g.note = fmt::format("windows anchored on energy-counter reads right after their edges (the counter moves "
                         "every {:.3f} ms)",
                         1e3 * period_s);
    return;
  }
  g.waiting.clear();  // edges seen during the search keep their integral
  turn_off_locked(g);
  if (period_s >= kMinPeriod) {
    g.note = fmt::format("windows not anchored: the energy counter steps every {:.1f} ms, too coarse to read at "
                         "the edges, and bridging an edge to a step needs power samples, which this GPU lacks",
                         1e3 * period_s);
  } else if (g.edge_reads_allowed) {
    g.note = fmt::format("windows not anchored: the energy counter moves every {:.3f} ms, but a read takes "
                         "{:.3f} ms, too long to place its updates",
                         1e3 * period_s, 1e3 * g.read_s);
  } else {
    g.note = "windows not anchored: the energy counter moves at every read (no steps to lock onto)";
  }
}

}  // namespace joule
