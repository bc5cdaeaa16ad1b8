// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/units_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "joule/analyze/svg_chart.h"

namespace joule {
namespace {

TEST(UnitsFormatTest, SiPrefixesWithUnits) {
  EXPECT_EQ(format_si(4920, "J"), "4.92 kJ");
  EXPECT_EQ(format_si(250, "W"), "250 W");
  EXPECT_EQ(format_si(1.2e6, "J"), "1.20 MJ");  // the precision shows
  EXPECT_EQ(format_si(0.25, "s"), "250 ms");
  EXPECT_EQ(format_si(929e-6, "s"), "929 \xC2\xB5s");
  EXPECT_EQ(format_si(0, "J"), "0 J");
  EXPECT_EQ(format_si(-4920, "J"), "-4.92 kJ");
  EXPECT_EQ(format_si(4.12e6, ""), "4.12M");
  EXPECT_EQ(format_si(0.8, ""), "0.800");  // a ratio: no milli
  EXPECT_EQ(format_tick(0.8, ""), "0.8");
  EXPECT_EQ(format_si(999.7, "W"), "1.00 kW");  // rounding carries into the next prefix
  EXPECT_EQ(format_si(3600, "s"), "3600 s");  // never kiloseconds
  EXPECT_EQ(format_si(141.42, "J", 2), "141 J");  // whole digits are never dropped
}

TEST(UnitsFormatTest, TicksDropTrailingZeros) {
  EXPECT_EQ(format_tick(1.2e6, "J"), "1.2 MJ");
  EXPECT_EQ(format_tick(2000, "J"), "2 kJ");
  EXPECT_EQ(format_tick(2500, "J"), "2.5 kJ");
  EXPECT_EQ(format_tick(0.05, "s"), "50 ms");
  EXPECT_EQ(format_tick(1.2, ""), "1.2");
}

TEST(UnitsFormatTest, NoExponentNotationAnywhereInTheRange) {
  for (double v = 1e-8; v < 1e14; v *= 3.7) {
    for (const std::string& text : {format_si(v, "J"), format_si(v, ""), format_tick(v, "W"), format_plain(v), format_duration(v)}) {
      EXPECT_EQ(text.find("e+"), std::string::npos) << v << " -> " << text;
      EXPECT_EQ(text.find("e-"), std::string::npos) << v << " -> " << text;
    }
  }
}

TEST(UnitsFormatTest, DurationsAndWattHours) {
  EXPECT_EQ(format_duration(16), "16.0 s");
  EXPECT_EQ(format_duration(22.872), "22.9 s");
  EXPECT_EQ(format_duration(0.5), "500 ms");
  EXPECT_EQ(format_duration(210), "3.50 min");
  EXPECT_EQ(format_duration(7560), "2.10 h");
  EXPECT_EQ(format_watt_hours(667), "0.185 Wh");  // 667 / 3600
  EXPECT_EQ(format_watt_hours(7.2e6), "2.00 kWh");
  EXPECT_EQ(format_plain(1.19), "1.19");
  EXPECT_EQ(format_plain(2), "2");
}

TEST(UnitsFormatTest, IntegerAxesTickAtWholeNumbersOnly) {
  EXPECT_EQ(linear_ticks(1, 2, 5, true), (std::vector<double>{1, 2}));
  EXPECT_EQ(log_ticks(1, 2, true), (std::vector<double>{1, 2}));
  EXPECT_EQ(log_ticks(1, 8, true), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(log_ticks(64, 128, true), (std::vector<double>{64, 128}));
}

TEST(UnitsFormatTest, LinearTicksStepByOneTwoOrFive) {
  EXPECT_EQ(linear_ticks(0, 4920), (std::vector<double>{0, 1000, 2000, 3000, 4000}));
  for (const auto& [low, high] : std::vector<std::pair<double, double>>{
           {0, 1}, {15.9, 22.9}, {2434, 4758}, {0.001, 0.0042}, {-3, 7}, {1, 1.19}, {250, 300}, {0, 123456}}) {
    const auto ticks = linear_ticks(low, high);
    ASSERT_GE(ticks.size(), 2u) << low << ".." << high;
    EXPECT_LE(ticks.size(), 11u) << low << ".." << high;
    const double step = ticks[1] - ticks[0];
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 || std::fabs(mantissa - 5) < 1e-6)
        << low << ".." << high << " step " << step;
    for (double t : ticks) {
      EXPECT_GE(t, low - 1e-9 * std::fabs(high));
      EXPECT_LE(t, high + 1e-9 * std::fabs(high));
      EXPECT_NEAR(std::remainder(t, step), 0.0, step * 1e-6);
    }
  }
}

TEST(UnitsFormatTest, LogTicksAtPowersThenOneTwoFive) {
  EXPECT_EQ(log_ticks(1, 1000), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(log_ticks(20, 300), (std::vector<double>{20, 50, 100, 200}));
  const auto narrow = log_ticks(1, 1.19);  // a speed-up of 1.19: a linear 1-2-5 set
  ASSERT_GE(narrow.size(), 2u);
  for (double t : narrow) EXPECT_TRUE(t >= 1 && t <= 1.19) << t;
}

std::vector<std::string> tick_texts(const std::string& svg) {
  std::vector<std::string> out;
  const std::regex tick("class=\"tick\"[^>]*>([^<]*)<");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// An axis's ticks share the prefix of the largest: 0-0.5 s in ms, 0-6 kJ in
// kJ, seconds never in ks; counts keep their own rule.
TEST(UnitsFormatTest, AnAxisSharesTheUnitOfItsLargestTick) {
  const AxisUnit ms = axis_unit({0, 0.1, 0.2, 0.3, 0.4, 0.5}, "s");
  EXPECT_EQ(ms.unit, "ms");
  EXPECT_DOUBLE_EQ(ms.scale, 1e-3);
  EXPECT_EQ(axis_unit({0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2}, "s").unit, "s");
  EXPECT_EQ(axis_unit({0, 2000, 4000, 6000}, "J").unit, "kJ");
  EXPECT_EQ(axis_unit({0, 5000, 10000}, "s").unit, "s");
  EXPECT_EQ(axis_unit({100, 200, 300}, "W").unit, "W");
  EXPECT_EQ(axis_unit({0}, "W").unit, "W");
  EXPECT_EQ(axis_unit({0, 1e5}, "").unit, "");
  EXPECT_DOUBLE_EQ(axis_unit({0, 1e5}, "").scale, 1.0);
}

TEST(SvgChartTest, GpuCountAxisReadsOneAndTwoAndEnergyInKilojoules) {
  ChartSeries s{.name = "batch 64", .points = {{1, 3101.6}, {2, 4758.1}}};
  s.y_ranges = {{2984, 3219}, {4485, 5031}};
  s.point_labels = {"one GPU", "two GPUs"};
  const std::string both = svg_line_chart(
      "energy", {s},
      {.x = {.label = "GPUs", .log = true, .integer = true}, .y = {.label = "energy", .unit = "J", .from_zero = true}},
      {.marks = {{1, 3101.6, "baseline"}}, .rules = {{.at = 5500, .label = "budget"}}});
  const std::string svg = both.substr(0, both.find("</svg>"));  // the desk drawing
  // The y ticks first (left of the plot), then the x ticks; the unit, with
  // its prefix, in the axis title alone.
  EXPECT_EQ(tick_texts(svg), (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "1", "2"}));
  EXPECT_NE(svg.find(">energy (kJ)</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">GPUs</text>"), std::string::npos);
  EXPECT_EQ(svg.find("e+0"), std::string::npos);
  EXPECT_NE(svg.find("class=\"errorbar\""), std::string::npos);
  EXPECT_NE(svg.find(">two GPUs<"), std::string::npos);
  EXPECT_NE(svg.find(">baseline<"), std::string::npos);
  EXPECT_NE(svg.find("class=\"rule\""), std::string::npos);
  EXPECT_NE(svg.find("viewBox=\"0 0 600 "), std::string::npos);
  EXPECT_EQ(svg.find(" width=\""), std::string::npos);  // sized by the page, not in pixels
}

TEST(SvgChartTest, NothingDrawableGivesNoChart) {
  EXPECT_EQ(svg_line_chart("t", {{.name = "s", .points = {{0, 1}}}}, {.x = {.log = true}}), "");
}

}  // namespace
}  // namespace joule
