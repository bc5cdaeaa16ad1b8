// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Counter anchors: the reading thread, the ration of reads, the edges
// noted and what to read next (the grid, its anchors and the edge reads
// are in counter_grid.cc, grid_anchors.cc and counter_edge_reads.cc).
#include "joule/measure/counter_anchors.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "counter_anchors_tuning.h"
#include "joule/error.h"

namespace joule {

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
  if (every_step_readers_.load(std::memory_order_relaxed) > 0) plan_every_step_locked(g, now_s);
  plan_check_locked(g, now_s);
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
    // made (prepare()): no cost for a sampler that never has windows. A
    // search that failed waits out its pause.
    const bool paused = g.mode == Mode::kSearch && now_s < g.search_after_s;
    if (paused && g.last_edge_s > kNever) wake_s = std::min(wake_s, g.search_after_s);
    const bool searching = g.mode == Mode::kSearch && g.last_edge_s > kNever && !paused &&
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

void CounterAnchors::keep_from(double since_s) { keep_from_s_.store(since_s); }

void CounterAnchors::read_every_step(bool on) {
  if (on) {
    every_step_readers_.fetch_add(1);
  } else if (every_step_readers_.fetch_sub(1) <= 0) {
    every_step_readers_.fetch_add(1);
    throw UsageError("counter reads every step: turned off more often than turned on");
  }
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
