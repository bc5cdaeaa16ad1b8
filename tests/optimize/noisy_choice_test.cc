// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// choose_with_noise (one stage) and screen_with_noise + confirm_with_noise
// (two stages): quantiles, the decision rules on noiseless, noisy and
// correlated measurements, and how often noise alone moves them.
#include "joule/optimize/noisy_choice.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Two stages as the optimizer runs them: `screening` rounds of every
// candidate, then `confirming` rounds of what screening names, on fresh
// noise; true costs in `truth` (time, energy per step), noise cv per visit.
struct TwoStageRun {
  NoiseAwareChoice screening, final;
};

TwoStageRun run_two_stages(const std::vector<std::pair<double, double>>& truth, const Objective& objective,
                           int screening, int confirming, double cv, std::mt19937_64& rng) {
  TwoStageRun run;
  const auto screened = measured(truth, screening, cv, rng);
  run.screening = screen_with_noise(screened, 0, objective, 700.0);
  run.final = run.screening;
  if (run.screening.decided) return run;
  auto fresh = measured(truth, confirming, cv, rng);
  for (std::size_t c = 0; c < fresh.size(); ++c) {
    const auto& confirm = run.screening.confirm;
    if (std::find(confirm.begin(), confirm.end(), c) == confirm.end()) fresh[c].stretches.clear();
  }
  run.final = confirm_with_noise(fresh, 0, run.screening, objective, 700.0);
  return run;
}

// A flat basin 1.5% below the baseline, among 15 candidates, 2% noise per
// visit: Bonferroni over 14 comparisons (the one-stage rule) rarely shows
// it; the two stages nearly always move into the basin.
TEST(NoisyChoiceTest, TwoStagesFindASmallGainThatOneStageMisses) {
  std::vector<std::pair<double, double>> truth(15, {0.0140, 6.60});
  for (std::size_t c = 5; c < 11; ++c) truth[c] = {0.0145, 5.98};  // cost(0.5) 1.6% lower
  for (std::size_t c = 11; c < 15; ++c) truth[c] = {0.0170, 6.20};  // slower and dearer
  std::mt19937_64 rng(21);
  int one_stage = 0, two_stages = 0;
  constexpr int kTrials = 100;
  for (int trial = 0; trial < kTrials; ++trial) {
    one_stage += choose_with_noise(measured(truth, 3, 0.02, rng), 0, Objective::cost(0.5), 700.0).moved ? 1 : 0;
    const TwoStageRun run = run_two_stages(truth, Objective::cost(0.5), 3, 16, 0.02, rng);
    if (!run.screening.decided) {  // the baseline, the smoothed pick and its neighbours, the measured minimum
      EXPECT_GE(run.screening.confirm.size(), 2u);
      EXPECT_LE(run.screening.confirm.size(), 5u);
      EXPECT_EQ(run.screening.confirm[0], 0u);
    }
    const std::size_t chosen = run.final.chosen;
    two_stages += run.final.moved && chosen >= 5 && chosen < 11 ? 1 : 0;
    EXPECT_TRUE(!run.final.moved || (chosen >= 5 && chosen < 11)) << run.final.summary;
  }
  EXPECT_LE(one_stage, 30);
  EXPECT_GE(two_stages, 85);
}

// No real difference: the two stages together move in about 5% of trials
// at most (a fifth of that at screening, the rest confirming).
TEST(NoisyChoiceTest, TwoStagesRarelyMoveOnNoise) {
  std::mt19937_64 rng(23);
  int moves = 0, confirmed = 0;
  constexpr int kTrials = 600;
  for (int trial = 0; trial < kTrials; ++trial) {
    const TwoStageRun run =
        run_two_stages(std::vector<std::pair<double, double>>(12, {0.014, 6.6}), Objective::cost(0.5), 3, 16, 0.02, rng);
    moves += run.final.moved ? 1 : 0;
    confirmed += run.screening.decided ? 0 : 1;
  }
  EXPECT_LE(moves, kTrials * 0.075);
  EXPECT_GE(confirmed, kTrials * 0.5);  // at 2% noise, 1% cannot be ruled out after three rounds
}

// Screening decides alone when the answer is clear: a 20% cheaper candidate
// (moving at once), or nothing that could be 1% cheaper (staying).
TEST(NoisyChoiceTest, ScreeningDecidesClearCasesAtOnce) {
  std::mt19937_64 rng(25);
  std::vector<std::pair<double, double>> truth(8, {0.010, 5.0});
  truth[5] = {0.0105, 4.0};
  NoiseAwareChoice choice = screen_with_noise(measured(truth, 3, 0.01, rng), 0, Objective::energy(), 700.0);
  EXPECT_TRUE(choice.decided);
  EXPECT_EQ(choice.chosen, 5u);
  EXPECT_NE(choice.summary.find("decided at screening"), std::string::npos) << choice.summary;

  choice = screen_with_noise(measured(std::vector<std::pair<double, double>>(8, {0.010, 5.0}), 3, 0.0005, rng), 0,
                             Objective::energy(), 700.0);
  EXPECT_TRUE(choice.decided);
  EXPECT_FALSE(choice.moved);
  EXPECT_NE(choice.summary.find("no candidate can be 1% cheaper"), std::string::npos) << choice.summary;
}

// A sharp minimum (one setting 4% cheaper, its neighbours 3% dearer, as in
// some measured tables): the running mean flattens it, so screening also
// names the minimum as measured, and confirming finds it.
TEST(NoisyChoiceTest, ASharpMinimumIsConfirmedToo) {
  std::vector<std::pair<double, double>> truth(9, {0.0100, 5.0});
  truth[5] = {0.0098, 4.6};             // cost(0.5) at a price of 700 W: 4.5% below the rest
  truth[4] = truth[6] = {0.0103, 5.2};  // 3.4% above
  std::mt19937_64 rng(31);
  int found = 0;
  constexpr int kTrials = 100;
  for (int trial = 0; trial < kTrials; ++trial) {
    const TwoStageRun run = run_two_stages(truth, Objective::cost(0.5), 3, 16, 0.02, rng);
    found += run.final.chosen == 5 ? 1 : 0;
    EXPECT_TRUE(!run.final.moved || run.final.chosen == 5) << run.final.summary;
  }
  EXPECT_GE(found, 95);
}

// Max-slowdown 1.1 with time rising 2.5% per step down: the contender is the
// cheapest within the bound; confirming tests its neighbours, itself and the
// measured minimum against the bound and keeps the cheapest that passes.
TEST(NoisyChoiceTest, MaxSlowdownConfirmsTheCheapestWithinTheBound) {
  std::vector<std::pair<double, double>> truth;
  for (int c = 0; c < 10; ++c) truth.push_back({0.010 * (1.0 + 0.025 * c), 5.0 * (1.0 - 0.04 * c)});
  // Within 1.10: c <= 4 (1.10 itself: c = 4); 1.125 at c = 5 is beyond the tolerance.
  std::mt19937_64 rng(27);
  int right = 0, too_slow = 0;
  constexpr int kTrials = 100;
  for (int trial = 0; trial < kTrials; ++trial) {
    const TwoStageRun run = run_two_stages(truth, Objective::slowdown(1.1), 3, 16, 0.005, rng);
    if (run.screening.decided) continue;
    const auto& confirm = run.screening.confirm;
    EXPECT_EQ(confirm.front(), 0u);  // the baseline (here also the fastest, the reference)
    EXPECT_GE(confirm.size(), 3u);
    right += run.final.chosen == 3 || run.final.chosen == 4 ? 1 : 0;
    too_slow += run.final.chosen >= 5 ? 1 : 0;
  }
  EXPECT_GE(right, 90);
  EXPECT_LE(too_slow, 2);
}

// Times that do not rise monotonically as the setting falls (measured
// tables): a faster setting beyond a slower one that breaks the bound is
// still found within it and chosen.
TEST(NoisyChoiceTest, MaxSlowdownLooksPastASlowNeighbour) {
  std::vector<std::pair<double, double>> truth;
  for (int c = 0; c < 6; ++c) truth.push_back({0.010 * (1.0 + 0.01 * c), 5.0 * (1.0 - 0.01 * c)});
  truth.push_back({0.0114, 4.8});   // 6: 14% slower, beyond the bound
  truth.push_back({0.0106, 4.4});   // 7: within it, and the cheapest there
  truth.push_back({0.0125, 4.3});   // 8: beyond it
  std::mt19937_64 rng(33);
  int right = 0, too_slow = 0;
  constexpr int kTrials = 100;
  for (int trial = 0; trial < kTrials; ++trial) {
    const TwoStageRun run = run_two_stages(truth, Objective::slowdown(1.1), 3, 16, 0.005, rng);
    right += run.final.chosen == 7 ? 1 : 0;
    too_slow += run.final.chosen == 6 || run.final.chosen == 8 ? 1 : 0;
  }
  EXPECT_GE(right, 95);
  EXPECT_LE(too_slow, 2);
}

TEST(NoisyChoiceTest, ConfirmingNeedsAnOpenScreening) {
  std::mt19937_64 rng(29);
  const auto samples = measured({{0.010, 5.0}, {0.0105, 4.0}}, 3, 0.0, rng);
  const NoiseAwareChoice decided = screen_with_noise(samples, 0, Objective::energy(), 700.0);
  ASSERT_TRUE(decided.decided);
  EXPECT_THROW(confirm_with_noise(samples, 0, decided, Objective::energy(), 700.0), UsageError);
  NoiseAwareOptions bad;
  bad.screening_share = 1.0;
  EXPECT_THROW(screen_with_noise(samples, 0, Objective::energy(), 700.0, bad), UsageError);
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
