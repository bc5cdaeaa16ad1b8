// Inline SVG charts and the HTML page around them, shared by the sweep report
// and the simulation report: self-contained (no script or style from the
// network), each chart an <svg class="plot"> that a headless browser can
// check drew something (the page sets data-plots / data-plots-ok on <body>).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace joule {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool line = true;     // join the points
  bool dashed = false;  // a dashed line without markers (fits, marks)
  bool markers = true;  // a dot at each point (not drawn when dashed)
  double stroke_width = 2.0;  // wider under narrower keeps overlapping paths visible
};

struct ChartAxes {
  std::string x_label, y_label;
  bool log_x = false;
  bool log_y = false;
};

// Lines and markers, one colour per series, legend on the right. Empty when
// no point can be drawn.
std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series, const ChartAxes& axes);

// Grouped bars: one group per label, one bar per series in each group
// (values[series][group]); a dashed line at `reference` (e.g. 1 for ratios).
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& group_labels,
                          const std::vector<std::string>& series_names, const std::vector<std::vector<double>>& values,
                          const std::string& y_label, double reference);

std::string html_escape(const std::string& text);

// A whole page: title, the body given (HTML), the shared style and the
// script that counts the charts drawn.
std::string html_page(const std::string& title, const std::string& body);

}  // namespace joule
