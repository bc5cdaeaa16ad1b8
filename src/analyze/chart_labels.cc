// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "chart_labels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "joule/analyze/svg_chart.h"
#include "joule/common/root_sum_square.h"

namespace joule::chart {

namespace {

constexpr double kLineHeight = 13;     // 12 px text, baseline to baseline
// Below the last baseline a 12 px line's descenders reach 3-4 px, 2 more than
// kLineHeight leaves: without it, two labels placed edge to edge touch
// (Chromium draws a two-line label's box 13 * 2 + 2 px tall).
constexpr double kDescender = 2;
constexpr double kLeaderFrom = 12;     // a label further than this from its point gets a leader
constexpr double kCharWidth = 6.6;     // at 12 px, for layout
constexpr double kGridStep = 10;       // the search over the whole plot

}  // namespace

bool Box::crossed_by(double x1, double y1, double x2, double y2) const {
  // Liang-Barsky: clip the segment's parameter range to the box's slabs.
  double t0 = 0, t1 = 1;
  const double dx = x2 - x1, dy = y2 - y1;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {x1 - left, right - x1, y1 - top, bottom - y1};
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
      continue;
    }
    const double r = q[i] / p[i];
    if (p[i] < 0) {
      t0 = std::max(t0, r);
    } else {
      t1 = std::min(t1, r);
    }
    if (t0 > t1) return false;
  }
  return true;
}

double Box::distance_to(double x, double y) const {
  const double dx = std::max({left - x, 0.0, x - right}), dy = std::max({top - y, 0.0, y - bottom});
  return root_sum_square(dx, dy);
}

namespace {

double text_width(const std::string& text, double char_width) {
  // Digits and '#' are wider than the average letter (numbered points).
  double width = 0;
  for (char c : text) width += c == '#' ? 10.0 : (c >= '0' && c <= '9') ? std::max(char_width, 7.7) : char_width;
  return width;
}

}  // namespace

std::vector<std::string> wrap_words(const std::string& text, double max_width, double char_width) {
  const auto max_chars = static_cast<std::size_t>(std::max(8.0, max_width / char_width));
  std::vector<std::string> lines;
  std::string line;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!line.empty() && line.size() + 1 + word.size() > max_chars) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    at = end + 1;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

bool LabelPlacer::free(const Box& box, Clearance clearance) const {
  if (box.left < area_.left + 2 || box.right > area_.right - 2 || box.top < area_.top + 1 || box.bottom > area_.bottom - 2) {
    return false;
  }
  auto covers = [&](const Box& b) { return b.overlaps(box); };
  auto covers_any = [&](const std::vector<Box>& boxes) { return std::any_of(boxes.begin(), boxes.end(), covers); };
  if (covers_any(placed_)) return false;
  if (clearance <= Clearance::kLabelsAndMarkers && covers_any(markers_)) return false;
  if (clearance <= Clearance::kAllButLines && covers_any(bars_)) return false;
  return clearance > Clearance::kEverything || std::none_of(segments_.begin(), segments_.end(), [&](const Segment& s) {
    return box.crossed_by(s.x1, s.y1, s.x2, s.y2);
  });
}

// Right of the point, then left; nearest first, then further up or down;
// then (when `whole_plot`) every place of the plot, nearest first.
std::vector<Box> LabelPlacer::candidates(double x, double y, double w, double h, bool whole_plot) const {
  std::vector<Box> near, far;
  for (int step = 0; step < 8; ++step) {
    for (double dy : {-8.0 - 14 * step, 17.0 + 14 * step}) {
      for (bool left_side : {false, true}) {
        const double left = left_side ? x - 9 - w : x + 9;
        const double bottom = y + dy + 2 + kDescender;  // the last baseline at y + dy
        near.push_back({left, bottom - h, left + w, bottom});
      }
    }
  }
  if (!whole_plot) return near;
  for (double top = area_.top + 2; top + h < area_.bottom - 2; top += kGridStep) {
    for (double left = area_.left + 3; left + w < area_.right - 2; left += kGridStep) far.push_back({left, top, left + w, top + h});
  }
  std::sort(far.begin(), far.end(),
            [&](const Box& l, const Box& r) { return l.distance_to(x, y) < r.distance_to(x, y); });
  near.insert(near.end(), far.begin(), far.end());
  return near;
}

std::string LabelPlacer::place(double x, double y, const std::string& text, const std::string& css_class, bool optional) {
  // Bold is wider. A label wider than most of the plot takes several lines.
  const double char_width = css_class == "mark-label" ? kCharWidth + 1.0 : kCharWidth + 0.4;
  const auto lines = wrap_words(text, 0.8 * (area_.right - area_.left), char_width);
  double w = 0;
  for (const auto& line : lines) w = std::max(w, text_width(line, char_width));
  const double h = kLineHeight * static_cast<double>(lines.size()) + kDescender;
  // An optional label (a point's among many) stays near its point or is left out.
  const auto places = candidates(x, y, w, h, !optional);
  std::optional<Box> chosen;
  // An optional label keeps clear of everything but the lines or is left out.
  const auto least = optional ? Clearance::kAllButLines : Clearance::kLabels;
  for (Clearance clearance = Clearance::kEverything; !chosen && clearance <= least;
       clearance = static_cast<Clearance>(static_cast<int>(clearance) + 1)) {
    const auto it = std::find_if(places.begin(), places.end(), [&](const Box& box) { return free(box, clearance); });
    if (it != places.end()) chosen = *it;
  }
  if (!chosen && optional) return "";
  if (!chosen) {  // nowhere free: inside the plot at least
    const double left = std::clamp(x + 9, area_.left + 2, std::max(area_.left + 2, area_.right - 2 - w));
    const double top = std::clamp(y - 6 - h, area_.top + 1, std::max(area_.top + 1, area_.bottom - 2 - h));
    chosen = Box{left, top, left + w, top + h};
  }
  placed_.push_back(*chosen);
  std::string svg;
  const double distance = chosen->distance_to(x, y);
  if (distance > kLeaderFrom) {
    // From the edge of the point's marker to the label's nearest corner or side.
    const double to_x = std::clamp(x, chosen->left, chosen->right), to_y = std::clamp(y, chosen->top, chosen->bottom);
    const double along = 6 / root_sum_square(to_x - x, to_y - y);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"leader\"/>",
                       x + (to_x - x) * along, y + (to_y - y) * along, to_x, to_y);
  }
  // Left of its point, a label ends at the box's right edge: the text's true
  // width (unknown here) does not move it away from the point.
  const bool left_of_point = chosen->right <= x;
  const double text_x = left_of_point ? chosen->right : chosen->left;
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"{}\" data-anchor=\"{:.1f},{:.1f}\"{}{}>", text_x,
                     chosen->top + kLineHeight - 2, css_class, x, y, distance > kLeaderFrom ? " data-leader=\"1\"" : "",
                     left_of_point ? " text-anchor=\"end\"" : "");
  if (lines.size() == 1) return svg + html_escape(text) + "</text>\n";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    svg += fmt::format("<tspan x=\"{:.1f}\" dy=\"{}\">{}</tspan>", text_x, i == 0 ? 0.0 : kLineHeight,
                       html_escape(lines[i]));
  }
  return svg + "</text>\n";
}

}  // namespace joule::chart
