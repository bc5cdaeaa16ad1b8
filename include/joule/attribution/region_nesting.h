// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The nesting of a training step's regions as hooks see it (joule.torch's
// module hooks, the optimizer's step, blocks of the user's), kept in C++ so
// that a hook is one call into here rather than Python bookkeeping per edge.
//
// Hooks do not always come in a strict nesting, and each case is repaired
// here rather than refused at flush: a region begun while still open (an
// exception left it open) is closed first; an end of a region not open is
// skipped; an end found late (torch ran the next call's begin first, on the
// same gradient) goes just before the edge recorded last when nothing ran
// between them; an end of a region with others open inside it (autograd ran
// branches around each other) closes those and begins them again. Each
// repair leaves one note, once per kind and region.
//
// Backward regions follow each other without gaps: the gradient of a call's
// output arriving ends the backward region open and begins this one; the
// pass's end (a callback the hooks queue on autograd's engine) ends the
// last. A pass that never ended (it raised) is found at the next edge from
// outside it, or at the first edge of another pass, and its last region
// ends there, with a note.
//
// Not thread-safe: its callers (Python hooks) are ordered by the GIL.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "joule/attribution/regions.h"

namespace joule::attribution {

// Where the edges go: a GpuEdgeClock, or host instants (joule.torch's HostClock).
class EdgeSink {
 public:
  virtual ~EdgeSink() = default;
  virtual void begin(const std::string& name) = 0;
  virtual void end(const std::string& name) = 0;
  // Ends name at the instant of the last nested edge, just before it; false
  // if there is none left to move (GpuEdgeClock::end_before_last).
  virtual bool end_before_last(const std::string& name) = 0;
  // One region ends and the next begins at the same instant, with nothing
  // between them (a backward region handing over to the next): a sink that
  // records events may record one for both.
  virtual void end_and_begin(const std::string& ended, const std::string& begun) {
    end(ended);
    begin(begun);
  }
};

// Edges at host instants, straight to a RegionRecorder (after its
// synchronize, if it has one). An end found late cannot move: the recorder
// has the edge before it already.
class RecorderEdges final : public EdgeSink {
 public:
  explicit RecorderEdges(RegionRecorder& recorder) : recorder_(recorder) {}
  void begin(const std::string& name) override { recorder_.begin(name); }
  void end(const std::string& name) override { recorder_.end(name); }
  bool end_before_last(const std::string&) override { return false; }

 private:
  RegionRecorder& recorder_;
};

class RegionNesting {
 public:
  explicit RegionNesting(EdgeSink& sink) : sink_(sink) {}
  RegionNesting(const RegionNesting&) = delete;
  RegionNesting& operator=(const RegionNesting&) = delete;

  // Whether no autograd pass runs on the calling thread: torch's id of the
  // pass running (-1: none), or where torch does not say (before 2.0: None)
  // grad mode on (autograd turns it off for a pass that makes no graph).
  static bool outside_backward(std::optional<std::int64_t> pass, bool grad_enabled) {
    return pass ? *pass == -1 : grad_enabled;
  }

  // A region begins or ends outside autograd's pass (a module's forward, the
  // optimizer's step, a block of the user's). outside_backward (above): a
  // backward region still open then is one whose pass raised.
  void begin(const std::string& name, bool outside_backward);
  void end(const std::string& name);

  // The gradient of name's call output arrived in autograd pass `pass` (None
  // where torch does not say): name's backward begins, the one open ends.
  // True for the pass's first: the caller arranges end_backward() at its end.
  bool begin_backward(const std::string& name, std::optional<std::int64_t> pass);
  // The pass is done: its last backward region ends.
  void end_backward();
  bool backward_open() const { return backward_.has_value(); }

  // Ends every region still open (the session ends), each with a note.
  void close_all();

  // A line for the user, once per key.
  void note(const std::string& key, const std::string& text);
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<std::string>& open() const { return open_; }

 private:
  void push(const std::string& name);
  void edge(bool begin, const std::string& name);
  void abandon_backward();

  EdgeSink& sink_;
  std::vector<std::string> open_;  // mirrors the recorder's stack, innermost last
  // The last edge: a begin or an end, and of which region.
  bool last_was_begin_ = false;
  std::string last_name_;
  std::optional<std::string> backward_;  // the backward region open during a pass
  std::optional<std::int64_t> backward_pass_;
  std::vector<std::string> notes_;
  std::set<std::string> noted_;
};

}  // namespace joule::attribution
