// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/attribution_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "joule/analyze/svg_chart.h"
#include "joule/analyze/units_format.h"
#include "joule/version.h"

namespace joule {

namespace {

using attribution::Attribution;
using attribution::RegionEnergy;

std::string cell(const std::string& text, double sort_key) {
  if (!std::isfinite(sort_key)) return "<td>" + html_escape(text) + "</td>";
  return fmt::format("<td data-sort=\"{}\">{}</td>", sort_key, html_escape(text));
}

// Regions in order of energy, largest first.
std::vector<std::size_t> by_energy(const Attribution& a) {
  std::vector<std::size_t> order(a.regions.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t l, std::size_t r) { return a.regions[l].energy_j > a.regions[r].energy_j; });
  return order;
}

std::string interval_text(const RegionEnergy& r) {
  if (!std::isfinite(r.energy_low_j) || !std::isfinite(r.energy_high_j)) return "-";
  return fmt::format("{} .. {}", format_si(r.energy_low_j, "J"), format_si(r.energy_high_j, "J"));
}

std::string shares_chart(const Attribution& a, const std::string& label, const std::vector<std::size_t>& order) {
  // Concurrent regions (an all-reduce) overlap the others: not part of the window's length.
  const double window_s =
      a.idle_time_s + std::accumulate(a.regions.begin(), a.regions.end(), 0.0, [](double sum, const RegionEnergy& r) {
        return r.concurrent ? sum : sum + r.gpu_time_s;
      });
  if (window_s <= 0 || a.window_energy_j <= 0) return "";
  std::vector<std::string> groups;
  std::vector<std::vector<double>> values(2);
  for (const std::size_t i : order) {
    groups.push_back(a.regions[i].name);
    values[0].push_back(100.0 * a.regions[i].gpu_time_s / window_s);
    values[1].push_back(100.0 * a.regions[i].energy_j / a.window_energy_j);
  }
  groups.push_back("(idle)");
  values[0].push_back(100.0 * a.idle_time_s / window_s);
  values[1].push_back(100.0 * a.idle_energy_j / a.window_energy_j);
  return svg_bar_chart(fmt::format("{}: share of the window's time and of its energy, by region", label), groups,
                       {"time", "energy"}, values, "% of the window", 0.0);
}

// A concurrent region (an all-reduce) has no level of its own: the power it adds.
std::string power_text(const RegionEnergy& r) {
  if (!r.resolved) return "not resolved";
  if (!r.concurrent) return format_si(r.power_w, "W");
  return (r.power_w < 0 ? "-" : "+") + format_si(std::abs(r.power_w), "W") + " added";
}

std::string region_table(const Attribution& a, const std::vector<std::size_t>& order) {
  std::string html =
      "<table class=\"sortable\"><tr><th>region</th><th>calls</th><th>GPU time</th><th>energy per call</th>"
      "<th>energy</th><th>share</th><th>power while running</th><th>interval</th></tr>\n";
  for (const std::size_t i : order) {
    const RegionEnergy& r = a.regions[i];
    html += "<tr>" + cell(r.name, NAN) + cell(std::to_string(r.calls), static_cast<double>(r.calls)) +
            cell(format_duration(r.gpu_time_s), r.gpu_time_s) + cell(format_si(r.energy_per_call_j, "J"), r.energy_per_call_j) +
            cell(format_si(r.energy_j, "J"), r.energy_j) + cell(fmt::format("{:.1f}%", 100 * r.share), r.share) +
            cell(power_text(r), r.resolved ? r.power_w : NAN) +
            cell(interval_text(r), NAN) + "</tr>\n";
  }
  html += "<tr>" + cell("(idle)", NAN) + cell("", NAN) + cell(format_duration(a.idle_time_s), a.idle_time_s) +
          cell("", NAN) + cell(format_si(a.idle_energy_j, "J"), a.idle_energy_j) +
          cell(fmt::format("{:.1f}%", a.window_energy_j > 0 ? 100 * a.idle_energy_j / a.window_energy_j : 0.0), NAN) +
          cell(a.baseline_separated ? format_si(a.baseline_w, "W") : "not separated", NAN) + cell("", NAN) +
          "</tr>\n</table>\n";
  return html;
}

std::string summary(const Attribution& a) {
  const std::string baseline =
      !a.baseline_separated ? "not separated (powers are absolute)"
                            : fmt::format("{} ({})", format_si(a.baseline_w, "W"),
                                          a.baseline_estimated ? "estimated" : "given");
  std::string html = fmt::format(
      "<p>Window energy {} (measured), split by a fit of {} power observations (residual {} rms); idle power {}; "
      "the fit integrates to {} of the measured energy.</p>\n",
      format_si(a.window_energy_j, "J"), a.observations, fmt::format("{:.2g} W", a.residual_rms_w), baseline,
      fmt::format("{:.2f}%", 100.0 / a.scale));
  if (!a.notes.empty()) {
    html += "<ul class=\"notes\">";
    for (const std::string& note : a.notes) html += "<li>" + html_escape(note) + "</li>";
    html += "</ul>\n";
  }
  return html;
}

}  // namespace

std::string attribution_page(const std::string& title, const std::vector<Attribution>& gpus,
                             const std::vector<std::string>& gpu_labels) {
  std::string body = fmt::format("<p class=\"meta\">joule {}: energy per region, {} GPU(s). Time and energy rank "
                                 "regions differently: the chart shows both.</p>\n",
                                 version(), gpus.size());
  const auto simulated = std::count_if(gpus.begin(), gpus.end(), [](const Attribution& a) { return a.simulated; });
  if (simulated > 0) {
    body = fmt::format("<p class=\"simulated\">SIMULATED GPUs: the power of {} of the {} GPU(s) below is joule's model "
                       "of a GPU, not a measurement.</p>\n",
                       simulated, gpus.size()) +
           body;
  }
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const std::string label = g < gpu_labels.size() ? gpu_labels[g] : fmt::format("GPU {}", g);
    const auto order = by_energy(gpus[g]);
    body += "<h2>" + html_escape(label) + "</h2>\n" + summary(gpus[g]) + shares_chart(gpus[g], label, order) +
            region_table(gpus[g], order);
  }
  return html_page(title, body);
}

}  // namespace joule
