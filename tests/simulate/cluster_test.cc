// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/cluster.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "common/test_support.h"
#include "joule/error.h"
#include "simulate/toy_trace.h"

namespace joule {
namespace {

// The shared toy (simulate/toy_trace.h) under a dataset name of its own, as
// the zeus group format names datasets, not workloads.
WorkloadTrace toy() { return testing::toy_trace("toy-data"); }

struct Replayed {
  ClusterReport report;
  std::vector<ClusterAttempt> attempts;  // in delivery order; .group dangles after the replay
  std::vector<std::string> groups;       // ... so the group of each attempt is kept here
};

Replayed replay(const std::string& csv, const std::vector<WorkloadTrace>& traces, ClusterReplayOptions options) {
  testing::TempDir dir;
  const std::string path = dir.file("trace.csv");
  testing::write_file(path, csv);
  std::vector<ClusterWorkload> workloads;
  for (const auto& t : traces) workloads.push_back(cluster_workload(t));
  ClusterTraceReader reader(path, workloads);
  Replayed r;
  r.report = replay_cluster(reader, traces, options, [&](const ClusterAttempt& a) {
    r.attempts.push_back(a);
    r.groups.emplace_back(a.group);
  });
  return r;
}

ClusterReplayOptions only(Policy policy) {
  ClusterReplayOptions o;
  o.policies = {policy};
  return o;
}

// Group A: jobs 0-2 overlap; job 3 comes after jobs 2 and 0 ended, while
// job 1 still runs.
const std::string kOverlapping =
    "group,start_time,end_time,dataset,runtime_ratio\n"
    "A,0,100,toy-data,1\n"
    "A,50,120,toy-data,2\n"
    "A,60,70,toy-data,0.5\n"
    "A,110,130,toy-data,1\n";

TEST(ClusterTest, ObservationsArriveInEndTimeOrderAndEnergySumsByHand) {
  const Replayed r = replay(kOverlapping, {toy()}, only(Policy::kDefault));
  std::vector<std::size_t> order;
  for (const auto& a : r.attempts) order.push_back(a.job);
  EXPECT_EQ(order, (std::vector<std::size_t>{2, 0, 1, 3}));
  // Default: b=64 at 200 W, 8 epochs x 10 s, 190 W: 80 s and 15200 J per
  // run, scaled by the runtime ratios 1 + 2 + 0.5 + 1.
  const ClusterTotals& t = r.report.totals[0][0];
  EXPECT_EQ(t.jobs, 4u);
  EXPECT_EQ(t.attempts, 4u);
  EXPECT_DOUBLE_EQ(t.time_s, 80.0 * 4.5);
  EXPECT_DOUBLE_EQ(t.energy_j, 15200.0 * 4.5);
  // Cost 8 x 1950 against the optimum 8 x 1770 (b=64 at 100 W).
  EXPECT_NEAR(t.regret_per_optimal, 4.5 * (8 * 1950.0 - 8 * 1770.0) / (8 * 1770.0), 1e-12);
  EXPECT_EQ(r.report.overlapped_jobs, 3u);  // jobs 1, 2 and 3 (job 0 ended before job 3, but job 1 runs)
  EXPECT_EQ(r.report.max_in_flight, 3u);
}

TEST(ClusterTest, OverlappingZeusJobsGetTheBestKnownSizeUntilTheExplorationReturns) {
  const Replayed r = replay(kOverlapping, {toy()}, only(Policy::kZeus));
  std::map<std::size_t, int> batch;
  for (const auto& a : r.attempts) batch[a.job] = a.run.batch_size;
  // Job 0 explores the default 64; jobs 1 and 2 arrive while it runs and get
  // the best known size (still 64). Job 2's end (64 converged) moves the
  // pruning walk down, so job 3 explores 32.
  EXPECT_EQ(batch[0], 64);
  EXPECT_EQ(batch[1], 64);
  EXPECT_EQ(batch[2], 64);
  EXPECT_EQ(batch[3], 32);
  for (const auto& a : r.attempts) EXPECT_DOUBLE_EQ(a.run.power_limit_w, 100);  // the toy's best limit
}

TEST(ClusterTest, OverlappingGridJobsDoNotTakeFurtherExplorations) {
  const Replayed r = replay(kOverlapping, {toy()}, only(Policy::kGridSearch));
  std::map<std::size_t, std::pair<int, double>> config;
  for (const auto& a : r.attempts) config[a.job] = {a.run.batch_size, a.run.power_limit_w};
  // One exploration at a time: 64 at 200 W for job 0; jobs 1 and 2 get the
  // default (nothing converged yet); after job 2's outcome the walk moves
  // to 64 at 100 W, which job 3 gets.
  EXPECT_EQ(config[0], (std::pair<int, double>{64, 200}));
  EXPECT_EQ(config[1], (std::pair<int, double>{64, 200}));
  EXPECT_EQ(config[2], (std::pair<int, double>{64, 200}));
  EXPECT_EQ(config[3], (std::pair<int, double>{64, 100}));
}

TEST(ClusterTest, MissesAreRetriedAtTheirEndForTheSameDurationUpToTheBound) {
  WorkloadTrace t = toy();
  t.default_batch_size = 16;  // never converges
  t.spec.default_batch_size = 16;
  ClusterReplayOptions options = only(Policy::kDefault);
  options.max_retries = 2;
  const Replayed r = replay("group,start_time,end_time,dataset,runtime_ratio\nA,10,110,toy-data,1\n", {t}, options);
  ASSERT_EQ(r.attempts.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.attempts[i].attempt, i);
    EXPECT_DOUBLE_EQ(r.attempts[i].start_s, 10 + 100.0 * i);
    EXPECT_DOUBLE_EQ(r.attempts[i].end_s, 110 + 100.0 * i);
    EXPECT_FALSE(r.attempts[i].run.converged);
    EXPECT_DOUBLE_EQ(r.attempts[i].time_s, 40 * 10.0);  // a miss trains max_epochs
    EXPECT_EQ(r.attempts[i].gave_up, i == 2);
  }
  EXPECT_EQ(r.report.totals[0][0].gave_up, 1u);
  EXPECT_EQ(r.report.totals[0][0].attempts, 3u);
}

TEST(ClusterTest, RetriesThatEndBeforeTheNextSubmissionAreDeliveredFirst) {
  WorkloadTrace t = toy();
  t.default_batch_size = 16;  // never converges
  t.spec.default_batch_size = 16;
  ClusterReplayOptions options = only(Policy::kDefault);
  options.max_retries = 3;
  const Replayed r = replay("group,start_time,end_time,dataset,runtime_ratio\nA,0,10,toy-data,1\nA,25,35,toy-data,1\n",
                            {t}, options);
  // Job 0's first retry (10-20) ends before job 1 comes at 25; its second
  // (20-30) does not. Afterwards everything in end-time order.
  std::vector<std::pair<std::size_t, int>> order;
  for (const auto& a : r.attempts) order.emplace_back(a.job, a.attempt);
  EXPECT_EQ(order, (std::vector<std::pair<std::size_t, int>>{
                       {0, 0}, {0, 1}, {0, 2}, {1, 0}, {0, 3}, {1, 1}, {1, 2}, {1, 3}}));
  EXPECT_EQ(r.report.totals[0][0].gave_up, 2u);
  EXPECT_EQ(r.report.max_in_flight, 2u);
}

TEST(ClusterTest, KmeansSeparatesObviousClustersInOrderOfValue) {
  EXPECT_EQ(kmeans_1d({100, 1, 10.5, 1.1, 101, 10}, 3), (std::vector<std::size_t>{2, 0, 1, 0, 2, 1}));
  EXPECT_EQ(kmeans_1d({5}, 6), (std::vector<std::size_t>{0}));
  EXPECT_TRUE(kmeans_1d({}, 6).empty());
}

TEST(ClusterTest, RawGroupsAreMappedOntoWorkloadsInOrderOfRuntime) {
  // Six workloads whose runtimes are out of order, twelve groups in six
  // obvious runtime clusters (two groups each).
  std::vector<WorkloadTrace> traces;
  const std::vector<int> epochs_rank = {3, 1, 5, 2, 6, 4};  // workload i's runtime rank
  for (std::size_t i = 0; i < 6; ++i) {
    WorkloadTrace t = toy();
    t.spec.name = "w" + std::to_string(i);
    t.spec.dataset = "d" + std::to_string(i);
    for (int b : t.batch_sizes) {
      for (auto& e : t.epochs[b]) {
        if (e) *e *= epochs_rank[i];
      }
    }
    traces.push_back(t);
  }
  std::string csv = "job_id,group,submit_s,duration_s\n";
  const std::vector<double> cluster_s = {10, 100, 1000, 10000, 100000, 1000000};
  int id = 0;
  for (std::size_t c = 0; c < 6; ++c) {
    for (const char* g : {"x", "y"}) {
      // Group y's jobs run 20% longer than x's; both have two jobs.
      const double d = cluster_s[c] * (g[0] == 'y' ? 1.2 : 1.0);
      for (int k = 0; k < 2; ++k) csv += fmt::format("{},{}{},{},{}\n", id++, g, c, k * 5, d);
    }
  }
  ClusterReplayOptions options = only(Policy::kDefault);
  const Replayed r = replay(csv, traces, options);
  // Cluster c (c-th shortest) goes to the workload of runtime rank c + 1.
  std::map<std::string, std::size_t> workload_of;
  for (std::size_t i = 0; i < r.attempts.size(); ++i) workload_of[r.groups[i]] = r.attempts[i].workload;
  for (std::size_t c = 0; c < 6; ++c) {
    const auto w = static_cast<std::size_t>(
        std::find(epochs_rank.begin(), epochs_rank.end(), static_cast<int>(c) + 1) - epochs_rank.begin());
    EXPECT_EQ(workload_of["x" + std::to_string(c)], w) << c;
    EXPECT_EQ(workload_of["y" + std::to_string(c)], w) << c;
    EXPECT_EQ(r.report.groups_per_workload[w], 2u);
  }
  // runtime_ratio: duration over the cluster's mean job duration (1.1 x).
  for (std::size_t i = 0; i < r.attempts.size(); ++i) {
    EXPECT_NEAR(r.attempts[i].runtime_ratio, r.groups[i][0] == 'y' ? 1.2 / 1.1 : 1.0 / 1.1, 1e-12) << r.groups[i];
  }
}

TEST(ClusterTest, ZeusGroupFormatNamesDatasetsAsTheZeusRepositoryDoes) {
  std::vector<WorkloadTrace> traces;
  for (const auto& spec : zeus_workloads()) {
    WorkloadTrace t = toy();
    t.spec = spec;
    t.spec.default_batch_size = 64;
    traces.push_back(t);
  }
  const Replayed r = replay(
      "group,start_time,end_time,dataset,runtime_ratio\n"
      "0001086788b7de0f13804d22a12a27db,0,600,movielens-1m,0.5\n"
      "feed,10,20,cifar100,2\n",
      traces, only(Policy::kDefault));
  ASSERT_EQ(r.attempts.size(), 2u);
  std::map<std::string, ClusterAttempt> by_group;
  for (std::size_t i = 0; i < r.attempts.size(); ++i) by_group[r.groups[i]] = r.attempts[i];
  EXPECT_EQ(zeus_workloads()[by_group["0001086788b7de0f13804d22a12a27db"].workload].name, "movielens");
  EXPECT_EQ(zeus_workloads()[by_group["feed"].workload].name, "cifar100");
  EXPECT_DOUBLE_EQ(by_group["0001086788b7de0f13804d22a12a27db"].runtime_ratio, 0.5);
  EXPECT_DOUBLE_EQ(by_group["feed"].end_s, 20);
}

std::string reader_error(const std::string& csv, std::vector<ClusterWorkload> workloads = {cluster_workload(toy())}) {
  testing::TempDir dir;
  const std::string path = dir.file("t.csv");
  testing::write_file(path, csv);
  try {
    ClusterTraceReader reader(path, workloads);
    ClusterJob job;
    while (reader.next(job)) {
    }
  } catch (const Error& e) {
    const std::string message = e.what();
    return message.substr(message.find("t.csv"));
  }
  return "no error";
}

TEST(ClusterTest, ReaderErrorsNameFileLineAndColumn) {
  EXPECT_EQ(reader_error("group,submit_s\nA,1\n").rfind("t.csv:1: not a cluster trace", 0), 0u)
      << reader_error("group,submit_s\nA,1\n");
  EXPECT_NE(reader_error("group,submit_s\nA,1\n").find("missing: duration_s"), std::string::npos);
  EXPECT_EQ(reader_error("job_id,group,submit_s,duration_s\n0,A,1,5\n1,A,x,5\n"),
            "t.csv:3: column 'submit_s' (column 3): 'x' is not a number");
  const std::string backwards = reader_error("job_id,group,submit_s,duration_s\n0,A,10,5\n1,B,3,5\n2,A,9,5\n");
  EXPECT_EQ(backwards.rfind("t.csv:4: column 'submit_s' (column 3): submit time 9 is earlier", 0), 0u) << backwards;
  EXPECT_NE(backwards.find("must not decrease within a group"), std::string::npos);
  const std::string unknown = reader_error("group,start_time,end_time,dataset,runtime_ratio\nA,0,1,toy-data,1\nB,0,1,mnist,1\n");
  EXPECT_EQ(unknown.rfind("t.csv:3: column 'dataset' (column 4): unknown dataset 'mnist'", 0), 0u) << unknown;
  EXPECT_EQ(reader_error("group,start_time,end_time,dataset,runtime_ratio\nA,5,1,toy-data,1\n"),
            "t.csv:2: column 'end_time' (column 3): end time 1 is before the start time 5");
  EXPECT_EQ(reader_error("group,start_time,end_time,dataset,runtime_ratio\nA,0,1,toy-data,1\nA,2,3,other,1\n",
                         {cluster_workload(toy()), {"other", "other-data", 10}}),
            "t.csv:3: column 'dataset' (column 4): group 'A' was 'toy-data' before; a group is one workload");
  EXPECT_EQ(reader_error("group,start_time,end_time,dataset,runtime_ratio\nA,0,1,toy-data,0\n"),
            "t.csv:2: column 'runtime_ratio' (column 5): must be positive");
  EXPECT_EQ(reader_error("job_id,group,submit_s,duration_s\n0,A,1,-5\n"),
            "t.csv:2: column 'duration_s' (column 4): must not be negative");
}

TEST(ClusterTest, GeneratorIsDeterministicPerSeed) {
  ClusterTraceShape shape;
  shape.jobs = 3000;
  shape.groups = 60;
  shape.days = 7;
  std::ostringstream a, b, c;
  generate_cluster_trace(shape, a);
  generate_cluster_trace(shape, b);
  shape.seed = 2;
  generate_cluster_trace(shape, c);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_NE(a.str(), c.str());
}

TEST(ClusterTest, GeneratedTraceHasTheDocumentedShape) {
  ClusterTraceShape shape;
  shape.jobs = 20000;
  shape.groups = 200;
  shape.days = 30;
  std::ostringstream out;
  generate_cluster_trace(shape, out);
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line, "job_id,group,submit_s,duration_s");
  std::map<std::string, std::size_t> size;
  std::map<std::string, double> latest_end_s;
  std::size_t jobs = 0, overlapped = 0;
  double previous_s = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, group, submit, duration;
    std::getline(fields, id, ',');
    std::getline(fields, group, ',');
    std::getline(fields, submit, ',');
    std::getline(fields, duration, ',');
    const double submit_s = std::stod(submit), duration_s = std::stod(duration);
    EXPECT_EQ(std::stoul(id), jobs);
    EXPECT_GE(submit_s, previous_s);  // rows in submit order
    EXPECT_LE(submit_s, 30 * 86400.0);
    EXPECT_GT(duration_s, 0);
    previous_s = submit_s;
    if (latest_end_s.count(group) && submit_s < latest_end_s[group]) ++overlapped;
    latest_end_s[group] = std::max(latest_end_s[group], submit_s + duration_s);
    ++size[group];
    ++jobs;
  }
  EXPECT_EQ(jobs, 20000u);
  EXPECT_EQ(size.size(), 200u);
  std::vector<std::size_t> sizes;
  for (const auto& [g, n] : size) sizes.push_back(n);
  std::sort(sizes.begin(), sizes.end());
  // A heavy tail: the largest group is many times the median one.
  EXPECT_GT(sizes.back(), 10 * sizes[sizes.size() / 2]);
  // Some recurrences overlap, most do not.
  EXPECT_GT(overlapped, jobs / 50);
  EXPECT_LT(overlapped, jobs / 2);
}

TEST(ClusterTest, ReplayIsDeterministicAndStreamsAGeneratedTrace) {
  ClusterTraceShape shape;
  shape.jobs = 5000;
  shape.groups = 50;
  shape.days = 10;
  std::ostringstream out;
  generate_cluster_trace(shape, out);
  std::vector<WorkloadTrace> traces(6, toy());
  for (std::size_t i = 0; i < 6; ++i) {
    traces[i].spec.name = "w" + std::to_string(i);
    traces[i].spec.dataset = "d" + std::to_string(i);
  }
  const Replayed first = replay(out.str(), traces, {});
  const Replayed second = replay(out.str(), traces, {});
  ASSERT_EQ(first.attempts.size(), second.attempts.size());
  EXPECT_EQ(first.report.jobs, 5000u);
  EXPECT_EQ(first.report.groups, 50u);
  for (std::size_t p = 0; p < 3; ++p) {
    EXPECT_EQ(first.report.cluster(p).jobs, 5000u);
    EXPECT_DOUBLE_EQ(first.report.cluster(p).energy_j, second.report.cluster(p).energy_j);
  }
  // Zeus learns the toy's optimum: less energy than Default over the trace.
  EXPECT_LT(first.report.cluster(0).energy_j, first.report.cluster(2).energy_j);
}

}  // namespace
}  // namespace joule
