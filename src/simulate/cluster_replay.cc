// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Event-driven cluster replay. Groups are independent (one optimizer each),
// so there is no global clock: each group keeps, per policy, its jobs in
// flight in a min-heap by end time, and a submission first delivers the
// outcomes of the group's jobs that ended by then (ties: an end at the
// submit time comes first), in end-time order. A job that misses its target
// is resubmitted when it ends, for the same wall duration, at most
// max_retries times. Wall times only order events; the training's time and
// energy are the trace run's, scaled by the job's runtime ratio.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>

#include "joule/error.h"
#include "joule/simulate/cluster.h"
#include "simulate/cluster_random.h"
#include "simulate/policy_driver.h"

namespace joule {

ClusterWorkload cluster_workload(const WorkloadTrace& trace) {
  const int b = trace.default_batch_size;
  const double epoch_s = trace.power.at(b).back().time_per_epoch_s;  // at the largest limit, as Default runs
  const auto& runs = trace.epochs.at(b);
  double epochs = 0;
  for (const auto& e : runs) epochs += e ? *e : trace.max_epochs;
  return {trace.spec.name, trace.spec.dataset, epochs / static_cast<double>(runs.size()) * epoch_s};
}

ClusterTotals ClusterReport::cluster(std::size_t policy_index) const {
  ClusterTotals sum;
  for (const auto& per_policy : totals) {
    const ClusterTotals& t = per_policy[policy_index];
    sum.jobs += t.jobs;
    sum.attempts += t.attempts;
    sum.gave_up += t.gave_up;
    sum.energy_j += t.energy_j;
    sum.time_s += t.time_s;
    sum.regret += t.regret;
    sum.regret_per_optimal += t.regret_per_optimal;
  }
  return sum;
}

namespace {

using simulate_internal::PolicyDriver;

struct InFlight {
  double end_s = 0;
  uint64_t order = 0;  // submission order within the lane: ties end in it
  double start_s = 0;
  std::size_t job = 0;
  int attempt = 0;
  double runtime_ratio = 1;
  Recurrence run;
};

struct EndsLater {
  bool operator()(const InFlight& a, const InFlight& b) const {
    return a.end_s != b.end_s ? a.end_s > b.end_s : a.order > b.order;
  }
};

// One policy's view of one group.
struct Lane {
  std::unique_ptr<PolicyDriver> driver;
  std::priority_queue<InFlight, std::vector<InFlight>, EndsLater> in_flight;
  uint64_t submitted = 0;  // also the index of the run draw: policies see the same luck
};

struct Group {
  std::string id;
  std::size_t workload = 0;
  uint64_t seed = 0;
  double latest_end_s = -std::numeric_limits<double>::infinity();  // of its trace jobs
  std::vector<Lane> lanes;  // per policy
};

class Replay {
 public:
  Replay(const std::vector<WorkloadTrace>& traces, const ClusterReplayOptions& options, const ClusterAttemptSink& sink)
      : traces_(traces), options_(options), sink_(sink) {
    for (const auto& t : traces) optimal_.push_back(optimal_config(t, options.eta));
    report_.policies = options.policies;
    report_.totals.assign(traces.size(), std::vector<ClusterTotals>(options.policies.size()));
    report_.groups_per_workload.assign(traces.size(), 0);
  }

  void submit(const ClusterJob& job) {
    Group& group = find_or_add(job);
    if (job.submit_s < group.latest_end_s) ++report_.overlapped_jobs;
    group.latest_end_s = std::max(group.latest_end_s, job.end_s);
    for (std::size_t p = 0; p < group.lanes.size(); ++p) {
      deliver_until(group, p, job.submit_s);
      launch(group, p, report_.jobs, 0, job.submit_s, job.end_s, job.runtime_ratio);
      ++report_.totals[group.workload][p].jobs;
    }
    ++report_.jobs;
  }

  ClusterReport finish() {
    for (auto& group : groups_) {
      for (std::size_t p = 0; p < group.lanes.size(); ++p) {
        deliver_until(group, p, std::numeric_limits<double>::infinity());
      }
    }
    report_.groups = groups_.size();
    return std::move(report_);
  }

 private:
  Group& find_or_add(const ClusterJob& job) {
    const auto [it, added] = index_.try_emplace(std::string(job.group), groups_.size());
    if (!added) return groups_[it->second];
    Group& group = groups_.emplace_back();
    group.id = it->first;
    group.workload = job.workload;
    ++report_.groups_per_workload[job.workload];
    group.seed = SplitMix64::mix(options_.seed ^ fnv1a(group.id));
    SimulationOptions driver_options;
    driver_options.eta = options_.eta;
    driver_options.beta = options_.beta;
    driver_options.seed = group.seed;
    for (Policy policy : options_.policies) {
      group.lanes.push_back({simulate_internal::make_policy_driver(traces_[job.workload], policy, driver_options), {}, 0});
    }
    return group;
  }

  void launch(Group& group, std::size_t p, std::size_t job, int attempt, double start_s, double end_s, double ratio) {
    Lane& lane = group.lanes[p];
    const WorkloadTrace& trace = traces_[group.workload];
    const auto [b, limit_w] = lane.driver->choose();
    const std::size_t runs = trace.epochs.at(b).size();
    // The run of the n-th submission is a function of (group, n) alone.
    const uint64_t draw = SplitMix64::mix(group.seed + 0x9E3779B97F4A7C15ull * (lane.submitted + 1));
    const auto run = static_cast<std::size_t>(draw % runs);  // runs is small: the bias is ~runs / 2^64
    InFlight x{end_s, lane.submitted++, start_s, job, attempt, ratio,
               simulate_internal::run_recurrence(trace, b, limit_w, run, lane.driver->early_stop_threshold(),
                                                 options_.eta)};
    lane.in_flight.push(x);
    report_.max_in_flight = std::max(report_.max_in_flight, lane.in_flight.size());
  }

  // Delivers, in end-time order, the outcomes of the lane's jobs that ended
  // by t, resubmitting misses (a retry may itself end by t).
  void deliver_until(Group& group, std::size_t p, double t) {
    Lane& lane = group.lanes[p];
    while (!lane.in_flight.empty() && lane.in_flight.top().end_s <= t) {
      const InFlight x = lane.in_flight.top();
      lane.in_flight.pop();
      lane.driver->observe(x.run);
      const bool retry = !x.run.converged && x.attempt < options_.max_retries;
      record(group, p, x, !x.run.converged && !retry);
      if (retry) launch(group, p, x.job, x.attempt + 1, x.end_s, x.end_s + (x.end_s - x.start_s), x.runtime_ratio);
    }
  }

  void record(const Group& group, std::size_t p, const InFlight& x, bool gave_up) {
    const double optimal = optimal_[group.workload].expected_cost;
    ClusterAttempt a;
    a.group = group.id;
    a.workload = group.workload;
    a.policy = options_.policies[p];
    a.job = x.job;
    a.attempt = x.attempt;
    a.start_s = x.start_s;
    a.end_s = x.end_s;
    a.runtime_ratio = x.runtime_ratio;
    a.run = x.run;
    a.time_s = x.run.time_s * x.runtime_ratio;
    a.energy_j = x.run.energy_j * x.runtime_ratio;
    // The optimal configuration reaches the target in one attempt (its every
    // run does): a job's regret is all its attempts' costs minus one optimal.
    a.regret = x.runtime_ratio * (x.run.cost - (x.attempt == 0 ? optimal : 0.0));
    a.gave_up = gave_up;
    ClusterTotals& t = report_.totals[group.workload][p];
    ++t.attempts;
    t.gave_up += gave_up ? 1 : 0;
    t.energy_j += a.energy_j;
    t.time_s += a.time_s;
    t.regret += a.regret;
    t.regret_per_optimal += a.regret / optimal;
    ++report_.attempts;
    if (sink_) sink_(a);
  }

  const std::vector<WorkloadTrace>& traces_;
  const ClusterReplayOptions& options_;
  const ClusterAttemptSink& sink_;
  std::vector<OptimalConfig> optimal_;
  std::vector<Group> groups_;  // in order of first appearance: the end of the replay is deterministic
  std::unordered_map<std::string, std::size_t> index_;
  ClusterReport report_;
};

}  // namespace

ClusterReport replay_cluster(ClusterTraceReader& reader, const std::vector<WorkloadTrace>& traces,
                             const ClusterReplayOptions& options, const ClusterAttemptSink& sink) {
  check_eta(options.eta);
  if (!(options.beta > 1.0)) throw UsageError(fmt::format("beta {} must be greater than 1", options.beta));
  if (options.max_retries < 0) throw UsageError("the retry bound must not be negative");
  if (options.policies.empty()) throw UsageError("cluster replay: no policy");
  if (traces.size() != reader.workloads().size()) {
    throw Error(fmt::format("cluster replay: {} traces for {} workloads", traces.size(), reader.workloads().size()));
  }
  Replay replay(traces, options, sink);
  ClusterJob job;
  while (reader.next(job)) replay.submit(job);
  return replay.finish();
}

}  // namespace joule
