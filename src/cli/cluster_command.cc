// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule simulate --cluster TRACE` and `joule cluster-trace`.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "joule/common/output_file.h"
#include "joule/error.h"
#include "joule/simulate/cluster.h"

namespace joule::cli {

namespace {

void reject_single_job_options(const SimulateOptions& o) {
  const char* option = !o.seeds.empty()         ? "--seeds"
                       : o.window               ? "--window"
                       : o.recurrences != 0     ? "--recurrences"
                       : !o.dataset.empty()     ? "--dataset"
                       : !o.workloads.empty()   ? "--workload"
                       : o.synthetic            ? "--synthetic"
                       : !o.learned_on.empty()  ? "--learned-on"
                       : o.drift_after          ? "--drift-after"
                       : !o.html_path.empty()   ? "--html"
                                                : nullptr;
  if (option) {
    throw UsageError(fmt::format("{} is not used with --cluster (the trace decides workloads and recurrences; one "
                                 "--seed seeds every group)",
                                 option));
  }
  if (o.max_retries < 0) throw UsageError(fmt::format("--max-retries {} must not be negative", o.max_retries));
}

// All six workloads: the mapping needs every one of them.
// The traces are the bundled ones (--gpu) unless --train-trace/--power-trace
// name others.
std::vector<WorkloadTrace> load_six(const SimulateOptions& o) {
  const TracePaths paths = resolve_trace_paths(o);
  std::vector<WorkloadTrace> traces;
  for (const auto& spec : zeus_workloads()) {
    try {
      traces.push_back(load_workload(paths.train, paths.power, spec, {o.strict}));
    } catch (const Error& e) {
      throw Error(fmt::format("workload '{}' cannot be simulated, and cluster replay needs all six: {}", spec.name,
                              e.what()));
    }
  }
  return traces;
}

// Writes one CSV row per attempt through a buffer (millions of rows).
class AttemptCsv {
 public:
  AttemptCsv(const std::string& path, const std::vector<ClusterWorkload>& workloads)
      : file_(path), workloads_(workloads) {
    file_.stream() << "group,workload,policy,job,attempt,start_s,end_s,runtime_ratio,batch_size,power_limit_w,converged,"
            "stopped_early,gave_up,time_s,energy_j,cost,regret\n";
  }
  void write(const ClusterAttempt& a) {
    fmt::format_to(std::back_inserter(buffer_), "{},{},{},{},{},{:.1f},{:.1f},{:.4f},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f}\n",
                   a.group, workloads_[a.workload].name, to_string(a.policy), a.job, a.attempt, a.start_s, a.end_s,
                   a.runtime_ratio, a.run.batch_size, a.run.power_limit_w, a.run.converged ? 1 : 0,
                   a.run.stopped_early ? 1 : 0, a.gave_up ? 1 : 0, a.time_s, a.energy_j, a.run.cost * a.runtime_ratio,
                   a.regret);
    if (buffer_.size() > (1u << 20)) flush();
  }
  void close() {
    flush();
    file_.commit();
  }

 private:
  void flush() {
    file_.stream().write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }
  OutputFile file_;
  const std::vector<ClusterWorkload>& workloads_;
  fmt::memory_buffer buffer_;
};

void print_row(const std::string& label, std::size_t groups, Policy policy, const ClusterTotals& t,
               const ClusterTotals& dflt) {
  std::cout << fmt::format("{:<14} {:>7} {:>9} {:<8} {:>9} {:>8} {:>12.3f} {:>10.3f} {:>12.1f} {:>11.3f}\n", label,
                           groups, t.jobs, to_string(policy), t.attempts - t.jobs, t.gave_up,
                           dflt.energy_j > 0 ? t.energy_j / dflt.energy_j : 0.0,
                           dflt.time_s > 0 ? t.time_s / dflt.time_s : 0.0, t.regret_per_optimal,
                           t.jobs ? t.regret_per_optimal / static_cast<double>(t.jobs) : 0.0);
}

}  // namespace

int run_simulate_cluster(const SimulateOptions& o) {
  reject_single_job_options(o);
  ClusterReplayOptions options;
  options.eta = o.eta;
  options.beta = o.beta;
  options.seed = o.seed;
  options.max_retries = o.max_retries;
  if (o.policy != "all") {
    options.policies = {parse_policy(o.policy)};
    if (options.policies[0] != Policy::kDefault) options.policies.push_back(Policy::kDefault);  // the reference
  }
  const std::size_t dflt = static_cast<std::size_t>(
      std::find(options.policies.begin(), options.policies.end(), Policy::kDefault) - options.policies.begin());

  const std::vector<WorkloadTrace> traces = load_six(o);
  std::vector<ClusterWorkload> workloads;
  for (const auto& t : traces) workloads.push_back(cluster_workload(t));
  const auto start = std::chrono::steady_clock::now();
  ClusterTraceReader reader(o.cluster_trace, workloads);  // a missing trace fails before any note
  print_trace_notes(traces, o.verbose);
  std::optional<AttemptCsv> csv;
  if (!o.out_path.empty()) csv.emplace(o.out_path, workloads);
  const ClusterReport report =
      replay_cluster(reader, traces, options, csv ? ClusterAttemptSink([&](const ClusterAttempt& a) { csv->write(a); })
                                                  : ClusterAttemptSink());
  if (csv) csv->close();
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const bool raw = reader.format() == ClusterTraceReader::Format::kRaw;
  std::cout << fmt::format("joule simulate --cluster {}: {}, eta {}, beta {}, seed {}, at most {} retries per job\n",
                           o.cluster_trace,
                           raw ? "raw format (groups mapped onto workloads by k-means on mean runtime)"
                               : "zeus group format",
                           o.eta, o.beta, o.seed, o.max_retries);
  std::cout << fmt::format("{} jobs in {} groups; {} submitted before an earlier job of their group ended; at most {} "
                           "jobs of one group in flight\n",
                           report.jobs, report.groups, report.overlapped_jobs, report.max_in_flight);
  std::cout << fmt::format("{:<14} {:>7} {:>9} {:<8} {:>9} {:>8} {:>12} {:>10} {:>12} {:>11}\n", "workload", "groups",
                           "jobs", "policy", "retries", "gave up", "energy/dflt", "time/dflt", "regret/opt",
                           "regret/job");
  for (std::size_t w = 0; w < workloads.size(); ++w) {
    if (report.groups_per_workload[w] == 0) continue;
    for (std::size_t p = 0; p < options.policies.size(); ++p) {
      print_row(workloads[w].name, report.groups_per_workload[w], options.policies[p], report.totals[w][p],
                report.totals[w][dflt]);
    }
  }
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    print_row("cluster", report.groups, options.policies[p], report.cluster(p), report.cluster(dflt));
  }
  if (raw) {
    std::cout << "mapping: ";
    for (std::size_t w = 0; w < workloads.size(); ++w) {
      std::cout << fmt::format("{}{} {} groups (mean job {:.0f} s)", w ? ", " : "", workloads[w].name,
                               reader.groups_per_workload()[w], reader.mean_duration_s()[w]);
    }
    std::cout << '\n';
  }
  std::cout << "energy/dflt, time/dflt: training energy and time of every attempt (retries included, scaled by the "
               "job's runtime ratio) relative to Default; regret/opt: cumulative regret in units of the workload's "
               "optimal recurrence cost (regret/job: per job).\n";
  std::cout << fmt::format("replayed {} recurrences ({} policies, retries included) in {:.2f} s: {:.0f} recurrences/s\n",
                           report.attempts, options.policies.size(), elapsed_s,
                           elapsed_s > 0 ? static_cast<double>(report.attempts) / elapsed_s : 0.0);
  return 0;
}

int run_cluster_trace(const ClusterTraceOptions& o) {
  const ClusterTraceShape& shape = o.shape;
  if (o.out_path == "-") {
    generate_cluster_trace(shape, std::cout);
    std::cout.flush();
    return std::cout ? 0 : 1;
  }
  OutputFile out(o.out_path);
  generate_cluster_trace(shape, out.stream());
  out.commit();
  return 0;
}

}  // namespace joule::cli
