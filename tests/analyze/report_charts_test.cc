// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The sweep report's charts as a reader sees them (issue 34): legends in
// natural order, labels inside the plot and clear of error bars, time and
// energy error bars, one caption, units in every axis title, the best
// configuration per objective ringed on the per-setting charts with a fit;
// (issue 50) one unit per axis, every Pareto point numbered as in the
// configurations table, labels by their points or led to them, twins shown,
// and the page checked in Chromium at a phone's and a desk's width.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/analyze/report.h"
#include "joule/analyze/svg_chart.h"
#include "joule/analyze/sweep_analysis.h"

namespace joule {
namespace {

SweepRun run(std::map<std::string, std::string> config, int repeat, double t, double e) {
  SweepRun r;
  r.config = std::move(config);
  r.repeat = repeat;
  r.status = "ok";
  r.elapsed_s = t;
  r.gpu_energy_j = e;
  r.samples = 3600;
  return r;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Each <text class="CLASS"> of a chart: (x, y, text).
struct Text {
  double x, y;
  std::string text;
};
std::vector<Text> texts(const std::string& svg, const std::string& css_class) {
  std::vector<Text> out;
  const std::regex re("<text x=\"([-0-9.]+)\" y=\"([-0-9.]+)\" class=\"" + css_class + "\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), (*it)[3]});
  }
  return out;
}

// Batch sizes 64, 128, 256 across 1 and 2 GPUs, two repeats each.
std::vector<SweepRun> batch_grid() {
  std::vector<SweepRun> runs;
  for (const char* batch : {"64", "128", "256"}) {
    for (const char* gpus : {"1", "2"}) {
      const double b = std::stod(batch), g = std::stod(gpus);
      for (int repeat : {0, 1}) {
        runs.push_back(run({{"batch_size", batch}, {"gpus", gpus}}, repeat, 100 / g * 64 / b + repeat,
                           3000 * g * (1 + 64 / b) + 50 * repeat));
      }
    }
  }
  return runs;
}

TEST(ReportChartsTest, LegendsAndGroupsInNaturalOrder) {
  const auto runs = batch_grid();
  const std::string html = render_report("t", runs, analyze_sweep(runs), {});
  // Each chart's legend: 64 before 128 before 256 (as text, 128 < 256 < 64).
  const std::size_t chart = html.find("Speed-up vs GPU count");
  ASSERT_NE(chart, std::string::npos);
  const std::size_t b64 = html.find(">batch_size=64<", chart), b128 = html.find(">batch_size=128<", chart),
                    b256 = html.find(">batch_size=256<", chart);
  ASSERT_NE(b256, std::string::npos);
  EXPECT_LT(b64, b128);
  EXPECT_LT(b128, b256);
  // The scaling table too.
  const std::size_t table = html.find("<h3>Scaling with GPU count</h3>");
  ASSERT_NE(table, std::string::npos);
  EXPECT_LT(html.find(">batch_size=64<", table), html.find(">batch_size=128<", table));
  EXPECT_LT(html.find(">batch_size=128<", table), html.find(">batch_size=256<", table));
}

TEST(ReportChartsTest, ParetoHasTimeAndEnergyErrorBarsAndOneCaption) {
  const auto runs = batch_grid();
  const std::string html = render_report("t", runs, analyze_sweep(runs), {});
  const std::size_t pareto = html.find("the Pareto front\"");
  ASSERT_NE(pareto, std::string::npos);
  const std::string svg = html.substr(pareto, html.find("</svg>", pareto) - pareto);
  EXPECT_GT(count(svg, "class=\"errorbar x\""), 0u) << "time error bars";
  EXPECT_GT(count(svg, "class=\"errorbar\""), 0u) << "energy error bars";
  EXPECT_EQ(count(html, "Bars: one standard deviation"), 0u);
  EXPECT_EQ(count(html, "Error bars: one standard deviation"), 1u);
}

TEST(ReportChartsTest, EveryAxisTitleHasAUnit) {
  const auto runs = batch_grid();
  std::vector<PowerPoint> timelines = {{1, 0.0, "gpu0", 100.0}, {1, 1.0, "gpu0", 120.0}};
  auto with_ids = runs;
  for (std::size_t i = 0; i < with_ids.size(); ++i) with_ids[i].id = static_cast<long long>(i + 1);
  const std::string html = render_report("t", with_ids, analyze_sweep(with_ids), timelines);
  const auto labels = texts(html, "label");
  ASSERT_GT(labels.size(), 10u);
  for (const auto& l : labels) {
    if (l.text.empty()) continue;  // a bar chart's empty x title
    EXPECT_TRUE(std::regex_search(l.text, std::regex(R"(\(.+\)$)"))) << "no unit in axis title \"" << l.text << "\"";
  }
}

// A power-limit sweep with three limits: both charts ring the best limit
// per objective and draw a fit with its equation in the legend.
TEST(ReportChartsTest, KnobChartsMarkTheBestAndShowTheFit) {
  std::vector<SweepRun> runs;
  for (double limit : {200.0, 250.0, 300.0}) {
    for (int repeat : {0, 1}) {
      const double t = 100 * std::pow(300 / limit, 0.5) + repeat;
      const double e = 200 * t * (0.5 + limit / 600) + 10 * repeat;
      runs.push_back(run({{"power_limit", fmt::format("{:g}", limit)}}, repeat, t, e));
    }
  }
  const SweepAnalysis a = analyze_sweep(runs);
  const std::string html = render_report("t", runs, a, {});
  const std::size_t energy = html.find("aria-label=\"Energy per run vs");
  ASSERT_NE(energy, std::string::npos);
  const std::string svg = html.substr(energy, html.find("</svg>", energy) - energy);
  bool least_energy = false;
  for (const auto& m : texts(svg, "mark-label")) least_energy = least_energy || m.text.find("least energy") != std::string::npos;
  EXPECT_TRUE(least_energy) << svg;
  EXPECT_NE(svg.find("min EDP"), std::string::npos);
  EXPECT_NE(svg.find("fit: E = "), std::string::npos) << "the fitted curve's equation in the legend";
  EXPECT_NE(svg.find("stroke-dasharray=\"6,4\""), std::string::npos) << "the fitted curve";
  EXPECT_NE(html.find("fit: t = "), std::string::npos);
}

// A power limit swept on 1 and 2 GPUs: the sweep's least energy is on one
// line; the other line's own best cap is ringed and named too.
TEST(ReportChartsTest, KnobChartsRingEachLinesOwnBestCap) {
  std::vector<SweepRun> runs;
  for (const char* gpus : {"1", "2"}) {
    for (double limit : {200.0, 250.0, 300.0}) {
      const double g = std::stod(gpus);
      const double t = 100 / g * std::pow(300 / limit, 0.5);
      // On 1 GPU 250 W costs least; on 2 GPUs (dearer overall) 200 W does.
      const double e = g == 1 ? 20000 + std::abs(limit - 250) * 40 : 30000 + (limit - 200) * 30;
      for (int repeat : {0, 1}) runs.push_back(run({{"gpus", gpus}, {"power_limit", fmt::format("{:g}", limit)}}, repeat, t, e));
    }
  }
  const SweepAnalysis a = analyze_sweep(runs);
  ASSERT_EQ(a.configs[a.best.at("energy")].label(), "gpus=1 power_limit=250");
  const std::string html = render_report("t", runs, a, {});
  const std::size_t energy = html.find("aria-label=\"Energy per run vs power");
  ASSERT_NE(energy, std::string::npos);
  const std::string svg = html.substr(energy, html.find("</svg>", energy) - energy);
  bool line_best = false;
  for (const auto& m : texts(svg, "mark-label")) line_best = line_best || m.text.find("least energy of gpus=2") != std::string::npos;
  EXPECT_TRUE(line_best) << svg;
  EXPECT_EQ(svg.find("least energy of gpus=1"), std::string::npos) << "gpus=1's best is the sweep's, marked once";
}

// Labels stay inside the plot (right of the y axis, where the tick labels
// are) and a point label that can only sit on an error bar is left out.
TEST(ReportChartsTest, LabelsStayInsideThePlotAndOffErrorBars) {
  ChartSeries s{.name = "points", .line = false};
  // "squeezed" sits between two error bars spanning the whole plot.
  s.points = {{1, 100}, {1.1, 100}, {1.2, 100}, {5, 50}};
  s.y_ranges = {{0, 200}, {100, 100}, {0, 200}, {45, 55}};
  s.point_labels = {"", "squeezed", "", "free"};
  ChartNotes notes;
  notes.marks.push_back({1, 1, "baseline at the left edge"});
  const std::string both = svg_line_chart("t", {s}, {.x = {.label = "x", .unit = "s"}, .y = {.label = "y", .unit = "J"}}, notes);
  const std::string svg = both.substr(0, both.find("</svg>"));  // the desk drawing
  std::smatch m;
  // The y axis: the vertical axis line from the plot's left edge.
  ASSERT_TRUE(std::regex_search(svg, m, std::regex(R"re(<line x1="([0-9.]+)" y1="[0-9.]+" x2="\1" y2="[0-9.]+" class="axis"/>\n)re")));
  const double left = std::stod(m[1]);
  const auto marks = texts(svg, "mark-label");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_GE(marks[0].x, left) << "the label covers the tick labels";
  const auto points = texts(svg, "point-label");
  for (const auto& p : points) EXPECT_NE(p.text, "squeezed") << "a label across another point's error bar";
  ASSERT_FALSE(points.empty());
  EXPECT_EQ(points.back().text, "free");
}

// On a phone (390 px) and a desktop the charts' text reads at 11 px or more
// and nothing sticks out of the page: charts and tables scroll sideways.
TEST(ReportChartsTest, ChartTextReadableAtPhoneWidth) {
  const auto runs = batch_grid();
  testing::TempDir tmp;
  testing::write_file(tmp.file("report.html"), render_report("t", runs, analyze_sweep(runs), {}));
  for (const std::string width : {"390", "1400"}) {
    const std::string body = testing::chromium_body_tag(tmp.file("report.html"), tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at width " << width << ": " << body;
    EXPECT_GE(std::stod(testing::tag_attribute(body, "data-min-font-px")), 10.95) << "at width " << width << ": " << body;
  }
}

// Twelve configurations, four power limits by three batch sizes, whose
// Pareto points crowd: times of 0.24-0.44 s, energies of 34-61 J.
std::vector<SweepRun> crowded_grid() {
  std::vector<SweepRun> runs;
  for (const char* batch : {"32", "64", "128"}) {
    for (const char* limit : {"700", "500", "350", "200"}) {
      const double b = std::stod(batch), w = std::stod(limit);
      for (int repeat : {0, 1}) {
        const double t = 0.05 + 12.0 / b + 0.02 * (700 - w) / 500 + 0.01 * repeat;
        runs.push_back(run({{"batch_size", batch}, {"power_limit", limit}}, repeat, t, t * (60 + w / 20) + repeat));
      }
    }
  }
  return runs;
}

// The desk drawing of the chart titled `title` on a page.
std::string desk_chart(const std::string& html, const std::string& title) {
  const std::size_t at = html.find("aria-label=\"" + title);
  if (at == std::string::npos) return "";
  const std::size_t begin = html.rfind("<svg", at);
  return html.substr(begin, html.find("</svg>", at) - begin);
}

TEST(ReportChartsTest, AnAxisShowsOneUnitInItsTitleAndPlainTicks) {
  ChartSeries s{.name = "a"};
  s.points = {{0.12, 900}, {0.31, 4100}, {0.47, 2600}};
  const std::string svg = svg_line_chart("t", {s}, {.x = {.label = "time", .unit = "s"}, .y = {.label = "energy", .unit = "J"}});
  const std::string desk = svg.substr(0, svg.find("</svg>"));
  const auto labels = texts(desk, "label");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0].text, "time (ms)");
  EXPECT_EQ(labels[1].text, "energy (kJ)");
  const auto ticks = texts(desk, "tick");
  ASSERT_GE(ticks.size(), 6u);
  for (const auto& t : ticks) EXPECT_TRUE(std::regex_match(t.text, std::regex("[0-9.]+"))) << "tick \"" << t.text << "\"";
  EXPECT_EQ(count(desk, ">500<"), 1u) << desk;  // 0.5 s on the time axis, in ms
}

TEST(ReportChartsTest, EveryParetoPointCarriesItsTableNumberByItsMarker) {
  const auto runs = crowded_grid();
  const SweepAnalysis a = analyze_sweep(runs);
  ASSERT_EQ(a.configs.size(), 12u);
  const std::string html = render_report("t", runs, a, {});
  const std::string svg = desk_chart(html, "Energy vs time per run");
  ASSERT_FALSE(svg.empty());
  // Each configuration's number once, as a point's label or in a ringed mark's.
  std::vector<std::pair<double, double>> markers;
  const std::regex circle("<circle cx=\"([-0-9.]+)\" cy=\"([-0-9.]+)\" r=\"4\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it) {
    markers.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  const std::regex label("<text x=\"[-0-9.]+\" y=\"[-0-9.]+\" class=\"(point|mark)-label\" data-anchor=\"([-0-9.]+),([-0-9.]+)\"[^>]*>#([0-9]+)[ <]");
  std::set<int> numbers;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator(); ++it) {
    numbers.insert(std::stoi((*it)[4]));
    const double x = std::stod((*it)[2]), y = std::stod((*it)[3]);
    // The anchor is the configuration's own marker.
    EXPECT_TRUE(std::any_of(markers.begin(), markers.end(), [&](const auto& m) {
      return std::fabs(m.first - x) < 0.2 && std::fabs(m.second - y) < 0.2;
    })) << "label #" << (*it)[4] << " anchored off every marker";
  }
  EXPECT_EQ(numbers.size(), 12u) << svg;
  EXPECT_EQ(*numbers.begin(), 1);
  EXPECT_EQ(*numbers.rbegin(), 12);
  // The table numbers its rows the same way.
  EXPECT_NE(html.find("<table class=\"sortable main\" id=\"configurations\"><tr><th>#</th>"), std::string::npos);
  EXPECT_NE(html.find("<tr><td data-sort=\"12\">12</td>"), std::string::npos);
}

// A series exactly over another (two GPUs drawing the same power) is dashed
// and its legend says so; a rule is drawn over the data, so a power line at
// its limit leaves the dashes seen.
TEST(ReportChartsTest, ASeriesOverAnIdenticalOneIsDashedAndNamedAndRulesLieOnTop) {
  ChartSeries gpu0{.name = "gpu0", .markers = false}, gpu1{.name = "gpu1", .markers = false};
  gpu0.points = gpu1.points = {{0, 300}, {1, 300}, {2, 280}};
  ChartNotes notes;
  notes.rules.push_back({.at = 300, .label = "limit 300 W"});
  const std::string both = svg_line_chart("t", {gpu0, gpu1}, {.y = {.label = "power", .unit = "W"}}, notes);
  const std::string svg = both.substr(0, both.find("</svg>"));
  const auto legend_at = svg.find("the same as gpu0");
  ASSERT_NE(legend_at, std::string::npos) << svg;
  EXPECT_EQ(count(svg, "stroke-dasharray=\"6,4\" points="), 1u) << "gpu1's line dashed over gpu0's";
  EXPECT_GT(svg.find("class=\"rule\""), svg.rfind("<polyline")) << "the limit drawn under the power";
  ChartSeries other = gpu1;
  other.points[2].second = 250;
  const std::string apart = svg_line_chart("t", {gpu0, other}, {});
  EXPECT_EQ(apart.find("the same as"), std::string::npos);
}

// The crowded report as a reader sees it: at a phone's and a desk's width
// nothing is cut, every label is by its point or led to it and none covers
// another, each series name keeps one colour on the page, chart text reads
// at 11 px or more, and at 1280 px the configurations table fits.
TEST(ReportChartsTest, CrowdedReportReadsAtPhoneAndDeskWidths) {
  const auto runs = crowded_grid();
  testing::TempDir tmp;
  testing::write_file(tmp.file("report.html"), render_report("a long sweep name: demo.sqlite", runs, analyze_sweep(runs), {}));
  for (const std::string width : {"390", "1280"}) {
    const std::string body = testing::chromium_body_tag(tmp.file("report.html"), tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at " << width << ": " << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-label-problems"), "none") << "at " << width << ": " << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-colour-conflicts"), "none") << "at " << width << ": " << body;
    EXPECT_GE(std::stod(testing::tag_attribute(body, "data-min-font-px")), 10.95) << "at " << width << ": " << body;
    if (width == "1280") {
      EXPECT_EQ(testing::tag_attribute(body, "data-table-scroll"), "none") << body;
    }
  }
}

TEST(ReportChartsTest, WideLayoutWidensTheViewBox) {
  ChartSeries s{.name = "a"};
  s.points = {{1, 1}, {2, 2}};
  EXPECT_NE(svg_line_chart("t", {s}, {}).find("viewBox=\"0 0 600 "), std::string::npos);
  const std::string wide = svg_line_chart("t", {s}, {}, {}, {.width = 900, .wide = true});
  EXPECT_NE(wide.find("viewBox=\"0 0 900 "), std::string::npos);
  EXPECT_NE(wide.find("class=\"plot wide desk\""), std::string::npos);
}

}  // namespace
}  // namespace joule
