// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The page of live recurrences of a recurring job (bench/gpu_recurring_live.py)
// held against the job's characterisation (bench/gpu_recurring_characterise.py)
// and against `joule simulate --out` on that characterisation's traces:
//
//   joule_bench_recurring_report --html PAGE --max-power-w 700
//       --characterisation runs.jsonl
//       --live 0.5:live-eta0.5.jsonl:sim-eta0.5.csv --live 1:live-eta1.jsonl:sim-eta1.csv
//
// Per eta: the cumulative cost of the live recurrences beside always the
// default batch size and always the best fixed one (both from the
// characterisation's mean cost per size: what they would have cost in
// expectation), the simulated recurrences (mean and range over the
// simulation's seeds, and its seed 1, the service's own), the regret, the
// batch size chosen per recurrence, and every run's energy and time to
// accuracy with the Pareto front. Prints the same figures as Markdown.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "joule/analyze/svg_chart.h"
#include "joule/analyze/units_format.h"
#include "joule/version.h"

namespace {

struct Run {
  int recurrence = 0;  // 1-based; 0 for a characterisation run
  int batch_size = 0;
  bool reached = false;
  bool stopped = false;
  double time_s = 0;
  double energy_j = 0;
  double counter_energy_j = NAN;
};

struct SimulatedPath {
  std::vector<int> batch_size;  // per recurrence
  std::vector<double> cost;
};

struct LiveSet {
  double eta = 0.5;
  std::vector<Run> runs;
  std::map<int, SimulatedPath> simulated;  // per simulation seed
};

double zeus_cost(double eta, double max_power_w, const Run& r) {
  return eta * r.energy_j + (1.0 - eta) * max_power_w * r.time_s;
}

std::vector<Run> read_runs(const std::string& path, bool live) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Run> runs;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      Run r;
      r.recurrence = live ? j.at("recurrence").get<int>() : 0;
      r.batch_size = j.at("batch_size").get<int>();
      r.reached = j.at("reached").get<bool>();
      r.stopped = j.value("stopped_by_service", false);
      r.time_s = j.contains("window") && !j["window"].is_null() ? j["window"]["elapsed_s"].get<double>()
                                                                 : j.at("time_s").get<double>();
      r.energy_j = j.at("energy_j").get<double>();
      if (j.contains("counter_energy_j") && j["counter_energy_j"].is_number()) r.counter_energy_j = j["counter_energy_j"];
      runs.push_back(r);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(fmt::format("{}:{}: {}", path, number, e.what()));
    }
  }
  return runs;
}

// joule simulate --out: the zeus policy's rows, per seed in recurrence order.
std::map<int, SimulatedPath> read_simulated(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  std::getline(in, line);  // header: workload,policy,seed,recurrence,batch_size,power_limit_w,...,cost,...
  std::map<int, SimulatedPath> paths;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.size() < 12 || cells[1] != "zeus") continue;
    SimulatedPath& p = paths[std::stoi(cells[2])];
    p.batch_size.push_back(std::stoi(cells[4]));
    p.cost.push_back(std::stod(cells[11]));
  }
  return paths;
}

// Mean cost per batch size over the characterisation's runs (all reached).
std::map<int, double> mean_cost_per_size(const std::vector<Run>& runs, double eta, double max_power_w) {
  std::map<int, std::pair<double, int>> sums;
  for (const Run& r : runs) {
    sums[r.batch_size].first += zeus_cost(eta, max_power_w, r);
    sums[r.batch_size].second += 1;
  }
  std::map<int, double> means;
  for (const auto& [size, sum] : sums) means[size] = sum.first / sum.second;
  return means;
}

std::vector<double> cumulative(const std::vector<double>& values) {
  std::vector<double> sums(values.size());
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) sums[i] = sum += values[i];
  return sums;
}

std::vector<std::pair<double, double>> numbered(const std::vector<double>& values) {
  std::vector<std::pair<double, double>> points;
  for (std::size_t i = 0; i < values.size(); ++i) points.emplace_back(static_cast<double>(i + 1), values[i]);
  return points;
}

// The non-dominated (time, energy) points, by time.
std::vector<std::pair<double, double>> pareto_front(std::vector<std::pair<double, double>> points) {
  std::sort(points.begin(), points.end());
  std::vector<std::pair<double, double>> front;
  for (const auto& p : points) {
    if (front.empty() || p.second < front.back().second) front.push_back(p);
  }
  return front;
}

struct Summary {
  double live_total = 0, default_total = 0, best_total = 0;
  double simulated_mean = 0, simulated_min = 0, simulated_max = 0, simulated_seed1 = 0;
  int best_size = 0, default_size = 0, last10_best = 0;
  double last10_worst_ratio = 0;    // the dearest size chosen in the last 10, against the best's mean
  double counter_worst_percent = 0;  // the largest |joule - counter| / counter
  // What any policy that starts knowing nothing pays at least: every size
  // tried once (the best first, so each other run stops at beta x the best's
  // cost), the rest at the best.
  double one_pass_floor = 0;
};

constexpr double kBeta = 2.0;  // the service's early-stop factor (the job spec's default)

struct Section {
  std::string charts, table;
};

Section section(const LiveSet& set, const std::vector<Run>& characterisation, double max_power_w,
                    int default_size, Summary& s) {
  const auto means = mean_cost_per_size(characterisation, set.eta, max_power_w);
  s.default_size = default_size;
  s.best_size = std::min_element(means.begin(), means.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  const std::size_t n = set.runs.size();
  std::vector<double> live_cost, default_cost(n, means.at(default_size)), best_cost(n, means.at(s.best_size));
  for (const Run& r : set.runs) live_cost.push_back(zeus_cost(set.eta, max_power_w, r));
  const auto live_cum = cumulative(live_cost), default_cum = cumulative(default_cost), best_cum = cumulative(best_cost);
  s.live_total = live_cum.back();
  s.default_total = default_cum.back();
  s.best_total = best_cum.back();
  for (const auto& [size, mean] : means) s.one_pass_floor += std::min(mean, kBeta * means.at(s.best_size));
  s.one_pass_floor += static_cast<double>(n - means.size()) * means.at(s.best_size);
  for (std::size_t i = n >= 10 ? n - 10 : 0; i < n; ++i) {
    const int size = set.runs[i].batch_size;
    s.last10_best += size == s.best_size;
    s.last10_worst_ratio = std::max(s.last10_worst_ratio, means.at(size) / means.at(s.best_size));
  }
  for (const Run& r : set.runs) {
    s.counter_worst_percent = std::max(s.counter_worst_percent, std::abs(100.0 * (r.energy_j / r.counter_energy_j - 1.0)));
  }

  // The simulation: per recurrence, mean and range of the cumulative cost over seeds.
  std::vector<std::vector<double>> sim_cums;
  for (const auto& [seed, path] : set.simulated) {
    sim_cums.push_back(cumulative(std::vector<double>(path.cost.begin(), path.cost.begin() + std::min(n, path.cost.size()))));
  }
  std::vector<double> sim_mean(n, 0.0);
  std::vector<std::pair<double, double>> sim_range(n, {INFINITY, -INFINITY});
  for (const auto& c : sim_cums) {
    for (std::size_t i = 0; i < n && i < c.size(); ++i) {
      sim_mean[i] += c[i] / sim_cums.size();
      sim_range[i] = {std::min(sim_range[i].first, c[i]), std::max(sim_range[i].second, c[i])};
    }
  }
  s.simulated_mean = sim_mean.back();
  s.simulated_min = sim_range.back().first;
  s.simulated_max = sim_range.back().second;
  const SimulatedPath& seed1 = set.simulated.at(1);
  s.simulated_seed1 = cumulative(seed1.cost)[n - 1];

  std::string html = fmt::format("<h2>eta {:g}: {} live recurrences</h2>\n<div class=\"charts\">", set.eta, n);
  const joule::ChartAxes cost_axes{{"recurrence", "", false, true}, {"cumulative cost", "", false, false, true}};
  // A colour per role on the whole page: live, simulated, the default, the
  // best fixed size, the characterisation's runs.
  constexpr std::size_t kLive = 0, kSimulated = 1, kBestFixed = 2, kDefault = 6, kCharacterisation = 7;
  auto series = [](std::string name, std::vector<std::pair<double, double>> points, std::size_t colour,
                   bool dashed = false) {
    joule::ChartSeries out{std::move(name), std::move(points), true, dashed};
    out.colour = colour;
    return out;
  };
  joule::ChartSeries simulated = series("simulated (mean, range over seeds)", numbered(sim_mean), kSimulated);
  simulated.y_ranges = sim_range;
  simulated.markers = false;
  html += "<figure class=\"chart\">" +
          joule::svg_line_chart(
              "Cumulative cost",
              {series("live", numbered(live_cum), kLive),
               series(fmt::format("always {} (default)", default_size), numbered(default_cum), kDefault, true),
               series(fmt::format("always {} (best fixed)", s.best_size), numbered(best_cum), kBestFixed, true), simulated},
              cost_axes) +
          "</figure>";
  std::vector<double> live_regret(n), sim_regret(n);
  for (std::size_t i = 0; i < n; ++i) {
    live_regret[i] = live_cum[i] - best_cum[i];
    sim_regret[i] = sim_mean[i] - best_cum[i];
  }
  html += "<figure class=\"chart\">" +
          joule::svg_line_chart("Regret against the best fixed size",
                                {series("live", numbered(live_regret), kLive),
                                 series("simulated (mean)", numbered(sim_regret), kSimulated)},
                                {{"recurrence", "", false, true}, {"cumulative regret", "", false, false, true}}) +
          "</figure>";
  std::vector<double> live_sizes, sim_sizes;
  for (const Run& r : set.runs) live_sizes.push_back(r.batch_size);
  for (std::size_t i = 0; i < n && i < seed1.batch_size.size(); ++i) sim_sizes.push_back(seed1.batch_size[i]);
  html += "<figure class=\"chart\">" +
          joule::svg_line_chart("Batch size per recurrence",
                                {series("live", numbered(live_sizes), kLive),
                                 series("simulated, seed 1", numbered(sim_sizes), kSimulated, true)},
                                {{"recurrence", "", false, true}, {"batch size", "", true}}) +
          "</figure>";
  // Energy vs time to accuracy of every run that reached it (live and
  // characterisation, each in its role's colour), and the runs no other beats
  // in both, ringed and named by their batch size.
  std::map<std::pair<double, double>, int> size_of_point;
  std::vector<joule::ChartSeries> scatter = {series("live", {}, kLive), series("characterisation", {}, kCharacterisation)};
  std::vector<std::pair<double, double>> all_points;
  for (const auto* runs : {&set.runs, &characterisation}) {
    for (const Run& r : *runs) {
      if (!r.reached) continue;
      scatter[runs == &set.runs ? 0 : 1].points.emplace_back(r.time_s, r.energy_j);
      size_of_point[{r.time_s, r.energy_j}] = r.batch_size;
      all_points.emplace_back(r.time_s, r.energy_j);
    }
  }
  for (auto& runs : scatter) runs.line = false;
  joule::ChartNotes front;
  for (const auto& [time_s, energy_j] : pareto_front(all_points)) {
    front.marks.push_back({time_s, energy_j, fmt::format("{}", size_of_point.at({time_s, energy_j}))});
  }
  html += "<figure class=\"chart\">" +
          joule::svg_line_chart("Energy vs time to accuracy, every run", scatter,
                                {{"time to accuracy", "s", true}, {"energy to accuracy", "J", true}}, front) +
          "<figcaption>Live and characterisation runs that reached the target. Ringed and named by their batch size: "
          "the Pareto front (no other run took both less time and less energy).</figcaption></figure></div>\n";

  std::string table = fmt::format("<h2>eta {:g}: every recurrence</h2>\n", set.eta);
  table += "<table class=\"sortable\"><tr><th>recurrence</th><th>batch size</th><th>outcome</th><th>time</th>"
          "<th>energy (joule)</th><th>energy (NVML counter)</th><th>cost</th><th>cumulative cost</th>"
          "<th>simulated, seed 1</th></tr>\n";
  for (std::size_t i = 0; i < n; ++i) {
    const Run& r = set.runs[i];
    table += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1f} s</td><td>{:.0f} J</td><td>{:.0f} J ({:+.2f}%)</td>"
                        "<td>{:.0f}</td><td>{:.0f}</td><td>{}</td></tr>\n",
                        r.recurrence, r.batch_size, r.reached ? "reached" : r.stopped ? "stopped" : "not reached", r.time_s,
                        r.energy_j, r.counter_energy_j, 100.0 * (r.energy_j / r.counter_energy_j - 1.0), live_cost[i],
                        live_cum[i], i < sim_sizes.size() ? fmt::format("{:g}", sim_sizes[i]) : "");
  }
  return {html, table + "</table>\n"};
}

std::string summary_text(double eta, const Summary& s) {
  return fmt::format(
      "eta {:g}: live {:.0f}; always {} (default) {:.0f} (live {:.1f}% less); always {} (best fixed) {:.0f} "
      "(live {:+.1f}%; one pass over every size, then the best: {:+.1f}%); simulated mean {:.0f} (range {:.0f}-{:.0f}; live {:+.1f}%), seed 1 {:.0f} (live {:+.1f}%); "
      "last 10: {} of 10 at {}, the dearest chosen {:+.1f}% against its mean cost; energy vs NVML counter: worst {:.2f}%\n",
      eta, s.live_total, s.default_size, s.default_total, 100.0 * (1.0 - s.live_total / s.default_total), s.best_size,
      s.best_total, 100.0 * (s.live_total / s.best_total - 1.0), 100.0 * (s.one_pass_floor / s.best_total - 1.0),
      s.simulated_mean, s.simulated_min, s.simulated_max,
      100.0 * (s.live_total / s.simulated_mean - 1.0), s.simulated_seed1, 100.0 * (s.live_total / s.simulated_seed1 - 1.0),
      s.last10_best, s.best_size, 100.0 * (s.last10_worst_ratio - 1.0), s.counter_worst_percent);
}

int usage() {
  std::cerr << "usage: joule_bench_recurring_report --html PAGE --max-power-w W [--default-batch-size 64] "
               "--characterisation RUNS.jsonl --live ETA:LIVE.jsonl:SIMULATED.csv ...\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string html_path, characterisation_path;
  double max_power_w = 0;
  int default_size = 64;
  std::vector<std::string> live_specs;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--html") html_path = value;
    else if (flag == "--characterisation") characterisation_path = value;
    else if (flag == "--max-power-w") max_power_w = std::stod(value);
    else if (flag == "--default-batch-size") default_size = std::stoi(value);
    else if (flag == "--live") live_specs.push_back(value);
    else return usage();
  }
  if (html_path.empty() || characterisation_path.empty() || !(max_power_w > 0) || live_specs.empty()) return usage();
  try {
    const auto characterisation = read_runs(characterisation_path, false);
    std::string body = fmt::format(
        "<p>Live recurrences of examples/recurring/train.py through joule serve on one GPU, against the job's "
        "characterisation ({} runs; always-default and best-fixed costs are their means per batch size) and joule "
        "simulate on the same traces. Cost: eta x energy + (1 - eta) x {:g} W x time.</p>\n",
        characterisation.size(), max_power_w);
    std::string summaries, charts, tables;
    for (const std::string& spec : live_specs) {
      const auto first = spec.find(':'), second = spec.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) return usage();
      LiveSet set;
      set.eta = std::stod(spec.substr(0, first));
      set.runs = read_runs(spec.substr(first + 1, second - first - 1), true);
      set.simulated = read_simulated(spec.substr(second + 1));
      if (set.runs.empty() || !set.simulated.count(1)) throw std::runtime_error("no live runs or no simulated seed 1 in " + spec);
      Summary summary;
      const Section made = section(set, characterisation, max_power_w, default_size, summary);
      const std::string text = summary_text(set.eta, summary);
      std::cout << text;
      summaries += "<li>" + joule::html_escape(text) + "</li>";
      charts += made.charts;
      tables += made.table;
    }
    body += "<ul>" + summaries + "</ul>\n" + charts + tables;
    body += fmt::format("<p class=\"muted\">Generated by joule {} (bench/recurring_report.cc).</p>\n", joule::version());
    std::ofstream(html_path) << joule::html_page("A recurring job on a real GPU", body);
  } catch (const std::exception& e) {
    std::cerr << "joule_bench_recurring_report: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
