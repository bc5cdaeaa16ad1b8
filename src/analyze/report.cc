// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "joule/analyze/svg_chart.h"
#include "joule/carbon/carbon.h"
#include "joule/common/root_sum_square.h"
#include "joule/version.h"
#include "joule/analyze/units_format.h"
#include "report_parts.h"

namespace joule {

std::optional<double> number(const std::map<std::string, std::string>& c, const std::string& key) {
  const auto it = c.find(key);
  if (it == c.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    const double v = std::stod(it->second, &used);
    return used == it->second.size() ? std::optional<double>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The scaling fits in their groups' natural order.
std::vector<ScalingFit> sorted_scaling(const SweepAnalysis& a) {
  std::vector<ScalingFit> out = a.scaling;
  std::stable_sort(out.begin(), out.end(), [](const ScalingFit& l, const ScalingFit& r) { return natural_less(l.group, r.group); });
  return out;
}

// The configuration every saving in the summary is measured against: the
// first configuration's baseline as the analysis defines it (its settings at
// the grid's largest power limit; the first configuration without a limit grid).
std::size_t reference_of(const SweepAnalysis& a) { return a.configs.front().baseline.value_or(0); }

namespace {

std::string cell(const std::string& text, std::optional<double> sort_key = std::nullopt) {
  if (!sort_key) return "<td>" + html_escape(text) + "</td>";
  return fmt::format("<td data-sort=\"{}\">{}</td>", *sort_key, html_escape(text));
}

std::string signed_percent(double percent) { return (percent > 0 ? "+" : "") + format_plain(percent, 3) + "%"; }

std::string mean_sd(const Summary& s, const std::string& unit) {
  return format_si(s.mean, unit) + (s.n > 1 ? " \xC2\xB1 " + format_si(s.stddev, unit, 2) : "");
}

// With carbon figures asked for: each configuration's mean run in g CO2e and
// cost (the mean energy's footprint), and the basis under the table.
std::string config_table(const SweepAnalysis& a, const std::optional<carbon::Basis>& carbon) {
  const std::vector<std::string> keys = [&] {
    std::vector<std::string> k;
    for (const auto& [key, v] : a.configs.front().config) k.push_back(key);
    return k;
  }();
  const bool nodes = std::any_of(a.configs.begin(), a.configs.end(), [](const ConfigResult& c) { return c.nodes > 1; });
  // "#": the number each configuration has on the Pareto chart.
  std::string html = "<table class=\"sortable main\" id=\"configurations\"><tr><th>#</th>";
  for (const auto& k : keys) html += "<th>" + html_escape(k) + "</th>";
  if (nodes) html += "<th>nodes</th>";
  // Columns no configuration has a figure for are left out: the table fits
  // a desk's width without scrolling.
  const bool samples = std::any_of(a.configs.begin(), a.configs.end(), [](const ConfigResult& c) { return c.samples_per_gpu_hour.has_value(); });
  const bool util = std::any_of(a.configs.begin(), a.configs.end(), [](const ConfigResult& c) { return c.gpu_util_mean.has_value(); });
  html += "<th>runs</th><th>time per run</th><th>energy per run</th><th>mean power</th>"
          "<th>energy vs baseline</th><th>time vs baseline</th><th>EDP</th>";
  if (samples) html += "<th>samples per GPU-hour</th>";
  if (util) html += "<th>SM use</th>";
  const bool co2e = carbon && carbon->g_per_kwh, cost = carbon && carbon->price_per_kwh;
  if (co2e) html += "<th>CO2e per run</th>";
  if (cost) html += "<th>cost per run</th>";
  html += "<th>notes</th></tr>\n";
  const auto etas = eta_ranges(a);
  for (std::size_t i = 0; i < a.configs.size(); ++i) {
    const auto& c = a.configs[i];
    html += "<tr>" + cell(std::to_string(i + 1), static_cast<double>(i + 1));
    for (const auto& k : keys) html += cell(c.config.count(k) ? c.config.at(k) : "", number(c.config, k));
    if (nodes) html += cell(std::to_string(c.nodes), c.nodes);
    std::vector<std::string> not_ok;
    if (c.failed) not_ok.push_back(fmt::format("{} failed", c.failed));
    if (c.partial) not_ok.push_back(fmt::format("{} partial", c.partial));
    html += cell(std::to_string(c.time_s.n) +
                     (not_ok.empty() ? "" : " (" + not_ok.front() + (not_ok.size() > 1 ? ", " + not_ok.back() : "") + ")"),
                 static_cast<double>(c.time_s.n));
    html += cell(mean_sd(c.time_s, "s"), c.time_s.mean) + cell(mean_sd(c.energy_j, "J"), c.energy_j.mean);
    html += cell(format_si(c.energy_j.mean / c.time_s.mean, "W"), c.energy_j.mean / c.time_s.mean);
    if (c.trade_off) {
      html += cell(signed_percent(-c.trade_off->energy_gain_percent), -c.trade_off->energy_gain_percent);
      html += cell(signed_percent(c.trade_off->performance_loss_percent), c.trade_off->performance_loss_percent);
      html += cell(format_si(c.trade_off->edp, "J s"), c.trade_off->edp);
    } else {
      html += "<td></td><td></td><td></td>";
    }
    if (samples) html += c.samples_per_gpu_hour ? cell(format_si(*c.samples_per_gpu_hour, ""), *c.samples_per_gpu_hour) : "<td></td>";
    if (util) html += c.gpu_util_mean ? cell(format_plain(*c.gpu_util_mean, 3) + "%", *c.gpu_util_mean) : "<td></td>";
    if (co2e || cost) {
      const carbon::Footprint f = carbon::footprint(*carbon, c.energy_j.mean);
      if (co2e) html += cell(format_si(*f.co2e_g, "g"), *f.co2e_g);
      if (cost) {
        html += cell(format_plain(*f.cost, 4) + (carbon->currency.empty() ? "" : " " + carbon->currency), *f.cost);
      }
    }
    std::string notes;
    if (c.baseline == i) notes += "<span class=\"tag\">baseline</span>";
    if (std::find(a.pareto.begin(), a.pareto.end(), i) != a.pareto.end()) notes += "<span class=\"tag\">Pareto</span>";
    if (etas.count(i)) notes += "<span class=\"tag\">" + html_escape(etas.at(i)) + "</span>";
    html += "<td class=\"notes\">" + notes + "</td></tr>\n";
  }
  html += "</table>\n";
  if (co2e) {
    html += fmt::format(
        "<p class=\"carbon\">CO2e per run: the mean energy x PUE {:g} x {:g} g CO2e/kWh, the average grid intensity of "
        "{}.</p>\n",
        carbon->pue, *carbon->g_per_kwh,
        carbon->region.empty()
            ? std::string("the figure given (--carbon-intensity)")
            : html_escape(fmt::format("{} ({}; {}, {})", carbon->region, carbon->region_name, carbon->source,
                                      carbon->year ? std::to_string(*carbon->year) : "")));
  }
  if (cost) {
    html += fmt::format("<p class=\"carbon\">Cost per run: the mean energy x PUE {:g} x {:g}{} per kWh.</p>\n",
                        carbon->pue, *carbon->price_per_kwh,
                        carbon->currency.empty() ? "" : " " + html_escape(carbon->currency));
  }
  return html;
}

// "6.91 s (30.2%) less than the baseline"; "the same as the baseline".
std::string difference(double value, double base, bool energy) {
  const double delta = value - base;
  if (base == 0 || std::fabs(delta) < 1e-12 * std::fabs(base)) return "the same as the baseline";
  const std::string amount =
      energy ? format_si(std::fabs(delta), "J") + ", " + format_watt_hours(std::fabs(delta)) : format_duration(std::fabs(delta));
  return fmt::format("{} ({}%) {} than the baseline", amount, format_plain(std::fabs(delta) / base * 100, 3),
                     delta < 0 ? "less" : "more");
}

// True when two means are closer than their repeats' spread: a difference a
// rerun could reverse.
bool within_noise(const Summary& a, const Summary& b) {
  return a.n > 1 && b.n > 1 && std::fabs(a.mean - b.mean) < root_sum_square(a.stddev, b.stddev);
}

std::string objective_line(const SweepAnalysis& a, const std::string& objective, std::size_t i) {
  const auto& c = a.configs[i];
  const auto& base = a.configs[reference_of(a)];
  std::string line = fmt::format("<li><b>{}</b>: <code>{}</code>", html_escape(objective), html_escape(c.label()));
  if (i == reference_of(a)) return line + " &mdash; the baseline itself.</li>\n";
  line += fmt::format(" &mdash; energy {} per run, {}; time {} per run, {}.", format_si(c.energy_j.mean, "J"),
                      difference(c.energy_j.mean, base.energy_j.mean, true), format_duration(c.time_s.mean),
                      difference(c.time_s.mean, base.time_s.mean, false));
  std::vector<std::string> noisy;
  if (within_noise(c.energy_j, base.energy_j)) noisy.push_back("energy");
  if (within_noise(c.time_s, base.time_s)) noisy.push_back("time");
  if (!noisy.empty()) {
    line += fmt::format(" <span class=\"muted\">(the {} difference is within the spread of the repeats)</span>",
                        noisy.size() == 2 ? "energy and time" : noisy.front());
  }
  return line + "</li>\n";
}

// The fastest and the least-energy configuration are only news when the
// runner-up is not as good within the spread of the repeats: say when it is.
std::string close_calls(const SweepAnalysis& a) {
  std::string html;
  auto check = [&](const char* metric, const char* what, const char* adjective, auto summary_of, auto format) {
    if (!a.best.count(metric)) return;
    const std::size_t best = a.best.at(metric);
    std::optional<std::size_t> runner_up;
    for (std::size_t i = 0; i < a.configs.size(); ++i) {
      if (i == best) continue;
      if (!runner_up || summary_of(a.configs[i]).mean < summary_of(a.configs[*runner_up]).mean) runner_up = i;
    }
    if (!runner_up || !within_noise(summary_of(a.configs[best]), summary_of(a.configs[*runner_up]))) return;
    const Summary& b = summary_of(a.configs[best]);
    const Summary& r = summary_of(a.configs[*runner_up]);
    html += fmt::format(
        "<p>Close call on {}: <code>{}</code> ({} &plusmn; {}) is as {} as <code>{}</code> ({} &plusmn; {}) within the "
        "spread of the repeats; more repeats would separate them.</p>\n",
        what, html_escape(a.configs[*runner_up].label()), format(r.mean), format(r.stddev), adjective,
        html_escape(a.configs[best].label()), format(b.mean), format(b.stddev));
  };
  check("time", "time", "fast", [](const ConfigResult& c) -> const Summary& { return c.time_s; },
        [](double v) { return format_duration(v); });
  check("energy", "energy", "frugal", [](const ConfigResult& c) -> const Summary& { return c.energy_j; },
        [](double v) { return format_si(v, "J"); });
  return html;
}

std::string summary([[maybe_unused]] const std::vector<SweepRun>& runs, const SweepAnalysis& a) {
  const auto& base = a.configs[reference_of(a)];
  const bool knobs = std::any_of(std::begin(kGpuKnobs), std::end(kGpuKnobs),
                                 [&](const GpuKnob& k) { return base.config.count(k.key) > 0; });
  const SweepCounts& n = a.counts;
  std::string html = "<section class=\"summary\"><h2>Summary</h2>\n";
  // Simulated GPUs first, where no one reading the page can miss it.
  if (const std::string warning = simulated_warning(n); !warning.empty()) {
    html += "<p class=\"simulated\" role=\"alert\"><strong>" + html_escape(warning) + ".</strong></p>\n";
  }
  // Every configuration and repeat once, by its latest attempt: the counts
  // add up to the grid, failed configurations included.
  const bool all_ok = n.ok == n.runs;
  html += fmt::format("<p>{}{}. Energy is GPU plus CPU package and DRAM where measured; times and energies are means "
                      "over the successful repeats.</p>\n",
                      html_escape(describe_counts(n)),
                      all_ok ? ", all succeeded"
                             : " (listed under <a href=\"#failed-runs\">Failed runs</a>, with their errors)");
  html += fmt::format("<p>Baseline: <code>{}</code> ({}) &mdash; {} and {} per run.</p>\n<ul>\n",
                      html_escape(base.label()),
                      knobs ? "the first configuration with every GPU knob (power limit, clock caps) at its "
                              "largest value in the grid"
                             : "the first configuration of the grid",
                      format_duration(base.time_s.mean), format_si(base.energy_j.mean, "J"));
  // Objectives in a fixed order; those picking the same configuration share a line.
  std::vector<std::pair<std::size_t, std::string>> picks;
  const std::pair<const char*, const char*> objectives[] = {
      {"time", "fastest"}, {"energy", "least energy"}, {"edp", "best energy-delay product"}};
  for (const auto& [metric, name] : objectives) {
    if (a.best.count(metric)) picks.emplace_back(a.best.at(metric), name);
  }
  for (const auto& [i, etas] : eta_ranges(a)) picks.emplace_back(i, "cost at " + etas);
  std::vector<std::pair<std::size_t, std::vector<std::string>>> lines;
  for (const auto& [i, name] : picks) {
    auto line = std::find_if(lines.begin(), lines.end(), [&](const auto& l) { return l.first == i; });
    if (line == lines.end()) line = lines.insert(lines.end(), {i, {}});
    line->second.push_back(name);
  }
  for (const auto& [i, names] : lines) {
    std::string joined;
    for (std::size_t k = 0; k < names.size(); ++k) {
      joined += (k == 0 ? "" : k + 1 == names.size() ? " and " : ", ") + names[k];
    }
    joined[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(joined[0])));
    html += objective_line(a, joined, i);
  }
  html += "</ul>\n" + close_calls(a);
  html += fmt::format("<p class=\"muted\">Cost weighs energy against time: eta E + (1 - eta) {} T; eta 0 is time "
                      "only, eta 1 energy only.</p>\n</section>\n",
                      format_si(a.max_power_w, "W"));
  return html;
}

std::string fits_and_picks(const SweepAnalysis& a) {
  std::string html;
  if (!a.scaling.empty()) {
    html += "<h3>Scaling with GPU count</h3>\n<table class=\"sortable\"><tr><th>group</th><th>b (t = a N<sup>-b</sup>)</th>"
            "<th>a</th><th>R<sup>2</sup></th><th>runs</th><th>time with twice the GPUs</th>"
            "<th>c (E = a N<sup>c</sup>)</th><th>energy with twice the GPUs</th></tr>\n";
    for (const auto& s : sorted_scaling(a)) {
      html += "<tr>" + cell(s.group) +
              cell(format_plain(s.fit.b, 3) + " \xC2\xB1 " + format_plain(s.fit.b_se, 2), s.fit.b) +
              cell(format_si(s.fit.a, "s") + " \xC2\xB1 " + format_si(s.fit.a_se, "s", 2), s.fit.a) +
              cell(format_plain(s.fit.r_squared, 3), s.fit.r_squared) + cell(std::to_string(s.fit.n), s.fit.n) +
              cell("\xC3\x97 " + format_plain(std::pow(2.0, -s.fit.b), 3), std::pow(2.0, -s.fit.b));
      if (s.energy) {
        const double c = -s.energy->b;
        html += cell(format_plain(c, 3) + " \xC2\xB1 " + format_plain(s.energy->b_se, 2), c) +
                cell("\xC3\x97 " + format_plain(std::pow(2.0, c), 3), std::pow(2.0, c));
      } else {
        html += "<td></td><td></td>";
      }
      html += "</tr>\n";
    }
    html += "</table>\n";
    html += "<h3>Scaling, per GPU count</h3>\n<table class=\"sortable\"><tr><th>group</th><th>GPUs</th><th>nodes</th>"
            "<th>runs</th><th>time per run</th><th>energy per run</th><th>energy per GPU-hour</th><th>speed-up</th>"
            "<th>efficiency</th></tr>\n";
    for (const auto& s : sorted_scaling(a)) {
      for (const auto& p : s.points) {
        html += "<tr>" + cell(s.group) + cell(format_plain(p.gpus, 6), p.gpus) + cell(std::to_string(p.nodes), p.nodes) +
                cell(std::to_string(p.time_s.n), static_cast<double>(p.time_s.n)) + cell(mean_sd(p.time_s, "s"), p.time_s.mean) +
                cell(mean_sd(p.energy_j, "J"), p.energy_j.mean) +
                cell(format_si(p.wh_per_gpu_hour, "Wh"), p.wh_per_gpu_hour) +
                cell("\xC3\x97 " + format_plain(p.speedup, 3), p.speedup) +
                cell(format_plain(p.efficiency * 100, 3) + "%", p.efficiency) + "</tr>\n";
      }
    }
    html += "</table>\n<p class=\"muted\">Energy per GPU-hour = energy / (GPUs \xC3\x97 hours), in Wh per GPU-hour: the "
            "mean power per GPU, CPU and DRAM included. Speed-up and efficiency (speed-up / GPU ratio) against the "
            "fewest GPUs of the group; c = 1: energy grows as the GPU count, c = 0: it stays the same.</p>\n";
  }
  if (a.kwh_per_gpu_hour) {
    html += fmt::format("<p>Energy grows with GPU-hours at {} \xC2\xB1 {} kWh per GPU-hour (R<sup>2</sup> {}, {} runs): "
                        "about {} per GPU on average.</p>\n",
                        format_plain(a.kwh_per_gpu_hour->slope, 3), format_plain(a.kwh_per_gpu_hour->slope_se, 2),
                        format_plain(a.kwh_per_gpu_hour->r_squared, 3), a.kwh_per_gpu_hour->n,
                        format_si(a.kwh_per_gpu_hour->slope * 1000, "W"));
  }
  html += "<h3>What each eta picks</h3>\n<table class=\"sortable\"><tr><th>eta</th><th>configuration</th>"
          "<th>time per run</th><th>energy per run</th></tr>\n";
  for (const auto& [eta, i] : a.eta_picks) {
    const auto& c = a.configs[i];
    html += "<tr>" + cell(format_plain(eta, 2), eta) + cell(c.label()) + cell(format_duration(c.time_s.mean), c.time_s.mean) +
            cell(format_si(c.energy_j.mean, "J"), c.energy_j.mean) + "</tr>\n";
  }
  return html + "</table>\n";
}

// Everything about one set of runs (the whole sweep, or one node's runs).
std::string sweep_sections(const std::vector<SweepRun>& runs, const SweepAnalysis& a,
                           const std::vector<PowerPoint>& timelines, const std::string& heading_prefix,
                           const std::optional<carbon::Basis>& carbon) {
  std::string html = "<h2>" + heading_prefix + "Configurations</h2>\n" + config_table(a, carbon);
  html += "<p class=\"muted\">Energy and time against each configuration's own baseline (its settings at the largest "
          "power limit, else the first configuration); EDP = energy \xC3\x97 time. Click a header to sort.</p>\n";
  html += "<h2>" + heading_prefix + "Charts</h2>\n<p class=\"muted\">Error bars: one standard deviation over the "
          "repeats (on the Pareto chart of time and of energy). Ringed: the baseline and the best configuration under "
          "each objective.</p>\n<div class=\"charts\">\n";
  html += setting_and_pareto_charts(a) + "</div>\n";
  const std::string lines = timeline_charts(runs, timelines);
  if (!lines.empty()) {
    html += "<h2>" + heading_prefix + "Power over time</h2>\n<p class=\"muted\">The first successful run of each "
            "configuration, one line per GPU" +
            std::string(a.configs.front().config.count("power_limit")
                            ? "; dashed: the power limit the run was given."
                            : "; the grid sets no power limit, so the runs ran at the GPUs' own limit, which the "
                              "store does not record.") +
            "</p>\n<div class=\"charts\">\n" + lines + "</div>\n";
  }
  html += "<h2>" + heading_prefix + "Fits and choices</h2>\n" + fits_and_picks(a);
  return html;
}

// Each run's nodes, from the store's per-node rows: per configuration and
// node, the node's part of the successful runs, and how far apart the nodes
// of one run were. Empty when every run ran on the same one node.
std::string nodes_section(const std::vector<SweepRun>& runs, const SweepAnalysis& a) {
  std::set<std::string> names;
  bool several = false;
  for (const auto& r : runs) {
    for (const auto& n : r.node_parts) names.insert(n.node);
    several = several || r.node_parts.size() > 1;
  }
  std::string partial_html;
  std::size_t partial = 0;
  for (const auto& r : runs) partial += r.status == "partial";
  if (partial) {
    partial_html += fmt::format("<p>{} run{} lost a node's measurement (partial: their totals are short, and the analysis "
                        "leaves them out):</p>\n<ul>\n",
                        partial, partial == 1 ? "" : "s");
    for (const auto& r : runs) {
      if (r.status == "partial") {
        partial_html += fmt::format("<li>run {} (<code>{}</code>): {}</li>\n", r.id,
                            html_escape(config_label(r.config, "(single configuration)")), html_escape(r.error));
      }
    }
    partial_html += "</ul>\n";
  }
  if (!several && names.size() < 2) return partial ? "<h2>Nodes</h2>\n" + partial_html : "";
  struct Part {
    std::vector<double> time_s, energy_j, gpu_w_per_gpu, share;
    std::set<std::string> ranks;
    int gpus = 0;
  };
  std::string rows;
  double worst_spread = 0;
  std::string worst;
  for (const auto& c : a.configs) {
    std::map<std::string, Part> parts;
    for (const auto& r : runs) {
      if (r.status != "ok" || r.config != c.config) continue;
      double lowest = 0, highest = 0;
      std::string low_node, high_node;
      for (const auto& n : r.node_parts) {
        Part& part = parts[n.node];
        part.time_s.push_back(n.elapsed_s);
        part.energy_j.push_back(n.total_energy_j());
        part.ranks.insert(n.ranks);
        part.gpus = std::max(part.gpus, n.gpus);
        if (r.total_energy_j() > 0) part.share.push_back(n.total_energy_j() / r.total_energy_j());
        if (n.gpus > 0 && n.elapsed_s > 0) {
          const double w = n.gpu_energy_j / n.gpus / n.elapsed_s;
          part.gpu_w_per_gpu.push_back(w);
          if (low_node.empty() || w < lowest) lowest = w, low_node = n.node;
          if (high_node.empty() || w > highest) highest = w, high_node = n.node;
        }
      }
      if (r.node_parts.size() > 1 && lowest > 0 && (highest - lowest) / lowest > worst_spread) {
        worst_spread = (highest - lowest) / lowest;
        worst = fmt::format("run {} (<code>{}</code>): {} per GPU on {}, {} on {}", r.id, html_escape(c.label()),
                            format_si(highest, "W"), html_escape(high_node), format_si(lowest, "W"),
                            html_escape(low_node));
      }
    }
    for (const auto& [node, part] : parts) {
      const Summary t = summarize(part.time_s), e = summarize(part.energy_j);
      std::string ranks;
      for (const auto& text : part.ranks) ranks += (ranks.empty() ? "" : " / ") + text;
      const auto w = summarize(part.gpu_w_per_gpu);
      const auto share = summarize(part.share);
      rows += "<tr>" + cell(c.label()) + cell(node) + cell(std::to_string(t.n), static_cast<double>(t.n)) +
              cell(ranks.empty() ? "-" : ranks) + cell(std::to_string(part.gpus), part.gpus) +
              cell(mean_sd(t, "s"), t.mean) + cell(mean_sd(e, "J"), e.mean) +
              (w.n ? cell(format_si(w.mean, "W"), w.mean) : "<td></td>") +
              (share.n ? cell(format_plain(share.mean * 100, 3) + "%", share.mean) : "<td></td>") + "</tr>\n";
    }
  }
  std::string html = "<h2>Nodes</h2>\n<p>Each run's nodes as measured there (by the node's lowest rank under "
                     "<code>joule measure --mpi</code>): per configuration and node, the node's part of the successful "
                     "runs.</p>\n<table class=\"sortable\"><tr><th>configuration</th><th>node</th><th>runs</th>"
                     "<th>ranks</th><th>GPUs</th><th>time</th><th>energy</th><th>GPU power per GPU</th>"
                     "<th>share of the run's energy</th></tr>\n" +
                     rows + "</table>\n";
  if (!worst.empty()) {
    html += fmt::format("<p>The nodes of one run differed by at most {:.1f}% in GPU power per GPU: {}.</p>\n",
                        worst_spread * 100, worst);
  }
  return html + partial_html;
}

// The configurations without a successful run and every run that did not
// succeed, each with its error: what failed stays in the report.
std::string failed_runs_section(const SweepAnalysis& a) {
  if (a.failed_runs.empty() && a.without_success.empty()) return "";
  std::string html = "<h2 id=\"failed-runs\">Failed runs</h2>\n";
  if (!a.without_success.empty()) {
    html += "<p>Configurations without a successful run (left out of the tables and charts above):</p>\n<ul>\n";
    for (const auto& c : a.without_success) {
      html += fmt::format("<li><code>{}</code>: {} failed{}</li>\n", html_escape(c.label()), c.failed,
                          c.partial ? fmt::format(", {} partial", c.partial) : "");
    }
    html += "</ul>\n";
  }
  if (!a.failed_runs.empty()) {
    html += "<p>Runs that failed or were interrupted, kept in the store (a resumed sweep runs interrupted ones "
            "again, <code>joule sweep --retry-failed</code> failed ones too):</p>\n"
            "<table class=\"sortable\" id=\"failed-run-table\"><tr><th>run</th><th>configuration</th><th>repeat</th><th>status</th>"
            "<th>exit status</th><th>error</th></tr>\n";
    for (const auto& f : a.failed_runs) {
      html += "<tr>" + cell(std::to_string(f.id), static_cast<double>(f.id)) +
              cell(config_label(f.config, "(single configuration)")) +
              cell(std::to_string(f.repeat), static_cast<double>(f.repeat)) + cell(f.status) +
              (f.exit_code ? cell(std::to_string(*f.exit_code), static_cast<double>(*f.exit_code)) : "<td></td>") +
              cell(f.error.empty() ? "no error recorded" : f.error) + "</tr>\n";
    }
    html += "</table>\n";
  }
  return html;
}

// The grid key naming the node a run ran on, when the sweep has one.
std::optional<std::string> node_key(const std::vector<SweepRun>& runs) {
  for (const char* key : {"node", "host"}) {
    for (const auto& r : runs) {
      if (r.config.count(key)) return std::string(key);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string render_report(const std::string& title, const std::vector<SweepRun>& runs, const SweepAnalysis& a,
                          const std::vector<PowerPoint>& timelines, const std::optional<carbon::Basis>& carbon) {
  std::string body = summary(runs, a);
  const auto key = node_key(runs);
  std::map<std::string, std::vector<SweepRun>> by_node;
  if (key) {
    for (auto r : runs) {
      const std::string node = r.config.count(*key) ? r.config.at(*key) : "(unnamed)";
      r.config.erase(*key);
      by_node[node].push_back(std::move(r));
    }
  }
  if (by_node.size() > 1) {
    for (const auto& [node, node_runs] : by_node) {
      bool any_ok = std::any_of(node_runs.begin(), node_runs.end(), [](const SweepRun& r) { return r.status == "ok"; });
      body += "<h2 class=\"node\">Node " + html_escape(node) + "</h2>\n";
      if (!any_ok) {
        body += "<p>No run succeeded on this node.</p>\n";
        continue;
      }
      body += sweep_sections(node_runs, analyze_sweep(node_runs, a.max_power_w), timelines,
                             html_escape(node) + ": ", carbon);
    }
  } else {
    body += sweep_sections(runs, a, timelines, "", carbon);
  }
  body += nodes_section(runs, a);
  body += failed_runs_section(a);
  body += "<details><summary>The analysis as text (<code>joule analyze</code>)</summary><pre>" + html_escape(to_text(a)) +
          "</pre></details>\n" + fmt::format("<p class=\"muted\">Generated by joule {} (joule report).</p>\n", version());
  return html_page(title, body);
}

}  // namespace joule
