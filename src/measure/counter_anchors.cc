// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/measure/counter_anchors.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "joule/error.h"

namespace joule {

namespace {

// A step seen between two back-to-back reads is placed at the midpoint of
// their midpoints: within about half a read (~2 ms on an H100) of wherever
// inside a read the driver takes its value, plus this.
constexpr double kPlacementSlackS = 0.0005;
// Two reads further apart than this (the thread was held up, or read
// another GPU in between) do not place a step.
constexpr double kMaxReadGap = 0.0015;
// A read that took longer than this many times the usual read, plus the
// slack, was held up inside (the thread lost its CPU in the driver or right
// around it): where in it the driver took its value is unknown, so it places
// no step. A grid placed from such reads drifts by up to half the delay,
// which a window edge pays in full (under CPU load: 1-2% of a 0.4 s window).
constexpr double kHeldUpReadFactor = 1.5;
constexpr double kHeldUpReadSlackS = 0.001;
// Steps closer than this are not steps: the counter moves continuously.
constexpr double kMinPeriod = 0.005;
constexpr double kNever = -1e300;
constexpr std::size_t kMaxLockPoints = 32;
// The next GPU's search may begin once this GPU's grid, left unchecked this
// many steps past its last check, still places steps within the margin: the
// search reads back to back for up to a few hundred ms, and this GPU's
// checks wait it out. (On an H100 that takes one check after the search.)
constexpr int64_t kUncheckedSteps = 5;
// Before a GPU's grid is known, an edge gets two reads this far apart, kept
// until the grid places them: a read within ~27 ms of a step (margin_s after
// it, margin_s / 2 and a read before the next) cannot be placed, and two
// reads 40 ms apart are not both that near a step of a ~100 ms grid.
constexpr double kEarlyReadSpacingS = 0.04;
// An edge this near a read already kept (or wanted) wants no more.
constexpr double kEarlyReadCoverS = 0.1;
// Early reads this late are of no use to their edge (beyond max_distance_s).
constexpr double kEarlyReadLatenessS = 0.2;
// Reads kept for placing, per GPU at most (they are dropped, like anchors,
// once older than history_s).
constexpr std::size_t kMaxUnplacedReads = 64;
constexpr double kLockPointSpan = 120.0;
// Reads per poll() call at most, so a broken clock cannot spin it.
constexpr int kMaxReadsPerPoll = 256;
// A counter read at the edges (reads_at_edges): it is read this many times
// per update period, so each update it shows is placed to within 1/32 of a
// period (~0.03 ms on a 1 ms counter) at a fraction of back-to-back reads'
// CPU; and a read duration above a quarter period could not place them.
constexpr double kEdgeReadsPerPeriod = 16.0;
constexpr double kMaxEdgeReadShare = 0.25;
// Reads farther apart than this share of the period may hold two updates
// (a grid a little irregular, or the period measured a little long).
constexpr double kMaxPlacingSpacing = 0.9;
// How late after its edge a read may start and still serve it: the stretch
// from the edge to the first update read is taken at the counter's rate just
// after it, wrong where the load changes inside (this long at most, plus a
// period); later, the edge keeps the power integral.
constexpr double kEdgeReadLatenessS = 0.005;
// A run of edge reads that places no two updates within this many periods
// (a counter that stopped moving, e.g. at 0 W) gives its edges up.
constexpr double kEdgeScanPeriods = 10.0;

}  // namespace

CounterAnchors::CounterAnchors(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<bool> enabled,
                               std::shared_ptr<const Clock> clock, CounterAnchorOptions options)
    : gpus_(gpus.size()),
      clock_(std::move(clock)),
      options_(options),
      awaiting_reads_(std::make_unique<std::atomic<bool>[]>(gpus.size())) {
  if (enabled.size() != gpus.size()) throw UsageError("CounterAnchors: one enabled flag per GPU");
  if (!(options_.reads_per_s > 0 && options_.burst_reads >= 1 && options_.margin_s > 0.002 &&
        options_.margin_s < 0.05 && options_.poll_s > 0 && options_.max_distance_s > 0)) {
    throw UsageError("counter anchor options out of range (reads_per_s > 0, burst >= 1, margin 2-50 ms, poll > 0)");
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    GpuState& g = gpus_[i];
    g.device = std::move(gpus[i]);
    g.tokens = options_.burst_reads;
    // The grid bridges steps with power samples; a GPU enabled only for its
    // fast counter has none (GPUs that declare nothing keep the grid).
    g.edge_reads_allowed = reads_at_edges(g.device->energy_counter_timing());
    g.grid_allowed = !g.edge_reads_allowed || g.device->has_power_samples();
    // Its read's cost as declared (0: unknown), then as measured: the search
    // decides whether reads are short enough to place the updates.
    if (g.edge_reads_allowed) g.read_s = g.device->energy_counter_timing().read_cost_s;
    wake_on_edge_ = wake_on_edge_ || (enabled[i] && options_.enabled && g.edge_reads_allowed);
    if (!options_.enabled || !enabled[i]) {
      g.note = "windows not anchored to the energy counter";
    } else {
      g.mode = Mode::kSearch;  // the first poll() starts the search
      awaiting_reads_[i].store(true);
      g.scan_until_s = std::numeric_limits<double>::quiet_NaN();
      g.note = "finding the energy counter's steps";
    }
  }
}

CounterAnchors::~CounterAnchors() { stop(); }

bool CounterAnchors::reads_at_edges(const Gpu::EnergyCounterTiming& timing) {
  return timing.update_s > 0 && timing.update_s < kMinPeriod &&
         timing.read_cost_s <= kMaxEdgeReadShare * timing.update_s;
}

void CounterAnchors::turn_off_locked(GpuState& g) {
  g.mode = Mode::kOff;
  g.unplaced.clear();
  g.early_due_s.clear();
  awaiting_reads_[static_cast<std::size_t>(&g - gpus_.data())].store(false);
}

void CounterAnchors::start(std::function<void()> on_anchor, std::shared_ptr<const void> keep_alive) {
  if (thread_.joinable()) return;
  on_anchor_ = std::move(on_anchor);
  thread_ = std::thread([this, keep_alive = std::move(keep_alive)] {
    run();
    std::lock_guard lock(wake_mutex_);
    thread_done_ = true;
    thread_done_cv_.notify_all();
  });
}

void CounterAnchors::stop() { stop_within(std::numeric_limits<double>::infinity()); }

void CounterAnchors::request_stop() {
  {
    std::lock_guard lock(wake_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
}

bool CounterAnchors::stop_within(double timeout_s) {
  bool done = true;
  {
    std::unique_lock lock(wake_mutex_);
    stop_ = true;
    wake_.notify_all();
    if (!thread_.joinable()) return true;
    if (std::isfinite(timeout_s)) {
      done = thread_done_cv_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, timeout_s)),
                                      [this] { return thread_done_; });
    }
  }
  if (done) {
    thread_.join();
  } else {
    thread_.detach();  // blocked in a hung read; its keep_alive holds what it touches
  }
  std::lock_guard lock(mutex_);
  stopped_ = true;  // planned reads will not happen: nothing is pending any more
  for (std::size_t i = 0; i < gpus_.size(); ++i) awaiting_reads_[i].store(false);
  return done;
}

bool CounterAnchors::read_hung() const {
  const double since_s = read_since_s_.load(std::memory_order_acquire);
  return std::isfinite(since_s) && clock_->now_s() - since_s >= options_.hung_read_s;
}

void CounterAnchors::run() {
  std::unique_lock lock(wake_mutex_);
  while (!stop_) {
    lock.unlock();
    const double wake_s = poll();
    thread_cpu_s_.store(this_thread_cpu_s());
    lock.lock();
    if (stop_) break;
    // Edges arrive without a notification (that would cost the caller a
    // system call), so the thread looks every poll_s at most.
    const double wait_s = std::clamp(wake_s - clock_->now_s(), 0.0, options_.poll_s);
    if (wait_s > 0) {
      wake_.wait_for(lock, std::chrono::duration<double>(wait_s), [this] { return stop_ || edge_noted_; });
    }
    edge_noted_ = false;
  }
}

void CounterAnchors::note_edge(double edge_s) {
  {
    std::lock_guard lock(mutex_);
    inbox_.push_back(edge_s);
  }
  if (!wake_on_edge_) return;  // set once, at construction: the hot path of GPUs read by grid is as before
  // An edge the ration will not read waits for the next poll (and is dropped
  // there): a wake-up costs the caller a system call, ~10x a window's cost.
  if (edge_s < edge_reads_open_from_s_.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard lock(wake_mutex_);
    if (edge_noted_) return;  // the thread is woken already and has not looked yet: no second system call
    edge_noted_ = true;
  }
  wake_.notify_one();
}

void CounterAnchors::prepare() {
  std::lock_guard lock(mutex_);
  const double now_s = clock_->now_s();
  for (GpuState& g : gpus_) {
    if (g.mode == Mode::kOff) continue;
    g.last_edge_s = std::max(g.last_edge_s, now_s);
    // Before any search: the first window is begun a moment from now, and
    // the GPUs searched last find their grids seconds later.
    want_early_reads_locked(g, now_s);
  }
}

double CounterAnchors::poll() {
  double wake_s = clock_->now_s() + options_.poll_s;
  for (int n = 0; n < kMaxReadsPerPoll; ++n) {
    std::optional<Action> action;
    int placed = 0;
    {
      std::lock_guard lock(mutex_);
      const double now_s = clock_->now_s();
      take_new_edges_locked();
      double edge_reads_open_from_s = std::numeric_limits<double>::infinity();
      for (GpuState& g : gpus_) {
        plan_locked(g, now_s);
        placed += place_unplaced_locked(g, now_s);
        if (g.edge_reads_allowed && (g.mode == Mode::kEdgeReads || g.mode == Mode::kSearch)) {
          // When this GPU's ration next holds a read (a searching GPU's edges
          // bring its search on: at once).
          refill_tokens_locked(g, now_s);
          const double open_from_s = g.mode == Mode::kSearch || g.tokens >= 1.0
                                         ? -std::numeric_limits<double>::infinity()
                                         : now_s + (1.0 - g.tokens) / options_.reads_per_s;
          edge_reads_open_from_s = std::min(edge_reads_open_from_s, open_from_s);
        }
      }
      if (wake_on_edge_) edge_reads_open_from_s_.store(edge_reads_open_from_s, std::memory_order_relaxed);
      wake_s = now_s + options_.poll_s;
      action = next_action_locked(now_s, wake_s);
    }
    if (placed > 0 && on_anchor_) on_anchor_();
    if (!action) return wake_s;
    GpuState& g = gpus_[action->gpu];  // the vector never changes size
    Read read;
    read.begin_s = clock_->now_s();
    read_since_s_.store(read.begin_s, std::memory_order_release);
    try {
      read.counter_mj = g.device->total_energy_mj();
      read_since_s_.store(std::numeric_limits<double>::infinity(), std::memory_order_release);
    } catch (const DeviceError& e) {
      read_since_s_.store(std::numeric_limits<double>::infinity(), std::memory_order_release);
      std::lock_guard lock(mutex_);
      turn_off_locked(g);
      g.note = fmt::format("windows not anchored: the energy counter failed ({})", e.what());
      g.planned.clear();
      g.waiting.clear();
      continue;
    }
    read.end_s = clock_->now_s();
    reads_.fetch_add(1, std::memory_order_relaxed);
    bool made = false;
    {
      std::lock_guard lock(mutex_);
      switch (action->kind) {
        case ActionKind::kAnchor:
          apply_anchor_read_locked(g, action->step, read, made);
          break;
        case ActionKind::kGrid:
          apply_grid_read_locked(g, read, read.end_s);
          break;
        case ActionKind::kEdge:
          apply_edge_read_locked(g, read, made);
          break;
        case ActionKind::kEarly:
          g.tokens -= 1.0;
          keep_unplaced_locked(g, read);
          while (!g.early_due_s.empty() && g.early_due_s.front() <= read.begin_s) {
            g.early_due_s.erase(g.early_due_s.begin());
          }
          break;
      }
    }
    if (made && on_anchor_) on_anchor_();
  }
  return clock_->now_s();
}

void CounterAnchors::refill_tokens_locked(GpuState& g, double now_s) const {
  g.tokens = std::min(options_.burst_reads, g.tokens + (now_s - g.tokens_at_s) * options_.reads_per_s);
  g.tokens_at_s = now_s;
}

void CounterAnchors::take_new_edges_locked() {
  if (inbox_.empty()) return;
  taken_.swap(inbox_);
  inbox_.clear();
  // Edges come from several threads, nearly in order. Edges within a
  // millisecond of each other want the same reads: one stands for them all
  // (windows begun and ended in a tight loop must not flood the planning).
  std::sort(taken_.begin(), taken_.end());
  std::size_t kept = 0;
  for (const double edge_s : taken_) {
    if (kept == 0 || edge_s - taken_[kept - 1] >= 0.001) taken_[kept++] = edge_s;
  }
  taken_.resize(kept);
  for (GpuState& g : gpus_) {
    if (g.mode == Mode::kOff) continue;
    const std::size_t old_size = g.waiting.size();
    g.waiting.insert(g.waiting.end(), taken_.begin(), taken_.end());
    std::inplace_merge(g.waiting.begin(), g.waiting.begin() + static_cast<std::ptrdiff_t>(old_size), g.waiting.end());
    g.last_edge_s = std::max(g.last_edge_s, taken_.back());
    for (const double edge_s : taken_) want_early_reads_locked(g, edge_s);
  }
  taken_.clear();
}

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

bool CounterAnchors::has_anchor(const GpuState& g, int64_t step) {
  const auto it = std::lower_bound(g.anchors.begin(), g.anchors.end(), step,
                                   [](const Anchor& a, int64_t s) { return a.step < s; });
  return it != g.anchors.end() && it->step == step;
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

void CounterAnchors::plan_locked(GpuState& g, double now_s) {
  if (g.mode == Mode::kOff) return;
  trim_locked(g, now_s);
  advance_grid_state_locked(g, now_s);
  if (g.mode == Mode::kOff) return;
  // Early reads are for GPUs still without a grid, and only near their edge.
  if (g.mode != Mode::kSearch) g.early_due_s.clear();
  while (!g.early_due_s.empty() && now_s - g.early_due_s.front() > kEarlyReadLatenessS) {
    g.early_due_s.erase(g.early_due_s.begin());
  }
  if (g.mode == Mode::kEdgeReads) {
    plan_edge_reads_locked(g, now_s);
    return;
  }
  if (g.mode == Mode::kSearch && g.edge_reads_allowed) {
    // A fast counter's search takes a few of its periods: the edges that
    // came meanwhile wait for it (read at their edges once it is done).
    g.waiting.erase(std::remove_if(g.waiting.begin(), g.waiting.end(),
                                   [&](double edge_s) { return now_s - edge_s > kEdgeReadLatenessS; }),
                    g.waiting.end());
    return;
  }
  plan_edges_locked(g, now_s);
  plan_check_locked(g, now_s);
}

void CounterAnchors::advance_grid_state_locked(GpuState& g, double now_s) {
  if (g.mode == Mode::kSearch) {
    if (now_s > g.scan_until_s) {  // false while NaN: the search has not started
      turn_off_locked(g);
      g.note = fmt::format("windows not anchored: the energy counter did not show two steps within {:.1f} s",
                           2 * options_.max_period_s);
      g.waiting.clear();
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

std::optional<CounterAnchors::Action> CounterAnchors::next_action_locked(double now_s, double& wake_s) {
  if (searching_gpu_ != kNoGpu && brought_up_locked(gpus_[searching_gpu_])) searching_gpu_ = kNoGpu;
  if (checking_gpu_ != kNoGpu && gpus_[checking_gpu_].mode != Mode::kCheck) checking_gpu_ = kNoGpu;
  std::optional<Action> best;
  double best_deadline_s = std::numeric_limits<double>::infinity();
  // Reads kept for GPUs without a grid go first, between scans (a read of
  // another GPU inside one would leave a gap too wide to place a step); a
  // search waits for those due within a spacing, so that both reads of an
  // edge come before it.
  const bool scan_in_flight = scan_in_flight_locked();
  bool early_soon = false;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& g = gpus_[i];
    if (g.mode != Mode::kSearch || g.early_due_s.empty()) continue;
    const double due_s = g.early_due_s.front();
    early_soon = early_soon || due_s <= now_s + kEarlyReadSpacingS + 0.005;
    if (due_s > now_s) {
      wake_s = std::min(wake_s, due_s);
      continue;
    }
    refill_tokens_locked(g, now_s);
    if (g.tokens < 1.0) {  // the ration is spent: this edge keeps its samples
      g.early_due_s.erase(g.early_due_s.begin());
      rationed_.fetch_add(1, std::memory_order_relaxed);
    } else if (!scan_in_flight && now_s + 0.002 < best_deadline_s) {
      best = Action{i, ActionKind::kEarly, 0};
      best_deadline_s = now_s + 0.002;
    }
  }
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& g = gpus_[i];
    if (g.mode == Mode::kOff) continue;
    // Searches and checks read back to back (but never twice at one instant,
    // which a virtual clock allows); reads of another GPU in between would
    // leave gaps too wide to place a step. So one GPU at a time is brought
    // up (its search, then the checks that refine its period), and its reads
    // go first; the checks of GPUs already built wait for each other and
    // skip a step when they collide. An anchor read about to miss its
    // interval goes before any of them.
    if (g.mode == Mode::kEdgeReads) {
      // Reads a few times a period while edges wait (never twice at one
      // instant, which a virtual clock allows), ahead of anything else: an
      // edge's first update must be read within a period or two of it.
      if (g.read_edges.empty()) continue;
      const double due_s = g.previous ? g.previous->begin_s + g.period_s / kEdgeReadsPerPeriod : now_s;
      if (g.previous && (now_s < due_s || now_s <= g.previous->end_s)) {
        wake_s = std::min(wake_s, std::max(due_s, now_s + 0.01 * g.period_s));
      } else if (now_s + 0.001 < best_deadline_s) {
        best = Action{i, ActionKind::kEdge, 0};
        best_deadline_s = now_s + 0.001;
      }
      continue;
    }
    const bool bringing_up = searching_gpu_ == i;
    // A GPU is brought up at its first window edge, or when its Monitor is
    // made (prepare()): no cost for a sampler that never has windows.
    const bool searching = g.mode == Mode::kSearch && g.last_edge_s > kNever &&
                           (bringing_up || searching_gpu_ == kNoGpu) && (g.previous || !early_soon);
    const bool checking = g.mode == Mode::kCheck && now_s >= g.check_from_s &&
                          (bringing_up || checking_gpu_ == i || checking_gpu_ == kNoGpu);
    if (g.mode == Mode::kCheck && now_s < g.check_from_s) wake_s = std::min(wake_s, g.check_from_s);
    if (searching || checking) {
      const double deadline_s = now_s + (bringing_up ? 0.003 : 0.004);
      if (g.previous && now_s <= g.previous->end_s) {
        wake_s = std::min(wake_s, now_s + 0.001);
      } else if (deadline_s < best_deadline_s) {
        best = Action{i, ActionKind::kGrid, 0};
        best_deadline_s = deadline_s;
      }
    }
    if (g.mode == Mode::kSearch) continue;
    for (const int64_t step : g.planned) {
      // Mid-interval, where the grid may be wrong by almost half a period and
      // the read still sees this step; earlier only when an edge came late.
      const double earliest_s = step_time(g, step) + std::max(options_.margin_s, 0.5 * (g.period_s - g.read_s));
      const double latest_s = latest_read_s(g, step);
      if (now_s < earliest_s) {
        wake_s = std::min(wake_s, earliest_s);
      } else if (now_s <= latest_s && latest_s < best_deadline_s) {
        best = Action{i, ActionKind::kAnchor, step};
        best_deadline_s = latest_s;
      }
    }
    if (g.mode == Mode::kLocked && checking_locked(g, now_s)) {
      wake_s = std::min(wake_s, check_start_s(g, g.next_check_step));
    }
  }
  if (best && best->kind == ActionKind::kGrid) {
    if (gpus_[best->gpu].mode == Mode::kSearch) {
      searching_gpu_ = best->gpu;
    } else if (searching_gpu_ != best->gpu) {
      checking_gpu_ = best->gpu;
    }
  }
  return best;
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

void CounterAnchors::keep_from(double since_s) { keep_from_s_.store(since_s); }

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

void CounterAnchors::windows(double begin_s, double end_s, std::vector<std::pair<Lookup, Lookup>>& out) const {
  out.clear();
  std::lock_guard lock(mutex_);
  for (const GpuState& g : gpus_) out.push_back(window_locked(g, begin_s, end_s));
}

bool CounterAnchors::anchored(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  return gpus_.at(gpu).mode != Mode::kOff;
}

std::string CounterAnchors::describe(std::size_t gpu) const {
  std::lock_guard lock(mutex_);
  if (read_hung()) {
    return gpus_.at(gpu).note + fmt::format("; an energy-counter read has not returned for {:.1f} s (hung): "
                                            "windows keep their samples",
                                            clock_->now_s() - read_since_s_.load());
  }
  return gpus_.at(gpu).note;
}

CounterAnchors::Stats CounterAnchors::stats() const {
  Stats stats;
  stats.reads = reads_.load();
  stats.anchors = anchors_made_.load();
  stats.rationed = rationed_.load();
  stats.relocks = relocks_.load();
  stats.held_up = held_up_.load();
  stats.edges_missed = edges_missed_.load();
  stats.thread_cpu_s = thread_cpu_s_.load();
  return stats;
}

}  // namespace joule
