#include "joule/analyze/simulation_report.h"

#include <fmt/format.h>

#include "joule/analyze/svg_chart.h"
#include "joule/version.h"

namespace joule {

namespace {

// Ratios to Default per workload: one bar per (variant, span), Default left out.
std::string ratio_bars(const std::vector<SimulationSet>& sets, bool energy) {
  std::vector<std::string> workloads, names;
  std::vector<std::vector<double>> values;
  for (const SimulationSet& set : sets) workloads.push_back(set.workload);
  for (std::size_t v = 0; !sets.empty() && v < sets.front().variants.size(); ++v) {
    if (v == sets.front().reference) continue;
    const std::string label = sets.front().variants[v].label();
    std::vector<double> last, all;
    for (const SimulationSet& set : sets) {
      const VariantSummary s = summarize(set, v);
      last.push_back(energy ? s.energy_last_ratio : s.time_last_ratio);
      all.push_back(energy ? s.energy_all_ratio : s.time_all_ratio);
    }
    names.push_back(label + ", last 5");
    values.push_back(last);
    names.push_back(label + ", all");
    values.push_back(all);
  }
  const char* what = energy ? "Energy to accuracy" : "Time to accuracy";
  return svg_bar_chart(fmt::format("{} relative to Default (dashed: Default)", what), workloads, names, values,
                       energy ? "ETA / Default" : "TTA / Default", 1.0);
}

// A vertical dashed line where the data drifts.
ChartNotes drift_notes(const SimulationSet& set) {
  if (!set.drift_after) return {};
  return {.rules = {{.vertical = true, .at = static_cast<double>(*set.drift_after), .label = "drift"}}};
}

std::string regret_chart(const SimulationSet& set) {
  std::vector<ChartSeries> series;
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    const auto& runs = set.results[v];
    ChartSeries s{set.variants[v].label(), {}, true, false, false};
    const std::size_t n = runs.front().recurrences.size();
    double cumulative = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      double mean = 0.0;
      for (const SimulationResult& r : runs) mean += r.recurrences[i].regret / r.optimal.expected_cost;
      cumulative += mean / static_cast<double>(runs.size());
      s.points.emplace_back(static_cast<double>(i + 1), cumulative);
    }
    series.push_back(std::move(s));
  }
  return svg_line_chart(fmt::format("{}: cumulative regret (mean of {} seeds)", set.workload,
                                    set.results.front().size()),
                        series,
                        {.x = {.label = "recurrence", .integer = true},
                         .y = {.label = "regret / optimal recurrence cost", .from_zero = true}},
                        drift_notes(set));
}

// The batch size each policy chose, recurrence by recurrence (first seed).
std::string batch_size_chart(const SimulationSet& set) {
  std::vector<ChartSeries> series;
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    // Paths often coincide: each drawn narrower than the one before.
    const double width = 1.5 * static_cast<double>(set.variants.size() - v) + 0.5;
    ChartSeries s{set.variants[v].label(), {}, true, false, false, width};
    for (const Recurrence& r : set.results[v].front().recurrences) {
      s.points.emplace_back(static_cast<double>(r.index + 1), r.batch_size);
    }
    series.push_back(std::move(s));
  }
  return svg_line_chart(fmt::format("{}: batch size per recurrence (seed {})", set.workload,
                                    set.results.front().front().seed),
                        series,
                        {.x = {.label = "recurrence", .integer = true},
                         .y = {.label = "batch size", .log = true, .integer = true}},
                        drift_notes(set));
}

// The path each policy walked over (batch size, power limit), first seed,
// with the optimum marked.
std::string search_path_chart(const SimulationSet& set) {
  std::vector<ChartSeries> series;
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    if (v == set.reference) continue;
    ChartSeries s{set.variants[v].label(), {}, true, false};
    for (const Recurrence& r : set.results[v].front().recurrences) s.points.emplace_back(r.batch_size, r.power_limit_w);
    series.push_back(std::move(s));
  }
  const OptimalConfig& opt = set.results.front().front().optimal;
  series.push_back({"optimum", {{static_cast<double>(opt.batch_size), opt.power_limit_w}}, false, false});
  return svg_line_chart(fmt::format("{}: search path over (batch size, power limit), seed {}", set.workload,
                                    set.results.front().front().seed),
                        series,
                        {.x = {.label = "batch size", .log = true, .integer = true},
                         .y = {.label = "power limit", .unit = "W"}});
}

std::string summary_table(const std::vector<SimulationSet>& sets) {
  std::string html =
      "<table class=\"sortable\"><tr><th>workload</th><th>target</th><th>policy</th><th>ETA / Default, last 5</th><th>TTA / Default, "
      "last 5</th><th>ETA / Default, all</th><th>TTA / Default, all</th><th>regret / optimal</th><th>converged "
      "to</th><th>at</th><th>optimal</th></tr>\n";
  for (const SimulationSet& set : sets) {
    const OptimalConfig& opt = set.results.front().front().optimal;
    for (std::size_t v = 0; v < set.variants.size(); ++v) {
      const VariantSummary s = summarize(set, v);
      html += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>"
          "<td>{:.1f}</td><td>b={} {:.0f} W</td><td>{}/{}</td><td>b={} {:.0f} W</td></tr>\n",
          html_escape(set.workload), html_escape(set.target_text), html_escape(set.variants[v].label()),
          s.energy_last_ratio, s.time_last_ratio, s.energy_all_ratio, s.time_all_ratio, s.regret_per_optimal,
          s.final_config.first, s.final_config.second, s.converged_at, s.recurrences, opt.batch_size,
          opt.power_limit_w);
    }
  }
  return html + "</table>\n";
}

}  // namespace

std::string render_simulation_report(const std::string& title, const std::string& subtitle,
                                     const std::vector<SimulationSet>& sets) {
  std::string body = "<p>" + html_escape(subtitle) + "</p>\n";
  body += "<div class=\"charts\">" + ratio_bars(sets, true) + ratio_bars(sets, false) + "</div>\n";
  body += summary_table(sets);
  body +=
      "<p>last 5: the mean of the last five recurrences (the steady state); all: every recurrence, exploration "
      "included (what the user paid). Regret: cost above the optimal configuration's expected cost, in units of "
      "that cost.</p>\n";
  for (const SimulationSet& set : sets) {
    body += "<h2>" + html_escape(set.workload) + " (" + html_escape(set.target_text) + ")</h2>\n<div class=\"charts\">";
    body += regret_chart(set) + batch_size_chart(set) + search_path_chart(set);
    body += "</div>\n";
  }
  body += fmt::format("<p class=\"muted\">Generated by joule {} (joule simulate).</p>\n", version());
  return html_page(title, body);
}

}  // namespace joule
