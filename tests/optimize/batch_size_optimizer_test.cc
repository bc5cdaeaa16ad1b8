// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/batch_size_optimizer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>

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

BatchSizeOptimizerOptions sums_only_options() {
  BatchSizeOptimizerOptions o = options();
  o.keep_observations = false;
  return o;
}

// A job whose cost at each batch size is noisy (seeded: every optimizer fed
// from one job sees the same costs) and stopped early past the threshold;
// 16 never reaches the target.
class NoisyJob {
 public:
  explicit NoisyJob(uint64_t seed) : rng_(seed) {}
  // One recurrence at batch size b: {cost, converged}.
  std::pair<double, bool> run(int b, double threshold_cost) {
    static const std::map<int, double> kMeanCost = {{16, 250}, {32, 110}, {64, 100}, {128, 96}, {256, 103}};
    const double cost = kMeanCost.at(b) * std::exp(0.1 * noise_(rng_));
    if (b == 16 || cost > threshold_cost) return {std::min(cost, threshold_cost), false};
    return {cost, true};
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> noise_;
};

void expect_same_bits(const RunningSums& a, const RunningSums& b, int batch_size) {
  EXPECT_EQ(a.n, b.n) << batch_size;
  EXPECT_EQ(std::bit_cast<uint64_t>(a.sum), std::bit_cast<uint64_t>(b.sum)) << batch_size;
  EXPECT_EQ(std::bit_cast<uint64_t>(a.welford_mean), std::bit_cast<uint64_t>(b.welford_mean)) << batch_size;
  EXPECT_EQ(std::bit_cast<uint64_t>(a.m2), std::bit_cast<uint64_t>(b.m2)) << batch_size;
}

// As a service would: every request (predict, then observe) loads the state
// from its text and saves it back. Every fifth recurrence a second job is
// submitted before the first reports.
TEST(BatchSizeOptimizerTest, RunningSumsStateSavedEveryRequestDecidesAsNeverSaved) {
  BatchSizeOptimizerOptions o = sums_only_options();
  o.beta = 1.3;  // many runs are stopped early: the thresholds matter
  BatchSizeOptimizer never_saved(o);
  o.keep_observations = true;
  BatchSizeOptimizer kept(o);  // same seed, every observation kept
  std::string saved = never_saved.to_json().dump();
  const auto request = [&saved](auto&& act) {
    BatchSizeOptimizer loaded = BatchSizeOptimizer::from_json(nlohmann::json::parse(saved));
    const auto result = act(loaded);
    saved = loaded.to_json().dump();
    return result;
  };
  NoisyJob job(7);
  int stopped_early = 0;
  for (int i = 0; i < 200; ++i) {
    const int jobs = i % 5 == 4 ? 2 : 1;
    std::vector<int> sizes;
    for (int k = 0; k < jobs; ++k) {
      const int b = never_saved.predict();
      ASSERT_EQ(request([](BatchSizeOptimizer& loaded) { return loaded.predict(); }), b) << i;
      ASSERT_EQ(kept.predict(), b) << i;
      sizes.push_back(b);
    }
    for (int b : sizes) {
      const double threshold = never_saved.early_stop_threshold_cost();
      ASSERT_EQ(request([](BatchSizeOptimizer& loaded) { return loaded.early_stop_threshold_cost(); }), threshold) << i;
      ASSERT_EQ(kept.early_stop_threshold_cost(), threshold) << i;
      const auto [cost, converged] = job.run(b, threshold);
      stopped_early += cost == threshold;
      never_saved.observe(b, cost, converged);
      kept.observe(b, cost, converged);
      request([&, cost = cost, converged = converged](BatchSizeOptimizer& loaded) {
        loaded.observe(b, cost, converged);
        return 0;
      });
    }
  }
  EXPECT_EQ(never_saved.phase(), BatchSizeOptimizer::Phase::kThompson);
  EXPECT_GT(stopped_early, 20);
  const nlohmann::json state = nlohmann::json::parse(saved);
  EXPECT_EQ(state.at("version"), 2);
  EXPECT_FALSE(state.contains("observations"));
  EXPECT_EQ(state, never_saved.to_json());
  const BatchSizeOptimizer restored = BatchSizeOptimizer::from_json(state);
  EXPECT_FALSE(restored.sampler().keeps_history());
  for (int b : options().batch_sizes) {
    expect_same_bits(restored.sampler().running(b), never_saved.sampler().running(b), b);
    expect_same_bits(restored.sampler().running(b), kept.sampler().running(b), b);
  }
}

TEST(BatchSizeOptimizerTest, RunningSumsStateSizeDoesNotGrowWithRecurrences) {
  BatchSizeOptimizer optimizer(sums_only_options());
  NoisyJob job(11);
  std::map<int, nlohmann::json> state;
  for (int i = 1; i <= 1000; ++i) {
    const int b = optimizer.predict();
    const auto [cost, converged] = job.run(b, optimizer.early_stop_threshold_cost());
    optimizer.observe(b, cost, converged);
    if (i == 10 || i == 1000) state[i] = optimizer.to_json();
  }
  EXPECT_GT(state[1000].at("running_sums").at("128").at("n").get<int>(), 500);  // the job did recur
  // The random generator's state is 312 words whatever the job, but their
  // decimal digits vary by a few dozen bytes: compared apart.
  const auto size_bytes = [](nlohmann::json j) {
    j.erase("rng");
    return static_cast<double>(j.dump().size());
  };
  // Apart from it, only n's digits grow (at most 3 per size here).
  EXPECT_NEAR(size_bytes(state[1000]), size_bytes(state[10]), 16.0);
  EXPECT_NEAR(static_cast<double>(state[1000].dump().size()), static_cast<double>(state[10].dump().size()), 64.0);
}

// tests/optimize/data/batch_size_optimizer_v1.json was written by to_json()
// before version 2 existed, from options() and the Job's costs plus 0.1 per
// recurrence, 14 recurrences.
// The file was written by an earlier build, whose random generator was a
// std::mt19937_64 (its "rng" is 313 numbers; PCG's is 3).
TEST(BatchSizeOptimizerTest, VersionOneStatesStillLoadAndAreWrittenAsBefore) {
  std::ifstream file(std::string(JOULE_SOURCE_DIR) + "/tests/optimize/data/batch_size_optimizer_v1.json");
  ASSERT_TRUE(file);
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  BatchSizeOptimizer replayed(options());
  Job job;
  for (int i = 0; i < 14; ++i) {
    const int b = replayed.predict();
    replayed.observe(b, job.converges(b) ? job.cost.at(b) + 0.1 * i : 250.0, job.converges(b));
  }
  // All but the generator is written as before.
  nlohmann::json written = replayed.to_json(), stored = nlohmann::json::parse(text);
  ASSERT_GT(stored.at("rng").get<std::string>().size(), 1000u);
  written.erase("rng");
  stored.erase("rng");
  EXPECT_EQ(written, stored);
  // The old generator's state loads, and goes on the same way every time.
  BatchSizeOptimizer loaded = BatchSizeOptimizer::from_json(nlohmann::json::parse(text));
  BatchSizeOptimizer again = BatchSizeOptimizer::from_json(nlohmann::json::parse(text));
  EXPECT_TRUE(loaded.sampler().keeps_history());
  EXPECT_EQ(loaded.sampler().observations(128).size(), 8u);
  // A state written now goes on exactly where its writer stopped.
  BatchSizeOptimizer restored = BatchSizeOptimizer::from_json(replayed.to_json());
  for (int i = 0; i < 20; ++i) {
    const int b = loaded.predict();
    ASSERT_EQ(again.predict(), b) << i;
    loaded.observe(b, job.cost.at(b) + i, true);
    again.observe(b, job.cost.at(b) + i, true);
    const int r = replayed.predict();
    ASSERT_EQ(restored.predict(), r) << i;
    replayed.observe(r, job.cost.at(r) + i, true);
    restored.observe(r, job.cost.at(r) + i, true);
  }
}

// With a window its observations are the state, whatever keep_observations.
TEST(BatchSizeOptimizerTest, WindowedStateListsTheWindowsObservations) {
  BatchSizeOptimizerOptions o = sums_only_options();
  o.window = 3;
  BatchSizeOptimizer optimizer(o);
  for (int i = 0; i < 5; ++i) optimizer.observe(64, 100.0 + i, true);
  const nlohmann::json state = optimizer.to_json();
  EXPECT_EQ(state.at("version"), 1);
  EXPECT_EQ(state.at("observations").at("64"), nlohmann::json({102.0, 103.0, 104.0}));
  EXPECT_EQ(BatchSizeOptimizer::from_json(state).to_json(), state);
}

void expect_refused(const nlohmann::json& state, const std::string& message) {
  try {
    BatchSizeOptimizer::from_json(state);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(BatchSizeOptimizerTest, MalformedRunningSumsStatesAreRefused) {
  BatchSizeOptimizer optimizer(sums_only_options());
  for (int i = 0; i < 3; ++i) optimizer.observe(64, 100.0 + i, true);
  const nlohmann::json good = optimizer.to_json();
  ASSERT_NO_THROW(BatchSizeOptimizer::from_json(good));
  const auto broken = [&good](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return j;
  };
  const auto sums = "/running_sums/64"_json_pointer;
  expect_refused(broken([](auto& j) { j["version"] = 3; }), "optimizer state: unsupported version 3");
  for (const char* rng : {"", "1 2", "6364136223846793005 1442695040888963407 1 extra", "not numbers"}) {
    expect_refused(broken([&](auto& j) { j["rng"] = rng; }), "optimizer state: bad random-generator state");
  }
  expect_refused(broken([&](auto& j) { j[sums]["n"] = -3; }), "optimizer state: batch size 64 has n -3");
  expect_refused(broken([&](auto& j) { j[sums]["n"] = 2.5; }), "optimizer state: batch size 64 has n 2.5");
  // NaN and infinity: as a caller's object, and as the null they are saved as.
  expect_refused(broken([&](auto& j) { j[sums]["sum"] = std::numeric_limits<double>::quiet_NaN(); }),
                 "batch size 64: running sums n 3, sum nan");
  expect_refused(broken([&](auto& j) { j[sums]["m2"] = std::numeric_limits<double>::infinity(); }),
                 "batch size 64: running sums n 3, sum 303, welford_mean 101, m2 inf");
  expect_refused(nlohmann::json::parse(broken([&](auto& j) {
                                         j[sums]["welford_mean"] = std::numeric_limits<double>::infinity();
                                       }).dump()),
                 "optimizer state: batch size 64 has welford_mean null (must be a finite number)");
  expect_refused(broken([&](auto& j) { j[sums]["m2"] = -1.0; }), "batch size 64: running sums");
  expect_refused(broken([](auto& j) { j["running_sums"]["48"] = j["running_sums"]["64"]; }),
                 "optimizer state: running sums for batch size 48, not one of the choices");
  expect_refused(broken([](auto& j) { j["running_sums"].erase("32"); }),
                 "optimizer state: no running sums for batch size 32");
  expect_refused(broken([](auto& j) { j["options"]["window"] = 10; }), "cannot have a window");
  expect_refused(broken([](auto& j) { j["options"]["keep_observations"] = true; }),
                 "must have keep_observations false");
  expect_refused(broken([](auto& j) { j.erase("running_sums"); }), "running_sums");
}

// A cost that is not finite is refused before it can become the threshold or
// a sum: the optimizer and its saved state are as before.
TEST(BatchSizeOptimizerTest, ANonFiniteCostIsRefusedAndChangesNothing) {
  BatchSizeOptimizerOptions o = options();
  o.keep_observations = false;
  BatchSizeOptimizer optimizer(o);
  const int b = optimizer.predict();
  const nlohmann::json before = optimizer.to_json();
  EXPECT_THROW(optimizer.observe(b, std::numeric_limits<double>::infinity(), true), UsageError);
  EXPECT_THROW(optimizer.observe(b, std::nan(""), true), UsageError);
  EXPECT_EQ(optimizer.to_json(), before);
  EXPECT_TRUE(std::isinf(optimizer.early_stop_threshold_cost()));
}

// The recurrences of a job, replayed in order into a fresh optimizer (a
// state rebuilt after damage), give the sums, phase, survivors and threshold
// the optimizer that saw them had.
TEST(BatchSizeOptimizerTest, ReplayingARecurrencesHistoryRebuildsItsState) {
  BatchSizeOptimizerOptions o = options();
  o.keep_observations = false;
  BatchSizeOptimizer original(o), rebuilt(o);
  Job job;
  std::mt19937_64 noise(5);
  for (int i = 0; i < 40; ++i) {
    const int b = original.predict();
    const double cost = (job.converges(b) ? job.cost.at(b) : 250.0) + std::uniform_real_distribution<>(0, 5)(noise);
    original.observe(b, cost, job.converges(b));
    rebuilt.replay(b, cost, job.converges(b));
  }
  const nlohmann::json a = original.to_json(), b = rebuilt.to_json();
  for (const char* key : {"phase", "round", "b0", "arms", "survivors", "running_sums", "min_cost", "pending"}) {
    EXPECT_EQ(a[key], b[key]) << key;
  }
  EXPECT_EQ(original.early_stop_threshold_cost(), rebuilt.early_stop_threshold_cost());
}

}  // namespace
}  // namespace joule
