// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Region edges on the GPU's clock for training loops (LibTorch's, and
// joule.torch's hooks through the Python module): each edge records a GPU
// event on the current stream and waits for nothing;
// flush() hands the edges to a RegionRecorder at their GPU instants, mapped
// onto the recorder's (the monitor's) clock.
//
// The mapping comes from anchors: with the GPU idle, an event is recorded
// between two reads of the clock, and the tightest bracket of a few tries
// places it (half its width: how far a mapped edge may be off). One anchor is
// taken when the clock is made and one at each flush; an edge between two
// anchors goes on the line through them, which takes out the drift between
// the clocks. Each edge's GPU time is chained from the edge before it: the
// elapsed time between neighbours is exact to well under a microsecond in a
// float's milliseconds, where one from a far reference would not be. Events
// are reused: every drain_every edges the ones the GPU has passed are read.
//
// Concurrent regions (work on another stream: a DDP all-reduce) record their
// calls the same way; they are handed over at their own instants, never moved
// up to the nested edge before them, and an end never before the earliest
// open call's begin (RegionRecorder's concurrent edges).
//
// joule links no GPU runtime: the GPU's calls are behind GpuEvents, which
// joule/attribution/libtorch_events.h implements with CUDA for LibTorch
// programs, cuda_runtime_events.h with the CUDA runtime a process has loaded
// (joule.torch's hooks), and the tests with a simulated GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "joule/attribution/region_nesting.h"
#include "joule/attribution/regions.h"

namespace joule::attribution {

// The GPU calls an edge clock makes. Events are the implementation's to own
// (made by create(), freed when it goes); the clock reuses them.
class GpuEvents {
 public:
  using Event = std::uintptr_t;
  virtual ~GpuEvents() = default;
  virtual Event create() = 0;
  // On the stream the work runs on, without waiting.
  virtual void record(Event event) = 0;
  // True once the GPU has passed the event (it does not wait).
  virtual bool reached(Event event) = 0;
  // GPU seconds from earlier to later, both reached.
  virtual double elapsed_s(Event earlier, Event later) = 0;
  // The same where the GPU has passed later (earlier already passed), none
  // if not yet: how the clock reads its queue. By default reached() then
  // elapsed_s(); a runtime whose elapsed time says "not ready" itself
  // answers in one call.
  virtual std::optional<double> elapsed_if_reached_s(Event earlier, Event later) {
    if (!reached(later)) return std::nullopt;
    return elapsed_s(earlier, later);
  }
  // Waits until the GPU has done all work queued so far.
  virtual void synchronize() = 0;
};

struct GpuEdgeClockOptions {
  int anchor_tries = 16;           // brackets tried per anchor; the tightest is kept
  std::size_t drain_every = 1024;  // edges between reads of the events passed
};

// Thread-safe: edges may come from several threads at once (autograd's, a
// communication hook's), each call under the clock's own lock.
class GpuEdgeClock final : public EdgeSink {
 public:
  // Takes the first anchor (a synchronize and anchor_tries round trips).
  GpuEdgeClock(RegionRecorder& recorder, GpuEvents& events, GpuEdgeClockOptions options = {});
  GpuEdgeClock(const GpuEdgeClock&) = delete;
  GpuEdgeClock& operator=(const GpuEdgeClock&) = delete;

  void begin(const std::string& name) override { edge(Kind::kBegin, name); }
  void end(const std::string& name) override { edge(Kind::kEnd, name); }
  void begin_concurrent(const std::string& name) { edge(Kind::kBeginConcurrent, name); }
  void end_concurrent(const std::string& name) { edge(Kind::kEndConcurrent, name); }
  // Ends name at the instant of the last nested edge, just before it: an
  // edge found late (a hook torch runs after another on the same gradient).
  // False if there is no nested edge not yet handed over.
  bool end_before_last(const std::string& name) override;
  // Both edges on one event: the work between them is none.
  void end_and_begin(const std::string& ended, const std::string& begun) override;
  // Waits for the GPU, anchors, and hands every edge so far to the recorder
  // (whose begin_at/end_at check their order and nesting). Before attributing.
  void flush();

  // The widest anchor's half-width: how far a mapped edge may be off.
  double uncertainty_s() const;
  // How much faster the recorder's clock ran than the GPU's, first to last anchor.
  double drift_ppm() const;
  // Edges the mapping put before the edge before them (moved up to it).
  std::size_t reordered_edges() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return reordered_edges_;
  }

 private:
  enum class Kind { kBegin, kEnd, kBeginConcurrent, kEndConcurrent };
  static bool concurrent(Kind kind) { return kind == Kind::kBeginConcurrent || kind == Kind::kEndConcurrent; }
  struct Pending {
    Kind kind;
    std::string name;
    GpuEvents::Event event;
  };
  struct Read {
    Kind kind;
    std::string name;
    double gpu_s;  // since the first anchor
  };
  // Inserts an end of name before the last nested edge of edges, at its
  // instant; false if there is none.
  template <typename Edges>
  static bool insert_end_before_last(Edges& edges, const std::string& name);
  void edge(Kind kind, const std::string& name);
  void hand_over(const Read& read);
  void read_passed(bool wait);
  // The event's GPU time, chained from the one before; with wait false,
  // none if the GPU has not passed it yet.
  std::optional<double> link(GpuEvents::Event event, bool wait);
  void anchor();
  GpuEvents::Event take_event();
  double to_clock_s(double gpu_s) const;

  mutable std::mutex mutex_;  // every public call holds it
  RegionRecorder& recorder_;
  GpuEvents& events_;
  GpuEdgeClockOptions options_;
  std::vector<GpuEvents::Event> pool_;
  std::deque<Pending> pending_;
  std::vector<Read> read_;
  // The last event read and its GPU seconds since the first anchor.
  std::optional<std::pair<GpuEvents::Event, double>> chain_;
  std::vector<double> anchor_gpu_s_, anchor_clock_s_, anchor_half_s_;
  double last_edge_s_ = -1e300;  // of the nested edges handed over
  std::size_t reordered_edges_ = 0;
  // Per concurrent region, the instants of its open calls' begins handed over.
  std::unordered_map<std::string, std::multiset<double>> open_concurrent_;
};

// A region on an edge clock for as long as it lives.
class GpuRegion {
 public:
  GpuRegion(GpuEdgeClock& clock, std::string name) : clock_(clock), name_(std::move(name)) { clock_.begin(name_); }
  ~GpuRegion() { clock_.end(name_); }
  GpuRegion(const GpuRegion&) = delete;
  GpuRegion& operator=(const GpuRegion&) = delete;

 private:
  GpuEdgeClock& clock_;
  std::string name_;
};

}  // namespace joule::attribution
