// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// CounterAnchors on a scripted GPU whose counter steps on a grid of its own
// (period and phase), on a virtual clock polled every 0.5 ms: finding the
// grid, anchors on both sides of an edge with the exact counter values, no
// reads without windows, honest refusals, the ration, and finding the grid
// again when the steps move.
#include "joule/measure/counter_anchors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "common/on_off_load.h"
#include "common/scripted_gpu.h"
#include "joule/clock.h"

namespace joule {
namespace {

using testing::OnOffLoad;
using testing::ScriptedGpu;

constexpr double kPeriodS = 0.1;
constexpr double kPhaseS = 0.0437;

struct Rig {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  OnOffLoad load{4, 100.0, 700.0, 0.15, 2.5, 200.0};
  std::shared_ptr<ScriptedGpu> gpu;
  std::unique_ptr<CounterAnchors> anchors;

  explicit Rig(double counter_update_s = kPeriodS, CounterAnchorOptions options = {}) {
    gpu = std::make_shared<ScriptedGpu>(
        0, clock, [this](double t) { return load.power_w(t); },
        [this](double t0, double t1) { return load.energy_j(t0, t1); });
    gpu->counter_update_s = counter_update_s;
    gpu->counter_phase_s = kPhaseS;
    anchors = std::make_unique<CounterAnchors>(std::vector<std::shared_ptr<Gpu>>{gpu}, std::vector<bool>{true},
                                               clock, options);
  }
  // Advances to until_s in 0.5 ms steps, polling at each.
  void run_to(double until_s) {
    while (clock->now_s() + 0.0005 <= until_s + 1e-9) {
      clock->advance_s(0.0005);
      anchors->poll();
    }
  }
  // The counter's value at a step, exactly (what the driver reports, in J).
  double counter_at_step_j(double step_s) const {
    return std::floor(load.energy_j(0.0, step_s) * 1000.0) / 1000.0;
  }
};

// The true step at or before t.
double step_before(double t) { return std::floor((t - kPhaseS) / kPeriodS) * kPeriodS + kPhaseS; }

TEST(CounterAnchorsTest, NoCounterReadUntilTheFirstWindowEdge) {
  Rig rig;
  rig.run_to(5.0);
  EXPECT_EQ(rig.gpu->counter_reads, 0);
  EXPECT_EQ(rig.anchors->stats().reads, 0u);
  EXPECT_EQ(rig.anchors->describe(0), "finding the energy counter's steps");
}

TEST(CounterAnchorsTest, FindsTheStepGridAndAnchorsBothSidesOfAnEdgeWithTheExactValues) {
  Rig rig;
  rig.run_to(1.0);
  rig.anchors->note_edge(1.0123);  // starts the search, whose reads anchor this edge once the grid places them
  rig.run_to(1.5);
  EXPECT_NE(rig.anchors->describe(0).find("anchored to energy-counter steps every 100.0"), std::string::npos)
      << rig.anchors->describe(0);

  rig.run_to(4.0);
  const CounterAnchors::Lookup first = rig.anchors->window(0, 1.0123, 1.0123).first;
  ASSERT_EQ(first.status, CounterAnchors::Status::kReady);
  ASSERT_TRUE(first.before && first.after);
  EXPECT_NEAR(first.before->step_s, step_before(1.0123), 0.002);
  EXPECT_DOUBLE_EQ(first.before->counter_j, rig.counter_at_step_j(step_before(1.0123)));
  EXPECT_DOUBLE_EQ(first.after->counter_j, rig.counter_at_step_j(step_before(1.0123) + kPeriodS));

  const double edge_s = 4.0261;
  rig.anchors->note_edge(edge_s);
  EXPECT_EQ(rig.anchors->window(0, edge_s, edge_s).first.status, CounterAnchors::Status::kPending);
  rig.run_to(4.3);
  const CounterAnchors::Lookup lookup = rig.anchors->window(0, edge_s, edge_s).first;
  ASSERT_EQ(lookup.status, CounterAnchors::Status::kReady);
  ASSERT_TRUE(lookup.before && lookup.after);
  const double before_s = step_before(edge_s);
  EXPECT_NEAR(lookup.before->step_s, before_s, 0.001);
  EXPECT_NEAR(lookup.after->step_s, before_s + kPeriodS, 0.001);
  EXPECT_DOUBLE_EQ(lookup.before->counter_j, rig.counter_at_step_j(before_s));
  EXPECT_DOUBLE_EQ(lookup.after->counter_j, rig.counter_at_step_j(before_s + kPeriodS));
  EXPECT_EQ(rig.anchors->stats().relocks, 0u);
}

TEST(CounterAnchorsTest, PreparedAnchorsPinTheFirstEdgeToo) {
  // What a Monitor does when it is made: the grid is sought at once, so the
  // first window's edge, a second later, is anchored like any other. (Left
  // to that edge, the search starts there and the edge gets no anchor, as
  // above.)
  Rig rig;
  rig.run_to(0.01);
  rig.anchors->prepare();
  rig.run_to(1.0);
  EXPECT_GT(rig.anchors->stats().reads, 0u);
  const double edge_s = 1.0123;
  rig.anchors->note_edge(edge_s);
  rig.run_to(1.4);
  const CounterAnchors::Lookup lookup = rig.anchors->window(0, edge_s, edge_s).first;
  ASSERT_EQ(lookup.status, CounterAnchors::Status::kReady);
  ASSERT_TRUE(lookup.before && lookup.after);
  EXPECT_DOUBLE_EQ(lookup.before->counter_j, rig.counter_at_step_j(step_before(edge_s)));
  EXPECT_DOUBLE_EQ(lookup.after->counter_j, rig.counter_at_step_j(step_before(edge_s) + kPeriodS));
}

// Four GPUs, each counter on a grid of its own, and a window begun the
// moment the Monitor is made: the searches go one GPU at a time, so the last
// grid is found a second or more later, but the reads taken at the edge are
// kept and placed then. Every GPU's first edge ends up anchored with the
// counter's exact values, and every grid is found within ~3 s (one GPU after
// the other, each waiting for the one before to be fully refined, took ~9 s).
TEST(CounterAnchorsTest, AWindowBegunAsTheMonitorIsMadeIsAnchoredOnEveryGpu) {
  constexpr int kGpus = 4;
  auto clock = std::make_shared<VirtualClock>();
  std::vector<OnOffLoad> loads;
  for (int i = 0; i < kGpus; ++i) loads.emplace_back(10 + i, 100.0, 700.0, 0.15, 2.5, 200.0);
  std::vector<std::shared_ptr<ScriptedGpu>> scripted;
  std::vector<std::shared_ptr<Gpu>> gpus;
  const auto phase_s = [](int i) { return 0.011 + 0.023 * i; };
  for (int i = 0; i < kGpus; ++i) {
    auto gpu = std::make_shared<ScriptedGpu>(
        i, clock, [&loads, i](double t) { return loads[i].power_w(t); },
        [&loads, i](double t0, double t1) { return loads[i].energy_j(t0, t1); });
    gpu->counter_update_s = kPeriodS;
    gpu->counter_phase_s = phase_s(i);
    scripted.push_back(gpu);
    gpus.push_back(gpu);
  }
  CounterAnchors anchors(gpus, std::vector<bool>(kGpus, true), clock);
  const auto run_to = [&](double until_s) {
    while (clock->now_s() + 0.0005 <= until_s + 1e-9) {
      clock->advance_s(0.0005);
      anchors.poll();
    }
  };
  run_to(0.5);
  anchors.prepare();  // the Monitor is made
  const double edge_s = 0.5031;
  anchors.note_edge(edge_s);  // and a window begun at once
  double all_found_s = -1.0;
  for (double t = 0.6; t <= 8.0 + 1e-9; t += 0.1) {
    run_to(t);
    bool all = true;
    for (int i = 0; i < kGpus; ++i) all = all && anchors.describe(i).find("anchored to") != std::string::npos;
    if (all && all_found_s < 0) all_found_s = t;
  }
  EXPECT_GT(all_found_s, 0.0);
  EXPECT_LT(all_found_s, 0.5 + 3.0) << "grids found one after the other, each fully refined first";
  for (int i = 0; i < kGpus; ++i) {
    const CounterAnchors::Lookup lookup = anchors.window(i, edge_s, edge_s).first;
    ASSERT_EQ(lookup.status, CounterAnchors::Status::kReady) << "GPU " << i;
    ASSERT_TRUE(lookup.before || lookup.after) << "GPU " << i;
    for (const auto& anchor : {lookup.before, lookup.after}) {
      if (!anchor) continue;
      // On this GPU's grid, with the counter's value at that step exactly.
      // Placed as well as a read places a step: the grid had been refined.
      const double steps = (anchor->step_s - phase_s(i)) / kPeriodS;
      EXPECT_NEAR(steps, std::round(steps), 0.02) << "GPU " << i;
      const double true_step_s = std::round(steps) * kPeriodS + phase_s(i);
      EXPECT_DOUBLE_EQ(anchor->counter_j, std::floor(loads[i].energy_j(0.0, true_step_s) * 1000.0) / 1000.0)
          << "GPU " << i;
    }
  }
  EXPECT_EQ(anchors.stats().relocks, 0u);
}

TEST(CounterAnchorsTest, ACounterThatMovesAtEveryReadIsNotAnchored) {
  Rig rig(0.0);  // continuous: every read sees a new value
  rig.anchors->note_edge(0.5);
  rig.run_to(2.0);
  EXPECT_FALSE(rig.anchors->anchored(0));
  EXPECT_NE(rig.anchors->describe(0).find("moves at every read"), std::string::npos) << rig.anchors->describe(0);
  rig.anchors->note_edge(2.0);
  EXPECT_EQ(rig.anchors->window(0, 2.0, 2.0).first.status, CounterAnchors::Status::kNone);
}

// A search that sees no two steps within the longest period (on an H200:
// another process reading the counter back to back beside a load, 2 of 16
// monitors) pauses, then starts over, each pause twice the last; meanwhile
// edges keep their samples without waiting. Once the counter steps again,
// the next search finds the grid.
TEST(CounterAnchorsTest, ASearchThatSeesNoTwoStepsPausesAndStartsOver) {
  Rig rig(5.0);  // no two steps within a search's second
  rig.anchors->note_edge(0.0);  // the search: from 0 to ~1.05 s
  rig.run_to(1.2);
  EXPECT_NE(rig.anchors->describe(0).find("did not show two steps within 1.0 s (1 search); searching again in 2 s"),
            std::string::npos)
      << rig.anchors->describe(0);
  const uint64_t reads = rig.anchors->stats().reads;
  rig.run_to(3.0);  // the pause, to ~3.05 s: no reads
  EXPECT_EQ(rig.anchors->stats().reads, reads);
  EXPECT_EQ(rig.anchors->window(0, 2.0, 2.0).first.status, CounterAnchors::Status::kNone);  // not pending
  rig.run_to(5.0);  // the second search (~3.05-4.1 s) fails too: a longer pause
  EXPECT_GT(rig.anchors->stats().reads, reads);
  EXPECT_NE(rig.anchors->describe(0).find("(2 searches); searching again in 4 s"), std::string::npos)
      << rig.anchors->describe(0);
  rig.gpu->counter_update_s = kPeriodS;  // the other reader let go
  rig.run_to(10.0);
  EXPECT_NE(rig.anchors->describe(0).find("windows anchored to energy-counter steps every 100.0"), std::string::npos)
      << rig.anchors->describe(0);
  rig.anchors->note_edge(10.0);
  rig.run_to(10.5);
  EXPECT_EQ(rig.anchors->window(0, 10.0, 10.0).first.status, CounterAnchors::Status::kReady);
}

TEST(CounterAnchorsTest, EdgesBeyondTheRationGetTheNearerSideOrNone) {
  CounterAnchorOptions options;
  options.reads_per_s = 2.0;
  options.burst_reads = 2.0;
  Rig rig(kPeriodS, options);
  rig.anchors->note_edge(0.5);
  rig.run_to(3.0);
  const uint64_t reads_before = rig.anchors->stats().reads;
  for (int i = 0; i < 40; ++i) {  // 20 edges a second, 4 s
    rig.anchors->note_edge(3.0 + 0.05 * i + 0.013);
    rig.run_to(3.0 + 0.05 * (i + 1));
  }
  rig.run_to(8.0);
  const CounterAnchors::Stats stats = rig.anchors->stats();
  EXPECT_GT(stats.rationed, 0u);
  // Anchor reads within the ration (the burst, then the rate), plus a few grid checks.
  EXPECT_LE(stats.reads - reads_before, 2.0 + 2.0 * 5.0 + 20.0);
}

// Edges in bursts (four 0.2 s apart every 2 s, as when two streams of
// windows cross): both sides of each outrun the ration, but a read stays in
// reserve for every edge's nearer side, so no edge is left to the samples
// alone; the farther sides take what is spare.
TEST(CounterAnchorsTest, EdgesWithinTheRationEachKeepTheirNearerSide) {
  CounterAnchorOptions options;
  options.reads_per_s = 3.0;
  options.burst_reads = 8.0;
  Rig rig(kPeriodS, options);
  rig.anchors->note_edge(0.5);
  rig.run_to(3.0);
  std::vector<double> edges;
  for (int burst = 0; burst < 10; ++burst) {  // 2 edges a second (4 reads wanted), 20 s
    for (int i = 0; i < 4; ++i) {
      const double edge_s = 3.0 + 2.0 * burst + 0.2 * i + 0.013 + 0.031 * ((burst + i) % 3);
      edges.push_back(edge_s);
      rig.run_to(edge_s);
      rig.anchors->note_edge(edge_s);
    }
  }
  rig.run_to(25.0);
  EXPECT_GT(rig.anchors->stats().rationed, 0u);
  int both_sides = 0;
  for (const double edge_s : edges) {
    const CounterAnchors::Lookup lookup = rig.anchors->window(0, edge_s, edge_s).first;
    ASSERT_EQ(lookup.status, CounterAnchors::Status::kReady) << edge_s;
    const double before_s = step_before(edge_s);
    const bool after_nearer = before_s + kPeriodS - edge_s < edge_s - before_s;
    EXPECT_TRUE(after_nearer ? lookup.after.has_value() : lookup.before.has_value()) << edge_s;
    both_sides += lookup.before && lookup.after ? 1 : 0;
  }
  // The spare reads (3 a second against 2 nearer sides) go to farther sides.
  EXPECT_GE(both_sides, 10);
  EXPECT_LT(both_sides, 40);
}

TEST(CounterAnchorsTest, FindsTheGridAgainWhenTheStepsMove) {
  Rig rig;
  rig.anchors->note_edge(0.5);
  rig.run_to(10.0);
  rig.gpu->counter_phase_s = kPhaseS + 0.05;  // e.g. the driver restarted its timer
  for (int i = 0; i < 30; ++i) {              // windows keep coming, one edge every 0.7 s
    rig.anchors->note_edge(10.0 + 0.7 * i + 0.021);
    rig.run_to(10.0 + 0.7 * (i + 1));
  }
  EXPECT_GE(rig.anchors->stats().relocks, 1u);
  const double edge_s = 31.0377;
  rig.anchors->note_edge(edge_s);
  rig.run_to(31.5);
  const CounterAnchors::Lookup lookup = rig.anchors->window(0, edge_s, edge_s).first;
  ASSERT_EQ(lookup.status, CounterAnchors::Status::kReady);
  ASSERT_TRUE(lookup.before.has_value());
  const double moved_phase_s = kPhaseS + 0.05;
  const double before_s = std::floor((edge_s - moved_phase_s) / kPeriodS) * kPeriodS + moved_phase_s;
  EXPECT_NEAR(lookup.before->step_s, before_s, 0.001);
  EXPECT_DOUBLE_EQ(lookup.before->counter_j, rig.counter_at_step_j(before_s));
}

// 40 windows of 0.4 s, one every 0.7 s from 1 s on: for each whose edges
// both got an anchor, its begin and how far the step times at its two edges
// err apart (what the window pays, times the power), having checked that
// each anchor holds its true step's counter value.
struct WindowDrift {
  double begin_s;
  double drift_s;
};
std::vector<WindowDrift> window_drifts(Rig& rig) {
  const auto true_step_s = [](double t) { return std::round((t - kPhaseS) / kPeriodS) * kPeriodS + kPhaseS; };
  std::vector<WindowDrift> drifts;
  for (int i = 0; i < 40; ++i) {
    const double begin_s = 1.0 + 0.7 * i + 0.013 * (i % 7);
    const double end_s = begin_s + 0.4;
    rig.run_to(begin_s);
    rig.anchors->note_edge(begin_s);
    rig.run_to(end_s);
    rig.anchors->note_edge(end_s);
    rig.run_to(end_s + 0.3);
    const auto [begin, end] = rig.anchors->window(0, begin_s, end_s);
    const auto& b = begin.before ? begin.before : begin.after;
    const auto& e = end.before ? end.before : end.after;
    if (begin.status != CounterAnchors::Status::kReady || end.status != CounterAnchors::Status::kReady || !b || !e) {
      continue;
    }
    EXPECT_DOUBLE_EQ(b->counter_j, rig.counter_at_step_j(true_step_s(b->step_s))) << "window at " << begin_s;
    EXPECT_DOUBLE_EQ(e->counter_j, rig.counter_at_step_j(true_step_s(e->step_s))) << "window at " << begin_s;
    drifts.push_back({begin_s, (e->step_s - true_step_s(e->step_s)) - (b->step_s - true_step_s(b->step_s))});
  }
  return drifts;
}

// Reads that take 4-12 ms and see the counter at their end, as a loaded CPU
// stretches an H100's ~4 ms read: steps are placed a few ms off, and the
// grid's checks keep refining it. Both edges of a window take their step
// times from the grid as refined by the time the window is looked up, so
// they err alike. (Taken from the grid as it stood when each anchor was
// read, they differed by 3-4 ms whenever a check fell inside a window: 1% of
// a 0.4 s window at any power.) A young grid, in its first second or so, may
// still be off by up to the margin over a window.
TEST(CounterAnchorsTest, BothEdgesOfAWindowTakeTheirStepTimesFromOneGrid) {
  Rig rig;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> read_s(0.004, 0.012);
  rig.gpu->counter_read_delay = [&] { rig.clock->advance_s(read_s(random)); };
  int settled = 0;
  for (const WindowDrift& w : window_drifts(rig)) {
    EXPECT_LE(std::abs(w.drift_s), CounterAnchorOptions{}.margin_s) << "window at " << w.begin_s;
    if (w.begin_s >= 3.0) {
      EXPECT_LE(std::abs(w.drift_s), 0.001) << "window at " << w.begin_s;
      ++settled;
    }
  }
  EXPECT_GE(settled, 25);
}

// Reads of 4 ms, but every twentieth held up for 30 ms (the thread lost its
// CPU inside the read): where in such a read the value was taken is
// unknown, so it places no step, and the grid stays as exact as the prompt
// reads make it.
TEST(CounterAnchorsTest, AHeldUpReadPlacesNoStep) {
  Rig rig;
  int reads = 0;
  rig.gpu->counter_read_delay = [&] { rig.clock->advance_s(++reads % 20 == 0 ? 0.03 : 0.004); };
  const std::vector<WindowDrift> drifts = window_drifts(rig);
  EXPECT_GE(drifts.size(), 30u);
  for (const WindowDrift& w : drifts) EXPECT_LE(std::abs(w.drift_s), 0.001) << "window at " << w.begin_s;
}

}  // namespace
}  // namespace joule
