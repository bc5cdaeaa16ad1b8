// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// GpuEdgeClock against a simulated GPU: a queue of work that runs behind the
// host, on a clock of its own (offset and drifting), whose elapsed times come
// in float milliseconds as CUDA's do. The edges must reach the recorder at
// the host instants the GPU passed them, to within the anchors' brackets.
#include "joule/attribution/gpu_edge_clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "joule/clock.h"
#include "joule/error.h"

namespace joule::attribution {
namespace {

class SimulatedGpuEvents final : public GpuEvents {
 public:
  SimulatedGpuEvents(std::shared_ptr<VirtualClock> clock, double drift_ppm)
      : clock_(std::move(clock)), rate_(1 + 1e-6 * drift_ppm) {}

  // Work of work_s queued now: it runs once the work before it is done.
  void queue(double work_s) { busy_until_s_ = std::max(busy_until_s_, clock_->now_s()) + work_s; }
  double busy_until_s() const { return busy_until_s_; }

  Event create() override {
    passed_at_s_.push_back(kNotRecorded);
    return passed_at_s_.size() - 1;
  }
  void record(Event event) override {
    busy_until_s_ = std::max(busy_until_s_, clock_->now_s());
    passed_at_s_.at(event) = busy_until_s_;
    ++records_;
  }
  bool reached(Event event) override { return clock_->now_s() >= passed_at_s_.at(event); }
  double elapsed_s(Event earlier, Event later) override {
    EXPECT_TRUE(reached(earlier) && reached(later));
    // CUDA's: float milliseconds between the two, on the GPU's own clock.
    const auto ms = static_cast<float>(1e3 * rate_ * (passed_at_s_.at(later) - passed_at_s_.at(earlier)));
    return ms / 1e3;
  }
  void synchronize() override {
    // Waiting costs a round trip of 10-60 us beyond the work itself.
    const double done_s = std::max(busy_until_s_, clock_->now_s()) + round_trip_s_(rng_);
    clock_->advance_s(done_s - clock_->now_s());
  }
  std::size_t events() const { return passed_at_s_.size(); }
  std::size_t records() const { return records_; }
  double passed_at_s(Event event) const { return passed_at_s_.at(event); }

 private:
  static constexpr double kNotRecorded = 1e300;
  std::shared_ptr<VirtualClock> clock_;
  double rate_;
  double busy_until_s_ = 0.0;
  std::vector<double> passed_at_s_;
  std::size_t records_ = 0;
  std::mt19937 rng_{7};
  std::uniform_real_distribution<double> round_trip_s_{10e-6, 60e-6};
};

struct Step {
  double forward_s;
  double backward_s;
};

// A training loop whose host runs ahead of the GPU (launches cost 50 us),
// held back when 20 ms of work are queued, as a caching allocator would.
std::vector<Step> run_loop(GpuEdgeClock& edges, SimulatedGpuEvents& gpu, VirtualClock& clock, int steps) {
  std::vector<Step> truth;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  for (int i = 0; i < steps; ++i) {
    const Step step{0.003 * jitter(rng), 0.005 * jitter(rng)};
    edges.begin("forward");
    gpu.queue(step.forward_s);
    clock.advance_s(50e-6);
    edges.end("forward");
    edges.begin("backward");
    gpu.queue(step.backward_s);
    clock.advance_s(50e-6);
    edges.end("backward");
    clock.advance_s(std::max(0.0, gpu.busy_until_s() - 0.02 - clock.now_s()));
    truth.push_back(step);
  }
  return truth;
}

TEST(GpuEdgeClockTest, EdgesReachTheRecorderWhereTheGpuPassedThem) {
  auto clock = std::make_shared<VirtualClock>(1000.0);
  SimulatedGpuEvents gpu(clock, /*drift_ppm=*/80.0);
  RegionRecorder recorder(clock);
  GpuEdgeClockOptions options;
  options.drain_every = 64;
  GpuEdgeClock edges(recorder, gpu, options);
  const double began_s = clock->now_s();
  const std::vector<Step> truth = run_loop(edges, gpu, *clock, 3000);
  edges.flush();

  const auto intervals = recorder.intervals_within(began_s, clock->now_s());
  ASSERT_EQ(intervals.size(), 2 * truth.size());
  // Each region's length is the GPU's work, whatever the host did meanwhile;
  // the drift (80 ppm, taken out between the anchors) and the chained float
  // milliseconds leave well under a microsecond.
  for (std::size_t i = 0; i < truth.size(); ++i) {
    EXPECT_NEAR(intervals[2 * i].end_s - intervals[2 * i].begin_s, truth[i].forward_s, 1e-6) << i;
    EXPECT_NEAR(intervals[2 * i + 1].end_s - intervals[2 * i + 1].begin_s, truth[i].backward_s, 1e-6) << i;
  }
  // Where: the GPU ran the loop back to back from its first edge; the last
  // edge is where the GPU finished, to within the anchors' brackets.
  const double last_s = intervals.back().end_s;
  double gpu_work_s = 0.0;
  for (const Step& s : truth) gpu_work_s += s.forward_s + s.backward_s;
  EXPECT_NEAR(last_s - intervals.front().begin_s, gpu_work_s, 1e-5);
  EXPECT_GT(edges.uncertainty_s(), 0.0);
  EXPECT_LE(edges.uncertainty_s(), 30e-6);
  EXPECT_NEAR(edges.drift_ppm(), -80.0, 1.0);  // the recorder's clock ran slower than the GPU's
  // Events are reused: the pool stays near drain_every, not one per edge.
  EXPECT_LT(gpu.events(), 4 * options.drain_every);
}

TEST(GpuEdgeClockTest, AnEdgeIsPlacedAtItsGpuInstantNotWhenTheHostRecordedIt) {
  auto clock = std::make_shared<VirtualClock>(5.0);
  SimulatedGpuEvents gpu(clock, 0.0);
  RegionRecorder recorder(clock);
  GpuEdgeClock edges(recorder, gpu);
  gpu.queue(0.040);  // 40 ms of work already queued: the region runs after it
  const double recorded_s = clock->now_s();
  edges.begin("late");
  gpu.queue(0.010);
  edges.end("late");
  edges.flush();
  const auto intervals = recorder.intervals_within(0.0, clock->now_s());
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_NEAR(intervals[0].begin_s, recorded_s + 0.040, edges.uncertainty_s() + 1e-6);
  EXPECT_NEAR(intervals[0].end_s - intervals[0].begin_s, 0.010, 1e-6);
}

TEST(GpuEdgeClockTest, EdgesKeepTheirOrderAcrossFlushesAndBadNestingIsRefused) {
  auto clock = std::make_shared<VirtualClock>(0.0);
  SimulatedGpuEvents gpu(clock, -40.0);
  RegionRecorder recorder(clock);
  GpuEdgeClock edges(recorder, gpu);
  for (int round = 0; round < 5; ++round) {
    {
      GpuRegion outer(edges, "outer");
      gpu.queue(0.002);
      GpuRegion inner(edges, "inner");
      gpu.queue(0.001);
    }
    edges.flush();
  }
  EXPECT_EQ(recorder.open_regions(), 0u);
  const auto intervals = recorder.intervals_within(-1.0, clock->now_s());
  ASSERT_EQ(intervals.size(), 10u);  // per round: outer's own 2 ms, then inner's 1 ms
  for (std::size_t i = 1; i < intervals.size(); ++i) EXPECT_GE(intervals[i].begin_s, intervals[i - 1].end_s);
  edges.end("never-begun");
  EXPECT_THROW(edges.flush(), UsageError);  // the recorder's own check, at the hand-over
}

// DDP's shape: a bucket's all-reduce begins inside backward, a second one at
// the edge where a layer begins, and backward's end is found late (after
// that layer's begin was recorded) and goes before it.
void record_overlapped_step(GpuEdgeClock& edges, SimulatedGpuEvents& gpu) {
  edges.begin("backward");
  gpu.queue(0.002);
  edges.begin_concurrent("allreduce");
  gpu.queue(0.002);
  edges.begin("layer");
  edges.begin_concurrent("allreduce");
  EXPECT_TRUE(edges.end_before_last("backward"));
  gpu.queue(0.002);
  edges.end("layer");
  edges.end_concurrent("allreduce");
  edges.end_concurrent("allreduce");
}

void expect_overlapped_step(const RegionRecorder& recorder, double from_s, double to_s) {
  EXPECT_EQ(recorder.open_regions(), 0u);
  EXPECT_EQ(recorder.open_concurrent_calls(), 0u);
  const auto intervals = recorder.intervals_within(from_s, to_s);
  std::unordered_map<std::string, double> length_s;
  std::size_t concurrent_calls = 0;
  for (const RegionInterval& i : intervals) {
    length_s[recorder.names().at(i.region)] += i.end_s - i.begin_s;
    concurrent_calls += i.concurrent;
  }
  EXPECT_NEAR(length_s["backward"], 0.004, 1e-6);  // ended where the layer began
  EXPECT_NEAR(length_s["layer"], 0.002, 1e-6);
  EXPECT_EQ(concurrent_calls, 2u);
  EXPECT_NEAR(length_s["allreduce"], 0.004 + 0.002, 1e-6);  // 4 ms and 2 ms: its own instants, not moved
}

TEST(GpuEdgeClockTest, ConcurrentCallsKeepTheirInstantsAndALateEndGoesBeforeTheLastEdge) {
  auto clock = std::make_shared<VirtualClock>(1.0);
  SimulatedGpuEvents gpu(clock, 20.0);
  RegionRecorder recorder(clock);
  GpuEdgeClock edges(recorder, gpu);
  const double from_s = clock->now_s();
  record_overlapped_step(edges, gpu);  // every edge still queued when the end comes late
  clock->advance_s(1.0);  // anchors a second apart: their brackets barely move the rate
  edges.flush();
  expect_overlapped_step(recorder, from_s, clock->now_s());
}

TEST(GpuEdgeClockTest, ALateEndFindsItsEdgeAlreadyReadFromTheGpu) {
  auto clock = std::make_shared<VirtualClock>(1.0);
  SimulatedGpuEvents gpu(clock, 0.0);
  RegionRecorder recorder(clock);
  GpuEdgeClock edges(recorder, gpu, {.drain_every = 1});  // every edge the GPU has passed is read at once
  EXPECT_FALSE(edges.end_before_last("nothing"));         // no nested edge yet
  const double from_s = clock->now_s();
  edges.begin("backward");
  gpu.queue(0.004);
  clock->advance_s(0.005);
  edges.begin("layer");
  clock->advance_s(0.001);  // the GPU passed "layer": read before the late end comes
  edges.begin_concurrent("allreduce");
  EXPECT_TRUE(edges.end_before_last("backward"));
  gpu.queue(0.002);
  edges.end("layer");
  edges.end_concurrent("allreduce");
  clock->advance_s(1.0);
  edges.flush();
  EXPECT_EQ(recorder.open_regions(), 0u);
  const auto intervals = recorder.intervals_within(from_s, clock->now_s());
  ASSERT_EQ(intervals.size(), 3u);
  EXPECT_EQ(recorder.names().at(intervals[0].region), "backward");
  EXPECT_NEAR(intervals[0].end_s - intervals[0].begin_s, 0.005, 1e-6);  // up to the layer's begin
  EXPECT_FALSE(edges.end_before_last("backward"));  // everything handed over
}

// A backward region handing over to the next: one event for the end and the
// begin, read once, at one instant; the durations on either side exact.
TEST(GpuEdgeClockTest, AnEndAndTheNextBeginShareOneEventAndOneInstant) {
  auto clock = std::make_shared<VirtualClock>(1.0);
  SimulatedGpuEvents gpu(clock, 0.0);
  RegionRecorder recorder(clock);
  GpuEdgeClock edges(recorder, gpu, {.drain_every = 2});  // read as it goes: the shared event goes back to the pool
  const double from_s = clock->now_s();
  const std::size_t before = gpu.records();
  for (int i = 0; i < 50; ++i) {
    edges.begin("a.backward");
    gpu.queue(0.002);
    clock->advance_s(0.0001);
    edges.end_and_begin("a.backward", "b.backward");
    gpu.queue(0.003);
    clock->advance_s(0.0001);
    edges.end("b.backward");
    clock->advance_s(0.006);
  }
  EXPECT_EQ(gpu.records() - before, 150u);  // three events a step for four edges
  edges.flush();
  const auto intervals = recorder.intervals_within(from_s, clock->now_s());
  ASSERT_EQ(intervals.size(), 100u);
  for (std::size_t i = 0; i < intervals.size(); i += 2) {
    EXPECT_EQ(intervals[i].end_s, intervals[i + 1].begin_s) << i;
    EXPECT_NEAR(intervals[i].end_s - intervals[i].begin_s, 0.002, 1e-6) << i;
    EXPECT_NEAR(intervals[i + 1].end_s - intervals[i + 1].begin_s, 0.003, 1e-6) << i;
  }
}

TEST(GpuEdgeClockTest, OptionsOutOfRangeAreRefused) {
  auto clock = std::make_shared<VirtualClock>(0.0);
  SimulatedGpuEvents gpu(clock, 0.0);
  RegionRecorder recorder(clock);
  EXPECT_THROW(GpuEdgeClock(recorder, gpu, {.anchor_tries = 0}), UsageError);
  EXPECT_THROW(GpuEdgeClock(recorder, gpu, {.drain_every = 0}), UsageError);
}

}  // namespace
}  // namespace joule::attribution
