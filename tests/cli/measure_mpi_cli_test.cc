// `joule measure --mpi` under a real mpirun: several ranks on this machine,
// grouped into nodes by JOULE_NODE_NAME (the documented override), each
// node with its own devices. Skipped where joule was built without MPI.
#include <gtest/gtest.h>
#include <unistd.h>

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

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b,
                              const std::vector<std::string>& c) {
  a.insert(a.end(), b.begin(), b.end());
  a.push_back(":");
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

const nlohmann::json& node_named(const nlohmann::json& report, const std::string& name) {
  for (const auto& node : report["nodes"]) {
    if (node["node"] == name) return node;
  }
  throw std::runtime_error("no node " + name + " in " + report.dump());
}

TEST(MeasureMpiCliTest, EachNodeIsMeasuredOnceAndRankZeroReportsEveryNodeAndTheTotal) {
  const auto r = run_process(
      join(mpirun(), node_block("node-a", 2, {"measure", "--mpi", "--json", "--sim", "count=2,load=0.5", "--", "sleep", "0.4"}),
           node_block("node-b", 2, {"measure", "--mpi", "--json", "--sim", "count=1,load=1.0", "--", "sleep", "0.4"})),
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
  EXPECT_NEAR(b["devices"][0]["energy_j"].get<double>(), 650.0 * elapsed_b, 0.02 * 650.0 * elapsed_b);
  EXPECT_NEAR(report["total_energy_j"].get<double>(),
              a["total_energy_j"].get<double>() + b["total_energy_j"].get<double>(), 1e-6);
  EXPECT_LT(report["edge_skew_s"].get<double>(), 0.05);
}

TEST(MeasureMpiCliTest, NodesWithTheirOwnFakeDriversAndAHumanReport) {
  TempDir dir_a, dir_b;
  const auto fake_a = testing::use_fake_nvml(dir_a, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n"
                                                    "device name=\"NVIDIA H100 80GB HBM3\" power_w=200\n");
  const auto fake_b = testing::use_fake_nvml(dir_b, "device name=\"NVIDIA A40\" power_w=120\n");
  auto env_of = [](const testing::FakeNvml& fake) {
    return std::map<std::string, std::string>{{"JOULE_NVML_LIBRARY", fake.library_path},
                                              {"JOULE_FAKE_NVML_CONFIG", fake.config_path},
                                              {"JOULE_POWERCAP_ROOT", "/nonexistent"}};
  };
  const std::vector<std::string> args = {"measure", "--mpi", "--", "sleep", "0.5"};
  const auto r = run_process(join(mpirun(), node_block("gpu-node-1", 1, args, env_of(fake_a)),
                                  node_block("gpu-node-2", 3, args, env_of(fake_b))),
                             {}, 120.0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("'command' on 2 nodes, 4 ranks"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node gpu-node-1 (rank 0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node gpu-node-2 (ranks 1,2,3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu1 NVIDIA H100 80GB HBM3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu0 NVIDIA A40"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("total:"), std::string::npos) << r.err;
}

TEST(MeasureMpiCliTest, ARankWhoseCommandFailsStillGetsTheJobMeasured) {
  const auto r = run_process(
      join(mpirun(), node_block("node-a", 1, {"measure", "--mpi", "--json", "--sim", "count=1", "--", "sleep", "0.2"}),
           node_block("node-b", 1, {"measure", "--mpi", "--json", "--sim", "count=1", "--", "sh", "-c", "exit 3"})),
      testing::simulated_only_env(), 120.0);
  EXPECT_NE(r.exit_code, 0);  // mpirun reports the failed rank
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["nodes"].size(), 2u) << report.dump(2);
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
