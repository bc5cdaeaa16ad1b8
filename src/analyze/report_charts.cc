// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The sweep report's charts: time and energy against each swept setting
// (a line per group of the others, fits dashed, the best of each ringed),
// speed-up and energy against GPU count, the Pareto front numbered as the
// configurations table, and each configuration's power over time.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "joule/analyze/svg_chart.h"
#include "joule/analyze/units_format.h"
#include "report_parts.h"

namespace joule {

// Labels in natural order: runs of digits compare as numbers, so that
// "batch_size=64" comes before "batch_size=128" (legends, groups, tables).
bool natural_less(const std::string& l, const std::string& r) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  while (i < l.size() && j < r.size()) {
    if (digit(l[i]) && digit(r[j])) {
      std::size_t i_end = i, j_end = j;
      while (i_end < l.size() && (digit(l[i_end]) || l[i_end] == '.')) ++i_end;
      while (j_end < r.size() && (digit(r[j_end]) || r[j_end] == '.')) ++j_end;
      const double lv = std::strtod(l.substr(i, i_end - i).c_str(), nullptr);
      const double rv = std::strtod(r.substr(j, j_end - j).c_str(), nullptr);
      if (lv != rv) return lv < rv;
      i = i_end;
      j = j_end;
      continue;
    }
    if (l[i] != r[j]) return l[i] < r[j];
    ++i;
    ++j;
  }
  return l.size() - i < r.size() - j;
}

namespace {

using Config = std::map<std::string, std::string>;

// Power timelines drawn at most (one small chart per configuration).
constexpr std::size_t kMaxTimelines = 16;

struct NaturalLess {
  bool operator()(const std::string& l, const std::string& r) const { return natural_less(l, r); }
};

// An axis title with its unit: "time per run (s)".
std::string with_unit(const std::string& label, const std::string& unit) {
  return unit.empty() ? label : label + " (" + unit + ")";
}

// The group a configuration belongs to when `drop` is the plotted setting;
// the same names as the scaling fits' groups.
std::string group_label(Config config, const std::string& drop) {
  config.erase(drop);
  return config_label(config, "all");
}

// A numeric setting swept over two or more values, and how to draw its axis.
struct SweptSetting {
  std::string key;
  std::vector<double> values;  // distinct, ascending
  ChartAxis axis;
};

std::vector<SweptSetting> swept_settings(const SweepAnalysis& a) {
  std::vector<SweptSetting> out;
  for (const auto& [key, unused] : a.configs.front().config) {
    std::set<double> values;
    bool numeric = true;
    for (const auto& c : a.configs) {
      const auto v = number(c.config, key);
      numeric = numeric && v.has_value();
      if (v) values.insert(*v);
    }
    if (!numeric || values.size() < 2) continue;
    SweptSetting s{key, {values.begin(), values.end()}, {}};
    const bool integral = std::all_of(s.values.begin(), s.values.end(), [](double v) { return v == std::round(v); });
    const bool powers_of_two = integral && std::all_of(s.values.begin(), s.values.end(), [](double v) {
      return v >= 1 && std::fabs(std::log2(v) - std::round(std::log2(v))) < 1e-9;
    });
    const GpuKnob* knob = find_gpu_knob(key);
    // Units in the axis title; a batch size counts samples, a GPU count GPUs.
    const std::string unit = knob                                       ? knob->unit
                             : key == "gpus"                            ? "count"
                             : key.find("batch") != std::string::npos ? "samples"
                                                                        : "";
    // A knob's unit is the axis's own (its title names it once, with its prefix).
    s.axis = {.label = knob ? knob->words : with_unit(key == "gpus" ? "GPUs" : key, unit),
              .unit = knob ? knob->unit : "",
              .log = powers_of_two,
              .integer = integral};
    out.push_back(std::move(s));
  }
  // Power limit first, then clocks, then the rest in name order.
  auto rank = [](const SweptSetting& s) { return s.key == "power_limit" ? 0 : s.key.find("clock") != std::string::npos ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const auto& l, const auto& r) { return rank(l) < rank(r); });
  return out;
}

std::pair<double, double> spread(const Summary& s) { return {s.mean - s.stddev, s.mean + s.stddev}; }

std::string figure(const std::string& svg, const std::string& caption = "", bool wide = false) {
  if (svg.empty()) return "";
  return std::string(wide ? "<figure class=\"chart wide\">" : "<figure class=\"chart\">") + svg + (caption.empty() ? "" : "<figcaption>" + caption + "</figcaption>") +
         "</figure>\n";
}

// What each configuration is best at, in words ("least energy, min EDP, eta
// 0.25-1"), for the rings on the per-setting charts; the baseline first.
std::map<std::size_t, std::vector<std::string>> roles(const SweepAnalysis& a, bool baseline) {
  std::map<std::size_t, std::vector<std::string>> out;
  if (baseline) out[reference_of(a)].push_back("baseline");
  const std::pair<const char*, const char*> objectives[] = {
      {"time", "fastest"}, {"energy", "least energy"}, {"edp", "min EDP"}};
  for (const auto& [metric, words] : objectives) {
    if (a.best.count(metric)) out[a.best.at(metric)].push_back(words);
  }
  for (const auto& [i, text] : eta_ranges(a)) out[i].push_back(text);
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// y = y0 (x / x0)^b by least squares on the logarithms, over a group's
// means; nullopt with fewer than three settings (two points fit exactly).
struct PowerFit {
  double x0 = 0, y0 = 0, b = 0, r_squared = 0;
};
std::optional<PowerFit> power_fit(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 3) return std::nullopt;
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  const double n = static_cast<double>(points.size());
  for (const auto& [x, y] : points) {
    if (!(x > 0) || !(y > 0)) return std::nullopt;
    const double lx = std::log(x), ly = std::log(y);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly, syy += ly * ly;
  }
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cxy = sxy - sx * sy / n;
  if (!(vx > 0)) return std::nullopt;
  PowerFit f;
  f.b = cxy / vx;
  f.x0 = points.front().first;
  f.y0 = std::exp((sy - f.b * sx) / n + f.b * std::log(f.x0));
  f.r_squared = vy > 0 ? cxy * cxy / (vx * vy) : 1.0;
  return f;
}

// The fitted curve of one group, dashed in its colour, its equation in the legend.
ChartSeries fit_series(const std::string& group, const std::vector<std::pair<double, double>>& points,
                       const std::string& y_symbol, const std::string& y_unit, const SweptSetting& s, std::size_t colour) {
  const auto fit = power_fit(points);
  if (!fit) return {};
  const std::string x_unit = s.axis.unit;
  ChartSeries line{.name = fmt::format("{} fit: {} = {} \xC3\x97 (x / {})^{} (R\xC2\xB2 {})", group, y_symbol,
                                       format_si(fit->y0, y_unit), format_tick(fit->x0, x_unit), format_plain(fit->b, 2),
                                       format_plain(fit->r_squared, 2)),
                   .dashed = true,
                   .stroke_width = 1.5,
                   .colour = colour};
  const double x1 = points.back().first;
  for (int k = 0; k <= 24; ++k) {
    const double x = fit->x0 * std::pow(x1 / fit->x0, k / 24.0);
    line.points.emplace_back(x, fit->y0 * std::pow(x / fit->x0, fit->b));
  }
  return line;
}

using Groups = std::map<std::string, std::vector<std::size_t>, NaturalLess>;

// On a knob's chart with several lines (a power limit per GPU count, ...),
// each line's own best cap for energy and EDP, where the sweep's best under
// that objective lies on another line: what a reader of that line would pick.
std::map<std::size_t, std::vector<std::string>> best_per_line(const SweepAnalysis& a, const Groups& lines) {
  std::map<std::size_t, std::vector<std::string>> out;
  if (lines.size() < 2) return out;
  const auto sweep_best = [&](const char* metric) { return a.best.count(metric) ? a.best.at(metric) : a.configs.size(); };
  for (const auto& [line, indices] : lines) {
    const auto best_by = [&](auto&& score) {
      std::optional<std::size_t> best;
      for (std::size_t i : indices) {
        const double v = score(a.configs[i]);
        if (std::isfinite(v) && (!best || v < score(a.configs[*best]))) best = i;
      }
      return best;
    };
    const auto energy = best_by([](const ConfigResult& c) { return c.energy_j.mean; });
    const auto edp = best_by([](const ConfigResult& c) { return c.energy_j.mean * c.time_s.mean; });
    if (energy && *energy != sweep_best("energy")) out[*energy].push_back("least energy of " + line);
    if (edp && *edp != sweep_best("edp")) out[*edp].push_back("min EDP of " + line);
  }
  return out;
}

// Time and energy against one swept setting, a line per group of the other
// settings (in natural order), error bars of one standard deviation over the
// repeats; ringed: the baseline and the best configuration under each
// objective (on a knob's chart also each line's own best cap); dashed: a
// fitted power law per group with three settings or more.
std::string setting_charts(const SweepAnalysis& a, const SweptSetting& s) {
  Groups members;
  for (std::size_t i = 0; i < a.configs.size(); ++i) members[group_label(a.configs[i].config, s.key)].push_back(i);
  ChartNotes time_notes, energy_notes;
  const bool knob = find_gpu_knob(s.key) != nullptr;
  auto marked = roles(a, !knob);  // a knob's baseline is a rule at its largest value; else the reference is ringed
  if (knob) {
    for (auto& [i, words] : best_per_line(a, members)) marked[i].insert(marked[i].end(), words.begin(), words.end());
  }
  for (const auto& [i, words] : marked) {
    const auto& c = a.configs[i];
    const auto x = number(c.config, s.key);
    if (!x) continue;
    time_notes.marks.push_back({*x, c.time_s.mean, joined(words)});
    energy_notes.marks.push_back({*x, c.energy_j.mean, joined(words)});
  }
  std::vector<ChartSeries> times, energies, time_fits, energy_fits;
  for (auto& [group, indices] : members) {
    std::sort(indices.begin(), indices.end(), [&](std::size_t l, std::size_t r) {
      return *number(a.configs[l].config, s.key) < *number(a.configs[r].config, s.key);
    });
    ChartSeries t{.name = group}, e{.name = group};
    for (std::size_t i : indices) {
      const auto& c = a.configs[i];
      const double x = *number(c.config, s.key);
      t.points.emplace_back(x, c.time_s.mean);
      t.y_ranges.push_back(spread(c.time_s));
      e.points.emplace_back(x, c.energy_j.mean);
      e.y_ranges.push_back(spread(c.energy_j));
    }
    const std::size_t colour = times.size();
    if (auto fit = fit_series(group, t.points, "t", "s", s, colour); !fit.points.empty()) time_fits.push_back(fit);
    if (auto fit = fit_series(group, e.points, "E", "J", s, colour); !fit.points.empty()) energy_fits.push_back(fit);
    times.push_back(std::move(t));
    energies.push_back(std::move(e));
  }
  if (knob) {
    // Every configuration's baseline sits at the knob's largest value.
    const ChartRule rule{.vertical = true, .at = s.values.back(), .label = "baseline"};
    time_notes.rules.push_back(rule);
    energy_notes.rules.push_back(rule);
  }
  times.insert(times.end(), time_fits.begin(), time_fits.end());
  energies.insert(energies.end(), energy_fits.begin(), energy_fits.end());
  const std::string name = s.axis.label.substr(0, s.axis.label.find(" ("));
  return figure(svg_line_chart("Time per run vs " + name, times,
                               {.x = s.axis, .y = {.label = "time per run", .unit = "s", .from_zero = true}},
                               time_notes)) +
         figure(svg_line_chart("Energy per run vs " + name, energies,
                               {.x = s.axis, .y = {.label = "energy per run", .unit = "J", .from_zero = true}},
                               energy_notes));
}

// Speed-up (against the fewest GPUs of each group) and energy against GPU
// count, with the fitted t = a N^-b and ideal linear scaling dashed.
std::string gpu_charts(const SweepAnalysis& a, const SweptSetting& s) {
  std::map<std::string, std::vector<std::size_t>, NaturalLess> members;
  for (std::size_t i = 0; i < a.configs.size(); ++i) members[group_label(a.configs[i].config, "gpus")].push_back(i);
  std::vector<ChartSeries> speedups, energies, guides;
  constexpr std::size_t kGrey = 7;  // the palette's last colour, for guides
  for (auto& [group, indices] : members) {
    const std::size_t colour = speedups.size();
    std::sort(indices.begin(), indices.end(), [&](std::size_t l, std::size_t r) {
      return *number(a.configs[l].config, "gpus") < *number(a.configs[r].config, "gpus");
    });
    const auto& first = a.configs[indices.front()];
    const double n0 = *number(first.config, "gpus"), t0 = first.time_s.mean;
    ChartSeries speedup{.name = group}, energy{.name = group};
    for (std::size_t i : indices) {
      const auto& c = a.configs[i];
      const double n = *number(c.config, "gpus");
      speedup.points.emplace_back(n, t0 / c.time_s.mean);
      const auto [t_low, t_high] = spread(c.time_s);
      speedup.y_ranges.emplace_back(t0 / t_high, t_low > 0 ? t0 / t_low : t0 / c.time_s.mean);
      energy.points.emplace_back(n, c.energy_j.mean);
      energy.y_ranges.push_back(spread(c.energy_j));
    }
    speedups.push_back(speedup);
    energies.push_back(energy);
    for (const auto& fit : a.scaling) {
      if (fit.group != group) continue;
      ChartSeries line{.name = group + " fit: speed-up = (N / " + format_plain(n0, 3) + ")^" + format_plain(fit.fit.b, 2),
                       .dashed = true,
                       .colour = colour};
      const double n1 = speedup.points.back().first;
      for (int k = 0; k <= 20; ++k) {
        const double n = n0 * std::pow(n1 / n0, k / 20.0);
        line.points.emplace_back(n, std::pow(n / n0, fit.fit.b));
      }
      guides.push_back(line);
    }
  }
  ChartSeries ideal{.name = "linear scaling", .dashed = true, .stroke_width = 1.2, .colour = kGrey};
  ideal.points = {{s.values.front(), 1.0}, {s.values.back(), s.values.back() / s.values.front()}};
  // Guides after the data, in their group's colour.
  speedups.insert(speedups.end(), guides.begin(), guides.end());
  speedups.push_back(ideal);
  const ChartAxis gpus = {.label = "GPUs (count)", .log = s.axis.log, .integer = true};
  std::string html =
      figure(svg_line_chart("Speed-up vs GPU count", speedups,
                            {.x = gpus, .y = {.label = "speed-up (\xC3\x97)", .unit = "", .log = s.axis.log}}),
             "Speed-up against the fewest GPUs of each group; dashed: the fitted t = a N<sup>-b</sup> and linear scaling.") +
      figure(svg_line_chart("Energy per run vs GPU count", energies,
                            {.x = gpus, .y = {.label = "energy per run", .unit = "J", .from_zero = true}}));
  // Energy per GPU-hour from the scaling points (groups with two GPU counts or more).
  std::vector<ChartSeries> per_gpu_hour;
  for (const auto& fit : sorted_scaling(a)) {
    ChartSeries series{.name = fit.group};
    for (const auto& p : fit.points) {
      series.points.emplace_back(p.gpus, p.wh_per_gpu_hour);
      series.point_labels.push_back(p.nodes > 1 ? fmt::format("{} nodes", p.nodes) : "");
    }
    per_gpu_hour.push_back(series);
  }
  if (!per_gpu_hour.empty()) {
    html += figure(svg_line_chart("Energy per GPU-hour vs GPU count", per_gpu_hour,
                                  {.x = gpus, .y = {.label = "energy per GPU-hour", .unit = "Wh", .from_zero = true}}),
                   "Energy / (GPUs &times; hours): the mean power per GPU, CPU and DRAM included. Flat: the GPUs "
                   "are as busy as with fewer; rising: they wait. Points on several nodes say how many.");
  }
  return html;
}

// The configurations' settings in a short label: the values of the settings
// that vary ("128, 1"), or the full label when only one configuration exists.
std::string short_label(const SweepAnalysis& a, const ConfigResult& c) {
  std::string out;
  for (const auto& [key, value] : c.config) {
    bool varies = false;
    for (const auto& other : a.configs) varies = varies || other.config.count(key) == 0 || other.config.at(key) != value;
    if (varies) out += (out.empty() ? "" : " ") + key + "=" + value;
  }
  return out.empty() ? c.label() : out;
}


// The Pareto chart spans its row (wide) when it would stand alone in it.
std::string pareto_chart(const SweepAnalysis& a, bool wide) {
  // Every point is numbered as in the configurations table ("#3"), so a
  // crowded front stays legible; the baseline and the eta picks are ringed,
  // their settings and roles in their label: "#1 gpus=1 (baseline, eta 0)".
  std::map<std::size_t, std::string> roles = {{reference_of(a), "baseline"}};
  for (const auto& [i, text] : eta_ranges(a)) roles[i] += (roles[i].empty() ? "" : ", ") + text;
  auto number_of = [](std::size_t i) { return "#" + std::to_string(i + 1); };
  ChartNotes notes;
  for (const auto& [i, text] : roles) {
    notes.marks.push_back({a.configs[i].time_s.mean, a.configs[i].energy_j.mean,
                           number_of(i) + " " + short_label(a, a.configs[i]) + " (" + text + ")"});
  }
  ChartSeries others{.name = "configuration", .line = false, .labels_required = true};
  ChartSeries front{.name = "Pareto front", .labels_required = true};
  auto add = [&](ChartSeries& series, std::size_t i) {
    series.points.emplace_back(a.configs[i].time_s.mean, a.configs[i].energy_j.mean);
    series.y_ranges.push_back(spread(a.configs[i].energy_j));
    series.x_ranges.push_back(spread(a.configs[i].time_s));
    series.point_labels.push_back(roles.count(i) ? "" : number_of(i));
  };
  for (std::size_t i = 0; i < a.configs.size(); ++i) {
    if (std::find(a.pareto.begin(), a.pareto.end(), i) == a.pareto.end()) add(others, i);
  }
  for (std::size_t i : a.pareto) add(front, i);
  return figure(svg_line_chart("Energy vs time per run: the Pareto front", {others, front},
                               {.x = {.label = "time per run", .unit = "s"}, .y = {.label = "energy per run", .unit = "J"}},
                               notes, wide ? ChartLayout{.width = 900, .wide = true} : ChartLayout{}),
                "Numbers: the configurations table's # column. Ringed: the baseline and what each eta picks (cost = "
                "eta E + (1 - eta) P<sub>max</sub> T, P<sub>max</sub> = " +
                    format_si(a.max_power_w, "W") + ").",
                wide);
}

}  // namespace

// The eta values picking each configuration: "eta 0.25-1" for a run of
// consecutive etas, runs joined by commas ("eta 0, 1").
std::map<std::size_t, std::string> eta_ranges(const SweepAnalysis& a) {
  std::map<std::size_t, std::vector<std::pair<double, double>>> spans;  // config -> [first, last] eta runs
  for (std::size_t k = 0; k < a.eta_picks.size(); ++k) {
    const auto [eta, i] = a.eta_picks[k];
    if (k > 0 && a.eta_picks[k - 1].second == i) {
      spans[i].back().second = eta;
    } else {
      spans[i].emplace_back(eta, eta);
    }
  }
  std::map<std::size_t, std::string> out;
  for (const auto& [i, runs] : spans) {
    std::string text;
    for (const auto& [first, last] : runs) {
      text += (text.empty() ? "" : ", ") + format_plain(first, 2) + (first == last ? "" : "-" + format_plain(last, 2));
    }
    out[i] = "eta " + text;
  }
  return out;
}

std::string setting_and_pareto_charts(const SweepAnalysis& a) {
  std::string charts;
  for (const auto& s : swept_settings(a)) charts += s.key == "gpus" ? gpu_charts(a, s) : setting_charts(a, s);
  std::size_t figures = 0;
  for (std::size_t at = charts.find("<figure"); at != std::string::npos; at = charts.find("<figure", at + 1)) ++figures;
  // The Pareto chart spans its row when it would stand alone in it.
  return charts + pareto_chart(a, figures % 2 == 0);
}

// One small chart per configuration (its first successful run): power of each
// device over time, the run's power limit dashed where the grid set it.
std::string timeline_charts(const std::vector<SweepRun>& runs, const std::vector<PowerPoint>& timelines) {
  std::map<Config, const SweepRun*> first_run;
  std::vector<Config> order;
  for (const auto& r : runs) {
    if (r.status != "ok" || first_run.count(r.config)) continue;
    first_run[r.config] = &r;
    order.push_back(r.config);
  }
  std::map<long long, std::map<std::string, ChartSeries>> by_run;
  double highest_w = 0;
  for (const auto& p : timelines) {
    auto& s = by_run[p.run_id][p.device];
    s.name = p.device;
    s.markers = false;
    s.stroke_width = 1.6;
    s.points.emplace_back(p.time_s, p.power_w);
    highest_w = std::max(highest_w, p.power_w);
  }
  std::string out;
  std::size_t drawn = 0;
  for (const auto& config : order) {
    const SweepRun& r = *first_run[config];
    if (!by_run.count(r.id)) continue;
    if (++drawn > kMaxTimelines) break;
    std::vector<ChartSeries> series;
    for (auto& [device, s] : by_run[r.id]) {
      std::sort(s.points.begin(), s.points.end());
      series.push_back(s);
    }
    ChartNotes notes;
    if (const auto limit_w = number(r.config, "power_limit")) {
      notes.rules.push_back({.at = *limit_w, .label = "limit " + format_si(*limit_w, "W")});
      highest_w = std::max(highest_w, *limit_w);
    }
    out += figure(svg_line_chart(config_label(config, "(single configuration)") + fmt::format(", run {}", r.id), series,
                                 {.x = {.label = "time", .unit = "s", .from_zero = true},
                                  .y = {.label = "power per GPU", .unit = "W", .min = 0.0, .max = highest_w * 1.05}},
                                 notes));
  }
  return out;
}

}  // namespace joule
