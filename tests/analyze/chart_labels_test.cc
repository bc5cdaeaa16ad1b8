// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Where a chart's labels go when the plot is crowded: a required label gives
// up keeping clear of error bars before it goes over another label, and two
// labels stacked leave room for the descenders Chromium draws below the last
// baseline (a sweep report at a phone's width showed both, one run in ~15).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "analyze/chart_labels.h"

namespace joule::chart {
namespace {

// A label's box as Chromium draws 12 px text: 11 px above the first
// baseline, 4 below the last, lines 13 apart; its width from its characters
// (7.6 px each in bold, a little over the average glyph).
Box drawn_box(const std::string& svg) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(svg, m, std::regex(R"re(<text x="([0-9.]+)" y="([0-9.]+)"([^>]*)>(.*)</text>)re")));
  const double x = std::stod(m[1]), y = std::stod(m[2]);
  const bool end_anchored = m[3].str().find("text-anchor=\"end\"") != std::string::npos;
  std::string body = m[4];
  std::vector<std::string> lines;
  const std::regex tspan(R"re(<tspan[^>]*>([^<]*)</tspan>)re");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), tspan); it != std::sregex_iterator(); ++it) {
    lines.push_back((*it)[1]);
  }
  if (lines.empty()) lines.push_back(body);
  double width = 0;
  for (const auto& line : lines) width = std::max(width, 7.6 * static_cast<double>(line.size()));
  const double left = end_anchored ? x - width : x;
  return {left, y - 11, left + width, y + 13.0 * static_cast<double>(lines.size() - 1) + 4};
}

bool touch(const Box& a, const Box& b) {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}

TEST(ChartLabelsTest, StackedLabelsLeaveRoomForDescenders) {
  // A plot so narrow, and a point so near its left edge, that the labels
  // (wrapped onto three lines) can only go right of it, one above the other.
  LabelPlacer labels(Box{0, 0, 220, 300});
  const std::string text = "#1 gpus=1 power_limit=300 the baseline";
  const std::string first = labels.place(10, 150, text, "mark-label");
  const std::string second = labels.place(10, 150, text, "mark-label");
  ASSERT_NE(first.find("<tspan"), std::string::npos) << first;
  EXPECT_FALSE(touch(drawn_box(first), drawn_box(second))) << first << second;
}

// Error bars across the whole plot every 12 px: no place for a label is
// clear of them. Both labels are drawn, over the bars, not over each other.
TEST(ChartLabelsTest, ALabelGoesOverErrorBarsRatherThanOverAnotherLabel) {
  LabelPlacer labels(Box{0, 0, 400, 200});
  for (double y = 4; y < 200; y += 12) labels.avoid_where_possible({0, y, 400, y + 2});
  const std::string first = labels.place(150, 100, "#1 gpus=1 power_limit=300 (baseline)", "mark-label");
  const std::string second = labels.place(152, 110, "#2 gpus=1 power_limit=200 (eta 0-1)", "mark-label");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_FALSE(touch(drawn_box(first), drawn_box(second))) << first << second;
  // A point's label, which may be left out, is: it would only sit on a bar.
  EXPECT_EQ(labels.place(300, 50, "#3", "point-label", /*optional=*/true), "");
}

// Markers stay clear while error bars are given up: a label that must cover
// one or the other covers the bar.
TEST(ChartLabelsTest, MarkersStayClearLongerThanErrorBars) {
  LabelPlacer labels(Box{0, 0, 400, 200});
  for (double y = 4; y < 200; y += 12) labels.avoid_where_possible({0, y, 400, y + 2});
  // Markers on the rows between the bars left of x = 300.
  std::vector<Box> markers;
  for (double y = 8; y < 200; y += 12) {
    for (double x = 5; x < 300; x += 20) markers.push_back({x, y, x + 4, y + 4});
  }
  for (const auto& m : markers) labels.avoid(m);
  const std::string svg = labels.place(150, 100, "#1 baseline", "mark-label");
  const Box box = drawn_box(svg);
  for (const auto& m : markers) EXPECT_FALSE(touch(box, m)) << svg;
  EXPECT_NE(svg.find("data-leader"), std::string::npos) << "far from its point: " << svg;
}

}  // namespace
}  // namespace joule::chart
