// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

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
constexpr std::size_t kTitleLineChars = 62, kLegendNameChars = 64;

double text_width(const std::string& text, double char_width) { return static_cast<double>(text.size()) * char_width; }

std::string tick_text(double value, const ChartAxis& axis) {
  return format_tick(value, axis.unit);
}

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
};

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
  return s;
}

struct Box {
  double left, top, right, bottom;
  bool overlaps(const Box& o) const { return left < o.right && o.left < right && top < o.bottom && o.top < bottom; }
};

// Places short labels next to points, trying four corners and avoiding the
// labels already placed and the edges of the chart.
class LabelPlacer {
 public:
  // Labels stay inside `area` (the plot), so they never cover a tick label.
  explicit LabelPlacer(Box area) : area_(area) {}

  // Something a label must not cover: a marker, an error bar.
  void avoid(const Box& box) { obstacles_.push_back(box); }

  // Empty when `optional` and no free place is found.
  std::string place(double x, double y, const std::string& text, const std::string& css_class, bool optional = false) {
    // 12 px text; bold is wider.
    const double char_width = css_class == "mark-label" ? kLabelCharWidth + 1.0 : kLabelCharWidth + 0.4;
    const double w = text_width(text, char_width), h = 13;
    // Right of the point, then left; nearest first, then further up or down.
    std::optional<Box> chosen;
    for (int step = 0; step < 12 && !chosen; ++step) {
      for (double dy : {-8.0 - 14 * step, 17.0 + 14 * step}) {
        for (bool left_side : {false, true}) {
          const double left = left_side ? x - 9 - w : x + 9;
          const Box box{left, y + dy - h + 2, left + w, y + dy + 2};
          if (box.left < area_.left + 2 || box.right > area_.right - 2 || box.top < area_.top + 1 ||
              box.bottom > area_.bottom - 2) {
            continue;
          }
          if (std::any_of(placed_.begin(), placed_.end(), [&](const Box& b) { return b.overlaps(box); })) continue;
          if (std::any_of(obstacles_.begin(), obstacles_.end(), [&](const Box& b) { return b.overlaps(box); })) continue;
          chosen = box;
          break;
        }
        if (chosen) break;
      }
    }
    if (!chosen && optional) return "";
    if (!chosen) {  // crowded: inside the plot at least
      const double left = std::clamp(x + 9, area_.left + 2, std::max(area_.left + 2, area_.right - 2 - w));
      chosen = Box{left, y - 8 - h + 2, left + w, y - 6};
    }
    placed_.push_back(*chosen);
    return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"{}\">{}</text>\n", chosen->left, chosen->bottom - 2,
                       css_class, html_escape(text));
  }

 private:
  Box area_;
  std::vector<Box> placed_, obstacles_;
};

std::vector<std::string> wrap_title(const std::string& title) {
  if (title.size() <= kTitleLineChars) return {title};
  std::size_t cut = title.rfind(' ', kTitleLineChars);
  if (cut == std::string::npos || cut < kTitleLineChars / 2) cut = kTitleLineChars;
  std::string rest = title.substr(cut);
  rest.erase(0, rest.find_first_not_of(' '));
  if (rest.size() > kTitleLineChars) rest = rest.substr(0, kTitleLineChars - 3) + "...";
  return {title.substr(0, cut), rest};
}

std::string truncated(const std::string& text, std::size_t chars) {
  return text.size() <= chars ? text : text.substr(0, chars - 3) + "...";
}

// The frame every chart shares: title, legend rows under the plot.
struct Frame {
  double width = 600, left = 70, top = 0, plot_bottom = 0, height = 0;
  std::vector<std::string> title_lines;
  std::vector<std::string> legend;  // names, in series order
  std::size_t legend_columns = 1;
  double legend_column_width = 0;

  double plot_right() const { return width - kRightMargin; }
};

Frame make_frame(const std::string& title, const std::vector<std::string>& legend, double left, double width = 600) {
  Frame f;
  f.width = width;
  f.left = left;
  f.title_lines = wrap_title(title);
  f.top = 12 + kTitleLine * static_cast<double>(f.title_lines.size());
  f.plot_bottom = f.top + kPlotHeight;
  std::size_t longest = 0;
  for (const auto& name : legend) {
    f.legend.push_back(truncated(name, kLegendNameChars));
    longest = std::max(longest, f.legend.back().size());
  }
  f.legend_column_width = std::min(width - 20, static_cast<double>(longest) * kLabelCharWidth + 48);
  f.legend_columns = std::max<std::size_t>(1, static_cast<std::size_t>((width - 20) / f.legend_column_width));
  const std::size_t rows = (f.legend.size() + f.legend_columns - 1) / f.legend_columns;
  f.height = f.plot_bottom + kAxisBelow + kLegendRow * static_cast<double>(rows) + 6;
  return f;
}

std::string svg_open(const Frame& f, const std::string& title, std::size_t points, bool wide = false) {
  std::string svg = fmt::format(
      "<svg class=\"plot{}\" data-points=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {:g} {:.0f}\" "
      "role=\"img\" aria-label=\"{}\">\n",
      wide ? " wide" : "", points, f.width, f.height, html_escape(title));
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

// How a series looks in the legend: a line, a dashed line, or a dot (markers only).
enum class Swatch { kLine, kDashed, kDot };

std::string legend_svg(const Frame& f, const std::vector<Swatch>& swatches, const std::vector<std::size_t>& colours) {
  std::string svg;
  const double first_row = f.plot_bottom + kAxisBelow + 12;
  for (std::size_t k = 0; k < f.legend.size(); ++k) {
    const double x = 10 + f.legend_column_width * static_cast<double>(k % f.legend_columns);
    const double y = first_row + kLegendRow * static_cast<double>(k / f.legend_columns);
    const Swatch swatch = k < swatches.size() ? swatches[k] : Swatch::kLine;
    const std::string mark =
        swatch == Swatch::kDot
            ? fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"currentColor\"/>", x + 10, y - 4)
            : fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"currentColor\" "
                          "stroke-width=\"3\"{}/>",
                          x, y - 4, x + 20, y - 4, swatch == Swatch::kDashed ? " stroke-dasharray=\"5,4\"" : "");
    svg += fmt::format("<g class=\"c{}\">{}<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text></g>\n",
                       (k < colours.size() ? colours[k] : k) % kPaletteSize, mark, x + 26, y, html_escape(f.legend[k]));
  }
  return svg;
}

double y_tick_margin(const Scale& y) {
  std::size_t widest = 0;
  for (double t : y.ticks) widest = std::max(widest, tick_text(t, y.axis).size());
  return 30 + static_cast<double>(widest) * kTickCharWidth + 8;
}

std::string grid_and_ticks(const Frame& f, const Scale& x, const Scale& y) {
  std::string svg;
  for (double t : y.ticks) {
    const double py = y.pixel(t);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", f.left, py,
                       f.plot_right(), py);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n", f.left - 6,
                       py + 4, html_escape(tick_text(t, y.axis)));
  }
  for (double t : x.ticks) {
    const double px = x.pixel(t);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"axis\"/>", px,
                       f.plot_bottom, f.plot_bottom + 5);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", px,
                       f.plot_bottom + 19, html_escape(tick_text(t, x.axis)));
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

std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series, const ChartAxes& axes,
                           const ChartNotes& notes, const ChartLayout& layout) {
  const double inf = std::numeric_limits<double>::infinity();
  double x_low = inf, x_high = -inf, y_low = inf, y_high = -inf;
  std::size_t count = 0;
  auto include = [&](double vx, double vy) {
    x_low = std::min(x_low, vx), x_high = std::max(x_high, vx);
    y_low = std::min(y_low, vy), y_high = std::max(y_high, vy);
  };
  Scale probe_x{axes.x}, probe_y{axes.y};
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if (!probe_x.drawable(vx) || !probe_y.drawable(vy)) continue;
      include(vx, vy);
      ++count;
      if (i < s.y_ranges.size()) {
        for (double v : {s.y_ranges[i].first, s.y_ranges[i].second}) {
          if (probe_y.drawable(v)) include(vx, v);
        }
      }
      if (i < s.x_ranges.size()) {
        for (double v : {s.x_ranges[i].first, s.x_ranges[i].second}) {
          if (probe_x.drawable(v)) include(v, vy);
        }
      }
    }
  }
  if (count == 0) return "";
  for (const auto& rule : notes.rules) {
    if (rule.vertical && probe_x.drawable(rule.at)) include(rule.at, y_low);
    if (!rule.vertical && probe_y.drawable(rule.at)) include(x_low, rule.at);
  }
  Scale x = make_scale(axes.x, x_low, x_high), y = make_scale(axes.y, y_low, y_high);
  std::vector<std::string> names;
  std::vector<Swatch> swatches;
  std::vector<std::size_t> colours;
  for (const auto& s : series) {
    names.push_back(s.name);
    swatches.push_back(s.dashed ? Swatch::kDashed : s.line && s.points.size() > 1 ? Swatch::kLine : Swatch::kDot);
    colours.push_back(s.colour.value_or(colours.size()));
  }
  const Frame f = make_frame(title, names, y_tick_margin(y), layout.width);
  x.pixel_low = f.left + 14, x.pixel_high = f.plot_right() - 14;
  y.pixel_low = f.plot_bottom - 8, y.pixel_high = f.top + 8;

  std::string svg =
      svg_open(f, title, count, layout.wide) + grid_and_ticks(f, x, y) + axis_labels(f, axes.x.label, axes.y.label);
  for (const auto& rule : notes.rules) svg += rule_svg(f, rule, x, y);
  for (std::size_t k = 0; k < series.size(); ++k) svg += series_svg(series[k], k, x, y);
  LabelPlacer labels(Box{f.left, f.top, f.plot_right(), f.plot_bottom});
  // Labels keep clear of every marker and error bar (not of lines: a fit
  // crosses the whole plot).
  for (const auto& s : series) {
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if (!x.drawable(vx) || !y.drawable(vy)) continue;
      const double px = x.pixel(vx), py = y.pixel(vy);
      if (s.markers && !s.dashed) labels.avoid({px - 5, py - 5, px + 5, py + 5});
      if (i < s.y_ranges.size() && y.drawable(s.y_ranges[i].first) && y.drawable(s.y_ranges[i].second)) {
        labels.avoid({px - 5, y.pixel(s.y_ranges[i].second) - 1, px + 5, y.pixel(s.y_ranges[i].first) + 1});
      }
      if (i < s.x_ranges.size() && x.drawable(s.x_ranges[i].first) && x.drawable(s.x_ranges[i].second)) {
        labels.avoid({x.pixel(s.x_ranges[i].first) - 1, py - 5, x.pixel(s.x_ranges[i].second) + 1, py + 5});
      }
    }
  }
  for (const auto& mark : notes.marks) {
    if (x.drawable(mark.x) && y.drawable(mark.y)) {
      labels.avoid({x.pixel(mark.x) - 9, y.pixel(mark.y) - 9, x.pixel(mark.x) + 9, y.pixel(mark.y) + 9});
    }
  }
  for (const auto& mark : notes.marks) {
    if (!x.drawable(mark.x) || !y.drawable(mark.y)) continue;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"8\" class=\"mark\"/>", x.pixel(mark.x), y.pixel(mark.y));
    svg += labels.place(x.pixel(mark.x), y.pixel(mark.y), mark.label, "mark-label");
  }
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    for (std::size_t i = 0; i < s.point_labels.size() && i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if (s.point_labels[i].empty() || !x.drawable(vx) || !y.drawable(vy)) continue;
      svg += labels.place(x.pixel(vx), y.pixel(vy), s.point_labels[i], "point-label", true);
    }
  }
  return svg + legend_svg(f, swatches, colours) + "</svg>\n";
}

std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& group_labels,
                          const std::vector<std::string>& series_names, const std::vector<std::vector<double>>& values,
                          const std::string& y_label, double reference) {
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
  const Frame f = make_frame(title, series_names, y_tick_margin(y));
  y.pixel_low = f.plot_bottom, y.pixel_high = f.top + 8;
  Scale x = make_scale({}, 0.0, 1.0);
  x.ticks.clear();
  const double plot_w = f.plot_right() - f.left;
  const double group_w = plot_w / static_cast<double>(group_labels.size());
  const double bar_w = 0.8 * group_w / static_cast<double>(std::max<std::size_t>(1, values.size()));
  std::string svg = svg_open(f, title, count) + grid_and_ticks(f, x, y) + axis_labels(f, "", y_label);
  const std::size_t label_chars = static_cast<std::size_t>(std::max(4.0, group_w / kTickCharWidth));
  for (std::size_t g = 0; g < group_labels.size(); ++g) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n",
                       f.left + group_w * (static_cast<double>(g) + 0.5), f.plot_bottom + 19,
                       html_escape(truncated(group_labels[g], label_chars)));
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    svg += fmt::format("<g class=\"c{}\">", k % kPaletteSize);
    for (std::size_t g = 0; g < values[k].size() && g < group_labels.size(); ++g) {
      const double x0 = f.left + group_w * static_cast<double>(g) + 0.1 * group_w + bar_w * static_cast<double>(k);
      const double v = values[k][g];
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"currentColor\"><title>{}: {}</title></rect>",
          x0, y.pixel(v), bar_w, y.pixel(0) - y.pixel(v), html_escape(group_labels[g]), format_plain(v, 3));
    }
    svg += "</g>\n";
  }
  svg += rule_svg(f, {false, reference, ""}, x, y);
  return svg + legend_svg(f, {}, {}) + "</svg>\n";
}

std::string html_page(const std::string& title, const std::string& body) {
  std::string html = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>{0}</title>
<style>
:root {{ --bg: #ffffff; --fg: #1d2127; --muted: #5b6470; --line: #d5d9df; --panel: #f5f7f9; --accent: #0b63b8;
  --c0: #0072b2; --c1: #d55e00; --c2: #009e73; --c3: #cc79a7; --c4: #b8860b; --c5: #56b4e9; --c6: #8c564b; --c7: #6b6b6b; }}
@media (prefers-color-scheme: dark) {{
  :root {{ --bg: #15181d; --fg: #e4e7eb; --muted: #9aa3ad; --line: #39404a; --panel: #1e232a; --accent: #6cb4f5;
    --c0: #56a8e6; --c1: #ff8c4d; --c2: #33c99a; --c3: #e99ad0; --c4: #f0c040; --c5: #8fd3fa; --c6: #cf9f8f; --c7: #b4b4b4; }}
}}
* {{ box-sizing: border-box; }}
body {{ font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 1em clamp(0.6em, 3vw, 2.5em);
  max-width: 1500px; background: var(--bg); color: var(--fg); }}
h1 {{ font-size: 1.5em; margin: 0.4em 0; overflow-wrap: break-word; }} h2 {{ font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid var(--line); }}
p, li {{ max-width: 80ch; overflow-wrap: break-word; }}
.summary {{ background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 0.6em 1.2em; }}
.summary li {{ margin: 0.3em 0; }}
.simulated {{ border: 3px solid #d55e00; border-radius: 6px; padding: 0.5em 0.8em; color: #d55e00; font-size: 1.1em; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 460px), 1fr)); gap: 1em; }}
figure.chart {{ margin: 0; min-width: 0; }} figure.chart.wide {{ grid-column: 1 / -1; }}
figure.chart figcaption {{ color: var(--muted); font-size: 0.9em; }}
svg.plot {{ display: block; width: 100%; height: auto; background: var(--bg); color: var(--fg);
  border: 1px solid var(--line); border-radius: 4px; }}
/* A phone: a chart keeps a width at which its text reads at 11 px or more and
   scrolls sideways inside its figure; so do tables. */
@media (max-width: 600px) {{
  figure.chart {{ overflow-x: auto; }} figure.chart > svg.plot {{ min-width: 560px; }}
  figure.chart > svg.plot.wide {{ min-width: 860px; }}
}}
svg.plot text {{ fill: var(--fg); font-family: system-ui, sans-serif; }}
svg.plot .title {{ font-weight: 600; font-size: 15px; }} svg.plot .tick {{ font-size: 12px; fill: var(--muted); }}
svg.plot .label {{ font-size: 13px; }} svg.plot .legend {{ font-size: 12px; }}
svg.plot .point-label {{ font-size: 12px; fill: var(--muted); }} svg.plot .mark-label {{ font-size: 12px; font-weight: 600; }}
svg.plot .rule-label {{ font-size: 12px; fill: var(--muted); }}
svg.plot .grid {{ stroke: var(--line); stroke-width: 0.7; }} svg.plot .axis {{ stroke: var(--muted); }}
svg.plot .rule {{ stroke: var(--muted); stroke-dasharray: 5 4; stroke-width: 1.3; }}
svg.plot .mark {{ fill: none; stroke: var(--fg); stroke-width: 1.8; }} svg.plot .errorbar {{ stroke-width: 1.4; fill: none; }}
.c0 {{ color: var(--c0); }} .c1 {{ color: var(--c1); }} .c2 {{ color: var(--c2); }} .c3 {{ color: var(--c3); }}
.c4 {{ color: var(--c4); }} .c5 {{ color: var(--c5); }} .c6 {{ color: var(--c6); }} .c7 {{ color: var(--c7); }}
table {{ display: block; max-width: 100%; overflow-x: auto; border-collapse: collapse; margin: 0.6em 0; font-variant-numeric: tabular-nums;
  /* A shadow at an edge with more columns beyond it (scroll sideways). */
  background: linear-gradient(to right, var(--bg) 30%, transparent) left / 40px 100% no-repeat local,
    linear-gradient(to left, var(--bg) 30%, transparent) right / 40px 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, rgba(0,0,0,.25), transparent) left / 14px 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,.25), transparent) right / 14px 100% no-repeat scroll; }}
td, th {{ border-bottom: 1px solid var(--line); padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }}
th {{ white-space: normal; vertical-align: bottom; min-width: 4em; }}
th {{ background: var(--panel); position: relative; }} td:first-child, th:first-child {{ text-align: left; }}
table.sortable th {{ cursor: pointer; user-select: none; }} table.sortable th[aria-sort]::after {{ content: " \2195"; color: var(--muted); }}
.tag {{ font-size: 0.8em; border: 1px solid var(--line); border-radius: 3px; padding: 0 0.3em; margin-left: 0.3em; color: var(--muted); }}
.muted {{ color: var(--muted); }} pre {{ background: var(--panel); padding: 1em; overflow-x: auto; }}
</style></head><body>
<h1>{0}</h1>
)",
                                 html_escape(title));
  html += body;
  html += R"(<script>
// Sortable tables: a click on a header sorts by that column (again: reversed).
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.setAttribute('aria-sort', 'none');
    th.addEventListener('click', function () {
      var rows = Array.prototype.slice.call(table.querySelectorAll('tr')).filter(function (r) { return r.querySelector('td'); });
      var up = th.getAttribute('aria-sort') !== 'ascending';
      var key = function (row) {
        var cell = row.children[column]; var n = cell && cell.getAttribute('data-sort');
        return n !== null && n !== undefined && n !== '' ? parseFloat(n) : (cell ? cell.textContent : '');
      };
      rows.sort(function (a, b) { var x = key(a), y = key(b); var c = x < y ? -1 : x > y ? 1 : 0; return up ? c : -c; });
      table.querySelectorAll('th').forEach(function (h) { h.setAttribute('aria-sort', 'none'); });
      th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      rows.forEach(function (r) { r.parentNode.appendChild(r); });
    });
  });
});
// Checks the page as a person would see it: every chart drew marks, and
// nothing sticks out of the window, its container or the chart itself.
window.addEventListener('load', function () {
  var ok = 0, overflow = [], plots = document.querySelectorAll('svg.plot');
  if (document.documentElement.scrollWidth > window.innerWidth) overflow.push('page');
  plots.forEach(function (svg, i) {
    var box = svg.getBBox(), marks = svg.querySelectorAll('polyline, circle, rect').length;
    if (box.width > 0 && box.height > 0 && marks > 0) ok++;
    var r = svg.getBoundingClientRect(), p = svg.parentElement.getBoundingClientRect();
    // A chart its figure scrolls (a phone) is meant to be wider than it.
    var scrolls = /auto|scroll/.test(getComputedStyle(svg.parentElement).overflowX);
    if (!scrolls && (r.left < p.left - 1 || r.right > p.right + 1 || r.right > window.innerWidth)) overflow.push('chart' + i);
    // On screen, so rotated labels count as drawn.
    svg.querySelectorAll('text').forEach(function (t) {
      var b = t.getBoundingClientRect();
      if (b.left < r.left - 1 || b.top < r.top - 1 || b.right > r.right + 1 || b.bottom > r.bottom + 1)
        overflow.push('chart' + i + ' text "' + t.textContent + '"');
    });
  });
  // The smallest chart text as drawn, in CSS pixels (data-min-font-px).
  var smallest = Infinity;
  plots.forEach(function (svg) {
    var scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    svg.querySelectorAll('text').forEach(function (t) {
      smallest = Math.min(smallest, parseFloat(getComputedStyle(t).fontSize) * scale);
    });
  });
  document.body.setAttribute('data-min-font-px', isFinite(smallest) ? smallest.toFixed(1) : 'none');
  document.body.setAttribute('data-plots', plots.length);
  document.body.setAttribute('data-plots-ok', ok);
  document.body.setAttribute('data-overflow', overflow.length ? overflow.join('; ') : 'none');
  document.body.setAttribute('data-width', window.innerWidth);
});
</script>
</body></html>
)";
  return html;
}

}  // namespace joule
