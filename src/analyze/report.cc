#include "joule/analyze/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace joule {

namespace {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool line = true;
  bool dashed = false;
};

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

std::string escape(const std::string& text) {
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

// An SVG chart with axes, ticks, a legend, and one polyline/markers per series.
std::string chart(const std::string& title, const std::vector<Series>& series, const std::string& x_label,
                  const std::string& y_label, bool log_axes) {
  const double width = 640, height = 360, left = 70, right = 170, top = 30, bottom = 50;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  std::size_t count = 0;
  auto tx = [&](double v) { return log_axes ? std::log10(v) : v; };
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (log_axes && (x <= 0 || y <= 0)) continue;
      x0 = std::min(x0, tx(x));
      x1 = std::max(x1, tx(x));
      y0 = std::min(y0, tx(y));
      y1 = std::max(y1, tx(y));
      ++count;
    }
  }
  if (count == 0) return "";
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  if (!log_axes) y0 = std::min(y0, 0.0);
  const double pad_y = (y1 - y0) * 0.05;
  y1 += pad_y;
  auto px = [&](double x) { return left + (tx(x) - x0) / (x1 - x0) * (width - left - right); };
  auto py = [&](double y) { return height - bottom - (tx(y) - y0) / (y1 - y0) * (height - top - bottom); };
  std::string svg = fmt::format(
      "<svg class=\"plot\" data-points=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n<text x=\"{}\" y=\"18\" class=\"title\">{}</text>\n",
      count, width, height, width, height, escape(title), left, escape(title));
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>"
                     "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#333\"/>\n",
                     left, height - bottom, width - right, top);
  for (int i = 0; i <= 4; ++i) {
    const double fx = x0 + (x1 - x0) * i / 4, fy = y0 + (y1 - y0) * i / 4;
    const double vx = log_axes ? std::pow(10, fx) : fx, vy = log_axes ? std::pow(10, fy) : fy;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{:.3g}</text>",
                       px(vx), height - bottom + 16, vx);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{:.3g}</text>\n", left - 6,
                       py(vy) + 4, vy);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\" text-anchor=\"middle\">{}</text>", (left + width - right) / 2,
                     height - 12, escape(x_label));
  svg += fmt::format("<text x=\"16\" y=\"{}\" class=\"label\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">{}</text>\n",
                     (top + height - bottom) / 2, (top + height - bottom) / 2, escape(y_label));
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* colour = kColours[k % std::size(kColours)];
    std::string points;
    for (const auto& [x, y] : s.points) {
      if (log_axes && (x <= 0 || y <= 0)) continue;
      points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    }
    if (s.line && s.points.size() > 1) {
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n", colour,
                         s.dashed ? " stroke-dasharray=\"5,4\"" : "", points);
    }
    if (!s.dashed) {
      for (const auto& [x, y] : s.points) {
        if (log_axes && (x <= 0 || y <= 0)) continue;
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>", px(x), py(y), colour);
      }
    }
    svg += fmt::format("\n<text x=\"{}\" y=\"{}\" class=\"legend\" fill=\"{}\">{}</text>\n", width - right + 10,
                       top + 16 * (k + 1), colour, escape(s.name.substr(0, 28)));
  }
  return svg + "</svg>\n";
}

double num(const std::map<std::string, std::string>& c, const std::string& k) { return std::stod(c.at(k)); }

// The group a configuration belongs to when `drop` is the plotted setting;
// the same names as the scaling fits' groups.
std::string group_label(std::map<std::string, std::string> config, const std::string& drop) {
  config.erase(drop);
  return config_label(config, "all");
}

}  // namespace

std::string render_report(const std::string& title, const std::vector<SweepRun>& runs, const SweepAnalysis& a,
                          const std::vector<PowerPoint>& timelines) {
  std::vector<std::string> plots;
  const auto& first = a.configs.front().config;
  if (first.count("power_limit")) {
    std::map<std::string, Series> time_by, energy_by;
    for (const auto& c : a.configs) {
      const std::string g = group_label(c.config, "power_limit");
      time_by[g].name = energy_by[g].name = g;
      time_by[g].points.emplace_back(num(c.config, "power_limit"), c.time_s.mean);
      energy_by[g].points.emplace_back(num(c.config, "power_limit"), c.energy_j.mean);
    }
    std::vector<Series> t, e;
    for (auto& [g, s] : time_by) {
      std::sort(s.points.begin(), s.points.end());
      t.push_back(s);
    }
    for (auto& [g, s] : energy_by) {
      std::sort(s.points.begin(), s.points.end());
      e.push_back(s);
    }
    plots.push_back(chart("Time vs power limit", t, "power limit (W)", "time (s)", false));
    plots.push_back(chart("Energy vs power limit", e, "power limit (W)", "energy (J)", false));
  }
  if (first.count("gpus")) {
    std::map<std::string, Series> speed_by, energy_by;
    std::map<std::string, double> base_time;
    for (const auto& c : a.configs) {
      const std::string g = group_label(c.config, "gpus");
      const double n = num(c.config, "gpus");
      if (!base_time.count(g) || n == 1) base_time[g] = c.time_s.mean;
    }
    for (const auto& c : a.configs) {
      const std::string g = group_label(c.config, "gpus");
      speed_by[g].name = energy_by[g].name = g;
      speed_by[g].points.emplace_back(num(c.config, "gpus"), base_time[g] / c.time_s.mean);
      energy_by[g].points.emplace_back(num(c.config, "gpus"), c.energy_j.mean);
    }
    std::vector<Series> s, e;
    for (auto& [g, series] : speed_by) {
      std::sort(series.points.begin(), series.points.end());
      s.push_back(series);
      // The fitted t = a N^-b, as speed-up N^b relative to the first point.
      for (const auto& fit : a.scaling) {
        if (fit.group != g || series.points.empty()) continue;
        Series line{g + " fit", {}, true, true};
        const double n0 = series.points.front().first, n1 = series.points.back().first;
        for (int i = 0; i <= 20; ++i) {
          const double n = n0 * std::pow(n1 / n0, i / 20.0);
          line.points.emplace_back(n, series.points.front().second * std::pow(n / n0, fit.fit.b));
        }
        s.push_back(line);
      }
    }
    for (auto& [g, series] : energy_by) {
      std::sort(series.points.begin(), series.points.end());
      e.push_back(series);
    }
    plots.push_back(chart("Speed-up vs GPU count (log-log, fitted t = a N^-b dashed)", s, "GPUs", "speed-up", true));
    plots.push_back(chart("Energy vs GPU count", e, "GPUs", "energy (J)", true));
  }
  {
    Series all{"configurations", {}, false, false}, front{"Pareto front", {}, true, false};
    for (const auto& c : a.configs) all.points.emplace_back(c.time_s.mean, c.energy_j.mean);
    for (std::size_t i : a.pareto) front.points.emplace_back(a.configs[i].time_s.mean, a.configs[i].energy_j.mean);
    plots.push_back(chart("Energy-time Pareto front", {all, front}, "time (s)", "energy (J)", false));
  }
  {
    // One timeline per configuration (its first run), summed over devices.
    std::map<long long, std::string> run_label;
    std::map<std::string, long long> first_run;
    for (const auto& r : runs) {
      const std::string label = config_label(r.config, "(single configuration)");
      if (!first_run.count(label) && r.status == "ok") first_run[label] = r.id;
    }
    for (const auto& [label, id] : first_run) run_label[id] = label;
    std::map<long long, Series> by_run;
    for (const auto& p : timelines) {
      if (!run_label.count(p.run_id)) continue;
      auto& s = by_run[p.run_id];
      s.name = run_label[p.run_id];
      s.points.emplace_back(p.time_s, p.power_w);
    }
    std::vector<Series> lines;
    for (auto& [id, s] : by_run) {
      std::sort(s.points.begin(), s.points.end());
      // Sum devices sampled at (nearly) the same instant.
      std::vector<std::pair<double, double>> summed;
      for (const auto& pt : s.points) {
        if (!summed.empty() && pt.first - summed.back().first < 1e-3) {
          summed.back().second += pt.second;
        } else {
          summed.push_back(pt);
        }
      }
      s.points = summed;
      s.dashed = false;
      if (lines.size() < 8) lines.push_back(s);
    }
    if (!lines.empty()) plots.push_back(chart("Power over time (first run of each configuration)", lines, "time (s)", "power (W)", false));
  }
  std::string html = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{0}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
svg.plot {{ border: 1px solid #ddd; margin: 0.5em 0; background: #fff; }}
.title {{ font-weight: bold; font-size: 14px; }} .tick {{ font-size: 11px; fill: #555; }}
.label {{ font-size: 12px; }} .legend {{ font-size: 11px; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}
</style></head><body>
<h1>{0}</h1>
)",
                                 escape(title));
  html += fmt::format("<p>{} runs, {} configurations. Generated by joule report.</p>\n", runs.size(), a.configs.size());
  for (const auto& p : plots) {
    if (!p.empty()) html += "<div>" + p + "</div>\n";
  }
  html += "<h2>Analysis</h2>\n<pre>" + escape(to_text(a)) + "</pre>\n";
  // Lets a headless browser confirm every plot rendered with content.
  html += R"(<script>
window.addEventListener('load', function () {
  var ok = 0, plots = document.querySelectorAll('svg.plot');
  plots.forEach(function (svg) {
    var box = svg.getBBox(), marks = svg.querySelectorAll('polyline, circle').length;
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
