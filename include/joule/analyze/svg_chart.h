// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Inline SVG charts and the HTML page around them, shared by the sweep report
// and the simulation report: self-contained (no script or style from the
// network), light and dark friendly (colours come from CSS variables through
// classes and currentColor), each chart an <svg class="plot"> whose viewBox
// scales to the page width. The page's script records on <body> how many
// charts drew (data-plots, data-plots-ok), what overflows (data-overflow,
// "none" when nothing) and the window width it was laid out for (data-width),
// so a headless browser can check it as a person would.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace joule {

struct ChartSeries {
  std::string name = {};
  std::vector<std::pair<double, double>> points = {};  // (x, y)
  bool line = true;     // join the points
  bool dashed = false;  // a dashed line without markers (fits, marks)
  bool markers = true;  // a dot at each point (not drawn when dashed)
  double stroke_width = 2.0;  // wider under narrower keeps overlapping paths visible
  std::vector<std::pair<double, double>> y_ranges = {};  // per point: (low, high) of an error bar; empty: none
  std::vector<std::string> point_labels = {};       // per point; empty: none
  std::optional<std::size_t> colour = {};  // palette index (a fit in its data's colour); default: the position
  std::vector<std::pair<double, double>> x_ranges = {};  // per point: (low, high) of a horizontal error bar
  bool labels_required = false;  // every point label drawn (short keys), with a leader where it cannot sit close
};

struct ChartAxis {
  std::string label = {};
  std::string unit = {};  // ticks read "250 W", "4.92 kJ"; empty: plain numbers
  bool log = false;
  bool integer = false;   // whole-number ticks only (GPU counts)
  bool from_zero = false; // a linear axis reaches down (or up) to 0
  std::optional<double> min = {}, max = {};  // a fixed range, e.g. shared by small multiples
};

struct ChartAxes {
  ChartAxis x = {}, y = {};
};

// A point ringed and labelled: the baseline, what an eta picks.
struct ChartMark {
  double x = 0, y = 0;
  std::string label = {};
};

// A dashed reference line across the plot: a power limit, an ideal.
struct ChartRule {
  bool vertical = false;  // at x = at; else at y = at
  double at = 0;
  std::string label = {};
};

struct ChartNotes {
  std::vector<ChartMark> marks = {};
  std::vector<ChartRule> rules = {};
};

// The chart's size in viewBox units: a chart that spans a whole row of the
// page is drawn wider, so that its text keeps the size of its neighbours'.
struct ChartLayout {
  double width = 600;
  bool wide = false;  // class "plot wide": the page lets it span the row
};

// Lines and markers, one colour per series, legend under the plot. Empty
// when no point can be drawn. Each axis shows one unit, named in its title
// ("time per run (ms)"), its ticks plain numbers; so an axis's label carries
// no unit of its own. Labels (marks' and points') stay inside the plot area,
// clear of each other, of the markers and of the error bars and, where a place
// is, of the lines; one that cannot sit by its point gets a leader line to
// it; a point label with no free place near it is left out unless the series
// says its labels are required (marks' labels never are left out). A series
// that would hide an earlier one exactly is dashed and says so in the legend.
//
// Two drawings: "plot desk" at the layout's width and "plot phone" at a
// phone's, which the page shows below 600 px so that no text shrinks or is cut.
std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series, const ChartAxes& axes,
                           const ChartNotes& notes = {}, const ChartLayout& layout = {});

// Grouped bars (desk and phone drawings, as above): one group per label, one bar per series in each group
// (values[series][group]); a dashed line at `reference` (e.g. 1 for ratios);
// each series in its style (default: colour k, solid).
// A bar series' look: its palette colour, and light (a paler fill) to set two
// series of one meaning apart (a policy's last recurrences and all of them).
struct BarStyle {
  std::size_t colour = 0;
  bool light = false;
};
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& group_labels,
                          const std::vector<std::string>& series_names, const std::vector<std::vector<double>>& values,
                          const std::string& y_label, double reference, const std::vector<BarStyle>& styles = {});

std::string html_escape(const std::string& text);

// A whole page: title, the body given (HTML), the shared style, and the
// script that sorts tables (<table class="sortable">: click a header; cells
// sort by their data-sort number when they carry one) and checks the charts.
std::string html_page(const std::string& title, const std::string& body);

}  // namespace joule
