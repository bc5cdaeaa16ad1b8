#include "joule/analyze/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "joule/analyze/svg_chart.h"

namespace joule {

namespace {

using Series = ChartSeries;

std::string chart(const std::string& title, const std::vector<Series>& series, const std::string& x_label,
                  const std::string& y_label, bool log_axes) {
  return svg_line_chart(title, series, {x_label, y_label, log_axes, log_axes});
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
  std::string body =
      fmt::format("<p>{} runs, {} configurations. Generated by joule report.</p>\n", runs.size(), a.configs.size());
  for (const auto& p : plots) {
    if (!p.empty()) body += "<div>" + p + "</div>\n";
  }
  body += "<h2>Analysis</h2>\n<pre>" + html_escape(to_text(a)) + "</pre>\n";
  return html_page(title, body);
}

}  // namespace joule
