#include "joule/optimize/batch_size_optimizer.h"

#include <gtest/gtest.h>

#include <map>

#include "joule/error.h"
#include "joule/optimize/pruning.h"

namespace joule {
namespace {

TEST(PruningRoundTest, WalksDownThenUpStoppingAtFailures) {
  PruningRound round({8, 16, 32, 64, 128, 256}, 64);
  const std::map<int, bool> converges = {{8, true}, {16, false}, {32, true}, {64, true}, {128, true}, {256, false}};
  std::vector<int> tried;
  while (auto b = round.next()) {
    tried.push_back(*b);
    round.report(converges.at(*b));
  }
  // 8 is never tried: 16 below it failed.
  EXPECT_EQ(tried, (std::vector<int>{64, 32, 16, 128, 256}));
  EXPECT_TRUE(round.done());
}

TEST(PruningRoundTest, EdgesOfTheListEndADirection) {
  PruningRound round({8, 16, 32}, 8);  // nothing below b0
  std::vector<int> tried;
  while (auto b = round.next()) {
    tried.push_back(*b);
    round.report(true);
  }
  EXPECT_EQ(tried, (std::vector<int>{8, 16, 32}));
}

// Cost by batch size of a deterministic job; 16 and 256 miss the target.
struct Job {
  std::map<int, double> cost = {{16, 0}, {32, 120}, {64, 100}, {128, 90}, {256, 0}};
  bool converges(int b) const { return cost.at(b) > 0; }
};

BatchSizeOptimizerOptions options() {
  BatchSizeOptimizerOptions o;
  o.batch_sizes = {16, 32, 64, 128, 256};
  o.default_batch_size = 64;
  o.seed = 42;
  return o;
}

TEST(BatchSizeOptimizerTest, TwoPruningRoundsThenThompsonAmongSurvivors) {
  BatchSizeOptimizer optimizer(options());
  Job job;
  std::vector<int> tried;
  while (optimizer.phase() == BatchSizeOptimizer::Phase::kPruning) {
    const int b = optimizer.predict();
    tried.push_back(b);
    optimizer.observe(b, job.converges(b) ? job.cost.at(b) : 250.0, job.converges(b));
  }
  // Round 1 from 64: down 32, 16 (fails), up 128, 256 (fails). Round 2 from
  // the cheapest survivor, 128, over {32, 64, 128}: 128, 64, 32.
  EXPECT_EQ(tried, (std::vector<int>{64, 32, 16, 128, 256, 128, 64, 32}));
  EXPECT_EQ(optimizer.candidates(), (std::vector<int>{32, 64, 128}));
  EXPECT_EQ(optimizer.default_batch_size(), 128);
  // Every survivor has two observations, so Thompson sampling has variances.
  for (int b : {32, 64, 128}) EXPECT_EQ(optimizer.sampler().observations(b).size(), 2u);
  int picks_128 = 0;
  for (int i = 0; i < 50; ++i) {
    const int b = optimizer.predict();
    picks_128 += b == 128;
    optimizer.observe(b, job.cost.at(b) + (i % 3), true);
  }
  EXPECT_GE(picks_128, 45);
}

TEST(BatchSizeOptimizerTest, EarlyStopThresholdIsBetaTimesTheCheapestConvergedCost) {
  BatchSizeOptimizer optimizer(options());
  EXPECT_TRUE(std::isinf(optimizer.early_stop_threshold_cost()));
  optimizer.observe(optimizer.predict(), 100.0, true);
  EXPECT_DOUBLE_EQ(optimizer.early_stop_threshold_cost(), 200.0);
  optimizer.observe(optimizer.predict(), 500.0, false);  // failures do not lower it
  EXPECT_DOUBLE_EQ(optimizer.early_stop_threshold_cost(), 200.0);
  optimizer.observe(optimizer.predict(), 80.0, true);
  EXPECT_DOUBLE_EQ(optimizer.early_stop_threshold_cost(), 160.0);
}

TEST(BatchSizeOptimizerTest, ConcurrentJobsDuringPruningGetTheBestKnownSize) {
  BatchSizeOptimizer optimizer(options());
  EXPECT_EQ(optimizer.predict(), 64);  // exploration of b0, outstanding
  EXPECT_EQ(optimizer.predict(), 64);  // nothing known yet: the default
  optimizer.observe(64, 100.0, true);
  EXPECT_EQ(optimizer.predict(), 32);  // next exploration
  EXPECT_EQ(optimizer.predict(), 64);  // concurrent: best known
  optimizer.observe(64, 101.0, true);  // the concurrent job reports first
  optimizer.observe(32, 120.0, true);  // then the exploration
  EXPECT_EQ(optimizer.predict(), 16);  // pruning carried on where it was
}

TEST(BatchSizeOptimizerTest, StateRoundTripsThroughJson) {
  BatchSizeOptimizer original(options());
  Job job;
  for (int i = 0; i < 11; ++i) {  // into the Thompson phase
    const int b = original.predict();
    original.observe(b, job.converges(b) ? job.cost.at(b) + i : 250.0, job.converges(b));
  }
  const std::string saved = original.to_json().dump();
  BatchSizeOptimizer restored = BatchSizeOptimizer::from_json(nlohmann::json::parse(saved));
  EXPECT_EQ(restored.to_json(), original.to_json());
  for (int i = 0; i < 20; ++i) {
    const int a = original.predict(), b = restored.predict();
    ASSERT_EQ(a, b) << i;
    original.observe(a, job.cost.at(a) + i, true);
    restored.observe(b, job.cost.at(b) + i, true);
  }
}

TEST(BatchSizeOptimizerTest, RejectsBadOptionsAndState) {
  auto o = options();
  o.default_batch_size = 48;
  EXPECT_THROW(BatchSizeOptimizer{o}, UsageError);
  o = options();
  o.beta = 1.0;
  EXPECT_THROW(BatchSizeOptimizer{o}, UsageError);
  o = options();
  o.batch_sizes = {64, 32};
  EXPECT_THROW(BatchSizeOptimizer{o}, UsageError);
  BatchSizeOptimizer optimizer(options());
  EXPECT_THROW(optimizer.observe(48, 1.0, true), UsageError);
  auto state = optimizer.to_json();
  state["phase"] = "dreaming";
  EXPECT_THROW(BatchSizeOptimizer::from_json(state), UsageError);
  EXPECT_THROW(BatchSizeOptimizer::from_json(nlohmann::json::object()), UsageError);
}

TEST(BatchSizeOptimizerTest, WithoutKeptObservationsStateIsNotSaved) {
  BatchSizeOptimizerOptions options{{32, 64, 128}, 64, 2.0, std::nullopt, {}, 1, false};
  BatchSizeOptimizer optimizer(options);
  optimizer.observe(optimizer.predict(), 10.0, true);
  EXPECT_THROW(optimizer.to_json(), UsageError);
}

}  // namespace
}  // namespace joule
