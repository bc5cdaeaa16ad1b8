// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A counter step split at an edge through the samples' response: samples made
// from a known load through a known response (an H200's shape, or a delayed
// boxcar), edges at random inside 100 ms steps, the share against the load's
// exact one, and beside it what the linear reading of the same samples gives.
#include "joule/measure/sample_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "common/on_off_load.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::OnOffLoad;

// The built-in H200 response, for the shape of a real one.
PowerSampleResponse h200() { return *builtin_sample_response("NVIDIA H200", "580.159.04"); }

// Samples every 20 ms from t=0: each the response-weighted mean of the load's power over the ms before its stamp.
std::vector<StampedPower> samples_of(const OnOffLoad& load, const PowerSampleResponse& r, double until_s) {
  const double sum = std::accumulate(r.weights_ms.begin(), r.weights_ms.end(), 0.0);
  std::vector<StampedPower> out;
  for (double t = 0.2; t < until_s; t += 0.02) {
    double power_w = 0.0;
    for (std::size_t i = 0; i < r.weights_ms.size(); ++i) {
      const double end_s = t - 1e-3 * (r.first_lag_ms + static_cast<double>(i));
      power_w += r.weights_ms[i] / sum * load.energy_j(end_s - 1e-3, end_s) / 1e-3;
    }
    out.push_back({t, power_w});
  }
  return out;
}

// The linear reading: each sample the mean power since the one before.
double linear_share(const std::vector<StampedPower>& samples, const CounterStep& step, double edge_s) {
  double before = 0.0, total = 0.0;
  for (std::size_t k = 1; k < samples.size(); ++k) {
    const double from_s = samples[k - 1].time_s, to_s = samples[k].time_s;
    const auto part = [&](double a, double b) { return std::max(0.0, std::min(b, to_s) - std::max(a, from_s)); };
    total += samples[k].power_w * part(step.begin_s, step.end_s);
    before += samples[k].power_w * part(step.begin_s, edge_s);
  }
  return before / total;
}

struct SplitErrors {
  double response_mean_j = 0.0, response_max_j = 0.0, linear_mean_j = 0.0;
};

// Edges at pseudo-random places in every step of [1 s, 29 s): the error of
// each split in joules (share error times the step's energy).
SplitErrors split_errors(const OnOffLoad& load, const PowerSampleResponse& made_with, const PowerSampleResponse& read_with) {
  const std::vector<StampedPower> samples = samples_of(load, made_with, 30.0);
  SplitErrors e;
  int edges = 0;
  for (int k = 10; k < 290; ++k) {
    const CounterStep step{0.1 * k + 0.037, 0.1 * (k + 1) + 0.037, 0.0};
    const double fraction = std::fmod(0.6180339887 * k, 1.0);
    const double edge_s = step.begin_s + fraction * (step.end_s - step.begin_s);
    CounterStep counted = step;
    counted.energy_j = load.energy_j(step.begin_s, step.end_s);
    const double truth = load.energy_j(step.begin_s, edge_s) / counted.energy_j;
    const std::optional<double> share = step_share_before(samples, read_with, counted, edge_s);
    EXPECT_TRUE(share.has_value()) << "step " << k;
    if (!share) continue;
    const double error_j = std::fabs(*share - truth) * counted.energy_j;
    e.response_mean_j += error_j;
    e.response_max_j = std::max(e.response_max_j, error_j);
    e.linear_mean_j += std::fabs(linear_share(samples, counted, edge_s) - truth) * counted.energy_j;
    ++edges;
  }
  e.response_mean_j /= edges;
  e.linear_mean_j /= edges;
  return e;
}

TEST(SampleResponseTest, SplitsStepsOfATrainingLikeLoadFarBetterThanTheLinearReading) {
  // Busy 600 W and stalls at 120 W, phases 10-150 ms: switches in most steps.
  for (const uint64_t seed : {1, 2}) {
    const OnOffLoad load(seed, 120.0, 600.0, 0.01, 0.15, 31.0);
    const SplitErrors e = split_errors(load, h200(), h200());
    std::printf("seed %llu: split error mean %.2f J (max %.2f J) through the response, %.2f J read linearly\n",
                static_cast<unsigned long long>(seed), e.response_mean_j, e.response_max_j, e.linear_mean_j);
    EXPECT_LT(e.response_mean_j, 0.35 * e.linear_mean_j);
    EXPECT_LT(e.response_mean_j, 1.5);  // of steps of 12-60 J
  }
}

TEST(SampleResponseTest, SplitsADelayedBoxcarsStepsToo) {
  PowerSampleResponse boxcar{std::vector<double>(20, 1.0), 20, "delayed boxcar"};
  const OnOffLoad load(3, 100.0, 700.0, 0.05, 0.5, 31.0);
  const SplitErrors e = split_errors(load, boxcar, boxcar);
  EXPECT_LT(e.response_mean_j, 0.35 * e.linear_mean_j) << e.response_mean_j << " vs " << e.linear_mean_j;
}

TEST(SampleResponseTest, SteadyPowerSplitsInProportionToTime) {
  const OnOffLoad steady(1, 400.0, 400.0, 1.0, 1.0, 31.0);
  const std::vector<StampedPower> samples = samples_of(steady, h200(), 30.0);
  const CounterStep step{10.037, 10.137, 40.0};
  for (const double fraction : {0.0, 0.1, 0.5, 0.93, 1.0}) {
    const std::optional<double> share = step_share_before(samples, h200(), step, step.begin_s + 0.1 * fraction);
    ASSERT_TRUE(share.has_value());
    EXPECT_NEAR(*share, fraction, 2e-3);
  }
  EXPECT_EQ(step_share_before(samples, h200(), step, step.begin_s - 1.0), 0.0);
  EXPECT_EQ(step_share_before(samples, h200(), step, step.end_s + 1.0), 1.0);
}

TEST(SampleResponseTest, SamplesThatDoNotCoverTheStepGiveNoShare) {
  const OnOffLoad steady(1, 400.0, 400.0, 1.0, 1.0, 31.0);
  std::vector<StampedPower> samples = samples_of(steady, h200(), 30.0);
  const CounterStep step{10.037, 10.137, 40.0};
  // A buffer overflow: 0.2 s of samples lost around the step.
  std::erase_if(samples, [](const StampedPower& p) { return p.time_s > 10.0 && p.time_s < 10.2; });
  EXPECT_FALSE(step_share_before(samples, h200(), step, 10.08).has_value());
  EXPECT_FALSE(step_share_before({}, h200(), step, 10.08).has_value());
}

TEST(SampleResponseTest, BadResponsesAreRefusedNamingWhat) {
  const auto message = [](const PowerSampleResponse& r) {
    try {
      check_sample_response(r);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({}).find("0 weights"), std::string::npos);
  EXPECT_NE(message({{0.5, -0.1}, 0, ""}).find("weight 1 is -0.1"), std::string::npos);
  EXPECT_NE(message({{0.5, std::nan("")}, 0, ""}).find("weight 1 is nan"), std::string::npos);
  EXPECT_NE(message({{0.0, 0.0}, 0, ""}).find("no weight is positive"), std::string::npos);
  EXPECT_EQ(message({{1.0, 1.0}, 999, ""}), "accepted");  // lags 999 and 1000
  EXPECT_NE(message({{1.0, 1.0, 1.0}, 999, ""}).find("lags 999 to 1001 ms (must lie within [-1000, 1000])"),
            std::string::npos);
  EXPECT_NE(message({{1.0}, -1001, ""}).find("lags -1001 to -1001"), std::string::npos);
  EXPECT_NE(message({std::vector<double>(1001, 1.0), 0, ""}).find("1001 weights"), std::string::npos);
  EXPECT_EQ(message(h200()), "accepted");
}

TEST(SampleResponseTest, TheBuiltInResponseIsPickedByModelAndDriverBranch) {
  const std::optional<PowerSampleResponse> r = builtin_sample_response("NVIDIA H200", "580.159.04");
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(std::accumulate(r->weights_ms.begin(), r->weights_ms.end(), 0.0), 1.0, 0.01);
  EXPECT_NE(r->source.find("H200"), std::string::npos);
  EXPECT_TRUE(builtin_sample_response("NVIDIA H200", "580.65.06").has_value());
  EXPECT_FALSE(builtin_sample_response("NVIDIA H200", "570.86.15").has_value());  // another driver: re-measure
  EXPECT_FALSE(builtin_sample_response("NVIDIA H100 80GB HBM3", "580.159.04").has_value());
  EXPECT_FALSE(builtin_sample_response("NVIDIA H200", "").has_value());
}

}  // namespace
}  // namespace joule
