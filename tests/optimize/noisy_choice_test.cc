// choose_with_noise: quantiles, the decision rule on noiseless, noisy and
// correlated measurements, and how often noise alone moves it.
#include "joule/optimize/noisy_choice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "joule/error.h"

namespace joule {
namespace {

TEST(NoisyChoiceTest, QuantilesMatchTables) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959964, 1e-6);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302653, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.95, 5), 2.015048, 0.005 * 2.015048);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.228139, 0.002 * 2.228139);
  EXPECT_NEAR(student_t_quantile(0.995, 30), 2.749996, 0.002 * 2.749996);
  EXPECT_NEAR(student_t_quantile(0.9995, 60), 3.460200, 0.005 * 3.460200);
  EXPECT_THROW(normal_quantile(1.0), UsageError);
  EXPECT_THROW(student_t_quantile(0.9, 0.5), UsageError);
}

// `rounds` visits per candidate, made round by round (every candidate once,
// then again), each visit two stretches; time and energy are the candidate's
// own times a noise factor that drifts along the visits' order in time (an
// AR(1) with correlation rho from one visit to the next, spread cv).
std::vector<CandidateSamples> measured(const std::vector<std::pair<double, double>>& true_time_energy, int rounds,
                                       double cv, std::mt19937_64& rng, double rho = 0.0) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<CandidateSamples> out(true_time_energy.size());
  double drift = normal(rng);
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t c = 0; c < true_time_energy.size(); ++c) {
      out[c].setting = 700.0 - 50.0 * static_cast<double>(c);
      for (int stretch = 0; stretch < 2; ++stretch) {
        drift = rho * drift + std::sqrt(1 - rho * rho) * normal(rng);
        const double factor = 1.0 + cv * drift;
        out[c].stretches.push_back({true_time_energy[c].first * factor, true_time_energy[c].second * factor, round});
      }
    }
  }
  return out;
}

TEST(NoisyChoiceTest, WithoutNoiseTheCheapestIsChosenAndNothingIsOpen) {
  std::mt19937_64 rng(1);
  const auto candidates = measured({{0.010, 5.0}, {0.011, 4.0}, {0.013, 3.9}}, 3, 0.0, rng);
  const NoiseAwareChoice choice = choose_with_noise(candidates, 0, Objective::energy(), 700.0);
  EXPECT_EQ(choice.chosen, 2u);
  EXPECT_TRUE(choice.moved);
  EXPECT_TRUE(choice.open.empty());
  EXPECT_NE(choice.summary.find("significant at 95%"), std::string::npos) << choice.summary;
}

// The same true cost everywhere: noise alone moves the choice in at most
// about 5% of trials (95% confidence over all comparisons together), also
// when the noise drifts from stretch to stretch.
TEST(NoisyChoiceTest, NoiseAloneRarelyMovesIt) {
  for (const double rho : {0.0, 0.6}) {
    std::mt19937_64 rng(7);
    int moves = 0;
    constexpr int kTrials = 400;
    for (int trial = 0; trial < kTrials; ++trial) {
      const auto candidates = measured(std::vector<std::pair<double, double>>(11, {0.014, 6.6}), 4, 0.08, rng, rho);
      const NoiseAwareChoice choice = choose_with_noise(candidates, 0, Objective::cost(0.5), 700.0);
      moves += choice.moved ? 1 : 0;
    }
    EXPECT_LE(moves, kTrials * 0.08) << "rho " << rho;
  }
}

// A 15% cheaper candidate among ten, 8% noise: found nearly always.
TEST(NoisyChoiceTest, ARealDifferenceIsFound) {
  std::mt19937_64 rng(3);
  int found = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::pair<double, double>> truth(10, {0.014, 6.6});
    truth[6] = {0.0145, 5.2};
    const auto candidates = measured(truth, 6, 0.08, rng);
    const NoiseAwareChoice choice = choose_with_noise(candidates, 0, Objective::energy(), 700.0);
    found += choice.chosen == 6 ? 1 : 0;
  }
  EXPECT_GE(found, 180);
}

// Too little data, a close contender, and the slowdown bound.
TEST(NoisyChoiceTest, SaysWhatIsStillOpenAndRespectsTheSlowdownBound) {
  std::vector<CandidateSamples> one_each = {{700, {{0.01, 5.0, 0}, {0.01, 5.1, 0}}}, {650, {{0.011, 4.0, 0}}}};
  NoiseAwareChoice choice = choose_with_noise(one_each, 0, Objective::energy(), 700.0);
  EXPECT_FALSE(choice.moved);
  EXPECT_EQ(choice.open.size(), 2u);

  std::mt19937_64 rng(5);
  const auto close = measured({{0.010, 5.0}, {0.010, 4.95}, {0.010, 4.0}}, 3, 0.05, rng);
  choice = choose_with_noise(close, 0, Objective::energy(), 700.0);
  EXPECT_EQ(choice.chosen, 2u);  // 20% is clear; 1% is not, and not worth measuring for
  EXPECT_TRUE(std::find(choice.open.begin(), choice.open.end(), 1u) == choice.open.end());

  // Slowdown 1.1: 30% slower is out however cheap; 5% slower is in.
  std::mt19937_64 rng2(9);
  const auto slow = measured({{0.010, 5.0}, {0.013, 3.0}, {0.0105, 4.0}}, 5, 0.0, rng2);
  choice = choose_with_noise(slow, 0, Objective::slowdown(1.1), 700.0);
  EXPECT_FALSE(choice.estimates[1].admissible);
  EXPECT_EQ(choice.chosen, 2u);
}

// Each visit's cost carries its stall (the steps' time beyond the fast
// ones): with the stall known, its share of the noise is taken out and a 3%
// difference in the GPU's work shows through 8% of stall noise; without it,
// it does not.
TEST(NoisyChoiceTest, KnownStallsAreTakenOut) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto measure = [&](bool stalls_known) {
    std::vector<CandidateSamples> candidates(3);
    for (int round = 0; round < 3; ++round) {
      for (std::size_t c = 0; c < 3; ++c) {
        const double work_s = c == 2 ? 0.0097 : 0.0100;  // 3% less work at the third
        const double stall_s = 0.002 * std::exp(0.6 * normal(rng));
        const double time_s = work_s + stall_s;
        candidates[c].setting = 700.0 - 100.0 * static_cast<double>(c);
        candidates[c].stretches.push_back({time_s, 400.0 * work_s + 100.0 * stall_s, round,
                                           stalls_known ? work_s + 0.1 * stall_s : 0.0});
      }
    }
    return choose_with_noise(candidates, 0, Objective::cost(0.5), 700.0);
  };
  int found_with = 0, found_without = 0;
  for (int trial = 0; trial < 50; ++trial) {
    const NoiseAwareChoice with = measure(true), without = measure(false);
    EXPECT_TRUE(with.stall_adjusted);
    EXPECT_FALSE(without.stall_adjusted);
    found_with += with.chosen == 2 ? 1 : 0;
    found_without += without.chosen == 2 ? 1 : 0;
  }
  EXPECT_GE(found_with, 45);
  EXPECT_LE(found_without, 10);
}

TEST(NoisyChoiceTest, BadArgumentsAreRefused) {
  EXPECT_THROW(choose_with_noise({}, 0, Objective::energy(), 700.0), UsageError);
  EXPECT_THROW(choose_with_noise({{700, {}}}, 1, Objective::energy(), 700.0), UsageError);
  NoiseAwareOptions bad;
  bad.confidence = 1.0;
  EXPECT_THROW(choose_with_noise({{700, {}}}, 0, Objective::energy(), 700.0, bad), UsageError);
}

}  // namespace
}  // namespace joule
