// A node's report as it travels between ranks, and the job-wide report.
#include "joule/cluster/node_report.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "joule/error.h"

namespace joule::cluster {
namespace {

NodeReport two_gpus_and_a_package() {
  NodeReport r;
  r.node = "node-a";
  r.ranks = {0, 1};
  r.elapsed_s = 2.0;
  r.devices = {{"gpu", "gpu0 H100", 600.0}, {"gpu", "gpu1 H100", 500.0}, {"cpu_package", "cpu0 package-0", 150.0}};
  r.warnings = {"something to say"};
  return r;
}

TEST(NodeReportTest, TravelsAsJsonAndComesBackTheSame) {
  const NodeReport sent = two_gpus_and_a_package();
  const NodeReport got = node_report_from_json(nlohmann::json::parse(to_json(sent).dump()));
  EXPECT_EQ(got.node, "node-a");
  EXPECT_EQ(got.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(got.elapsed_s, 2.0);
  ASSERT_EQ(got.devices.size(), 3u);
  EXPECT_EQ(got.devices[2].kind, "cpu_package");
  EXPECT_EQ(got.devices[1].energy_j, 500.0);
  EXPECT_EQ(got.warnings, sent.warnings);
  EXPECT_EQ(got.energy_j("gpu"), 1100.0);
  EXPECT_EQ(got.total_energy_j(), 1250.0);
  EXPECT_LT(to_json(sent).dump().size(), 400u);  // a few hundred bytes per node
}

TEST(NodeReportTest, AReportThatIsNotOneIsRefusedNamingWhat) {
  auto json = to_json(two_gpus_and_a_package());
  json.erase("elapsed_s");
  try {
    node_report_from_json(json);
    FAIL() << "accepted a report without elapsed_s";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'elapsed_s'"), std::string::npos) << e.what();
  }
  json = to_json(two_gpus_and_a_package());
  json["devices"][0]["kind"] = "fan";
  EXPECT_THROW(node_report_from_json(json), Error);
  json = to_json(two_gpus_and_a_package());
  json["devices"][1]["energy_j"] = "a lot";
  EXPECT_THROW(node_report_from_json(json), Error);
  EXPECT_THROW(node_report_from_json(nlohmann::json::array()), Error);
}

TEST(NodeReportTest, TheJobsReportSumsNodesAndSaysWhatIsMissing) {
  ClusterReport report;
  report.window = "epoch";
  report.world_size = 3;
  report.nodes = {two_gpus_and_a_package()};
  NodeReport b;
  b.node = "node-b";
  b.ranks = {2};
  b.elapsed_s = 2.0;
  b.devices = {{"gpu", "gpu0 H100", 700.0}, {"dram", "cpu0 dram", 20.0}};
  report.nodes.push_back(b);
  report.missing_nodes = {"node-c (rank 3): GPU lost"};
  const auto json = to_json(report);
  EXPECT_EQ(json["gpu_energy_j"], 1800.0);
  EXPECT_EQ(json["cpu_package_energy_j"], 150.0);
  EXPECT_EQ(json["dram_energy_j"], 20.0);
  EXPECT_EQ(json["total_energy_j"], 1970.0);
  EXPECT_EQ(json["nodes"].size(), 2u);
  const std::string text = to_text(report);
  EXPECT_NE(text.find("node node-b (rank 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("MISSING node-c (rank 3): GPU lost"), std::string::npos) << text;
  EXPECT_NE(text.find("PARTIAL"), std::string::npos) << text;
  EXPECT_NE(text.find("total: 1970.0 J"), std::string::npos) << text;
}

TEST(NodeReportTest, TheNodeNameCanBeOverriddenForTests) {
  setenv("JOULE_NODE_NAME", "posing-node", 1);
  EXPECT_EQ(node_name(), "posing-node");
  unsetenv("JOULE_NODE_NAME");
  EXPECT_FALSE(node_name().empty());
  EXPECT_NE(node_name(), "posing-node");
}

}  // namespace
}  // namespace joule::cluster
