// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Where a chart's labels go (internal to analyze): next to the point they
// name, clear of each other, of markers, error bars and, where any place is,
// of the data lines; a label that cannot sit next to its point is joined to
// it by a leader line, so no label floats free of what it names.
#pragma once

#include <string>
#include <vector>

namespace joule::chart {

struct Box {
  double left = 0, top = 0, right = 0, bottom = 0;
  bool overlaps(const Box& o) const { return left < o.right && o.left < right && top < o.bottom && o.top < bottom; }
  // Whether the segment from (x1, y1) to (x2, y2) passes through the box.
  bool crossed_by(double x1, double y1, double x2, double y2) const;
  // The distance from (x, y) to the nearest point of the box (0 inside).
  double distance_to(double x, double y) const;
};

// A label's text (12 px, in viewBox units) split at spaces into lines no
// wider than `max_width`; a word longer than a line keeps its own line.
std::vector<std::string> wrap_words(const std::string& text, double max_width, double char_width);

class LabelPlacer {
 public:
  // Labels stay inside `area` (the plot), so they never cover a tick label.
  explicit LabelPlacer(Box area) : area_(area) {}

  // Something a label must not cover: a marker.
  void avoid(const Box& box) { markers_.push_back(box); }
  // Something a label covers only where no place clear of it is left: an
  // error bar (text over a bar still reads; text over text does not).
  void avoid_where_possible(const Box& box) { bars_.push_back(box); }
  // A stretch of a data line a label should not cross where it has a choice.
  void avoid_segment(double x1, double y1, double x2, double y2) { segments_.push_back({x1, y1, x2, y2}); }

  // The label's SVG (its leader line first, where it has one): nearest the
  // point (x, y) first, then anywhere free in the plot. An `optional` label
  // is only tried near its point and is empty when no place there is free;
  // any other label gives up, in turn, keeping clear of data lines, error
  // bars and markers, and in a plot too crowded for even that goes over
  // another label rather than be left out.
  std::string place(double x, double y, const std::string& text, const std::string& css_class, bool optional = false);

 private:
  struct Segment {
    double x1, y1, x2, y2;
  };
  // What a place must keep clear of, from the most to the least.
  enum class Clearance { kEverything, kAllButLines, kLabelsAndMarkers, kLabels };
  bool free(const Box& box, Clearance clearance) const;
  std::vector<Box> candidates(double x, double y, double w, double h, bool whole_plot) const;

  Box area_;
  std::vector<Box> placed_, markers_, bars_;
  std::vector<Segment> segments_;
};

}  // namespace joule::chart
