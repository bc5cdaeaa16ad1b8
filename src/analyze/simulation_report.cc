// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/analyze/simulation_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "chart_labels.h"
#include "joule/analyze/svg_chart.h"
#include "joule/analyze/units_format.h"
#include "joule/version.h"

namespace joule {

namespace {

// Ratios to Default per workload: one bar per (variant, span), Default left out.
std::string ratio_bars(const std::vector<SimulationSet>& sets, bool energy) {
  std::vector<std::string> workloads, names;
  std::vector<std::vector<double>> values;
  std::vector<BarStyle> styles;
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
    // A policy keeps its colour on the whole page: its last recurrences solid,
    // all of them light.
    names.push_back(label + ", last 5");
    values.push_back(last);
    styles.push_back({v, false});
    names.push_back(label + ", all");
    values.push_back(all);
    styles.push_back({v, true});
  }
  const char* what = energy ? "Energy to accuracy" : "Time to accuracy";
  return "<figure class=\"chart\">" +
         svg_bar_chart(fmt::format("{} relative to Default (dashed: Default)", what), workloads, names, values,
                       energy ? "ETA / Default" : "TTA / Default", 1.0, styles) +
         "</figure>\n";
}

// The per-workload charts are drawn here rather than by svg_line_chart: they
// need step lines, dash patterns, a drawing order apart from the legend's,
// small offsets between coinciding paths, axes that end at the data and
// small multiples with a shared range. Same classes and page style as the
// shared charts (svg_chart.h), so light/dark and the page's self-check apply.

// A chart is drawn for a desk (600 wide) and for a phone (370), as the
// shared charts are; the page shows one.
constexpr double kDeskWidth = 600, kPhoneWidth = 370, kPlotHeight = 230;
constexpr double kTickChar = 7.0, kLegendChar = 6.6, kLegendRow = 18, kTitleChar = 9.35, kTitleRow = 19;

// Series styles: the first variant (zeus) is the key series, solid and drawn
// last; the others dashed or dotted, each its own pattern.
const char* dash_of(std::size_t variant) {
  static const char* const patterns[] = {"", "7 3", "3 2", "1.2 2.6", "9 3 2 3"};
  return patterns[std::min<std::size_t>(variant, 4)];
}
constexpr double kKeyWidth = 1.9, kOtherWidth = 1.5;

struct Axis {
  std::string label;
  bool log2 = false;  // powers of two (batch sizes)
  std::string unit;   // named once in the axis title: "power limit (W)"
  double low = 0, high = 1;
  std::vector<double> ticks;
  double p0 = 0, p1 = 1;  // pixels of low and high

  double t(double v) const { return log2 ? std::log2(v) : v; }
  double pixel(double v) const { return p0 + (t(v) - t(low)) / (t(high) - t(low)) * (p1 - p0); }
  std::string tick_text(double v) const {
    if (log2 || std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{:.0f}", v);
    return format_plain(v, 3);
  }
  std::string title() const { return unit.empty() ? label : label + " (" + unit + ")"; }
};

// Powers of two from the one at or below `low` to the one at or above `high`:
// the largest value has a tick at or above it. At most 8 ticks, thinned from
// the top down so the top one stays.
Axis log2_axis(std::string label, double low, double high) {
  Axis a;
  a.label = std::move(label);
  a.log2 = true;
  a.low = std::exp2(std::floor(std::log2(low) + 1e-9));
  a.high = std::exp2(std::ceil(std::log2(high) - 1e-9));
  if (a.high <= a.low) a.high = a.low * 2;
  std::vector<double> all;
  for (double p = a.high; p >= a.low * (1 - 1e-9); p /= 2) all.push_back(p);
  const std::size_t every = (all.size() + 7) / 8;
  for (std::size_t i = 0; i < all.size(); i += every) a.ticks.insert(a.ticks.begin(), all[i]);
  return a;
}

// A linear axis from the 1-2-5 step at or below `low` to the one at or above
// `high` (a tick above the largest value), unless `exact_high`: then it ends
// at `high`, the ticks at those inside.
Axis linear_axis(std::string label, double low, double high, bool integer, bool exact_high = false,
                 std::string unit = "") {
  Axis a;
  a.label = std::move(label);
  a.unit = std::move(unit);
  if (!(high > low)) high = low + 1;
  a.ticks = linear_ticks(low, high, 5, integer);
  const double step = a.ticks.size() >= 2 ? a.ticks[1] - a.ticks[0] : 1.0;
  a.low = std::floor(low / step + 1e-9) * step;
  a.high = exact_high ? high : std::ceil(high / step - 1e-9) * step;
  if (a.ticks.front() > a.low + step * 1e-6) a.ticks.insert(a.ticks.begin(), a.low);
  if (!exact_high && a.ticks.back() < a.high - step * 1e-6) a.ticks.push_back(a.high);
  return a;
}

struct Line {
  std::string name;
  std::size_t colour = 0;  // palette class cK
  std::string dash;        // stroke-dasharray; empty: solid
  double width = kOtherWidth;
  std::string points;  // a polyline's points, in pixels
};

struct LegendEntry {
  std::string name;
  std::size_t colour = 0;
  std::string dash;
  double width = 2;
  bool dot = false;  // a marker, not a line
  bool ring = false; // the optimum's ring
};

// Chart frame: title (wrapped to the width), plot, axis labels, legend rows
// below. `variant` is " desk" or " phone": the class the page shows by width.
class Plot {
 public:
  Plot(std::string title, Axis x, Axis y, std::vector<LegendEntry> legend, std::string kind, double width,
       std::string variant)
      : title_(std::move(title)), x_(std::move(x)), y_(std::move(y)), legend_(std::move(legend)), kind_(std::move(kind)),
        variant_(std::move(variant)), width_(width), right_(width - 20) {
    title_lines_ = chart::wrap_words(title_, width_ - 20, kTitleChar);
    top_ = 42 + kTitleRow * static_cast<double>(title_lines_.size() - 1);
    std::size_t widest = 0;
    for (double t : y_.ticks) widest = std::max(widest, y_.tick_text(t).size());
    left_ = 30 + static_cast<double>(widest) * kTickChar + 8;
    bottom_ = top_ + kPlotHeight;
    x_.p0 = left_ + (x_.log2 || kind_ == "search-path" ? 12 : 0);
    x_.p1 = right_ - (x_.log2 || kind_ == "search-path" ? 12 : 0);
    y_.p0 = bottom_ - 10;
    y_.p1 = top_ + 10;
    std::size_t longest = 0;
    for (const auto& e : legend_) longest = std::max(longest, e.name.size());
    column_width_ = std::min(width_ - 20, static_cast<double>(longest) * kLegendChar + 44);
    columns_ = std::max<std::size_t>(1, static_cast<std::size_t>((width_ - 20) / column_width_));
    rows_ = (legend_.size() + columns_ - 1) / columns_;
  }

  const Axis& x() const { return x_; }
  const Axis& y() const { return y_; }
  double left() const { return left_; }

  void add(std::string svg) { body_ += svg; }

  // A dashed vertical rule, labelled at its top.
  void vertical_rule(double at, const std::string& label) {
    const double p = x_.pixel(at);
    body_ += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"rule\"/>"
                         "<text x=\"{3:.1f}\" y=\"{4:.1f}\" class=\"rule-label\" text-anchor=\"end\">{5}</text>\n",
                         p, top_, bottom_, p - 4, top_ - 4, html_escape(label));
  }

  void line(const Line& l) {
    body_ += fmt::format("<g class=\"c{}\" data-series=\"{}\"><polyline points=\"{}\" fill=\"none\" stroke=\"currentColor\" "
                         "stroke-width=\"{:g}\" stroke-linejoin=\"round\"{}/></g>\n",
                         l.colour % 8, html_escape(l.name), l.points, l.width,
                         l.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", l.dash));
  }

  std::string svg() const {
    const double legend_top = bottom_ + 56;
    const double height = legend_top + kLegendRow * static_cast<double>(rows_) + 4;
    std::string s = fmt::format(
        "<svg class=\"plot{}\" data-chart=\"{}\" data-points=\"{}\" data-x-high=\"{:g}\" data-y-high=\"{:g}\" "
        "xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {:.0f}\" role=\"img\" aria-label=\"{}\">\n",
        variant_, kind_, points, x_.high, y_.high, width_, height, html_escape(title_));
    for (std::size_t i = 0; i < title_lines_.size(); ++i) {
      s += fmt::format("<text x=\"10\" y=\"{:.0f}\" class=\"title\">{}</text>\n", 22 + kTitleRow * static_cast<double>(i),
                       html_escape(title_lines_[i]));
    }
    for (double t : y_.ticks) {
      const double py = y_.pixel(t);
      s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", left_, py, right_,
                       py);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" data-axis=\"y\" text-anchor=\"end\">{}</text>\n",
                       left_ - 6, py + 4, html_escape(y_.tick_text(t)));
    }
    for (double t : x_.ticks) {
      const double px = x_.pixel(t);
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"axis\"/>", px, bottom_,
                       bottom_ + 5);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" data-axis=\"x\" text-anchor=\"middle\">{}</text>\n",
                       px, bottom_ + 19, html_escape(x_.tick_text(t)));
    }
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" class=\"axis\"/>"
                     "<line x1=\"{0:.1f}\" y1=\"{3:.1f}\" x2=\"{0:.1f}\" y2=\"{1:.1f}\" class=\"axis\"/>\n",
                     left_, bottom_, right_, top_);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"label\" text-anchor=\"middle\">{}</text>\n",
                     (left_ + right_) / 2, bottom_ + 38, html_escape(x_.title()));
    const double middle = (top_ + bottom_) / 2;
    s += fmt::format("<text x=\"15\" y=\"{0:.1f}\" class=\"label\" transform=\"rotate(-90 15 {0:.1f})\" "
                     "text-anchor=\"middle\">{1}</text>\n",
                     middle, html_escape(y_.title()));
    s += body_;
    for (std::size_t k = 0; k < legend_.size(); ++k) s += legend_entry(k, legend_top);
    return s + "</svg>\n";
  }

  std::size_t points = 0;

 private:
  std::string legend_entry(std::size_t k, double legend_top) const {
    const LegendEntry& e = legend_[k];
    const double x = 10 + column_width_ * static_cast<double>(k % columns_);
    const double y = legend_top + kLegendRow * static_cast<double>(k / columns_);
    std::string mark;
    if (e.ring) {
      mark = fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"6\" class=\"mark\" style=\"stroke-width:2.2\"{}/>",
                         x + 12, y - 4, e.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", e.dash));
    } else if (e.dot) {
      mark = fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"currentColor\"/>", x + 12, y - 4);
    } else {
      mark = fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"currentColor\" "
                         "stroke-width=\"{:g}\"{}/>",
                         x, y - 4, x + 26, y - 4, e.width,
                         e.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", e.dash));
    }
    // A ring is black, whatever the colour class of its entry.
    return fmt::format("<g class=\"{}\">{}<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text></g>\n",
                       e.ring ? "ring" : fmt::format("c{}", e.colour % 8), mark, x + 32, y, html_escape(e.name));
  }

  std::string title_;
  std::vector<std::string> title_lines_;
  Axis x_, y_;
  std::vector<LegendEntry> legend_;
  std::string kind_, variant_;
  std::string body_;
  double width_, right_, top_ = 42;
  double left_ = 70, bottom_ = 0, column_width_ = 100;
  std::size_t columns_ = 1, rows_ = 1;
};

// A chart's figure: its desk and its phone drawings.
template <typename Draw>
std::string figure_of(const Draw& draw) {
  return "<figure class=\"chart\">" + draw(kDeskWidth, " desk") + draw(kPhoneWidth, " phone") + "</figure>\n";
}

// Variants in drawing order: Default first, the key series (the first
// variant, zeus) last, on top.
std::vector<std::size_t> drawing_order(const SimulationSet& set) {
  std::vector<std::size_t> order;
  for (std::size_t v = set.variants.size(); v-- > 0;) order.push_back(v);
  return order;
}

std::vector<LegendEntry> variant_legend(const SimulationSet& set) {
  std::vector<LegendEntry> legend;
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    legend.push_back({set.variants[v].label(), v, dash_of(v), 2.5});
  }
  return legend;
}

std::string regret_chart(const SimulationSet& set, double width, const std::string& variant) {
  const std::size_t n = set.results.front().front().recurrences.size();
  std::vector<std::vector<double>> curves;
  double high = 0;
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    const auto& runs = set.results[v];
    std::vector<double> curve{0.0};
    for (std::size_t i = 0; i < n; ++i) {
      double mean = 0.0;
      for (const SimulationResult& r : runs) mean += r.recurrences[i].regret / r.optimal.expected_cost;
      curve.push_back(curve.back() + mean / static_cast<double>(runs.size()));
    }
    for (double c : curve) high = std::max(high, c);
    curves.push_back(std::move(curve));
  }
  const std::size_t seeds = set.results.front().size();
  Plot plot(seeds == 1 ? fmt::format("{}: cumulative regret (seed {})", set.workload, set.results.front().front().seed)
                       : fmt::format("{}: cumulative regret (mean of {} seeds)", set.workload, seeds),
            linear_axis("recurrence", 0, static_cast<double>(n), true, true),
            linear_axis("regret / optimal recurrence cost", 0, std::max(high, 1e-9), false), variant_legend(set),
            "regret", width, variant);
  if (set.drift_after) plot.vertical_rule(*set.drift_after, "drift");
  for (std::size_t v : drawing_order(set)) {
    std::string path;
    for (std::size_t i = 0; i < curves[v].size(); ++i) {
      path += fmt::format("{:.1f},{:.1f} ", plot.x().pixel(static_cast<double>(i)), plot.y().pixel(curves[v][i]));
    }
    plot.points += curves[v].size();
    plot.line({set.variants[v].label(), v, dash_of(v), v == 0 ? kKeyWidth : kOtherWidth, path});
  }
  return plot.svg();
}

// The batch size each policy chose, recurrence by recurrence (first seed), as
// steps: recurrence i holds from i-1 to i. Paths that coincide are drawn a
// little apart (2 px) so each stays visible.
std::string batch_size_chart(const SimulationSet& set, double width, const std::string& variant) {
  const std::size_t n = set.results.front().front().recurrences.size();
  double low = std::numeric_limits<double>::infinity(), high = 0;
  for (const auto& runs : set.results) {
    for (const Recurrence& r : runs.front().recurrences) {
      low = std::min(low, static_cast<double>(r.batch_size));
      high = std::max(high, static_cast<double>(r.batch_size));
    }
  }
  Plot plot(fmt::format("{}: batch size per recurrence (seed {})", set.workload, set.results.front().front().seed),
            linear_axis("recurrence", 0, static_cast<double>(n), true, true), log2_axis("batch size", low, high),
            variant_legend(set), "batch-size", width, variant);
  if (set.drift_after) plot.vertical_rule(*set.drift_after, "drift");
  const double spread = 2.0, middle = (static_cast<double>(set.variants.size()) - 1) / 2;
  for (std::size_t v : drawing_order(set)) {
    const double offset = (static_cast<double>(v) - middle) * spread;
    std::string path;
    const auto& recurrences = set.results[v].front().recurrences;
    for (std::size_t i = 0; i < recurrences.size(); ++i) {
      const Recurrence& r = recurrences[i];
      const double y = plot.y().pixel(r.batch_size) + offset;
      // A corner where the batch size changes, and the end.
      if (i == 0 || r.batch_size != recurrences[i - 1].batch_size) {
        path += fmt::format("{:.1f},{:.1f} ", plot.x().pixel(r.index), y);
      }
      if (i + 1 == recurrences.size() || recurrences[i + 1].batch_size != r.batch_size) {
        path += fmt::format("{:.1f},{:.1f} ", plot.x().pixel(r.index + 1), y);
      }
      ++plot.points;
    }
    plot.line({set.variants[v].label(), v, dash_of(v), v == 0 ? kKeyWidth : kOtherWidth, path});
  }
  return plot.svg();
}

// One small multiple per policy (Default left out) over a shared range: the
// path over (batch size, power limit) of the first seed, each configuration's
// dot sized by how often it was chosen, and the optimum ringed on top.
std::string search_path_chart(const SimulationSet& set, std::size_t v, double width, const std::string& variant) {
  const SimulationResult& first = set.results.front().front();
  double b_low = first.optimal.batch_size, b_high = b_low;
  double p_low = first.optimal.power_limit_w, p_high = p_low;
  // The range every policy's chart shares.
  for (const auto& runs : set.results) {
    for (const Recurrence& r : runs.front().recurrences) {
      b_low = std::min(b_low, static_cast<double>(r.batch_size));
      b_high = std::max(b_high, static_cast<double>(r.batch_size));
      p_low = std::min(p_low, r.power_limit_w);
      p_high = std::max(p_high, r.power_limit_w);
    }
  }
  if (first.optimal_after) {
    b_low = std::min(b_low, static_cast<double>(first.optimal_after->batch_size));
    b_high = std::max(b_high, static_cast<double>(first.optimal_after->batch_size));
    p_low = std::min(p_low, first.optimal_after->power_limit_w);
    p_high = std::max(p_high, first.optimal_after->power_limit_w);
  }
  {
    const SimulationResult& run = set.results[v].front();
    std::vector<LegendEntry> legend = {{set.variants[v].label(), v, "", 1.5, true},
                                       {"optimum", 0, "", 2, false, true}};
    if (first.optimal_after) legend.push_back({"optimum after drift", 0, "3 2", 2, false, true});
    Plot plot(fmt::format("{}: search path of {} (seed {})", set.workload, set.variants[v].label(), run.seed),
              log2_axis("batch size", b_low, b_high),
              linear_axis("power limit", p_low, p_high, false, false, "W"), legend, "search-path", width, variant);
    std::string path;
    std::map<std::pair<int, double>, int> visits;
    for (const Recurrence& r : run.recurrences) {
      path += fmt::format("{:.1f},{:.1f} ", plot.x().pixel(r.batch_size), plot.y().pixel(r.power_limit_w));
      ++visits[{r.batch_size, r.power_limit_w}];
    }
    plot.points = run.recurrences.size();
    plot.add(fmt::format("<g class=\"c{}\" data-series=\"{}\"><polyline points=\"{}\" fill=\"none\" stroke=\"currentColor\" "
                         "stroke-width=\"1.2\" stroke-opacity=\"0.55\" stroke-linejoin=\"round\"/>",
                         v % 8, html_escape(set.variants[v].label()), path));
    for (const auto& [config, count] : visits) {
      plot.add(fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\" fill=\"currentColor\" fill-opacity=\"0.8\">"
                           "<title>b={} {:g} W: {} recurrence{}</title></circle>",
                           plot.x().pixel(config.first), plot.y().pixel(config.second),
                           std::min(9.0, 2.5 + 1.2 * std::sqrt(static_cast<double>(count))), config.first,
                           config.second, count, count == 1 ? "" : "s"));
    }
    plot.add("</g>\n");
    // The optimum last, on top of everything.
    auto ring = [&](const OptimalConfig& opt, const std::string& label, bool dashed) {
      const double px = plot.x().pixel(opt.batch_size), py = plot.y().pixel(opt.power_limit_w);
      plot.add(fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"10\" class=\"mark optimum\" style=\"stroke-width:2.6\"{}>"
                           "<title>{}: b={} {:g} W</title></circle>\n",
                           px, py, dashed ? " stroke-dasharray=\"3 2\"" : "", html_escape(label), opt.batch_size,
                           opt.power_limit_w));
    };
    ring(first.optimal, "optimum", false);
    if (first.optimal_after) ring(*first.optimal_after, "optimum after drift", true);
    return plot.svg();
  }
}

// The text table's columns (joule simulate's output), stale and the optimum
// after the drift included where a set drifts.
std::string summary_table(const std::vector<SimulationSet>& sets) {
  const bool drift = std::any_of(sets.begin(), sets.end(), [](const SimulationSet& s) { return s.drift_after.has_value(); });
  std::string html = fmt::format(
      "<table class=\"sortable main\" id=\"summary\"><tr><th>workload</th><th>target</th><th>policy</th><th>ETA / Default, last 5</th>"
      "<th>TTA / Default, last 5</th><th>ETA / Default, all</th><th>TTA / Default, all</th><th>regret / optimal</th>"
      "<th>converged to</th><th>at</th>{}<th>optimal</th></tr>\n",
      drift ? "<th>stale</th>" : "");
  for (const SimulationSet& set : sets) {
    const std::string optimal = optimal_text(set);
    for (std::size_t v = 0; v < set.variants.size(); ++v) {
      const VariantSummary s = summarize(set, v);
      html += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>"
          "<td>{:.1f}</td><td>b={} {:.0f} W</td><td>{}/{}</td>{}<td class=\"notes\">{}</td></tr>\n",
          html_escape(set.workload), html_escape(set.target_text), html_escape(set.variants[v].label()),
          s.energy_last_ratio, s.time_last_ratio, s.energy_all_ratio, s.time_all_ratio, s.regret_per_optimal,
          s.final_config.first, s.final_config.second, s.converged_at, s.recurrences,
          drift ? (set.drift_after ? fmt::format("<td>{:.1f}</td>", s.stale_after_drift) : "<td></td>") : "",
          html_escape(optimal));
    }
  }
  return html + "</table>\n";
}

}  // namespace

std::string render_simulation_report(const std::string& title, const std::string& subtitle,
                                     const std::vector<SimulationSet>& sets, const std::string& warning) {
  std::string body = warning.empty() ? "" : "<p class=\"simulated\">" + html_escape(warning) + "</p>\n";
  body += "<p>" + html_escape(subtitle) + "</p>\n";
  body += "<div class=\"charts\">" + ratio_bars(sets, true) + ratio_bars(sets, false) + "</div>\n";
  body += summary_table(sets);
  body +=
      "<p>last 5: the mean of the last five recurrences (the steady state); all: every recurrence, exploration "
      "included (what the user paid). Regret: cost above the optimal configuration's expected cost, in units of "
      "that cost. In the batch-size charts each recurrence is a step, and paths that coincide are drawn 2 px apart; "
      "the search paths show one policy each over the same axes: a dot's area grows with the recurrences that chose "
      "it, the optimum is ringed.</p>\n";
  for (const SimulationSet& set : sets) {
    body += "<h2>" + html_escape(set.workload) + " (" + html_escape(set.target_text) + ")</h2>\n<div class=\"charts\">";
    body += figure_of([&](double width, const std::string& variant) { return regret_chart(set, width, variant); });
    body += figure_of([&](double width, const std::string& variant) { return batch_size_chart(set, width, variant); });
    for (std::size_t v = 0; v < set.variants.size(); ++v) {
      if (v == set.reference) continue;
      body += figure_of([&](double width, const std::string& variant) { return search_path_chart(set, v, width, variant); });
    }
    body += "</div>\n";
  }
  body += fmt::format("<p class=\"muted\">Generated by joule {} (joule simulate).</p>\n", version());
  return html_page(title, body);
}

}  // namespace joule
