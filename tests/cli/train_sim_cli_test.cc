// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule train-sim` end to end.
#include <gtest/gtest.h>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;

TEST(TrainSimCliTest, PrintsTheProfileAndTheDecision) {
  const auto r = run_process({JOULE_BINARY, "train-sim", "--sim", "count=2", "--objective", "energy"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 SIMULATED GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("objective energy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<- chosen"), std::string::npos) << r.out;
  // With the default model, energy per step falls all the way to the minimum.
  EXPECT_NE(r.out.find("chose 200 W"), std::string::npos) << r.out;
}

// The SM clock knob on the simulated GPUs' model: energy per step falls as
// the clock does (the power above idle with its cube), down to the lowest cap tried.
TEST(TrainSimCliTest, TunesTheSmClockCapWhenAsked) {
  const auto r = run_process({JOULE_BINARY, "train-sim", "--sim", "count=2", "--objective", "energy", "--knob",
                              "sm_clock", "--step-mhz", "250", "--epochs", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("joule SM clock profile"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cost vs 1980 MHz"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chose SM clock cap 1215 MHz"), std::string::npos) << r.out;  // 1980, 1725, 1470, 1215: the lowest above half
  EXPECT_NE(r.out.find("at 1980 MHz throughout"), std::string::npos) << r.out;
  const auto bad = run_process({JOULE_BINARY, "train-sim", "--knob", "core_clock"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("core_clock"), std::string::npos) << bad.err;
}

TEST(TrainSimCliTest, SavedProfileIsReusedUnlessReprofiling) {
  testing::TempDir tmp;
  const std::vector<std::string> base = {JOULE_BINARY, "train-sim", "--profile", tmp.file("p.json"), "--job", "demo"};
  ASSERT_EQ(run_process(base).exit_code, 0);
  const auto again = run_process(base);
  EXPECT_NE(again.out.find("(saved profile)"), std::string::npos) << again.out;
  auto forced = base;
  forced.push_back("--reprofile");
  EXPECT_EQ(run_process(forced).out.find("(saved profile)"), std::string::npos);
}

// Steps with stalls as noisy as a real loop's: the profile says how far it
// trusts each limit, a seed repeats a run exactly, and the clear saving
// (energy at the lowest limit) is still found.
TEST(TrainSimCliTest, NoisyStepsAreProfiledInRoundsAndASeedRepeatsARun) {
  const std::vector<std::string> args = {JOULE_BINARY, "train-sim", "--sim", "count=1", "--objective", "energy",
                                         "--step-ms", "11", "--stall-ms", "2", "--seed", "3", "--step-w", "100",
                                         "--epochs", "2", "--steps-per-epoch", "4000"};
  const auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stalls of 2 ms on average (seed 3)"), std::string::npos) << r.out;
  // 49% at the lowest limit is clear after three screening rounds.
  EXPECT_NE(r.out.find("significant at 99% over 5 comparisons"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decided at screening"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cost vs 700 W"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chose 200 W"), std::string::npos) << r.out;
  EXPECT_EQ(run_process(args).out, r.out);
  const auto bad = run_process({JOULE_BINARY, "train-sim", "--stall-ms", "-1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--stall-ms: -1 is outside [0, 3600000]"), std::string::npos) << bad.err;
}

// Issue 34: the header showed "batch size 0" when none was given, and the
// run never said that the limits were put back at the end.
TEST(TrainSimCliTest, SaysTheLimitsWereRestoredAndShowsOnlyARealBatchSize) {
  const auto r = run_process({JOULE_BINARY, "train-sim", "--sim", "count=2", "--objective", "energy"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("batch size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("profile: job 'train-sim', 2 x "), std::string::npos) << r.out;
  // Chose 200 W; 700 W put back, said last.
  EXPECT_NE(r.out.find("chose 200 W"), std::string::npos) << r.out;
  const std::string restored = "restored the power limit of 2 GPUs as the run found them: 700 W\n";
  ASSERT_GE(r.out.size(), restored.size());
  EXPECT_EQ(r.out.substr(r.out.size() - restored.size()), restored) << r.out;

  const auto sized = run_process({JOULE_BINARY, "train-sim", "--sim", "count=1", "--batch-size", "256"});
  ASSERT_EQ(sized.exit_code, 0) << sized.err;
  EXPECT_NE(sized.out.find("job 'train-sim', batch size 256, 1 x "), std::string::npos) << sized.out;
  EXPECT_NE(sized.out.find("restored the power limit of 1 GPU as the run found it: 700 W"), std::string::npos)
      << sized.out;

  const auto clocks = run_process({JOULE_BINARY, "train-sim", "--sim", "count=1", "--objective", "energy", "--knob",
                                   "sm_clock", "--step-mhz", "250", "--epochs", "4"});
  ASSERT_EQ(clocks.exit_code, 0) << clocks.err;
  EXPECT_NE(clocks.out.find("restored the SM clock of 1 GPU as the run found it: no lock"), std::string::npos)
      << clocks.out;

  // An observer changes nothing, so there is nothing to restore or say.
  const auto observer = run_process({JOULE_BINARY, "train-sim", "--sim", "count=1", "--observer"});
  ASSERT_EQ(observer.exit_code, 0) << observer.err;
  EXPECT_EQ(observer.out.find("restored"), std::string::npos) << observer.out;
}

TEST(TrainSimCliTest, TooFewStepsSaysSoAndBadOptionsAreNamed) {
  const auto r = run_process({JOULE_BINARY, "train-sim", "--epochs", "1", "--steps-per-epoch", "30"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("profiling did not finish"), std::string::npos) << r.out;
  const auto bad = run_process({JOULE_BINARY, "train-sim", "--objective", "speed"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown objective 'speed'"), std::string::npos) << bad.err;
  const auto eta = run_process({JOULE_BINARY, "train-sim", "--eta", "7"});
  EXPECT_NE(eta.err.find("--eta: 7 is outside [0, 1]"), std::string::npos) << eta.err;
}

}  // namespace
}  // namespace joule
