// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Real Slurm steps on a single-machine cluster the tests start
// (common/slurm_cluster.h): srun starts every task, and `joule measure --mpi`
// launched by srun itself, without mpirun, makes one report of the job.
// Needs root and Debian's slurm-wlm and munge: skipped otherwise (failed
// where JOULE_TESTS_REQUIRE_SERVERS=1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/slurm_cluster.h"
#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(SlurmTest, SrunStartsEveryTaskOfAStep) {
  auto& slurm = testing::shared_slurm();
  if (!slurm.running()) JOULE_SKIP_WITHOUT_SERVER(slurm.skip_reason());
  const auto r = run_process({"srun", "--ntasks", "3", "sh", "-c", "echo $SLURM_PROCID"}, slurm.env(), 60.0);
  ASSERT_EQ(r.exit_code, 0) << r.err << slurm.logs();
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"0", "1", "2"})) << r.out;
}

TEST(SlurmTest, SrunExitsWithAFailedTasksStatus) {
  auto& slurm = testing::shared_slurm();
  if (!slurm.running()) JOULE_SKIP_WITHOUT_SERVER(slurm.skip_reason());
  const auto r = run_process({"srun", "--ntasks", "2", "sh", "-c", "exit $((3 * SLURM_PROCID))"}, slurm.env(), 60.0);
  EXPECT_EQ(r.exit_code, 3) << r.err;
}

#ifdef JOULE_TEST_MPIEXEC
const nlohmann::json& node_named(const nlohmann::json& report, const std::string& name) {
  for (const auto& node : report["nodes"]) {
    if (node["node"] == name) return node;
  }
  throw std::runtime_error("no node " + name + " in " + report.dump());
}

// srun starts the ranks itself: Open MPI 4.1 (Debian's, built with PMIx)
// initialises from Slurm's PMIx plugin. --mpi=pmi2 and none do not work
// with it: Debian's Open MPI has no Slurm PMI-1/2 support.
TEST(SlurmTest, MeasureMpiUnderSrunMakesNodesOfTheRanksPerNode) {
  auto& slurm = testing::shared_slurm();
  if (!slurm.running()) JOULE_SKIP_WITHOUT_SERVER(slurm.skip_reason());
  auto env = testing::simulated_only_env();
  env.insert(slurm.env().begin(), slurm.env().end());
  env["JOULE_NODE_NAME"] = "";  // unset: nodes are named after the host
  const auto r = run_process({"srun", "--mpi=pmix", "--ntasks", "4", "env", "JOULE_RANKS_PER_NODE=2", JOULE_BINARY,
                              "measure", "--mpi", "--json", "--sim", "count=1", "--", "sleep", "0.3"},
                             env, 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err << slurm.logs();
  const auto report = nlohmann::json::parse(r.out);  // one report: rank 0's alone
  EXPECT_EQ(report["world_size"], 4);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  ASSERT_EQ(report["nodes"].size(), 2u) << report.dump(2);
  EXPECT_TRUE(report["missing_nodes"].empty()) << report.dump(2);
  EXPECT_EQ(node_named(report, std::string(host) + "-0")["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(node_named(report, std::string(host) + "-1")["ranks"], nlohmann::json({2, 3}));
  for (const auto& node : report["nodes"]) {
    EXPECT_EQ(node["devices"].size(), 1u);  // once per node, not per rank
    EXPECT_GE(node["elapsed_s"].get<double>(), 0.3);
  }
}

// A sweep whose runs span "nodes": every run a real srun step of joule
// measure --mpi (the one machine's ranks posing as nodes of 2). This Slurm
// has a single node, so launcher_options (which srun reads after the
// sweep's own layout) keep every step on it.
TEST(SlurmTest, ASweepLaunchesEachRunAsARealSrunStepMeasuredOnEveryNode) {
  auto& slurm = testing::shared_slurm();
  if (!slurm.running()) JOULE_SKIP_WITHOUT_SERVER(slurm.skip_reason());
  testing::TempDir tmp;
  testing::write_file(tmp.file("s.toml"),
                      "command = \"sleep 0.3\"\nlauncher = \"srun\"\ngpus_per_node = 2\n"
                      "launcher_options = \"--mpi=pmix --nodes 1 --ntasks-per-node 8\"\n"
                      "[grid]\ngpus = [1, 2, 4]\n");
  auto env = testing::simulated_only_env();
  env.insert(slurm.env().begin(), slurm.env().end());
  env["JOULE_NODE_NAME"] = "box";
  env["JOULE_RANKS_PER_NODE"] = "2";
  const auto r = run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--sim", "count=2,load=0.5",
                              "--export", tmp.file("runs.csv")},
                             env, 300.0);
  ASSERT_EQ(r.exit_code, 0) << r.err << slurm.logs();
  // One row per run, one per node of each run: 1 and 2 GPUs on one node, 4 on two.
  const auto runs = testing::read_lines(tmp.file("runs.csv"));
  ASSERT_EQ(runs.size(), 4u) << testing::read_file(tmp.file("runs.csv"));
  for (std::size_t i = 1; i < runs.size(); ++i) EXPECT_NE(runs[i].find(",ok,"), std::string::npos) << runs[i];
  const std::string nodes = testing::read_file(tmp.file("runs.nodes.csv"));
  const auto node_lines = testing::read_lines(tmp.file("runs.nodes.csv"));
  EXPECT_EQ(node_lines.size(), 1u + 1 + 1 + 2) << nodes;
  EXPECT_NE(nodes.find("box-0"), std::string::npos) << nodes;
  EXPECT_NE(nodes.find("box-1"), std::string::npos) << nodes;
  // Each run was an srun step of its own layout (the sweep's, then the options).
  EXPECT_NE(runs[3].find("srun --nodes 2 --ntasks 4 --ntasks-per-node 2 --mpi=pmix"), std::string::npos) << runs[3];
  // The analysis shows the scaling: per GPU count, its nodes and energy per GPU-hour.
  const auto analysis = run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite")}, env, 60.0);
  ASSERT_EQ(analysis.exit_code, 0) << analysis.err;
  EXPECT_NE(analysis.out.find("scaling with GPU count"), std::string::npos) << analysis.out;
  EXPECT_NE(analysis.out.find("energy with GPU count"), std::string::npos) << analysis.out;
  EXPECT_NE(analysis.out.find("Wh/GPU-h"), std::string::npos) << analysis.out;
}
#endif

}  // namespace
}  // namespace joule
