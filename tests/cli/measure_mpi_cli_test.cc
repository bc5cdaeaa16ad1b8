// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule measure --mpi` under a real mpirun: several ranks on this machine,
// grouped into nodes by JOULE_NODE_NAME (the documented override), each
// node with its own devices. Skipped where joule was built without MPI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

#ifdef JOULE_TEST_MPIEXEC
// mpirun, running as root where the tests do (CI), and taking more ranks
// than cores.
std::vector<std::string> mpirun() {
  std::vector<std::string> argv = {JOULE_TEST_MPIEXEC, "--oversubscribe"};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  return argv;
}

// One MPMD block of mpirun: `ranks` ranks posing as node `node`.
std::vector<std::string> node_block(const std::string& node, int ranks, const std::vector<std::string>& joule_args,
                                    const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {"-n", std::to_string(ranks), "-x", "JOULE_NODE_NAME=" + node};
  for (const auto& [k, v] : env) {
    argv.push_back("-x");
    argv.push_back(k + "=" + v);
  }
  argv.push_back(JOULE_BINARY);
  argv.insert(argv.end(), joule_args.begin(), joule_args.end());
  return argv;
}

// mpirun's argv followed by its MPMD blocks, separated by ":".
std::vector<std::string> join(std::vector<std::string> launcher,
                              std::initializer_list<std::vector<std::string>> blocks) {
  bool first = true;
  for (const auto& block : blocks) {
    if (!first) launcher.push_back(":");
    launcher.insert(launcher.end(), block.begin(), block.end());
    first = false;
  }
  return launcher;
}

// `joule` options, then "--" and the command.
std::vector<std::string> with_command(std::vector<std::string> options, const std::vector<std::string>& command) {
  options.push_back("--");
  options.insert(options.end(), command.begin(), command.end());
  return options;
}

// A node's environment for its own fake driver (and no RAPL).
std::map<std::string, std::string> fake_nvml_env(const testing::FakeNvml& fake) {
  return {{"JOULE_NVML_LIBRARY", fake.library_path},
          {"JOULE_FAKE_NVML_CONFIG", fake.config_path},
          {"JOULE_POWERCAP_ROOT", "/nonexistent"}};
}

const nlohmann::json& node_named(const nlohmann::json& report, const std::string& name) {
  for (const auto& node : report["nodes"]) {
    if (node["node"] == name) return node;
  }
  throw std::runtime_error("no node " + name + " in " + report.dump());
}

TEST(MeasureMpiCliTest, EachNodeIsMeasuredOnceAndRankZeroReportsEveryNodeAndTheTotal) {
  const auto r = run_process(
      join(mpirun(), {node_block("node-a", 2, {"measure", "--mpi", "--json", "--sim", "count=2,load=0.5", "--", "sleep", "0.4"}),
                      node_block("node-b", 2, {"measure", "--mpi", "--json", "--sim", "count=1,load=1.0", "--", "sleep", "0.4"})}),
      testing::simulated_only_env(), 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);  // one report: rank 0's alone
  EXPECT_EQ(report["world_size"], 4);
  EXPECT_EQ(report["command"], nlohmann::json({"sleep", "0.4"}));
  ASSERT_EQ(report["nodes"].size(), 2u) << report.dump(2);
  EXPECT_TRUE(report["missing_nodes"].empty());
  const auto& a = node_named(report, "node-a");
  const auto& b = node_named(report, "node-b");
  EXPECT_EQ(a["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(b["ranks"], nlohmann::json({2, 3}));
  // Once per node: node-a's two GPUs once, not once per rank.
  ASSERT_EQ(a["devices"].size(), 2u);
  ASSERT_EQ(b["devices"].size(), 1u);
  const double elapsed_a = a["elapsed_s"], elapsed_b = b["elapsed_s"];
  EXPECT_GE(elapsed_a, 0.4);
  EXPECT_NEAR(elapsed_a, elapsed_b, 0.05);  // the same window everywhere
  for (const auto& gpu : a["devices"]) EXPECT_NEAR(gpu["energy_j"].get<double>(), 360.0 * elapsed_a, 0.02 * 360.0 * elapsed_a);
  for (const auto& gpu : a["devices"]) EXPECT_EQ(gpu["simulated"], true) << "said per device";
  EXPECT_NEAR(b["devices"][0]["energy_j"].get<double>(), 650.0 * elapsed_b, 0.02 * 650.0 * elapsed_b);
  EXPECT_NEAR(report["total_energy_j"].get<double>(),
              a["total_energy_j"].get<double>() + b["total_energy_j"].get<double>(), 1e-6);
  EXPECT_LT(report["edge_skew_s"].get<double>(), 0.05);
}

// Carbon and cost of the whole job: its total energy (every node's) x PUE x the intensity.
TEST(MeasureMpiCliTest, CarbonAndCostAreTheJobsTotals) {
  const std::vector<std::string> carbon = {"--carbon-intensity", "300", "--pue", "1.1", "--price", "0.2"};
  auto args_a = std::vector<std::string>{"measure", "--mpi", "--json", "--sim", "count=2,load=0.5"};
  auto args_b = std::vector<std::string>{"measure", "--mpi", "--json", "--sim", "count=1,load=1.0"};
  args_a.insert(args_a.end(), carbon.begin(), carbon.end());
  args_b.insert(args_b.end(), carbon.begin(), carbon.end());
  const auto r = run_process(join(mpirun(), {node_block("node-a", 1, with_command(args_a, {"sleep", "0.3"})),
                                             node_block("node-b", 1, with_command(args_b, {"sleep", "0.3"}))}),
                             testing::simulated_only_env(), 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  const double total_j = report["total_energy_j"];
  EXPECT_GT(total_j, (2 * 360.0 + 650.0) * 0.3 * 0.98);
  const auto& c = report["carbon"];
  EXPECT_NEAR(c["energy_kwh"].get<double>(), total_j / 3.6e6, 1e-15);
  EXPECT_NEAR(c["co2e_g"].get<double>(), total_j / 3.6e6 * 1.1 * 300, 1e-12);
  EXPECT_NEAR(c["cost"].get<double>(), total_j / 3.6e6 * 1.1 * 0.2, 1e-12);
  EXPECT_EQ(c["source"], "user-given");
  const auto refused = run_process({JOULE_BINARY, "measure", "--mpi", "--emissions-csv", "/tmp/never.csv", "--", "true"},
                                   testing::simulated_only_env());
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--emissions-csv: not supported with --mpi yet"), std::string::npos) << refused.err;
}

TEST(MeasureMpiCliTest, NodesWithTheirOwnFakeDriversAndAHumanReport) {
  TempDir dir_a, dir_b;
  const auto fake_a = testing::use_fake_nvml(dir_a, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n"
                                                    "device name=\"NVIDIA H100 80GB HBM3\" power_w=200\n");
  const auto fake_b = testing::use_fake_nvml(dir_b, "device name=\"NVIDIA A40\" power_w=120\n");
  const std::vector<std::string> args = {"measure", "--mpi", "--", "sleep", "0.5"};
  const auto r = run_process(join(mpirun(), {node_block("gpu-node-1", 1, args, fake_nvml_env(fake_a)),
                                             node_block("gpu-node-2", 3, args, fake_nvml_env(fake_b))}),
                             {}, 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("joule: 'sleep 0.5' on 2 nodes, 4 ranks\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIMULATED"), std::string::npos) << "drivers' GPUs, if fake ones" << r.err;
  EXPECT_NE(r.err.find("node gpu-node-1 (rank 0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node gpu-node-2 (ranks 1,2,3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu1 NVIDIA H100 80GB HBM3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu0 NVIDIA A40"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("total:"), std::string::npos) << r.err;
}

TEST(MeasureMpiCliTest, ARankWhoseCommandFailsStillGetsTheJobMeasured) {
  const auto r = run_process(
      join(mpirun(), {node_block("node-a", 1, {"measure", "--mpi", "--json", "--sim", "count=1", "--", "sleep", "0.2"}),
                      node_block("node-b", 1, {"measure", "--mpi", "--json", "--sim", "count=1", "--", "sh", "-c", "exit 3"})}),
      testing::simulated_only_env(), 120.0);
  EXPECT_NE(r.exit_code, 0);  // mpirun reports the failed rank
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["nodes"].size(), 2u) << report.dump(2);
}

TEST(MeasureMpiCliTest, ANodeThatHangsIsReportedMissingWithinTheTimeoutAndTheOthersAreKept) {
  const auto started = std::chrono::steady_clock::now();
  const std::vector<std::string> options = {"measure", "--mpi", "--mpi-timeout", "2", "--json", "--sim", "count=1"};
  const auto r = run_process(join(mpirun(), {node_block("node-a", 2, with_command(options, {"sleep", "0.2"})),
                                             node_block("node-b", 1, with_command(options, {"sleep", "120"}))}),
                             testing::simulated_only_env(), 60.0);
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(took_s, 30.0);  // the barrier's 2 s, the reports' 2 s more, mpirun's start and abort
  EXPECT_NE(r.exit_code, 0);  // the job was ended
  EXPECT_NE(r.err.find("ends the job"), std::string::npos) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["complete"], false);
  ASSERT_EQ(report["nodes"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["nodes"][0]["node"], "node-a");
  EXPECT_GT(report["nodes"][0]["total_energy_j"].get<double>(), 0.0);
  ASSERT_EQ(report["missing_nodes"].size(), 1u);
  const std::string missing = report["missing_nodes"][0];
  EXPECT_NE(missing.find("node-b (rank 2): no report within"), std::string::npos) << missing;
}

TEST(MeasureMpiCliTest, ANodeThatDiesIsReportedMissingWhereMpirunLetsTheJobGoOn) {
  // Open MPI ends the whole job when a rank dies unless recovery is on.
  std::vector<std::string> argv = mpirun();
  argv.insert(argv.end(), {"--mca", "orte_enable_recovery", "1"});
  const std::vector<std::string> options = {"measure", "--mpi", "--mpi-timeout", "2", "--json", "--sim", "count=1"};
  const auto r = run_process(join(argv, {node_block("node-a", 1, with_command(options, {"sleep", "0.5"})),
                                         node_block("node-b", 1, with_command(options, {"sh", "-c", "sleep 0.2; kill -9 $PPID"}))}),
                             testing::simulated_only_env(), 60.0);
  // (With recovery on, mpirun's own exit status does not carry MPI_Abort's.)
  EXPECT_NE(r.err.find("ends the job"), std::string::npos) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["nodes"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["nodes"][0]["node"], "node-a");
  ASSERT_EQ(report["missing_nodes"].size(), 1u);
  EXPECT_NE(report["missing_nodes"][0].get<std::string>().find("node-b"), std::string::npos);
}

TEST(MeasureMpiCliTest, ANodeWhoseGpuIsLostMidRunIsReportedAsPartial) {
  TempDir dir_a, dir_b;
  const auto fake_a = testing::use_fake_nvml(dir_a, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n");
  const auto fake_b = testing::use_fake_nvml(dir_b, "device name=\"NVIDIA A40\" power_w=120\n"
                                                    "error function=* device=0 code=15 after_ms=300\n");
  const std::vector<std::string> args = {"measure", "--mpi", "--json", "--", "sleep", "1"};
  const auto r = run_process(join(mpirun(), {node_block("node-a", 1, args, fake_nvml_env(fake_a)),
                                             node_block("node-b", 2, args, fake_nvml_env(fake_b))}),
                             {}, 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["complete"], false);
  const auto& a = node_named(report, "node-a");
  const auto& b = node_named(report, "node-b");
  EXPECT_EQ(a["devices_failed"], false);
  EXPECT_NEAR(a["total_energy_j"].get<double>(), 300.0 * a["elapsed_s"].get<double>(), 15.0);
  EXPECT_EQ(b["devices_failed"], true);
  EXPECT_NE(b["warnings"].dump().find("GPU is lost"), std::string::npos) << b.dump(2);
  // Counted up to the loss (0.3 s of the 1 s window), not carried on.
  EXPECT_GT(b["total_energy_j"].get<double>(), 0.0);
  EXPECT_LT(b["total_energy_j"].get<double>(), 120.0 * 0.5);
}

TEST(MeasureMpiCliTest, ALeaderWhoseMeasurementCannotStartIsReportedMissingWithWhy) {
  const auto r = run_process(
      join(mpirun(), {node_block("node-a", 1, {"measure", "--mpi", "--json", "--sim", "count=1", "--", "sleep", "0.2"}),
                      node_block("node-b", 2, {"measure", "--mpi", "--json", "--sim", "count=1", "--gpus", "5", "--", "sleep", "0.2"})}),
      testing::simulated_only_env(), 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;  // the job itself ran; its report says what is missing
  const auto report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["nodes"].size(), 1u) << report.dump(2);
  ASSERT_EQ(report["missing_nodes"].size(), 1u);
  const std::string missing = report["missing_nodes"][0];
  EXPECT_NE(missing.find("node-b (rank 1): its measurement could not start"), std::string::npos) << missing;
  EXPECT_NE(missing.find("5"), std::string::npos) << missing;
}

TEST(MeasureMpiCliTest, EachNodeMeasuresTheGpusItsRanksMayUseAndWritesItsOwnTimeline) {
  TempDir dir;
  const std::string timeline = dir.file("run.csv");
  const std::vector<std::string> args = {"measure", "--mpi", "--json", "--sim", "count=4,load=0.5",
                                         "--timeline", timeline, "--", "sleep", "0.4"};
  // node-a's two ranks may use GPUs 1 and 2; node-b's rank sees all four.
  const auto r = run_process(join(mpirun(), {node_block("node-a", 1, args, {{"CUDA_VISIBLE_DEVICES", "1"}}),
                                             node_block("node-a", 1, args, {{"CUDA_VISIBLE_DEVICES", "2"}}),
                                             node_block("node-b", 1, args)}),
                             testing::simulated_only_env(), 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  const auto& a = node_named(report, "node-a");
  ASSERT_EQ(a["devices"].size(), 2u) << a.dump(2);
  EXPECT_EQ(a["devices"][0]["name"].get<std::string>().rfind("gpu1 ", 0), 0u) << a.dump(2);
  EXPECT_EQ(a["devices"][1]["name"].get<std::string>().rfind("gpu2 ", 0), 0u) << a.dump(2);
  EXPECT_EQ(node_named(report, "node-b")["devices"].size(), 4u);
  for (const std::string node : {"node-a", "node-b"}) {
    const auto lines = testing::read_lines(dir.file("run." + node + ".csv"));
    EXPECT_GT(lines.size(), 3u) << node;  // a header and samples
  }
}
#else
TEST(MeasureMpiCliTest, SaysWhenBuiltWithoutMpi) {
  const auto r = run_process({JOULE_BINARY, "measure", "--mpi", "--", "true"}, testing::simulated_only_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("built without MPI"), std::string::npos) << r.err;
}
#endif

}  // namespace
}  // namespace joule
