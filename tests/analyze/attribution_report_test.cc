// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The attribution page: each region's share of time beside its share of
// energy, the table sorted by energy with every region and the idle row, the
// notes, and headless Chromium finding every chart drawn and nothing sticking
// out at a phone's and a desktop's width.
#include "joule/analyze/attribution_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <vector>

#include "common/test_support.h"

namespace joule {
namespace {

using attribution::PowerObservation;
using attribution::RegionInterval;

// A step of a long low-power region and a short high-power one, observed by
// point samples every 7 ms (drifting against the 13 ms step).
attribution::Attribution two_regions() {
  std::vector<RegionInterval> intervals;
  std::vector<PowerObservation> observations;
  const auto power_at = [](double t) {
    const double phase = std::fmod(t, 0.013);
    return phase < 0.008 ? 200.0 : phase < 0.010 ? 650.0 : 90.0;
  };
  constexpr double kWindowS = 20.0;
  for (double t = 0; t + 0.013 <= kWindowS; t += 0.013) {
    intervals.push_back({0, t, t + 0.008});
    intervals.push_back({1, t + 0.008, t + 0.010});
  }
  for (double t = 0.001; t < kWindowS; t += 0.007) observations.push_back({t, t, power_at(t)});
  double energy_j = 0;
  for (double t = 0; t < kWindowS; t += 1e-5) energy_j += power_at(t) * 1e-5;
  const std::vector<std::string> names = {"memory_bound <bound>", "matmul"};
  return attribution::attribute(observations, intervals, names, 0.0, kWindowS, energy_j);
}

TEST(AttributionReportTest, TimeAndEnergySharesSideBySideAndTheTableByEnergy) {
  const auto a = two_regions();
  ASSERT_TRUE(a.regions[0].resolved && a.regions[1].resolved);
  const std::string page = attribution_page("Step energy", {a, a}, {"GPU 0 (test)"});
  EXPECT_NE(page.find("<h2>GPU 0 (test)</h2>"), std::string::npos);
  EXPECT_NE(page.find("<h2>GPU 1</h2>"), std::string::npos);  // unlabelled: numbered
  EXPECT_NE(page.find("share of the window's time and of its energy"), std::string::npos) << page.substr(0, 2000);
  EXPECT_NE(page.find("memory_bound &lt;bound&gt;"), std::string::npos);  // escaped
  // The long region runs 8 of 13 ms but uses less energy than 2 ms at 650 W
  // would suggest by time alone; the table lists by energy: memory_bound
  // (1.6 J a step) before matmul (1.3 J).
  const auto table = page.find("<table class=\"sortable\">");
  ASSERT_NE(table, std::string::npos);
  EXPECT_LT(page.find("memory_bound", table), page.find("matmul", table));
  EXPECT_NE(page.find("(idle)", table), std::string::npos);
  EXPECT_EQ(page.find("class=\"simulated\""), std::string::npos) << "measured power: no banner";

  testing::TempDir tmp;
  testing::write_file(tmp.file("page.html"), page);
  for (const std::string width : {"390", "1400"}) {
    const std::string body = testing::chromium_body_tag(tmp.file("page.html"), tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-plots"), "2") << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-plots-ok"), "2") << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at width " << width << ": " << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-colour-conflicts"), "none") << "at width " << width << ": " << body;
    EXPECT_GE(std::stod(testing::tag_attribute(body, "data-min-font-px")), 10.95) << "at width " << width << ": " << body;
  }
}

// Power from a simulated GPU is said at the top of the page, with how many.
TEST(AttributionReportTest, APageOfSimulatedGpusSaysSoAtTheTop) {
  auto simulated = two_regions();
  simulated.simulated = true;
  const std::string page = attribution_page("Step energy", {simulated, two_regions()});
  const auto banner = page.find("<p class=\"simulated\">SIMULATED GPUs: the power of 1 of the 2 GPU(s) below");
  ASSERT_NE(banner, std::string::npos) << page.substr(0, 3000);
  EXPECT_LT(banner, page.find("<h2>GPU 0</h2>"));
}

// A concurrent region (an all-reduce over the end of the matmul) is listed
// with the power it adds, and its time, which overlaps the others', is no
// part of the window's.
TEST(AttributionReportTest, AConcurrentRegionShowsThePowerItAdds) {
  std::vector<RegionInterval> intervals;
  std::vector<PowerObservation> observations;
  constexpr double kWindowS = 10.0, kStepS = 0.013;
  double energy_j = 0;
  for (double t = 0; t + kStepS <= kWindowS; t += kStepS) {
    const double overlap_s = 0.001 + 0.002 * std::fmod(t * 7.3, 1.0);
    intervals.push_back({0, t, t + 0.008});
    intervals.push_back({1, t + 0.008 - overlap_s, t + 0.011, false, true});
    energy_j += 0.008 * 500.0 + 0.005 * 90.0 + (0.003 + overlap_s) * 40.0;
  }
  const auto power_at = [&](double t) {
    const double start = std::floor(t / kStepS) * kStepS, phase = t - start;
    const double overlap_s = 0.001 + 0.002 * std::fmod(start * 7.3, 1.0);
    return (phase < 0.008 ? 500.0 : 90.0) + (phase >= 0.008 - overlap_s && phase < 0.011 ? 40.0 : 0.0);
  };
  for (double t = 0.0005; t < kWindowS; t += 0.0007) observations.push_back({t, t, power_at(t)});
  const auto a = attribution::attribute(observations, intervals, std::vector<std::string>{"matmul", "allreduce"}, 0.0,
                                        kWindowS, energy_j);
  ASSERT_TRUE(a.regions[1].resolved && a.regions[1].concurrent) << ::testing::PrintToString(a.notes);
  EXPECT_NEAR(a.regions[1].power_w, 40.0, 1.0);
  const std::string page = attribution_page("Step energy", {a}, {"GPU 0"});
  std::smatch added;
  ASSERT_TRUE(std::regex_search(page, added, std::regex(R"(>\+([0-9.]+) W added<)")));
  EXPECT_NEAR(std::stod(added[1]), 40.0, 1.0);
}

}  // namespace
}  // namespace joule
