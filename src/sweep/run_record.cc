// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What a run's record holds besides its energy: the counts the run wrote
// (samples, steps, epochs), its utilisation and its decimated power timeline,
// from the monitor on this machine or from the nodes' timeline files.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "joule/analyze/analysis.h"
#include "joule/cluster/node_report.h"
#include "joule/common/csv.h"
#include "joule/common/utf8.h"
#include "joule/measure/monitor.h"
#include "sweep/run_parts.h"

namespace joule {

namespace {

// Utilisation statistics and a decimated power timeline (at most ~200
// points per device) of one run.
// One sample of a run, its time from the run's start.
struct RunSample {
  double time_s;
  std::string device;
  double power_w, gpu_util_percent, memory_util_percent;  // utilisation < 0: not sampled
};

// A run's utilisation (mean and variation over every sample) and its power
// timeline, decimated to about 200 points per device for the report.
void summarize_samples(const std::vector<RunSample>& samples, double elapsed_s, sweep::RunRecord& record) {
  std::vector<double> gpu_util, mem_util;
  std::map<std::string, std::vector<const RunSample*>> by_device;
  for (const auto& s : samples) {
    by_device[s.device].push_back(&s);
    if (s.gpu_util_percent >= 0) gpu_util.push_back(s.gpu_util_percent);
    if (s.memory_util_percent >= 0) mem_util.push_back(s.memory_util_percent);
  }
  if (!gpu_util.empty()) {
    const Summary g = summarize(gpu_util), mm = summarize(mem_util);
    record.gpu_util_mean = g.mean;
    record.gpu_util_cv = g.cv();
    record.mem_util_mean = mm.mean;
    record.mem_util_cv = mm.cv();
  }
  for (const auto& [device, list] : by_device) {
    const std::size_t step = std::max<std::size_t>(1, list.size() / 200);
    for (std::size_t i = 0; i < list.size(); i += step) {
      record.timeline.push_back({std::clamp(list[i]->time_s, 0.0, elapsed_s), device, list[i]->power_w});
    }
  }
}

}  // namespace

// Reads "samples=N steps=M epochs=K" lines the run appended to its report file.
void read_counts(const std::string& path, sweep::RunRecord& record) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = word.substr(0, eq);
      char* end = nullptr;
      const double value = std::strtod(word.c_str() + eq + 1, &end);
      if (*end != '\0') continue;
      // The workload writes this file: a count that is no finite number >= 0
      // (inf, -5, 1e400) is not stored, and the run says so.
      if ((key == "samples" || key == "steps" || key == "epochs") && !(std::isfinite(value) && value >= 0)) {
        record.error += fmt::format("{}$JOULE_REPORT_FILE: '{}' is not a count (a finite number >= 0): left out",
                                    record.error.empty() ? "" : "; ", printable(word));
        continue;
      }
      if (key == "samples") record.samples = record.samples.value_or(0) + value;
      if (key == "steps") record.steps = record.steps.value_or(0) + value;
      if (key == "epochs") record.epochs = record.epochs.value_or(0) + value;
    }
  }
}

void summarize_timeline(Monitor& monitor, const Measurement& m, sweep::RunRecord& record) {
  const auto& names = monitor.timeline().device_names();
  // The samples just before and after the run bound it (a short run may
  // hold no sample of its own).
  const double margin_s = monitor.sampler().options().interval_s;
  std::vector<RunSample> samples;
  for (const auto& s : monitor.timeline().samples()) {
    if (s.time_s < m.begin_s - margin_s || s.time_s > m.begin_s + m.elapsed_s + margin_s) continue;
    samples.push_back({s.time_s - m.begin_s, names.at(s.device), s.power_w, static_cast<double>(s.gpu_util_percent),
                       static_cast<double>(s.memory_util_percent)});
  }
  summarize_samples(samples, m.elapsed_s, record);
}

// A run across nodes: each node's timeline, written by its leader beside
// the store (node_file_path), as "<node> <device>". Its time counts from
// the node's first sample, taken when the leader's monitor started, a few
// milliseconds before the window began. A missing or unreadable file is a
// note in the run's error; the energy does not depend on it.
void read_node_timelines(const std::string& timeline_path, sweep::RunRecord& record) {
  std::vector<RunSample> samples;
  for (const auto& node : record.node_rows) {
    const std::string path = cluster::node_file_path(timeline_path, node.node);
    try {
      const CsvTable table = CsvTable::read(path);
      table.require_columns({"time_s", "device", "power_w", "gpu_util_percent", "memory_util_percent"});
      const double first_s = table.size() ? table.row(0).number("time_s") : 0.0;
      for (std::size_t i = 0; i < table.size(); ++i) {
        const auto row = table.row(i);
        const auto util = [&](const char* column) { return row.text(column).empty() ? -1.0 : row.number(column); };
        const double t = row.number("time_s") - first_s;
        if (t > node.elapsed_s + 1.0) continue;  // after the window: the leader settling
        samples.push_back({t, node.node + " " + row.text("device"), row.number("power_w"), util("gpu_util_percent"),
                           util("memory_util_percent")});
      }
    } catch (const Error& e) {
      record.error += (record.error.empty() ? "" : "; ") + fmt::format("no timeline of node {}: {}", node.node, e.what());
    }
    std::remove(path.c_str());
  }
  summarize_samples(samples, record.elapsed_s, record);
}

}  // namespace joule
