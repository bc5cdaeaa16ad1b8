// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule simulate --cluster` and `joule cluster-trace` end to end.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;

const std::string kExample = std::string(JOULE_SOURCE_DIR) + "/data/cluster/example_groups.csv";

// The bundled V100 traces, named as a user would.
std::vector<std::string> cluster_args(const std::string& trace) {
  return {JOULE_BINARY, "simulate", "--cluster", trace, "--gpu", "v100"};
}

// The energy/dflt column of the cluster-wide row of a policy.
double cluster_energy_ratio(const std::string& out, const std::string& policy) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string label, groups, jobs, name, retries, gave_up;
    double energy = 0;
    fields >> label >> groups >> jobs >> name >> retries >> gave_up >> energy;
    if (label == "cluster" && name == policy && fields) return energy;
  }
  return -1;
}

TEST(ClusterCliTest, ReplaysTheShippedExampleTrace) {
  testing::TempDir tmp;
  auto args = cluster_args(kExample);
  args.insert(args.end(), {"--out", tmp.file("jobs.csv")});
  const auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("raw format (groups mapped onto workloads by k-means"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5000 jobs in 100 groups"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recurrences/s"), std::string::npos);
  EXPECT_DOUBLE_EQ(cluster_energy_ratio(r.out, "default"), 1.0);
  const double zeus = cluster_energy_ratio(r.out, "zeus");
  EXPECT_GT(zeus, 0.0) << r.out;
  EXPECT_LT(zeus, 1.0) << r.out;
  const auto lines = testing::read_lines(tmp.file("jobs.csv"));
  // One row per attempt: every job under three policies, plus retries.
  EXPECT_GE(lines.size(), 1u + 3u * 5000u);
  EXPECT_EQ(lines[0],
            "group,workload,policy,job,attempt,start_s,end_s,runtime_ratio,batch_size,power_limit_w,converged,"
            "stopped_early,gave_up,time_s,energy_j,cost,regret");
}

TEST(ClusterCliTest, ReadsTheZeusGroupFormatFromStdin) {
  testing::TempDir tmp;
  testing::write_file(tmp.file("groups.csv"),
                      "group,start_time,end_time,dataset,runtime_ratio\n"
                      "a1,0,3600,cifar100,1.0\n"
                      "a1,1800,5400,cifar100,0.8\n"
                      "b2,100,900,movielens-1m,1.2\n");
  std::string command;
  for (const auto& arg : cluster_args("-")) command += "'" + arg + "' ";
  const auto r = run_process({"/bin/sh", "-c", fmt::format("cat '{}' | {}", tmp.file("groups.csv"), command)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("zeus group format"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 jobs in 2 groups; 1 submitted before an earlier job of their group ended"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cifar100"), std::string::npos);
  EXPECT_NE(r.out.find("movielens"), std::string::npos);
}

TEST(ClusterCliTest, RawFormatFromStdinIsAClearError) {
  std::string command;
  for (const auto& arg : cluster_args("-")) command += "'" + arg + "' ";
  const auto r = run_process({"/bin/sh", "-c", fmt::format("cat '{}' | {}", kExample, command)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot be read from stdin; write it to a file first"), std::string::npos) << r.err;
}

TEST(ClusterCliTest, BadTraceIsNamedWithFileAndLine) {
  testing::TempDir tmp;
  testing::write_file(tmp.file("t.csv"), "job_id,group,submit_s,duration_s\n0,g,5,10\n1,g,4,10\n");
  const auto r = run_process(cluster_args(tmp.file("t.csv")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(tmp.file("t.csv") + ":3: column 'submit_s'"), std::string::npos) << r.err;
}

TEST(ClusterCliTest, OptionsOfOtherModesAreRefused) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--seeds", "1..3"}, {"--learned-on", "a40"}, {"--drift-after", "5"},
        {"--html", "x.html"}, {"--synthetic"}}) {
    auto args = cluster_args(kExample);
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_process(args);
    EXPECT_EQ(r.exit_code, 2) << extra.front();
    EXPECT_NE(r.err.find(extra.front() + " "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--cluster"), std::string::npos) << r.err;
  }
}

TEST(ClusterCliTest, GeneratorWritesOneTracePerSeed) {
  testing::TempDir tmp;
  const auto a = run_process({JOULE_BINARY, "cluster-trace", "--jobs", "800", "--groups", "20", "--days", "3"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = run_process({JOULE_BINARY, "cluster-trace", "--jobs", "800", "--groups", "20", "--days", "3",
                              "--out", tmp.file("t.csv")});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, testing::read_file(tmp.file("t.csv")));
  EXPECT_EQ(testing::read_lines(tmp.file("t.csv")).size(), 801u);
  const auto c = run_process({JOULE_BINARY, "cluster-trace", "--jobs", "800", "--groups", "20", "--days", "3",
                              "--seed", "2"});
  EXPECT_NE(a.out, c.out);
  const auto bad = run_process({JOULE_BINARY, "cluster-trace", "--jobs", "0"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace joule
