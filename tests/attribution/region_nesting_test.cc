// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// RegionNesting: the edges a step's hooks make, repaired where hooks do not
// nest (a late end, interleaved branches, a region reopened, a backward
// pass that raised), against a sink that writes down what it was handed.
#include "joule/attribution/region_nesting.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace joule::attribution {
namespace {

using Edges = std::vector<std::string>;

// "+name" a begin, "-name" an end, "<name" an end put before the last edge,
// "-a+b" an end and a begin at one instant.
class WrittenSink final : public EdgeSink {
 public:
  void begin(const std::string& name) override { edges.push_back("+" + name); }
  void end(const std::string& name) override { edges.push_back("-" + name); }
  void end_and_begin(const std::string& ended, const std::string& begun) override {
    edges.push_back("-" + ended + "+" + begun);
  }
  bool end_before_last(const std::string& name) override {
    if (!can_move_up) return false;
    edges.push_back("<" + name);
    return true;
  }
  Edges edges;
  bool can_move_up = true;
};

TEST(RegionNestingTest, NestedRegionsPassThroughUnchanged) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  nesting.begin("step", true);
  nesting.begin("a.forward", true);
  nesting.end("a.forward");
  nesting.end("step");
  EXPECT_EQ(sink.edges, (Edges{"+step", "+a.forward", "-a.forward", "-step"}));
  EXPECT_TRUE(nesting.notes().empty());
  EXPECT_TRUE(nesting.open().empty());
}

TEST(RegionNestingTest, AnEndFoundLateGoesBeforeTheBeginRecordedLast) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  nesting.begin("a", true);
  nesting.begin("b", true);  // torch ran b's begin first on the same gradient
  nesting.end("a");
  EXPECT_EQ(sink.edges, (Edges{"+a", "+b", "<a"}));
  EXPECT_EQ(nesting.open(), (Edges{"b"}));
  EXPECT_TRUE(nesting.notes().empty());

  // Where the edge recorded last was handed over already, it cannot move:
  // the inner region is closed and begun again, with a note.
  WrittenSink flushed;
  flushed.can_move_up = false;
  RegionNesting late(flushed);
  late.begin("a", true);
  late.begin("b", true);
  late.end("a");
  EXPECT_EQ(flushed.edges, (Edges{"+a", "+b", "-b", "-a", "+b"}));
  ASSERT_EQ(late.notes().size(), 1u);
  EXPECT_NE(late.notes()[0].find("a ended while b inside it ran"), std::string::npos) << late.notes()[0];
}

TEST(RegionNestingTest, InterleavedEndsCloseAndReopenTheRegionsInsideOnceNoted) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  nesting.begin("a", true);
  nesting.begin("b", true);
  nesting.begin("c", true);
  nesting.end("a");  // not the late-end case: two regions inside
  EXPECT_EQ(sink.edges, (Edges{"+a", "+b", "+c", "-c", "-b", "-a", "+b", "+c"}));
  EXPECT_EQ(nesting.open(), (Edges{"b", "c"}));
  nesting.begin("a", true);
  nesting.begin("x", true);
  nesting.begin("y", true);
  nesting.end("a");
  ASSERT_EQ(nesting.notes().size(), 1u) << "one note per region";
  EXPECT_NE(nesting.notes()[0].find("a ended while b, c inside it ran"), std::string::npos) << nesting.notes()[0];
}

TEST(RegionNestingTest, AReopenedRegionIsClosedFirstAndAStrayEndSkipped) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  nesting.begin("a", true);
  nesting.begin("a", true);
  nesting.end("nothing");
  nesting.end("nothing");
  EXPECT_EQ(sink.edges, (Edges{"+a", "-a", "+a"}));
  ASSERT_EQ(nesting.notes().size(), 2u);
  EXPECT_EQ(nesting.notes()[0], "a: began again while still open; the open call was closed");
  EXPECT_EQ(nesting.notes()[1], "nothing: ended without having begun; that edge was skipped");
}

TEST(RegionNestingTest, BackwardRegionsFollowEachOtherAndTheLastEndsWithThePass) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  nesting.begin("step", true);
  EXPECT_TRUE(nesting.begin_backward("head.backward", 7)) << "the pass's first: the caller queues its end";
  EXPECT_FALSE(nesting.begin_backward("head.backward", 7)) << "a second output of the same call";
  EXPECT_FALSE(nesting.begin_backward("body.backward", 7));
  nesting.end_backward();
  nesting.end_backward();  // nothing open any more: no edge
  nesting.end("step");
  EXPECT_EQ(sink.edges, (Edges{"+step", "+head.backward", "-head.backward+body.backward", "-body.backward", "-step"}));
  EXPECT_TRUE(nesting.notes().empty());

  // A region of yours begun inside the pass (a checkpointed forward) and
  // still open: no shared instant; the open one's end goes before that
  // begin (nothing ran between them), then the next begins.
  sink.edges.clear();
  EXPECT_TRUE(nesting.begin_backward("a.backward", 8));
  nesting.begin("recompute", false);
  EXPECT_FALSE(nesting.begin_backward("b.backward", 8));
  EXPECT_EQ(sink.edges, (Edges{"+a.backward", "+recompute", "<a.backward", "+b.backward"}));
}

TEST(RegionNestingTest, APassThatRaisedEndsItsRegionAtTheNextEdgeFromOutsideOrFromAnotherPass) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  EXPECT_TRUE(nesting.begin_backward("a.backward", 1));
  nesting.begin("inside", false);  // an edge inside the pass (a checkpointed forward): nothing abandoned
  nesting.end("inside");
  nesting.begin("data", true);  // the pass raised: its end never came
  nesting.end("data");
  EXPECT_EQ(sink.edges, (Edges{"+a.backward", "+inside", "-inside", "-a.backward", "+data", "-data"}));
  ASSERT_EQ(nesting.notes().size(), 1u);
  EXPECT_NE(nesting.notes()[0].find("a.backward: its backward pass did not finish"), std::string::npos);

  sink.edges.clear();
  EXPECT_TRUE(nesting.begin_backward("b.backward", 2));
  EXPECT_TRUE(nesting.begin_backward("b.backward", 3)) << "another pass: the first of its own";
  EXPECT_EQ(sink.edges, (Edges{"+b.backward", "-b.backward", "+b.backward"}));
  // Outside a pass: torch's id -1; before 2.0 (no id), grad mode on.
  EXPECT_TRUE(RegionNesting::outside_backward(-1, false));
  EXPECT_FALSE(RegionNesting::outside_backward(4, true));
  EXPECT_TRUE(RegionNesting::outside_backward(std::nullopt, true));
  EXPECT_FALSE(RegionNesting::outside_backward(std::nullopt, false));
  // Where torch does not say which pass (before 2.0), passes are not told apart.
  RegionNesting old_torch(sink);
  EXPECT_TRUE(old_torch.begin_backward("c.backward", std::nullopt));
  EXPECT_FALSE(old_torch.begin_backward("d.backward", std::nullopt));
}

TEST(RegionNestingTest, ClosingAllEndsEveryOpenRegionWithANote) {
  WrittenSink sink;
  RegionNesting nesting(sink);
  nesting.begin("outer", true);
  nesting.begin_backward("x.backward", 1);
  nesting.close_all();
  EXPECT_EQ(sink.edges, (Edges{"+outer", "+x.backward", "-x.backward", "-outer"}));
  EXPECT_TRUE(nesting.open().empty());
  ASSERT_EQ(nesting.notes().size(), 2u);
  EXPECT_EQ(nesting.notes()[0], "x.backward: still open when the session ended; closed there");
  nesting.end_backward();  // the pass's callback after the session: nothing left to end
  EXPECT_EQ(sink.edges.size(), 4u);
}

}  // namespace
}  // namespace joule::attribution
