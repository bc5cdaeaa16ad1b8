// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// LibTorchRegions on the CPU (Debian's LibTorch), edges at host instants: a
// model's recorded calls give their forward regions in order and their
// backward regions in backward order without gaps, the last ending with
// autograd's pass; no backward region under no_grad; a call whose output
// has no autograd node is noted, not hooked.
#include "joule/attribution/libtorch_regions.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "joule/clock.h"

namespace joule::attribution {
namespace {

struct Recorded {
  std::shared_ptr<SteadyClock> clock = std::make_shared<SteadyClock>();
  RegionRecorder recorder{clock};
  RecorderEdges edges{recorder};
  LibTorchRegions regions{edges};

  // The ended intervals, by name, in order of beginning.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const RegionInterval& i : recorder.intervals_within(0.0, recorder.clock_s() + 1.0)) {
      out.push_back(recorder.names().at(i.region));
    }
    return out;
  }
};

TEST(LibTorchRegionsTest, BackwardRegionsFollowEachOtherInBackwardOrderAndEndWithThePass) {
  torch::manual_seed(0);
  torch::nn::Linear fc1(8, 16), fc2(16, 4);
  Recorded r;
  const auto first = r.regions.module("fc1"), second = r.regions.module("fc2");
  const torch::Tensor x = torch::randn({5, 8});
  for (int step = 0; step < 3; ++step) {
    r.regions.begin("step");
    const torch::Tensor h = first([&] { return torch::relu(fc1->forward(x)); });
    const torch::Tensor out = second([&] { return fc2->forward(h); });
    out.pow(2).mean().backward();
    r.regions.end("step");
  }
  const std::vector<std::string> names = r.names();
  // Each step: step's own time before fc1 begins and after the backward
  // ends; fc2.backward, then fc1.backward from the same hook's call (the
  // sliver of "step" between them is the two edges' own microseconds), the
  // last ended by the pass's end, before step's end.
  const std::vector<std::string> one_step = {"step", "fc1.forward",  "step", "fc2.forward", "step",
                                             "fc2.backward", "step", "fc1.backward", "step"};
  std::vector<std::string> expected;
  for (int step = 0; step < 3; ++step) expected.insert(expected.end(), one_step.begin(), one_step.end());
  EXPECT_EQ(names, expected);
  const auto intervals = r.recorder.intervals_within(0.0, r.recorder.clock_s() + 1.0);
  int slivers = 0;
  for (std::size_t i = 0; i + 2 < intervals.size(); ++i) {
    if (r.recorder.names().at(intervals[i].region) != "fc2.backward") continue;
    EXPECT_LT(intervals[i + 2].begin_s - intervals[i].end_s, 1e-3);  // not autograd's work between them
    ++slivers;
  }
  EXPECT_EQ(slivers, 3);
  EXPECT_TRUE(r.regions.notes().empty()) << r.regions.notes().front();
  EXPECT_EQ(r.recorder.open_regions(), 0u);
}

TEST(LibTorchRegionsTest, NoBackwardRegionWithoutGradAndANoteForAnOutputWithoutANode) {
  torch::nn::Linear fc(4, 4);
  Recorded r;
  const auto recorded = r.regions.module("fc");
  {
    torch::NoGradGuard no_grad;
    recorded([&] { return fc->forward(torch::randn({2, 4})); });
  }
  EXPECT_TRUE(r.regions.notes().empty());
  const auto leaf = r.regions.module("leaf");
  const torch::Tensor weight = leaf([&] { return fc->weight; });  // a parameter: no node made it
  weight.sum().backward();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"fc.forward", "leaf.forward"}));
  ASSERT_EQ(r.regions.notes().size(), 1u);
  EXPECT_NE(r.regions.notes()[0].find("leaf.backward: not recorded"), std::string::npos) << r.regions.notes()[0];
}

TEST(LibTorchRegionsTest, AnExceptionInACallEndsItsForwardAndCloseAllEndsTheRest) {
  Recorded r;
  const auto failing = r.regions.module("bad");
  r.regions.begin("outer");
  EXPECT_THROW(failing([]() -> torch::Tensor { throw std::runtime_error("shape mismatch"); }), std::runtime_error);
  r.regions.close_all();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"outer", "bad.forward", "outer"}));
  ASSERT_EQ(r.regions.notes().size(), 1u);
  EXPECT_EQ(r.regions.notes()[0], "outer: still open when the session ended; closed there");
}

}  // namespace
}  // namespace joule::attribution
