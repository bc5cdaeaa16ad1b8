#include "joule/analyze/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace joule {

namespace {

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

const char* colour(std::size_t k) { return kColours[k % std::size(kColours)]; }

// The plotting area of every chart.
constexpr double kWidth = 640, kHeight = 360, kLeft = 70, kRight = 170, kTop = 30, kBottom = 50;

std::string svg_open(const std::string& title, std::size_t marks) {
  return fmt::format(
      "<svg class=\"plot\" data-points=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n<text x=\"{}\" y=\"18\" class=\"title\">{}</text>\n",
      marks, kWidth, kHeight, kWidth, kHeight, html_escape(title), kLeft, html_escape(title));
}

std::string axes_lines(const std::string& x_label, const std::string& y_label) {
  std::string svg = fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>"
                                "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#333\"/>\n",
                                kLeft, kHeight - kBottom, kWidth - kRight, kTop);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>",
                     (kLeft + kWidth - kRight) / 2, kHeight - 12, html_escape(x_label));
  svg += fmt::format(
      "<text x=\"16\" y=\"{0}\" class=\"label\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">{1}</text>\n",
      (kTop + kHeight - kBottom) / 2, html_escape(y_label));
  return svg;
}

std::string legend_entry(std::size_t k, const std::string& name) {
  return fmt::format("<text x=\"{}\" y=\"{}\" class=\"legend\" fill=\"{}\">{}</text>\n", kWidth - kRight + 10,
                     kTop + 16 * (k + 1), colour(k), html_escape(name.substr(0, 28)));
}

// One axis: data range [low, high] (log10 of it on a log axis) onto pixels.
struct Scale {
  bool log = false;
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  double t(double v) const { return log ? std::log10(v) : v; }
  bool drawable(double v) const { return !log || v > 0; }
  void include(double v) {
    low = std::min(low, t(v));
    high = std::max(high, t(v));
  }
  double value_at(double fraction) const {
    const double f = low + (high - low) * fraction;
    return log ? std::pow(10, f) : f;
  }
  double fraction(double v) const { return (t(v) - low) / (high - low); }
};

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

std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series, const ChartAxes& axes) {
  Scale x{axes.log_x}, y{axes.log_y};
  std::size_t count = 0;
  for (const auto& s : series) {
    for (const auto& [px, py] : s.points) {
      if (!x.drawable(px) || !y.drawable(py)) continue;
      x.include(px);
      y.include(py);
      ++count;
    }
  }
  if (count == 0) return "";
  if (x.high == x.low) x.high = x.low + 1;
  if (y.high == y.low) y.high = y.low + 1;
  if (!axes.log_y) y.low = std::min(y.low, 0.0);
  y.high += (y.high - y.low) * 0.05;
  auto px = [&](double v) { return kLeft + x.fraction(v) * (kWidth - kLeft - kRight); };
  auto py = [&](double v) { return kHeight - kBottom - y.fraction(v) * (kHeight - kTop - kBottom); };
  std::string svg = svg_open(title, count) + axes_lines(axes.x_label, axes.y_label);
  for (int i = 0; i <= 4; ++i) {
    const double vx = x.value_at(i / 4.0), vy = y.value_at(i / 4.0);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{:.3g}</text>", px(vx),
                       kHeight - kBottom + 16, vx);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{:.3g}</text>\n", kLeft - 6,
                       py(vy) + 4, vy);
  }
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    std::string points;
    for (const auto& [vx, vy] : s.points) {
      if (x.drawable(vx) && y.drawable(vy)) points += fmt::format("{:.1f},{:.1f} ", px(vx), py(vy));
    }
    if (s.line && s.points.size() > 1) {
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{:g}\"{} points=\"{}\"/>\n", colour(k),
                         s.stroke_width, s.dashed ? " stroke-dasharray=\"5,4\"" : "", points);
    }
    if (s.markers && !s.dashed) {
      for (const auto& [vx, vy] : s.points) {
        if (!x.drawable(vx) || !y.drawable(vy)) continue;
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>", px(vx), py(vy), colour(k));
      }
    }
    svg += "\n" + legend_entry(k, s.name);
  }
  return svg + "</svg>\n";
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
  high *= 1.08;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double group_w = plot_w / static_cast<double>(group_labels.size());
  const double bar_w = 0.8 * group_w / static_cast<double>(std::max<std::size_t>(1, series_names.size()));
  auto py = [&](double v) { return kHeight - kBottom - v / high * plot_h; };
  std::string svg = svg_open(title, count) + axes_lines("", y_label);
  for (int i = 0; i <= 4; ++i) {
    const double v = high * i / 4;
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{:.3g}</text>\n", kLeft - 6,
                       py(v) + 4, v);
  }
  for (std::size_t g = 0; g < group_labels.size(); ++g) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n",
                       kLeft + group_w * (static_cast<double>(g) + 0.5), kHeight - kBottom + 16,
                       html_escape(group_labels[g]));
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    for (std::size_t g = 0; g < values[k].size() && g < group_labels.size(); ++g) {
      const double x = kLeft + group_w * static_cast<double>(g) + 0.1 * group_w + bar_w * static_cast<double>(k);
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}: {:.3g}</title></rect>",
          x, py(values[k][g]), bar_w, py(0) - py(values[k][g]), colour(k), html_escape(group_labels[g]), values[k][g]);
    }
    svg += "\n" + legend_entry(k, k < series_names.size() ? series_names[k] : "");
  }
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#333\" stroke-dasharray=\"5,4\"/>\n",
                     kLeft, py(reference), kWidth - kRight);
  return svg + "</svg>\n";
}

std::string html_page(const std::string& title, const std::string& body) {
  std::string html = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{0}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
svg.plot {{ border: 1px solid #ddd; margin: 0.5em 0; background: #fff; }}
.title {{ font-weight: bold; font-size: 14px; }} .tick {{ font-size: 11px; fill: #555; }}
.label {{ font-size: 12px; }} .legend {{ font-size: 11px; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; white-space: nowrap; }}
</style></head><body>
<h1>{0}</h1>
)",
                                 html_escape(title));
  html += body;
  // Lets a headless browser confirm every plot rendered with content.
  html += R"(<script>
window.addEventListener('load', function () {
  var ok = 0, plots = document.querySelectorAll('svg.plot');
  plots.forEach(function (svg) {
    var box = svg.getBBox(), marks = svg.querySelectorAll('polyline, circle, rect').length;
    if (box.width > 0 && box.height > 0 && marks > 0) ok++;
  });
  document.body.setAttribute('data-plots', plots.length);
  document.body.setAttribute('data-plots-ok', ok);
});
</script>
</body></html>
)";
  return html;
}

}  // namespace joule
