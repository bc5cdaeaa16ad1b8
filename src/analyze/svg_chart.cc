// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "chart_labels.h"
#include "joule/analyze/units_format.h"

namespace joule {

namespace {

// Series colours are classes c0..c7 (CSS variables, light and dark); every
// mark of a series is drawn in currentColor inside its <g class="cK">.
constexpr std::size_t kPaletteSize = 8;

// The chart's coordinate system (viewBox units; the page scales it).
constexpr double kPlotHeight = 250, kRightMargin = 20;
constexpr double kTitleLine = 19, kAxisBelow = 46, kLegendRow = 19;
// Rough widths of a character at the tick and legend font sizes, for layout.
constexpr double kTickCharWidth = 7.0, kLabelCharWidth = 6.6;
// The width of a title character (15 px, bold) and of the legend's swatch.
constexpr double kTitleCharWidth = 9.35, kSwatchWidth = 26;
// A phone's chart: drawn for about 370 CSS px, so 12 px text stays 12 px.
constexpr double kPhoneWidth = 370;

using chart::Box;

// One axis: the domain (log10 of it on a log axis), its ticks, and the pixels
// it spans, inset so that markers at the ends stay clear of the axis lines.
struct Scale {
  ChartAxis axis = {};
  double low = 0, high = 1;
  std::vector<double> ticks = {};
  double pixel_low = 0, pixel_high = 1;

  double t(double v) const { return axis.log ? std::log10(v) : v; }
  bool drawable(double v) const { return std::isfinite(v) && (!axis.log || v > 0); }
  double pixel(double v) const { return pixel_low + (t(v) - low) / (high - low) * (pixel_high - pixel_low); }
  AxisUnit shown = {};  // the one unit of the ticks and the title
};

// A tick as the axis shows it: a plain number in the axis's unit.
std::string tick_text(double value, const Scale& s) {
  return s.axis.unit.empty() ? format_tick(value, "") : format_tick(value / s.shown.scale, "");
}

// The axis title with its unit once: "time per run (ms)".
std::string axis_title(const Scale& s) {
  if (s.shown.unit.empty() || s.axis.label.empty()) return s.axis.label;
  return s.axis.label + " (" + s.shown.unit + ")";
}

// The largest 1, 2 or 5 times a power of ten at or below v > 0, and the
// smallest at or above.
double nice_floor(double v) {
  const double power = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {5.0, 2.0, 1.0}) {
    if (m * power <= v * (1 + 1e-9)) return m * power;
  }
  return power;
}
double nice_ceil(double v) {
  const double power = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= v * (1 - 1e-9)) return m * power;
  }
  return 10 * power;
}

Scale make_scale(const ChartAxis& axis, double low, double high) {
  Scale s{axis};
  if (axis.min) low = *axis.min;
  if (axis.max) high = *axis.max;
  if (!axis.log && axis.from_zero) {
    low = std::min(low, 0.0);
    high = std::max(high, 0.0);
  }
  if (!(high > low)) {
    const double pad = axis.log ? 0.0 : std::max(std::fabs(low) * 0.1, axis.integer ? 1.0 : 1e-9);
    low = axis.log ? low / 2 : low - pad;
    high = axis.log ? high * 2 : high + pad;
  }
  if (axis.log) {
    // Out to the 1-2-5 values around the data, so the ends carry ticks
    // (integer axes keep their range: their ticks are powers of two).
    if (!axis.integer && low > 0 && !axis.min && !axis.max) {
      low = nice_floor(low);
      high = nice_ceil(high);
    }
    s.ticks = log_ticks(low, high, axis.integer);
    s.low = std::log10(low);
    s.high = std::log10(high);
    s.shown = axis_unit(s.ticks, axis.unit);
    return s;
  }
  s.ticks = linear_ticks(low, high, 5, axis.integer);
  // Widen the range to whole steps so the ends carry ticks, unless fixed.
  if (s.ticks.size() >= 2 && !axis.min && !axis.max) {
    const double step = s.ticks[1] - s.ticks[0];
    low = std::floor(low / step + 1e-9) * step;
    high = std::ceil(high / step - 1e-9) * step;
    if (s.ticks.front() > low + step * 1e-6) s.ticks.insert(s.ticks.begin(), low);
    if (s.ticks.back() < high - step * 1e-6) s.ticks.push_back(high);
  }
  s.low = low;
  s.high = high;
  s.shown = axis_unit(s.ticks, axis.unit);
  return s;
}

std::string truncated(const std::string& text, std::size_t chars) {
  return text.size() <= chars ? text : text.substr(0, chars - 3) + "...";
}

// The frame every chart shares: title, legend entries under the plot.
struct Frame {
  double width = 600, left = 70, top = 0, plot_bottom = 0, height = 0;
  std::vector<std::string> title_lines;
  struct LegendEntry {
    double x = 0, y = 0;              // the swatch's left end; the first line's baseline
    std::vector<std::string> lines;  // a long name wraps rather than be cut
  };
  std::vector<LegendEntry> legend;  // in series order

  double plot_right() const { return width - kRightMargin; }
};

// A title in up to three lines of the chart's width (the third cut short).
std::vector<std::string> title_lines(const std::string& title, double width) {
  auto lines = chart::wrap_words(title, width - 20, kTitleCharWidth);
  if (lines.size() > 3) {
    lines.resize(3);
    lines[2] = truncated(lines[2] + " ...", static_cast<std::size_t>((width - 20) / kTitleCharWidth));
  }
  return lines;
}

// The frame's geometry: title lines, plot area. The legend (set_legend) comes
// after, once the series' names are final.
Frame make_frame(const std::string& title, double left, double width) {
  Frame f;
  f.width = width;
  f.left = left;
  f.title_lines = title_lines(title, width);
  f.top = 12 + kTitleLine * static_cast<double>(f.title_lines.size());
  f.plot_bottom = f.top + kPlotHeight;
  f.height = f.plot_bottom + kAxisBelow + 6;
  return f;
}

// The legend's entries under the plot, and the chart's height with them.
void set_legend(Frame& f, const std::vector<std::string>& legend) {
  std::size_t longest = 0;
  for (const auto& name : legend) longest = std::max(longest, name.size());
  // Columns when the names are short; one column of wrapped names otherwise.
  const double column_width = std::min(f.width - 20, static_cast<double>(longest) * kLabelCharWidth + 48);
  const auto columns = std::max<std::size_t>(1, static_cast<std::size_t>((f.width - 20) / column_width));
  double y = f.plot_bottom + kAxisBelow + 12;
  f.legend.clear();
  for (std::size_t k = 0; k < legend.size(); ++k) {
    Frame::LegendEntry entry;
    entry.x = 10 + column_width * static_cast<double>(k % columns);
    entry.lines = columns > 1 ? std::vector<std::string>{legend[k]}
                              : chart::wrap_words(legend[k], f.width - 20 - kSwatchWidth, kLabelCharWidth);
    if (k > 0 && k % columns == 0) y += kLegendRow * static_cast<double>(f.legend[k - 1].lines.size());
    entry.y = y;
    f.legend.push_back(std::move(entry));
  }
  const double last_lines = f.legend.empty() ? 0.0 : static_cast<double>(f.legend.back().lines.size());
  f.height = (f.legend.empty() ? f.plot_bottom + kAxisBelow : y - 12 + kLegendRow * last_lines) + 6;
}

// `variant`: " desk" or " phone" (the page shows one of the two).
std::string svg_open(const Frame& f, const std::string& title, std::size_t points, bool wide, const std::string& variant) {
  std::string svg = fmt::format(
      "<svg class=\"plot{}{}\" data-points=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {:g} {:.0f}\" "
      "role=\"img\" aria-label=\"{}\">\n",
      wide ? " wide" : "", variant, points, f.width, f.height, html_escape(title));
  for (std::size_t i = 0; i < f.title_lines.size(); ++i) {
    svg += fmt::format("<text x=\"10\" y=\"{:.0f}\" class=\"title\">{}</text>\n", 12 + kTitleLine * (i + 0.75),
                       html_escape(f.title_lines[i]));
  }
  return svg;
}

std::string axis_labels(const Frame& f, const std::string& x_label, const std::string& y_label) {
  std::string svg = fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\" text-anchor=\"middle\">{}</text>\n",
                                (f.left + f.plot_right()) / 2, f.plot_bottom + 38, html_escape(x_label));
  const double middle = (f.top + f.plot_bottom) / 2;
  svg += fmt::format(
      "<text x=\"15\" y=\"{0:.1f}\" class=\"label\" transform=\"rotate(-90 15 {0:.1f})\" text-anchor=\"middle\">{1}</text>\n",
      middle, html_escape(truncated(y_label, 40)));
  return svg;
}

// How a series looks in the legend: a line, a dashed line, a dot (markers
// only), or a bar (solid or light).
enum class Swatch { kLine, kDashed, kDot, kBar, kLightBar };
// A light bar: its colour paler, outlined in the full colour.
constexpr const char* kLightBar = " fill-opacity=\"0.35\" stroke=\"currentColor\" stroke-width=\"1.5\"";

std::string legend_svg(const Frame& f, const std::vector<Swatch>& swatches, const std::vector<std::size_t>& colours) {
  std::string svg;
  for (std::size_t k = 0; k < f.legend.size(); ++k) {
    const auto& [x, y, lines] = f.legend[k];
    const Swatch swatch = k < swatches.size() ? swatches[k] : Swatch::kLine;
    const bool bar = swatch == Swatch::kBar || swatch == Swatch::kLightBar;
    const std::string mark =
        bar ? fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"11\" fill=\"currentColor\"{}/>", x + 1,
                          y - 10, swatch == Swatch::kLightBar ? kLightBar : "")
        : swatch == Swatch::kDot
            ? fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"currentColor\"/>", x + 10, y - 4)
            : fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"currentColor\" "
                          "stroke-width=\"3\"{}/>",
                          x, y - 4, x + 20, y - 4, swatch == Swatch::kDashed ? " stroke-dasharray=\"5,4\"" : "");
    std::string text;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      text += fmt::format("<tspan x=\"{:.1f}\" dy=\"{}\">{}</tspan>", x + kSwatchWidth, i == 0 ? 0.0 : kLegendRow,
                          html_escape(lines[i]));
    }
    svg += fmt::format("<g class=\"c{}\">{}<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text></g>\n",
                       (k < colours.size() ? colours[k] : k) % kPaletteSize, mark, x + kSwatchWidth, y, text);
  }
  return svg;
}

double y_tick_margin(const Scale& y) {
  std::size_t widest = 0;
  for (double t : y.ticks) widest = std::max(widest, tick_text(t, y).size());
  return 30 + static_cast<double>(widest) * kTickCharWidth + 8;
}

std::string grid_and_ticks(const Frame& f, const Scale& x, const Scale& y) {
  std::string svg;
  for (double t : y.ticks) {
    const double py = y.pixel(t);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", f.left, py,
                       f.plot_right(), py);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", f.left - 6,
                       py + 4, html_escape(tick_text(t, y)));
  }
  for (double t : x.ticks) {
    const double px = x.pixel(t);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"axis\"/>", px,
                       f.plot_bottom, f.plot_bottom + 5);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", px,
                       f.plot_bottom + 19, html_escape(tick_text(t, x)));
  }
  svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" class=\"axis\"/>"
                     "<line x1=\"{0:.1f}\" y1=\"{3:.1f}\" x2=\"{0:.1f}\" y2=\"{1:.1f}\" class=\"axis\"/>\n",
                     f.left, f.plot_bottom, f.plot_right(), f.top);
  return svg;
}

std::string series_svg(const ChartSeries& s, std::size_t k, const Scale& x, const Scale& y) {
  std::string svg = fmt::format("<g class=\"c{}\">", s.colour.value_or(k) % kPaletteSize);
  std::string points;
  for (const auto& [vx, vy] : s.points) {
    if (x.drawable(vx) && y.drawable(vy)) points += fmt::format("{:.1f},{:.1f} ", x.pixel(vx), y.pixel(vy));
  }
  for (std::size_t i = 0; i < s.y_ranges.size() && i < s.points.size(); ++i) {
    const auto [low, high] = s.y_ranges[i];
    const double vx = s.points[i].first;
    if (!x.drawable(vx) || !y.drawable(low) || !y.drawable(high) || low == high) continue;
    const double px = x.pixel(vx), top = y.pixel(high), bottom = y.pixel(low);
    svg += fmt::format("<path class=\"errorbar\" d=\"M{0:.1f},{1:.1f}V{2:.1f}M{3:.1f},{1:.1f}H{4:.1f}M{3:.1f},{2:.1f}H{4:.1f}\" "
                       "stroke=\"currentColor\"/>",
                       px, top, bottom, px - 4, px + 4);
  }
  for (std::size_t i = 0; i < s.x_ranges.size() && i < s.points.size(); ++i) {
    const auto [low, high] = s.x_ranges[i];
    const double vy = s.points[i].second;
    if (!y.drawable(vy) || !x.drawable(low) || !x.drawable(high) || low == high) continue;
    const double py = y.pixel(vy), left = x.pixel(low), right = x.pixel(high);
    svg += fmt::format("<path class=\"errorbar x\" d=\"M{0:.1f},{1:.1f}H{2:.1f}M{0:.1f},{3:.1f}V{4:.1f}M{2:.1f},{3:.1f}V{4:.1f}\" "
                       "stroke=\"currentColor\"/>",
                       left, py, right, py - 4, py + 4);
  }
  if (s.line && s.points.size() > 1) {
    svg += fmt::format("<polyline fill=\"none\" stroke=\"currentColor\" stroke-width=\"{:g}\"{} points=\"{}\"/>",
                       s.stroke_width, s.dashed ? " stroke-dasharray=\"6,4\"" : "", points);
  }
  if (s.markers && !s.dashed) {
    for (const auto& [vx, vy] : s.points) {
      if (!x.drawable(vx) || !y.drawable(vy)) continue;
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"currentColor\"/>", x.pixel(vx), y.pixel(vy));
    }
  }
  return svg + "</g>\n";
}

std::string rule_svg(const Frame& f, const ChartRule& rule, const Scale& x, const Scale& y) {
  const Scale& along = rule.vertical ? x : y;
  if (!along.drawable(rule.at)) return "";
  const double p = along.pixel(rule.at);
  if (rule.vertical) {
    return fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"rule\"/>"
                       "<text x=\"{3:.1f}\" y=\"{4:.1f}\" class=\"rule-label\" text-anchor=\"end\">{5}</text>\n",
                       p, f.top, f.plot_bottom, p - 4, f.top + 13, html_escape(rule.label));
  }
  return fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" class=\"rule\"/>"
                     "<text x=\"{3:.1f}\" y=\"{4:.1f}\" class=\"rule-label\" text-anchor=\"end\">{5}</text>\n",
                     f.left, p, f.plot_right(), f.plot_right() - 4, p - 5, html_escape(rule.label));
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// A series drawn exactly over an earlier one (every point within a pixel)
// would hide it: it is dashed, so the earlier shows through, and its legend
// name says so.
void show_hidden_twins(std::vector<ChartSeries>& series, const Scale& x, const Scale& y) {
  auto same_path = [&](const ChartSeries& a, const ChartSeries& b) {
    if (a.points.size() != b.points.size() || a.points.empty() || a.line != b.line) return false;
    for (std::size_t i = 0; i < a.points.size(); ++i) {
      const auto [ax, ay] = a.points[i];
      const auto [bx, by] = b.points[i];
      if (!x.drawable(ax) || !y.drawable(ay) || !x.drawable(bx) || !y.drawable(by)) return false;
      if (std::fabs(x.pixel(ax) - x.pixel(bx)) > 1.0 || std::fabs(y.pixel(ay) - y.pixel(by)) > 1.0) return false;
    }
    return true;
  };
  for (std::size_t k = 1; k < series.size(); ++k) {
    if (series[k].dashed || !series[k].line) continue;
    for (std::size_t j = 0; j < k; ++j) {
      if (!same_path(series[j], series[k])) continue;
      series[k].dashed = true;
      series[k].name += " (dashed: the same as " + series[j].name + ")";
      break;
    }
  }
}

// What labels keep clear of: markers always, error bars, the data lines and
// rules where they can.
void add_obstacles(chart::LabelPlacer& labels, const std::vector<ChartSeries>& series, const ChartNotes& notes,
                   const Frame& f, const Scale& x, const Scale& y) {
  for (const auto& s : series) {
    std::optional<std::pair<double, double>> previous;
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if (!x.drawable(vx) || !y.drawable(vy)) continue;
      const double px = x.pixel(vx), py = y.pixel(vy);
      if (s.line && previous) labels.avoid_segment(previous->first, previous->second, px, py);
      previous = {px, py};
      if (s.markers && !s.dashed) labels.avoid({px - 5, py - 5, px + 5, py + 5});
      if (i < s.y_ranges.size() && y.drawable(s.y_ranges[i].first) && y.drawable(s.y_ranges[i].second)) {
        labels.avoid_where_possible(
            {px - 5, y.pixel(s.y_ranges[i].second) - 1, px + 5, y.pixel(s.y_ranges[i].first) + 1});
      }
      if (i < s.x_ranges.size() && x.drawable(s.x_ranges[i].first) && x.drawable(s.x_ranges[i].second)) {
        labels.avoid_where_possible(
            {x.pixel(s.x_ranges[i].first) - 1, py - 5, x.pixel(s.x_ranges[i].second) + 1, py + 5});
      }
    }
  }
  for (const auto& rule : notes.rules) {
    const Scale& along = rule.vertical ? x : y;
    if (!along.drawable(rule.at)) continue;
    const double p = along.pixel(rule.at);
    if (rule.vertical) {
      labels.avoid_segment(p, f.top, p, f.plot_bottom);
    } else {
      labels.avoid_segment(f.left, p, f.plot_right(), p);
    }
  }
  for (const auto& mark : notes.marks) {
    if (x.drawable(mark.x) && y.drawable(mark.y)) {
      labels.avoid({x.pixel(mark.x) - 9, y.pixel(mark.y) - 9, x.pixel(mark.x) + 9, y.pixel(mark.y) + 9});
    }
  }
}

// The ranges the axes must show: every drawable point, error bar and rule.
struct Extent {
  double x_low = std::numeric_limits<double>::infinity(), x_high = -x_low, y_low = x_low, y_high = -x_low;
  std::size_t points = 0;
  void include(double vx, double vy) {
    x_low = std::min(x_low, vx);
    x_high = std::max(x_high, vx);
    y_low = std::min(y_low, vy);
    y_high = std::max(y_high, vy);
  }
};

Extent extent_of(const std::vector<ChartSeries>& series, const ChartAxes& axes, const ChartNotes& notes) {
  Extent e;
  const Scale probe_x{axes.x}, probe_y{axes.y};
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if (!probe_x.drawable(vx) || !probe_y.drawable(vy)) continue;
      e.include(vx, vy);
      ++e.points;
      if (i < s.y_ranges.size()) {
        for (double v : {s.y_ranges[i].first, s.y_ranges[i].second}) {
          if (probe_y.drawable(v)) e.include(vx, v);
        }
      }
      if (i < s.x_ranges.size()) {
        for (double v : {s.x_ranges[i].first, s.x_ranges[i].second}) {
          if (probe_x.drawable(v)) e.include(v, vy);
        }
      }
    }
  }
  if (e.points == 0) return e;
  for (const auto& rule : notes.rules) {
    if (rule.vertical && probe_x.drawable(rule.at)) e.include(rule.at, e.y_low);
    if (!rule.vertical && probe_y.drawable(rule.at)) e.include(e.x_low, rule.at);
  }
  return e;
}

// One drawing of a line chart at one width.
std::string line_chart(const std::string& title, std::vector<ChartSeries> series, const ChartAxes& axes,
                       const ChartNotes& notes, double width, bool wide, const std::string& variant) {
  const Extent e = extent_of(series, axes, notes);
  if (e.points == 0) return "";
  Scale x = make_scale(axes.x, e.x_low, e.x_high), y = make_scale(axes.y, e.y_low, e.y_high);
  // The frame's left margin depends on the y ticks, the twins on the pixels,
  // the legend on the twins.
  Frame f = make_frame(title, y_tick_margin(y), width);
  x.pixel_low = f.left + 14;
  x.pixel_high = f.plot_right() - 14;
  y.pixel_low = f.plot_bottom - 8;
  y.pixel_high = f.top + 8;
  show_hidden_twins(series, x, y);
  std::vector<std::string> names;
  std::vector<Swatch> swatches;
  std::vector<std::size_t> colours;
  for (const auto& s : series) {
    names.push_back(s.name);
    swatches.push_back(s.dashed ? Swatch::kDashed : s.line && s.points.size() > 1 ? Swatch::kLine : Swatch::kDot);
    colours.push_back(s.colour.value_or(colours.size()));
  }
  set_legend(f, names);

  std::string svg = svg_open(f, title, e.points, wide, variant) + grid_and_ticks(f, x, y) +
                    axis_labels(f, axis_title(x), axis_title(y));
  for (std::size_t k = 0; k < series.size(); ++k) svg += series_svg(series[k], k, x, y);
  // Rules over the data: a power line at its limit leaves the dashes seen.
  for (const auto& rule : notes.rules) svg += rule_svg(f, rule, x, y);
  chart::LabelPlacer labels(Box{f.left, f.top, f.plot_right(), f.plot_bottom});
  add_obstacles(labels, series, notes, f, x, y);
  for (const auto& mark : notes.marks) {
    if (!x.drawable(mark.x) || !y.drawable(mark.y)) continue;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"8\" class=\"mark\"/>", x.pixel(mark.x), y.pixel(mark.y));
    svg += labels.place(x.pixel(mark.x), y.pixel(mark.y), mark.label, "mark-label");
  }
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.point_labels.size() && i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if (s.point_labels[i].empty() || !x.drawable(vx) || !y.drawable(vy)) continue;
      svg += labels.place(x.pixel(vx), y.pixel(vy), s.point_labels[i], "point-label", !s.labels_required);
    }
  }
  return svg + legend_svg(f, swatches, colours) + "</svg>\n";
}

}  // namespace

std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series, const ChartAxes& axes,
                           const ChartNotes& notes, const ChartLayout& layout) {
  std::string desk = line_chart(title, series, axes, notes, layout.width, layout.wide, " desk");
  if (desk.empty()) return "";
  return desk + line_chart(title, series, axes, notes, kPhoneWidth, false, " phone");
}

namespace {

std::string bar_chart(const std::string& title, const std::vector<std::string>& group_labels,
                      const std::vector<std::string>& series_names, const std::vector<std::vector<double>>& values,
                      const std::string& y_label, double reference, const std::vector<BarStyle>& styles, double width,
                      const std::string& variant) {
  auto style_of = [&](std::size_t k) { return k < styles.size() ? styles[k] : BarStyle{k, false}; };
  double high = reference;
  std::size_t count = 0;
  for (const auto& row : values) {
    for (double v : row) {
      high = std::max(high, v);
      ++count;
    }
  }
  if (count == 0 || group_labels.empty()) return "";
  Scale y = make_scale({.label = y_label, .from_zero = true}, 0.0, high);
  Frame f = make_frame(title, y_tick_margin(y), width);
  set_legend(f, series_names);
  y.pixel_low = f.plot_bottom;
  y.pixel_high = f.top + 8;
  Scale x = make_scale({}, 0.0, 1.0);
  x.ticks.clear();
  const double plot_w = f.plot_right() - f.left;
  const double group_w = plot_w / static_cast<double>(group_labels.size());
  const double bar_w = 0.8 * group_w / static_cast<double>(std::max<std::size_t>(1, values.size()));
  std::string svg = svg_open(f, title, count, false, variant) + grid_and_ticks(f, x, y) + axis_labels(f, "", y_label);
  const std::size_t label_chars = static_cast<std::size_t>(std::max(4.0, group_w / kTickCharWidth));
  for (std::size_t g = 0; g < group_labels.size(); ++g) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n",
                       f.left + group_w * (static_cast<double>(g) + 0.5), f.plot_bottom + 19,
                       html_escape(truncated(group_labels[g], label_chars)));
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    svg += fmt::format("<g class=\"c{}\">", style_of(k).colour % kPaletteSize);
    for (std::size_t g = 0; g < values[k].size() && g < group_labels.size(); ++g) {
      const double x0 = f.left + group_w * static_cast<double>(g) + 0.1 * group_w + bar_w * static_cast<double>(k);
      const double v = values[k][g];
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"currentColor\"{}><title>{}: {}</title></rect>",
          x0, y.pixel(v), bar_w, y.pixel(0) - y.pixel(v), style_of(k).light ? kLightBar : "", html_escape(group_labels[g]),
          format_plain(v, 3));
    }
    svg += "</g>\n";
  }
  svg += rule_svg(f, {false, reference, ""}, x, y);
  std::vector<Swatch> swatches;
  std::vector<std::size_t> colours;
  for (std::size_t k = 0; k < series_names.size(); ++k) {
    swatches.push_back(style_of(k).light ? Swatch::kLightBar : Swatch::kBar);
    colours.push_back(style_of(k).colour);
  }
  return svg + legend_svg(f, swatches, colours) + "</svg>\n";
}

}  // namespace

std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& group_labels,
                          const std::vector<std::string>& series_names, const std::vector<std::vector<double>>& values,
                          const std::string& y_label, double reference, const std::vector<BarStyle>& styles) {
  std::string desk = bar_chart(title, group_labels, series_names, values, y_label, reference, styles, 600, " desk");
  if (desk.empty()) return "";
  return desk + bar_chart(title, group_labels, series_names, values, y_label, reference, styles, kPhoneWidth, " phone");
}

}  // namespace joule
