// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Cluster traces: the streaming reader of both formats, the k-means mapping of
// raw groups onto workloads, and the generator of raw traces.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <queue>

#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/simulate/cluster.h"
#include "simulate/cluster_random.h"

namespace joule {

std::vector<std::size_t> kmeans_1d(const std::vector<double>& values, std::size_t k) {
  if (values.empty() || k == 0) return std::vector<std::size_t>(values.size(), 0);
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> centroid(k);
  for (std::size_t c = 0; c < k; ++c) {
    const double q = (static_cast<double>(c) + 0.5) / static_cast<double>(k);
    centroid[c] = sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * static_cast<double>(sorted.size())))];
  }
  std::vector<std::size_t> cluster(values.size(), 0);
  auto nearest = [&](double v) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < k; ++c) {
      if (std::fabs(v - centroid[c]) < std::fabs(v - centroid[best])) best = c;
    }
    return best;
  };
  // Lloyd's iterations until no value changes cluster (1-D converges fast).
  for (int iteration = 0; iteration < 1000; ++iteration) {
    bool changed = iteration == 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::size_t c = nearest(values[i]);
      changed |= c != cluster[i];
      cluster[i] = c;
    }
    if (!changed) break;
    std::vector<double> sum(k, 0.0);
    std::vector<std::size_t> count(k, 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
      sum[cluster[i]] += values[i];
      ++count[cluster[i]];
    }
    for (std::size_t c = 0; c < k; ++c) {
      if (count[c]) centroid[c] = sum[c] / static_cast<double>(count[c]);  // an empty cluster keeps its place
    }
  }
  // Number the clusters in order of their centroid.
  std::vector<std::size_t> order(k), rank(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return centroid[a] < centroid[b]; });
  for (std::size_t r = 0; r < k; ++r) rank[order[r]] = r;
  for (auto& c : cluster) c = rank[c];
  return cluster;
}

namespace {

const std::vector<std::string> kZeusColumns = {"group", "start_time", "end_time", "dataset", "runtime_ratio"};
const std::vector<std::string> kRawColumns = {"group", "submit_s", "duration_s"};

std::string missing_of(const CsvStream& csv, const std::vector<std::string>& columns) {
  std::string missing;
  for (const auto& c : columns) {
    if (!csv.has_column(c)) missing += (missing.empty() ? "" : ", ") + c;
  }
  return missing;
}

double non_negative(const CsvStream& csv, std::size_t column) {
  const double x = csv.number(column);
  if (x < 0) throw Error(fmt::format("{}: must not be negative", csv.where(column)));
  return x;
}

}  // namespace

ClusterTraceReader::ClusterTraceReader(const std::string& path, std::vector<ClusterWorkload> workloads)
    : workloads_(std::move(workloads)), csv_(std::make_unique<CsvStream>(path)) {
  if (workloads_.empty()) throw Error("cluster replay: no workload to map jobs onto");
  if (missing_of(*csv_, kZeusColumns).empty()) {
    format_ = Format::kZeus;
    for (const auto& c : kZeusColumns) columns_.push_back(csv_->column(c));
    return;
  }
  if (!missing_of(*csv_, kRawColumns).empty()) {
    throw Error(fmt::format("{}:1: not a cluster trace: the zeus group format needs columns {} (missing: {}); the "
                            "raw format needs {} (missing: {})",
                            csv_->path(), fmt::join(kZeusColumns, ","), missing_of(*csv_, kZeusColumns),
                            fmt::join(kRawColumns, ","), missing_of(*csv_, kRawColumns)));
  }
  format_ = Format::kRaw;
  if (path == "-") {
    throw Error("<stdin>: the raw cluster format (group,submit_s,duration_s) is mapped in two passes and cannot be "
                "read from stdin; write it to a file first (the zeus group format streams from stdin)");
  }
  for (const auto& c : kRawColumns) columns_.push_back(csv_->column(c));
  map_raw_groups(path);
}

// First pass: per-group job count and duration sum (memory: groups), k-means
// on the group means, clusters onto workloads by runtime. Then the file is
// opened again for the jobs themselves.
void ClusterTraceReader::map_raw_groups(const std::string& path) {
  struct Aggregate {
    std::size_t jobs = 0;
    double duration_s = 0;
  };
  std::vector<Aggregate> aggregates;
  std::unordered_map<std::string, std::size_t> index;
  std::vector<double> last_submit_s;
  while (csv_->next()) {
    const std::string group(csv_->text(columns_[0]));
    const double submit_s = non_negative(*csv_, columns_[1]);
    const double duration_s = non_negative(*csv_, columns_[2]);
    const auto [it, added] = index.emplace(group, aggregates.size());
    if (added) {
      aggregates.emplace_back();
      last_submit_s.push_back(submit_s);
    }
    if (submit_s < last_submit_s[it->second]) {
      throw Error(fmt::format("{}: submit time {} is earlier than the previous job of group '{}' ({}); submit times "
                              "must not decrease within a group",
                              csv_->where(columns_[1]), submit_s, printable(group), last_submit_s[it->second]));
    }
    last_submit_s[it->second] = submit_s;
    ++aggregates[it->second].jobs;
    aggregates[it->second].duration_s += duration_s;
  }
  std::vector<double> group_mean_s(aggregates.size());
  for (std::size_t g = 0; g < aggregates.size(); ++g) group_mean_s[g] = aggregates[g].duration_s / aggregates[g].jobs;
  const std::vector<std::size_t> cluster = kmeans_1d(group_mean_s, workloads_.size());

  // Cluster r (by mean runtime) goes to the workload of rank r by runtime.
  std::vector<std::size_t> by_runtime(workloads_.size());
  std::iota(by_runtime.begin(), by_runtime.end(), 0);
  std::stable_sort(by_runtime.begin(), by_runtime.end(),
                   [&](std::size_t a, std::size_t b) { return workloads_[a].runtime_s < workloads_[b].runtime_s; });
  groups_per_workload_.assign(workloads_.size(), 0);
  mean_duration_s_.assign(workloads_.size(), 0.0);
  std::vector<std::size_t> jobs(workloads_.size(), 0);
  for (const auto& [group, g] : index) {
    const std::size_t w = by_runtime[cluster[g]];
    groups_[group].workload = w;
    ++groups_per_workload_[w];
    jobs[w] += aggregates[g].jobs;
    mean_duration_s_[w] += aggregates[g].duration_s;
  }
  for (std::size_t w = 0; w < workloads_.size(); ++w) {
    if (jobs[w]) mean_duration_s_[w] /= static_cast<double>(jobs[w]);
  }
  csv_ = std::make_unique<CsvStream>(path);
}

std::size_t ClusterTraceReader::workload_of_dataset(std::string_view dataset, std::size_t column) const {
  for (std::size_t w = 0; w < workloads_.size(); ++w) {
    if (dataset == workloads_[w].dataset || dataset == workloads_[w].name) return w;
  }
  std::vector<std::string> known;
  for (const auto& w : workloads_) known.push_back(w.dataset);
  throw Error(fmt::format("{}: unknown dataset '{}' (known: {})", csv_->where(column), printable(dataset),
                          fmt::join(known, ", ")));
}

bool ClusterTraceReader::next(ClusterJob& job) {
  if (!csv_->next()) return false;
  const CsvStream& csv = *csv_;
  job.line = csv.line();
  const std::string group(csv.text(columns_[0]));
  job.submit_s = non_negative(csv, columns_[1]);
  if (format_ == Format::kZeus) {
    job.end_s = non_negative(csv, columns_[2]);
    if (job.end_s < job.submit_s) {
      throw Error(fmt::format("{}: end time {} is before the start time {}", csv.where(columns_[2]), job.end_s,
                              job.submit_s));
    }
    job.workload = workload_of_dataset(csv.text(columns_[3]), columns_[3]);
    job.runtime_ratio = csv.number(columns_[4]);
    if (!(job.runtime_ratio > 0)) throw Error(fmt::format("{}: must be positive", csv.where(columns_[4])));
  } else {
    job.end_s = job.submit_s + non_negative(csv, columns_[2]);
  }
  auto [it, added] = groups_.try_emplace(group);
  GroupEntry& entry = it->second;
  if (format_ == Format::kZeus) {
    if (!added && entry.workload != job.workload) {
      throw Error(fmt::format("{}: group '{}' was '{}' before; a group is one workload", csv.where(columns_[3]),
                              printable(group), workloads_[entry.workload].dataset));
    }
    entry.workload = job.workload;
  } else {
    job.workload = entry.workload;
    const double mean_s = mean_duration_s_[job.workload];
    job.runtime_ratio = mean_s > 0 ? (job.end_s - job.submit_s) / mean_s : 1.0;
  }
  if (job.submit_s < entry.last_submit_s) {
    throw Error(fmt::format("{}: submit time {} is earlier than the previous job of group '{}' ({}); submit times "
                            "must not decrease within a group",
                            csv.where(columns_[1]), job.submit_s, printable(group), entry.last_submit_s));
  }
  entry.last_submit_s = job.submit_s;
  job.group = it->first;
  return true;
}

// ---------------------------------------------------------------------------
// Generator.

namespace {

// One group's arrival process, advanced one job at a time so that the whole
// trace is written in submit order with memory proportional to groups.
struct GroupGenerator {
  std::string id;
  std::size_t jobs = 0, next_job = 0;
  bool bursty = false;
  double slot_s = 0;          // period between submissions (periodic) or bursts (bursty)
  double median_runtime_s = 0;
  double burst_start_s = 0, burst_time_s = 0;
  std::size_t burst = SIZE_MAX;
  SplitMix64 rng{0};

  std::size_t bursts() const { return (jobs + 3) / 4; }

  // The next submit time. Periodic: one job per slot, jittered within the
  // middle 80% of it. Bursty: ~4 jobs per slot, the burst starting within the
  // middle 60% and its jobs minutes apart (at most 5% of a slot each), so
  // submit times never decrease.
  double next_submit_s(double span_s) {
    const std::size_t k = next_job++;
    if (!bursty) return std::min(span_s, (static_cast<double>(k) + 0.1 + 0.8 * rng.uniform()) * slot_s);
    const std::size_t b = k * bursts() / jobs;
    if (b != burst) {
      burst = b;
      burst_start_s = (static_cast<double>(b) + 0.2 + 0.6 * rng.uniform()) * slot_s;
      burst_time_s = burst_start_s;
    } else {
      burst_time_s += std::min(0.05 * slot_s, rng.exponential(300.0));
    }
    return std::min(span_s, burst_time_s);
  }
};

// Throws UsageError naming the first field of shape outside its range
// (kClusterTraceLimits); a NaN is outside every range.
void check_shape(const ClusterTraceShape& shape) {
  const ClusterTraceLimits& limits = kClusterTraceLimits;
  const auto check_count = [](const char* field, std::size_t value, std::size_t max) {
    if (value < 1 || value > max) {
      throw UsageError(fmt::format("cluster trace: {} {} is outside [1, {}]", field, value, max));
    }
  };
  const auto check = [](const char* field, double value, bool min_excluded, double min, double max) {
    if (!((min_excluded ? value > min : value >= min) && value <= max)) {
      throw UsageError(
          fmt::format("cluster trace: {} {} is outside {}{}, {}]", field, value, min_excluded ? '(' : '[', min, max));
    }
  };
  check_count("jobs", shape.jobs, limits.max_jobs);
  check_count("groups", shape.groups, limits.max_groups);
  check("days", shape.days, true, 0, limits.max_days);
  check("group_size_alpha", shape.group_size_alpha, true, 0, limits.max_group_size_alpha);
  check("max_group_weight", shape.max_group_weight, false, 1, limits.max_group_weight);
  check("bursty_fraction", shape.bursty_fraction, false, 0, 1);
  check("median_runtime_s", shape.median_runtime_s, true, 0, limits.max_median_runtime_s);
  check("runtime_spread", shape.runtime_spread, false, 0, limits.max_runtime_spread);
  check("job_runtime_spread", shape.job_runtime_spread, false, 0, limits.max_runtime_spread);
}

}  // namespace

void generate_cluster_trace(const ClusterTraceShape& shape, std::ostream& out) {
  check_shape(shape);
  const std::size_t groups = std::min(shape.groups, shape.jobs);
  const double span_s = shape.days * 86400.0;
  SplitMix64 rng(shape.seed);

  // Group sizes: Pareto weights, every group at least one job, the rest
  // shared by largest remainder so that the total is exact.
  std::vector<double> weight(groups);
  // Truncated: one group with most of the jobs would make the cluster-wide
  // figures that group's.
  for (auto& w : weight) {
    w = std::min(shape.max_group_weight, std::pow(1.0 - rng.uniform(), -1.0 / shape.group_size_alpha));
  }
  const double total_weight = std::accumulate(weight.begin(), weight.end(), 0.0);
  const std::size_t spare = shape.jobs - groups;
  std::vector<std::size_t> size(groups, 1);
  std::vector<std::pair<double, std::size_t>> remainder(groups);
  std::size_t given = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const double share = static_cast<double>(spare) * weight[g] / total_weight;
    size[g] += static_cast<std::size_t>(share);
    given += static_cast<std::size_t>(share);
    remainder[g] = {share - std::floor(share), g};
  }
  std::sort(remainder.begin(), remainder.end(), std::greater<>());
  for (std::size_t i = 0; given < spare; ++i, ++given) ++size[remainder[i].second];

  std::vector<GroupGenerator> gen(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    GroupGenerator& x = gen[g];
    x.rng = SplitMix64(rng.next());
    x.id = fmt::format("{:016x}", rng.next());
    x.jobs = size[g];
    x.bursty = rng.uniform() < shape.bursty_fraction;
    x.slot_s = span_s / static_cast<double>(x.bursty ? x.bursts() : x.jobs);
    x.median_runtime_s = shape.median_runtime_s * std::exp(shape.runtime_spread * rng.normal());
  }

  // Merge the groups' arrivals: a min-heap of each group's next submission.
  using Next = std::pair<double, std::size_t>;
  std::priority_queue<Next, std::vector<Next>, std::greater<>> heap;
  for (std::size_t g = 0; g < groups; ++g) heap.emplace(gen[g].next_submit_s(span_s), g);
  out << "job_id,group,submit_s,duration_s\n";
  for (std::size_t job = 0; !heap.empty(); ++job) {
    const auto [submit_s, g] = heap.top();
    heap.pop();
    GroupGenerator& x = gen[g];
    const double duration_s = std::max(1.0, x.median_runtime_s * std::exp(shape.job_runtime_spread * x.rng.normal()));
    out << fmt::format("{},{},{:.1f},{:.1f}\n", job, x.id, submit_s, duration_s);
    if (x.next_job < x.jobs) heap.emplace(x.next_submit_s(span_s), g);
  }
}

}  // namespace joule
