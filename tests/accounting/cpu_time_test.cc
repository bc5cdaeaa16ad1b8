// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A job's share of the node's CPU time, from fixture /proc and cgroup trees:
// its cgroup's where its processes' cgroup names the job, else its
// processes'; never more than the node used, never negative.
#include "joule/accounting/cpu_time.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::TempDir;

struct Trees {
  TempDir proc, cgroups;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));

  void node_busy_s(double busy_s) {
    // user nice system idle iowait irq softirq steal: busy split over user and system.
    testing::write_file(proc.file("stat"), fmt::format("cpu  {} 0 {} 99999 0 0 0 0 0 0\ncpu0 1 2 3 4\n",
                                                       std::llround(busy_s * ticks / 2), std::llround(busy_s * ticks / 2)));
  }
  void process(uint32_t pid, const std::string& cgroup, double cpu_s) {
    const std::string dir = proc.file(std::to_string(pid));
    std::filesystem::create_directories(dir);
    testing::write_file(dir + "/cgroup", cgroup);
    // The command name may hold spaces and parentheses.
    testing::write_file(dir + "/stat", fmt::format("{} (python (x) y) S 1 1 1 0 -1 0 0 0 0 0 {} {} 0 0 20 0 1 0\n", pid,
                                                   std::llround(cpu_s * ticks / 2), std::llround(cpu_s * ticks / 2)));
  }
  void cgroup_usage_s(const std::string& dir, double usage_s) {
    std::filesystem::create_directories(cgroups.file(dir.substr(1)));
    testing::write_file(cgroups.file(dir.substr(1)) + "/cpu.stat",
                        fmt::format("usage_usec {}\nuser_usec 1\nsystem_usec 1\n", std::llround(usage_s * 1e6)));
  }
};

TEST(CpuTimeTest, FindsAJobsCgroupInTheUnifiedHierarchyOnly) {
  Trees t;
  t.process(10, "0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0\n", 0);
  t.process(11, "12:cpu:/slurm/uid_0/job_78/step_0\n", 0);  // cgroup v1
  t.process(12, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/cri-containerd-1.scope\n", 0);
  t.process(13, "0::/user.slice/user-0.slice/session-1.scope\n", 0);
  EXPECT_EQ(job_cgroup_of(10, t.proc.path()), "/system.slice/slurmstepd.scope/job_77");
  EXPECT_FALSE(job_cgroup_of(11, t.proc.path()));
  EXPECT_EQ(job_cgroup_of(12, t.proc.path()),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice");
  EXPECT_FALSE(job_cgroup_of(13, t.proc.path()));
  EXPECT_FALSE(job_cgroup_of(99, t.proc.path()));
}

TEST(CpuTimeTest, EachJobsShareOfTheNodesCpuTimeSinceTheLastStep) {
  Trees t;
  const std::string job_dir = "/system.slice/slurmstepd.scope/job_77";
  t.node_busy_s(100);
  t.process(10, "0::" + job_dir + "/step_0/user/task_0\n", 5);  // its cgroup counts, not it
  t.cgroup_usage_s(job_dir, 50);
  t.process(20, "0::/user.slice/user-0.slice/session-1.scope\n", 7);
  t.process(21, "0::/user.slice/user-0.slice/session-1.scope\n", 3);
  JobCpuMeter meter(t.proc.path(), t.cgroups.path());
  const std::map<std::string, std::vector<uint32_t>> jobs = {{"slurm/77", {10}}, {"user/alice", {20, 21}}};
  EXPECT_TRUE(meter.shares(jobs).empty());  // the first step has nothing to compare with

  t.node_busy_s(108);          // 8 s busy on the node
  t.cgroup_usage_s(job_dir, 52);  // the job's cgroup: 2 s
  t.process(10, "0::" + job_dir + "/step_0/user/task_0\n", 5.5);
  t.process(20, "0::/user.slice/user-0.slice/session-1.scope\n", 7.5);  // 0.5 s
  t.process(21, "0::/user.slice/user-0.slice/session-1.scope\n", 3.5);  // 0.5 s
  auto shares = meter.shares(jobs);
  EXPECT_NEAR(shares.at("slurm/77"), 2.0 / 8, 1e-6);
  EXPECT_NEAR(shares.at("user/alice"), 1.0 / 8, 1e-6);

  // A process gone, one new (its time before it was seen is not this step's),
  // and counters read apart that claim more than the node used: scaled to it.
  t.node_busy_s(110);
  t.cgroup_usage_s(job_dir, 55);  // 3 s against the node's 2
  std::filesystem::remove_all(t.proc.file("21"));
  t.process(22, "0::/user.slice/user-0.slice/session-1.scope\n", 40);
  shares = meter.shares({{"slurm/77", {10}}, {"user/alice", {20, 21, 22}}});
  EXPECT_NEAR(shares.at("slurm/77"), 1.0, 1e-6);
  EXPECT_EQ(shares.count("user/alice"), 0u);
  double total = 0;
  for (const auto& [job, fraction] : shares) total += fraction;
  EXPECT_LE(total, 1.0 + 1e-12);

  // A cgroup counter that went back (the job's cgroup made anew) counts nothing.
  t.node_busy_s(112);
  t.cgroup_usage_s(job_dir, 1);
  shares = meter.shares({{"slurm/77", {10}}});
  EXPECT_EQ(shares.count("slurm/77"), 0u);
}

TEST(CpuTimeTest, UnreadableOrMalformedCountersAreNone) {
  Trees t;
  EXPECT_FALSE(node_busy_cpu_s(t.proc.path()));
  testing::write_file(t.proc.file("stat"), "intr 1 2 3\n");
  EXPECT_FALSE(node_busy_cpu_s(t.proc.path()));
  testing::write_file(t.proc.file("stat"), "cpu  \xff\xfe 1 2\n");
  EXPECT_FALSE(node_busy_cpu_s(t.proc.path()));
  std::filesystem::create_directories(t.proc.file("5"));
  testing::write_file(t.proc.file("5/stat"), "5 no parenthesis at all\n");
  EXPECT_FALSE(process_cpu_s(5, t.proc.path()));
  EXPECT_FALSE(cgroup_cpu_s("/../../etc", t.cgroups.path()));
  std::filesystem::create_directories(t.cgroups.file("x"));
  testing::write_file(t.cgroups.file("x/cpu.stat"), "usage_usec nan\n");
  EXPECT_FALSE(cgroup_cpu_s("/x", t.cgroups.path()));
}

}  // namespace
}  // namespace joule
