// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Cluster replay: the recurring job groups of a GPU cluster trace, each mapped
// onto one of the six Zeus workloads, replayed with one optimizer per group.
// Jobs of a group that overlap in time are served concurrently: a submission
// first delivers the group's observations of jobs that ended by then, in
// end-time order.
//
// Two trace formats, both read as a stream (one row in memory at a time):
//   zeus:  group,start_time,end_time,dataset,runtime_ratio
//          (the mapped Alibaba trace the Zeus repository ships; times in s)
//   raw:   job_id,group,submit_s,duration_s
//          mapped here: 1-D k-means (k = 6) on mean group runtime, clusters
//          matched to the workloads in order of runtime, runtime_ratio = job
//          duration / its cluster's mean job duration. Needs two passes, so a
//          file, not stdin.
// Within a group, submit times must not decrease.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "joule/common/csv.h"
#include "joule/simulate/simulator.h"

namespace joule {

// A workload the trace's jobs can be mapped onto.
struct ClusterWorkload {
  std::string name;      // e.g. "movielens"
  std::string dataset;   // e.g. "movielens-1m", as the zeus format names it
  double runtime_s = 0;  // typical training time (for ordering against group runtimes)
};

// A trace's workload with its runtime: the default configuration's mean
// training time over the trace's runs (a miss trains max_epochs).
ClusterWorkload cluster_workload(const WorkloadTrace& trace);

struct ClusterJob {
  std::string_view group;  // valid while the reader lives
  std::size_t workload = 0;  // index into the reader's workloads
  double submit_s = 0, end_s = 0;  // wall time in the cluster
  double runtime_ratio = 1;        // scales the simulated training's time and energy
  std::size_t line = 0;
};

// 1-D k-means with a deterministic start (centroids at the quantiles
// (i + 0.5) / k of the sorted values). Returns each value's cluster, clusters
// numbered in order of their centroid (0: smallest). Empty clusters are kept.
std::vector<std::size_t> kmeans_1d(const std::vector<double>& values, std::size_t k);

class ClusterTraceReader {
 public:
  enum class Format { kZeus, kRaw };
  // Opens path ("-": stdin, zeus format only) and, for the raw format, reads
  // it once to map groups. Throws Error naming file, line and column.
  ClusterTraceReader(const std::string& path, std::vector<ClusterWorkload> workloads);

  // The next job in file order; false at the end. Throws Error naming file,
  // line and column for malformed values and for a submit time earlier than
  // the group's previous one.
  bool next(ClusterJob& job);

  Format format() const { return format_; }
  const std::vector<ClusterWorkload>& workloads() const { return workloads_; }
  // Raw format: groups mapped onto each workload, and the mean job duration
  // of its cluster.
  const std::vector<std::size_t>& groups_per_workload() const { return groups_per_workload_; }
  const std::vector<double>& mean_duration_s() const { return mean_duration_s_; }

 private:
  void map_raw_groups(const std::string& path);
  std::size_t workload_of_dataset(std::string_view dataset, std::size_t column) const;

  std::vector<ClusterWorkload> workloads_;
  std::unique_ptr<CsvStream> csv_;
  Format format_ = Format::kZeus;
  std::vector<std::size_t> columns_;  // per format, in the order documented above
  // Per group: its workload (raw), and the last submit time (the order check).
  struct GroupEntry {
    std::size_t workload = 0;
    double last_submit_s = -1e300;
  };
  std::unordered_map<std::string, GroupEntry> groups_;
  std::vector<std::size_t> groups_per_workload_;
  std::vector<double> mean_duration_s_;
};

// Writes a raw-format trace with the shape described in docs/simulation.md:
// heavy-tailed group sizes, periodic-with-jitter or bursty arrivals, log-normal
// runtimes per group. Deterministic per seed; rows in submit order.
struct ClusterTraceShape {
  std::size_t jobs = 20000;
  std::size_t groups = 500;
  double days = 60;
  uint64_t seed = 1;
  double group_size_alpha = 1.5;    // Pareto tail of group weights (smaller: heavier)
  double max_group_weight = 200;    // the Pareto law truncated here (the smallest weight is 1)
  double bursty_fraction = 0.3;     // groups that submit in bursts
  double median_runtime_s = 1800;   // median over groups of the group's median runtime
  double runtime_spread = 1.5;      // log-normal sigma of group medians
  double job_runtime_spread = 0.3;  // log-normal sigma of jobs around their group's median
};
// The shapes generate_cluster_trace() takes: jobs and groups from 1, days,
// the alpha and the median runtime positive, the weight from 1, the bursty
// fraction within [0, 1], spreads from 0, each up to its limit here (memory
// is per group, the rows are streamed). Anything else, NaN included, is a
// UsageError naming the field and its range, before a row is written.
struct ClusterTraceLimits {
  std::size_t max_jobs = 100'000'000;
  std::size_t max_groups = 1'000'000;
  double max_days = 36'500;  // a century
  double max_group_size_alpha = 100;
  double max_group_weight = 1e6;
  double max_median_runtime_s = 365 * 86'400.0;
  double max_runtime_spread = 5;  // e^5: a sigma of 150x already
};
inline constexpr ClusterTraceLimits kClusterTraceLimits{};
void generate_cluster_trace(const ClusterTraceShape& shape, std::ostream& out);

struct ClusterReplayOptions {
  double eta = 0.5;
  double beta = 2.0;
  uint64_t seed = 1;
  int max_retries = 20;  // a job missing its target is resubmitted at most this often
  std::vector<Policy> policies{Policy::kZeus, Policy::kGridSearch, Policy::kDefault};
};

// One training attempt of a job (the first, or a retry), as --out writes it.
struct ClusterAttempt {
  std::string_view group;  // valid during the sink's call
  std::size_t workload = 0;
  Policy policy = Policy::kZeus;
  std::size_t job = 0;  // 0-based, in trace order
  int attempt = 0;      // 0: the submission itself
  double start_s = 0, end_s = 0;  // wall time in the cluster
  double runtime_ratio = 1;
  Recurrence run;  // unscaled: the workload's trace run
  double time_s = 0, energy_j = 0;  // scaled by runtime_ratio
  double regret = 0;  // runtime_ratio x (cost, minus the optimal expected cost on attempt 0)
  bool gave_up = false;  // missed the target on the last attempt allowed
};

struct ClusterTotals {
  std::size_t jobs = 0, attempts = 0, gave_up = 0;
  double energy_j = 0, time_s = 0;  // scaled, all attempts
  double regret = 0;                // scaled cost units
  double regret_per_optimal = 0;    // sum of regret / optimal expected cost of the workload
};

struct ClusterReport {
  std::size_t jobs = 0, groups = 0, attempts = 0;
  std::size_t max_in_flight = 0;     // most jobs of one group (one policy) running at once
  std::size_t overlapped_jobs = 0;   // submitted before an earlier job of its group ended (trace times)
  std::vector<Policy> policies;
  std::vector<std::size_t> groups_per_workload;
  // [workload][policy index]
  std::vector<std::vector<ClusterTotals>> totals;
  ClusterTotals cluster(std::size_t policy_index) const;  // summed over workloads
};

using ClusterAttemptSink = std::function<void(const ClusterAttempt&)>;

// Replays every job of the reader. traces[i] is reader.workloads()[i]'s
// trace. Memory: groups plus jobs in flight, not jobs.
ClusterReport replay_cluster(ClusterTraceReader& reader, const std::vector<WorkloadTrace>& traces,
                             const ClusterReplayOptions& options, const ClusterAttemptSink& sink = {});

}  // namespace joule
