// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Pins window edges to the GPU energy counter.
//
// The counter is the only source that integrates everything, but it moves in
// steps (every ~100 ms on an H100) and a read costs ~3.8 ms of CPU. Its steps
// lie on a regular grid, though: on an H100 the step times fit a line to
// within the ~1.5 ms a read takes to see them (bench/probes/counter_phase.py).
// So a read anywhere between two steps gives the counter's value at the first
// of them, an instant known to ~1 ms. A window's energy is then the counter's
// change between the steps nearest its edges, plus the power-sample integral
// over the few tens of milliseconds between each step and its edge: exact up
// to the sample noise of those short stretches, whatever the load does.
//
// This class finds each GPU's step grid at its first window edge, or when a
// Monitor is made (prepare()): back-to-back reads until two steps are seen,
// one GPU at a time, each GPU's first checks overlapping the next one's
// search. Reads taken before a GPU's grid is known (its own search, and a
// read or two at each edge while it waits for its turn) are kept and become
// anchors once the grid is good enough to place them, so a window begun the
// moment a Monitor is made is anchored too. It re-checks the grid at growing
// intervals while windows are in use (a few reads around one predicted step),
// and for every window edge reads the counter in the middle of the step
// intervals on either side of it. One thread serves all GPUs; callers only
// note edges (a short lock, no driver call). Reads are rationed per GPU (a
// token bucket): beyond the ration the side nearer the edge is read first,
// and edges with neither side keep the sample integral. The Sampler combines
// anchors and samples (src/measure/window_energy.cc); docs/measurement.md
// has the method, its error model and the H100 figures.
//
// A counter that advances every millisecond or so and is cheap to read (ROCm
// SMI's, Gpu::energy_counter_timing) needs no grid and no samples: for each
// edge the thread reads it a few times a period from the moment it sees the
// edge until it has placed two of its updates, and the edge's value is the
// first update's, less the counter's own rate over the next update interval
// times the little time from the edge to it (reads_at_edges()). The search
// at the first edge measures the update period and the read's duration
// first; a counter that turns out slower is treated as above where the GPU
// keeps power samples, and not anchored where it does not.
//
// In src/measure: counter_anchors.cc (the thread, the ration, what to read
// next), counter_grid.cc (the grid's search and checks), grid_anchors.cc
// (anchors on the grid, made and looked up), counter_edge_reads.cc (the fast
// counter's reads at the edges); counter_anchors_tuning.h holds the figures
// they share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "joule/clock.h"
#include "joule/device/gpu.h"

namespace joule {

struct CounterAnchorOptions {
  bool enabled = true;
  // Counter reads per GPU once its grid is found (anchors and the grid's
  // checks), sustained and in a burst. On a counter read at the edges one
  // token pays for one edge's reads (a few periods of them: 2-3 ms on a 1 ms
  // counter, about what one read of an H100's counter costs). A read costs ~4.1 ms of CPU on an
  // H100, so 2.5 a second is ~1.0% of a core at most: with the sampling
  // thread (~0.5%) and this thread's wake-ups (~0.25%) under the 2% per GPU
  // that joule allows itself whatever the window rate. That covers both
  // sides of every edge up to a window every ~1.8 s (edges that share a step
  // share its read; back-to-back windows share their edges); beyond that,
  // the side nearer each edge first, then the sample integral.
  double reads_per_s = 2.5;
  double burst_reads = 8.0;
  // Reads start this long after a predicted step and must end this long
  // before the next one: the grid error tolerated. Generous: a read whose
  // step is mistaken costs a whole step's energy, and on an H100 a read
  // takes 3.9 ms (6 ms when another thread reads the counter too).
  double margin_s = 0.015;
  // An anchor farther than this from an edge is not used for it.
  double max_distance_s = 0.3;
  // How often the thread looks for new edges (it must see an edge before the
  // step interval nearest to it is over).
  double poll_s = 0.02;
  // The grid is re-checked at most this far apart while edges keep coming,
  // and not at all once none came for keep_locked_s (no cost when idle).
  double recheck_every_s = 30.0;
  double keep_locked_s = 30.0;
  // Anchors kept (windows older than this settle without them).
  double history_s = 30.0;
  // A counter that does not step within this long is not anchored.
  double max_period_s = 0.5;
  // A read that has not returned after this long is hung: the reads planned
  // behind it are not waited for (windows keep their samples) and stop()
  // leaves the thread behind. The Sampler sets it to its driver_call_timeout_s.
  double hung_read_s = 2.0;
};

// A counter value and the instant it describes, on the sampler's clock.
struct CounterAnchor {
  double step_s = 0.0;
  double counter_j = 0.0;
  // The counter's restarts (driver reload, GPU reset) seen before this value
  // was read: values of different epochs count from different origins.
  // CounterAnchors::window() gives both edges of a window in one epoch's terms.
  int64_t epoch = 0;
};

class CounterAnchors {
 public:
  // Whether a counter with this timing is one to read right after each
  // window edge (advances every few ms at most, a read a fraction of that):
  // the Sampler anchors such a GPU's windows even without power samples.
  static bool reads_at_edges(const Gpu::EnergyCounterTiming& timing);

  // Only GPUs with enabled[i] are anchored; indices follow gpus.
  CounterAnchors(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<bool> enabled,
                 std::shared_ptr<const Clock> clock, CounterAnchorOptions options = {});
  ~CounterAnchors();
  CounterAnchors(const CounterAnchors&) = delete;
  CounterAnchors& operator=(const CounterAnchors&) = delete;

  // Starts the reading thread; on_anchor runs on it after every new anchor.
  // The thread holds keep_alive (the owner that on_anchor and this object
  // live in) until it ends, so that one left behind by stop_within() in a
  // hung read touches nothing freed when the read returns.
  void start(std::function<void()> on_anchor, std::shared_ptr<const void> keep_alive = nullptr);
  // Stops the thread and waits for it (stop_within: at most timeout_s,
  // then the thread is left behind, false; only with a keep_alive).
  void stop();
  bool stop_within(double timeout_s);
  // Asks the thread to end without waiting (stop_within waits).
  void request_stop();

  // Any thread, cheap (a short lock, no driver call): anchors are wanted near
  // edge_s on every anchored GPU.
  void note_edge(double edge_s);
  // Starts bringing up every anchored GPU's step grid now, as a first edge
  // would (one GPU at a time, a few hundred ms to a few s each), instead of
  // at the first edge: a window that begins before its GPU's grid is found
  // keeps the sample integral alone. Monitor calls it when it is made.
  void prepare();
  // Does the reads that are due now; returns when it wants to be called
  // next. The thread calls it; owners without one (virtual clocks) call it
  // often enough to place reads between steps (every millisecond or so).
  double poll();
  // Keep anchors from since_s on (the oldest open window's start), beyond
  // history_s; +infinity releases the pin.
  void keep_from(double since_s);
  // While on, every GPU read by grid has its counter read once in every
  // step interval, beyond the ration: the anchors become an attribution's
  // counter increments (attribution/window.h). ~10 reads a second on an
  // H100, ~4% of a core. Counted: each on wants its own off.
  void read_every_step(bool on);
  // The anchors of gpu whose instants lie within [begin_s, end_s], in time
  // order and in one epoch (those after a restart of the counter are left
  // out), without waiting for planned reads.
  std::vector<CounterAnchor> anchors_within(std::size_t gpu, double begin_s, double end_s) const;

  enum class Status {
    kReady,    // anchor holds the value to use
    kPending,  // a read for this edge is still to come
    kNone,     // no anchor will come: use the sample integral
  };
  // The anchors nearest on either side of an edge (within max_distance_s).
  struct Lookup {
    Status status = Status::kNone;
    std::optional<CounterAnchor> before;  // at or before the edge
    std::optional<CounterAnchor> after;
    double pending_until_s = 0.0;  // kPending: the last step a read is planned for
  };
  // The anchors for both edges of [begin_s, end_s] on gpu, under one lock.
  // Edges read in different epochs of a fast counter (a restart between
  // them) come in the begin's terms where the restart could be bridged, else
  // as kNone (the sample integral, as after a restart of a counter read by
  // grid, whose anchors are dropped).
  std::pair<Lookup, Lookup> window(std::size_t gpu, double begin_s, double end_s) const;
  // The same for every GPU (what a window's end needs).
  void windows(double begin_s, double end_s, std::vector<std::pair<Lookup, Lookup>>& out) const;

  bool anchored(std::size_t gpu) const;
  // Lock-free: whether an edge noted just now on gpu still waits for its
  // reads (the GPU is anchored and the reads will come). Then a window
  // ending at that edge can only have its sample integral yet, and
  // Monitor::end_window's immediate value skips the lookups.
  bool awaits_reads(std::size_t gpu) const { return awaiting_reads_[gpu].load(std::memory_order_relaxed); }
  // E.g. "windows anchored to counter steps every 100.003 ms".
  std::string describe(std::size_t gpu) const;

  struct Stats {
    uint64_t reads = 0;         // all counter reads, grid checks included
    uint64_t anchors = 0;       // anchors made
    uint64_t rationed = 0;      // edges left without an anchor by the ration
    uint64_t held_up = 0;       // anchor reads discarded: they ran too near the next step
    uint64_t relocks = 0;       // grid lost and searched again, or a fast counter's restart seen
    uint64_t edges_missed = 0;  // read at the edges: seen too late, or no two updates placed after them
    double thread_cpu_s = 0.0;
  };
  Stats stats() const;

 private:
  struct Read {
    double begin_s = 0.0;
    double end_s = 0.0;
    uint64_t counter_mj = 0;
    bool held_up = false;  // took far longer than reads usually do (grid reads only)
    double mid_s() const { return 0.5 * (begin_s + end_s); }
    double duration_s() const { return end_s - begin_s; }
  };
  // kEdgeReads: a fast counter, read right after each edge (no grid).
  enum class Mode { kOff, kSearch, kCheck, kLocked, kEdgeReads };
  struct LockPoint {
    int64_t step;
    double time_s;
  };
  // An anchor on a grid (its step, numbered from the grid's origin) or, with
  // grid kNoGrid, at an edge read by a fast counter's run of reads.
  static constexpr int64_t kNoGrid = -1;
  struct Anchor {
    int64_t step;
    double step_s;
    double counter_j;
    int64_t epoch;  // CounterAnchor::epoch
    int64_t grid;   // GpuState::grid when read, or kNoGrid
  };
  // A counter update placed by edge reads, and the counter's rate over the
  // updates that placed it.
  struct PlacedUpdate {
    double time_s;
    double counter_j;
    double rate_w;
  };
  // A restart of a fast counter: epoch is the one it began. Until the new
  // epoch places its first rate, from holds the old epoch's last update;
  // then offset_j, if the two lie close enough to bridge, is what turns the
  // new epoch's values into the old one's terms.
  struct Restart {
    int64_t epoch;
    std::optional<PlacedUpdate> from;
    std::optional<double> offset_j;
  };
  struct GpuState {
    std::shared_ptr<Gpu> device;
    // Reads taken before the grid could place them (sorted by time), and
    // when more such reads are wanted: they become anchors later.
    std::vector<Read> unplaced;
    std::vector<double> early_due_s;
    Mode mode = Mode::kOff;
    std::string note;  // why off, or the grid in words
    // Searching or checking: the reads so far, and the step sought.
    std::optional<Read> previous;
    std::vector<double> found_steps_s;
    double scan_until_s = 0.0;
    int64_t check_step = 0;
    double check_from_s = 0.0;
    int failed_checks = 0;
    // Searches that saw no two steps in a row, and when the next may start.
    int failed_searches = 0;
    double search_after_s = -std::numeric_limits<double>::infinity();
    // The grid: step k at origin_s + k * period_s; grid counts the searches
    // (each numbers its steps afresh).
    int64_t grid = 0;
    double origin_s = 0.0;
    double period_s = 0.0;
    double period_error_s = 0.0;
    std::deque<LockPoint> locks;
    int64_t next_check_step = 0;
    // Anchors (sorted by step) and the edges that want them.
    std::deque<Anchor> anchors;
    std::vector<double> waiting;  // edges not yet planned (the grid needs a check), sorted
    std::vector<int64_t> planned;  // step intervals to read, sorted
    double tokens = 0.0;
    double tokens_at_s = 0.0;
    double last_edge_s = -1e300;
    double read_s = 0.004;  // typical read duration, learned
    // The counter declares itself fast and cheap (reads_at_edges), and
    // whether its windows may use the step grid (it needs power samples).
    bool edge_reads_allowed = false;
    bool grid_allowed = true;
    // kEdgeReads: the counter update placed last in the current run of reads
    // (time, J), and when the run began or last gave an edge its value.
    std::optional<std::pair<double, double>> last_update;
    std::vector<double> read_edges;  // edges paid for, awaiting their value (sorted)
    double edge_scan_from_s = 0.0;
    // kEdgeReads: restarts are told by a read lower than the one before,
    // within a run of reads or across runs. Anchors keep their epoch; the
    // restarts are kept while anchors of an earlier epoch are.
    std::optional<uint64_t> last_read_mj;
    int64_t epoch = 0;
    std::optional<PlacedUpdate> epoch_last;  // this epoch's latest placed update
    std::deque<Restart> restarts;
  };
  enum class ActionKind { kGrid, kAnchor, kEarly, kEdge };
  struct Action {
    std::size_t gpu;
    ActionKind kind;  // a grid read (search or check), an anchor read, or a read kept for later
    int64_t step;     // kAnchor: the step interval read
  };

  // --- counter_anchors.cc: the thread, the ration, what to read next ---
  void run();
  void take_new_edges_locked();
  void turn_off_locked(GpuState& g);  // no anchors for this GPU from now on
  void refill_tokens_locked(GpuState& g, double now_s) const;  // the ration's bucket, up to now_s
  void plan_locked(GpuState& g, double now_s);
  std::optional<Action> next_action_locked(double now_s, double& wake_s);

  // --- counter_grid.cc: finding the step grid and keeping it true ---
  // The parts of plan_locked for the grid: searches that time out, checks
  // that missed; when to check the grid next.
  void advance_grid_state_locked(GpuState& g, double now_s);
  void plan_check_locked(GpuState& g, double now_s);
  // The search found the counter's steps period_s apart (read placed the
  // second): which mode now.
  void settle_mode_after_search_locked(GpuState& g, double period_s, const Read& read);
  void apply_grid_read_locked(GpuState& g, const Read& read, double now_s);
  bool brought_up_locked(const GpuState& g) const;
  bool scan_in_flight_locked() const;
  void start_search_locked(GpuState& g, bool again);
  void fit_grid_locked(GpuState& g);
  void schedule_check_locked(GpuState& g);
  double step_time(const GpuState& g, int64_t step) const { return g.origin_s + g.period_s * step; }
  double grid_error_s(const GpuState& g, int64_t step) const;
  bool checking_locked(const GpuState& g, double now_s) const;
  // The last moment a read of step's interval may start.
  double latest_read_s(const GpuState& g, int64_t step) const;
  // The first step whose interval can still be read from time_s on.
  int64_t readable_from(const GpuState& g, double time_s) const;
  static double placement_error_s(const GpuState& g);
  static int64_t step_at_or_before(const GpuState& g, double time_s);
  static bool read_held_up(const GpuState& g, const Read& read);
  static void learn_read_duration(GpuState& g, const Read& read);
  // How far around a predicted step a check reads, and when it starts.
  double check_half_width_s(const GpuState& g, int64_t step) const;
  double check_start_s(const GpuState& g, int64_t step) const;

  // --- grid_anchors.cc: anchors on the grid, made and looked up ---
  // The reads new edges want (the part of plan_locked for anchors).
  void plan_edges_locked(GpuState& g, double now_s);
  // The next step intervals to read while read_every_step is on.
  void plan_every_step_locked(GpuState& g, double now_s);
  void apply_anchor_read_locked(GpuState& g, int64_t step, const Read& read, bool& made);
  // Stores the counter's value at step; false when it contradicts the
  // anchors held (values must grow from step to step: the grid is wrong).
  bool insert_anchor_locked(GpuState& g, int64_t step, double counter_j);
  // Reads kept from before the grid: for later, and into anchors once the
  // grid places them to within the margin (returns the anchors made).
  void keep_unplaced_locked(GpuState& g, const Read& read);
  void want_early_reads_locked(GpuState& g, double edge_s);
  int place_unplaced_locked(GpuState& g, double now_s);
  static bool has_anchor(const GpuState& g, int64_t step);
  void refresh_anchor_times_locked(GpuState& g);
  void trim_locked(GpuState& g, double now_s);
  Lookup lookup_locked(const GpuState& g, double edge_s) const;
  Lookup anchors_around_locked(const GpuState& g, double edge_s) const;
  // Both edges' lookups, the end's in the begin's epoch (window()).
  std::pair<Lookup, Lookup> window_locked(const GpuState& g, double begin_s, double end_s) const;

  // --- counter_edge_reads.cc: a fast counter read right after each edge ---
  // The edges whose reads may still start (the ration, late ones dropped),
  // whether a read is due, and what a read gives them.
  void plan_edge_reads_locked(GpuState& g, double now_s);
  void apply_edge_read_locked(GpuState& g, const Read& read, bool& made);
  // A read went back: a new epoch begins (older anchors are kept).
  void start_epoch_locked(GpuState& g);
  // A rate placed in this epoch: bridges its restart if it is the first.
  void note_update_locked(GpuState& g, const PlacedUpdate& first, const PlacedUpdate& latest);
  // What turns values of epoch to into epoch from's terms (none: a restart
  // between them not bridged).
  static std::optional<double> epoch_offset_j(const GpuState& g, int64_t from, int64_t to);
  // The anchor taken at exactly edge_s, if any.
  Lookup edge_anchor_locked(const GpuState& g, double edge_s) const;

  std::vector<GpuState> gpus_;
  std::shared_ptr<const Clock> clock_;
  CounterAnchorOptions options_;
  mutable std::mutex mutex_;
  std::vector<double> inbox_;  // edges noted since the last poll
  static constexpr std::size_t kNoGpu = static_cast<std::size_t>(-1);
  std::size_t searching_gpu_ = kNoGpu;  // the GPU being brought up (search, first checks)
  std::size_t checking_gpu_ = kNoGpu;   // the GPU whose check does
  std::vector<double> taken_;  // scratch
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  // A GPU may be read at its edges: note_edge wakes the thread (a counter
  // read at an edge must come within a period or two of it), and sets this
  // (wake_mutex_). Otherwise edges wait for the next poll, as before.
  bool wake_on_edge_ = false;
  bool edge_noted_ = false;
  // Edges before this time find every GPU read at the edges out of reads:
  // note_edge does not wake the thread for them (set by poll()).
  std::atomic<double> edge_reads_open_from_s_{-std::numeric_limits<double>::infinity()};
  bool stopped_ = false;  // guarded by mutex_: the thread is gone, reads planned will not come
  // Per GPU, mode != kOff && !stopped_, readable without the lock.
  std::unique_ptr<std::atomic<bool>[]> awaiting_reads_;
  std::thread thread_;
  bool thread_done_ = false;  // run() returned; guarded by wake_mutex_
  std::condition_variable thread_done_cv_;
  // When the read in flight began (+infinity: none); lock-free for lookups.
  std::atomic<double> read_since_s_{std::numeric_limits<double>::infinity()};
  bool read_hung() const;
  std::function<void()> on_anchor_;
  std::atomic<uint64_t> reads_{0}, anchors_made_{0}, rationed_{0}, relocks_{0}, held_up_{0}, edges_missed_{0};
  std::atomic<double> thread_cpu_s_{0.0};
  std::atomic<double> keep_from_s_{std::numeric_limits<double>::infinity()};
  std::atomic<int> every_step_readers_{0};  // read_every_step(true) less read_every_step(false)
};

}  // namespace joule
