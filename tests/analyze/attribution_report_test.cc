// The attribution page: each region's share of time beside its share of
// energy, the table sorted by energy with every region and the idle row, the
// notes, and headless Chromium finding every chart drawn and nothing sticking
// out at a phone's and a desktop's width.
#include "joule/analyze/attribution_report.h"

#include <gtest/gtest.h>

#include <cmath>
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

  testing::TempDir tmp;
  testing::write_file(tmp.file("page.html"), page);
  for (const std::string width : {"390", "1400"}) {
    const std::string body = testing::chromium_body_tag(tmp.file("page.html"), tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-plots"), "2") << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-plots-ok"), "2") << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at width " << width << ": " << body;
  }
}

}  // namespace
}  // namespace joule
