// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A node's report as it travels between ranks, and the job-wide report.
#include "joule/cluster/node_report.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "common/fake_drivers.h"
#include "common/test_support.h"
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
}

// A simulated GPU travels as one and is said in the job's text: the job's
// line and the device's.
TEST(NodeReportTest, SimulatedGpusAreSaidInTheJobsText) {
  NodeReport sent = two_gpus_and_a_package();
  sent.devices[1].simulated = true;
  const NodeReport got = node_report_from_json(nlohmann::json::parse(to_json(sent).dump()));
  EXPECT_FALSE(got.devices[0].simulated);
  EXPECT_TRUE(got.devices[1].simulated);
  NodeReport measured = two_gpus_and_a_package();
  measured.node = "node-b";
  ClusterReport job;
  job.window = "python3 train.py";
  job.world_size = 4;
  job.nodes = {got, measured};
  const std::string text = to_text(job);
  EXPECT_NE(text.find("joule: 'python3 train.py' on 2 nodes, 4 ranks\njoule: GPUs are SIMULATED on node node-a "),
            std::string::npos) << text;
  EXPECT_NE(text.find("gpu1 H100 [SIMULATED]"), std::string::npos) << text;
  EXPECT_EQ(text.find("gpu0 H100 [SIMULATED]"), std::string::npos) << text;
  job.nodes = {measured};
  EXPECT_EQ(to_text(job).find("SIMULATED"), std::string::npos);
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

TEST(NodeReportTest, TheRanksOfOneMachinePoseAsNodesOfKRanks) {
  setenv("JOULE_NODE_NAME", "host", 1);
  setenv("JOULE_RANKS_PER_NODE", "2", 1);
  EXPECT_EQ(node_name(0), "host-0");
  EXPECT_EQ(node_name(1), "host-0");
  EXPECT_EQ(node_name(5), "host-2");
  EXPECT_EQ(node_name(), "host");  // the rank unknown: no suffix
  setenv("JOULE_RANKS_PER_NODE", "two", 1);
  EXPECT_THROW(node_name(3), UsageError);
  unsetenv("JOULE_RANKS_PER_NODE");
  unsetenv("JOULE_NODE_NAME");
}

WindowMessage a_message(const NodeReport& roster) {
  WindowMessage m;
  m.window_seq = 7;
  m.elapsed_s = 2.5;
  m.edge_wall_s = 1.7e9;
  for (std::size_t i = 0; i < roster.devices.size(); ++i) m.energies_j.push_back(100.0 * static_cast<double>(i + 1));
  m.warnings = {"gpu1: energy after t=1.2 s is missing"};
  m.devices_failed = true;
  return m;
}

TEST(NodeReportTest, AWindowMessageCarriesNumbersAndTheRosterNamesThem) {
  NodeReport roster = two_gpus_and_a_package();
  for (auto& d : roster.devices) d.energy_j = 0.0;
  const WindowMessage sent = a_message(roster);
  const std::string bytes = encode(sent);
  const WindowMessage got = decode_window_message(bytes);
  EXPECT_EQ(got.window_seq, 7u);
  EXPECT_EQ(got.energies_j, sent.energies_j);
  EXPECT_EQ(got.warnings, sent.warnings);
  EXPECT_TRUE(got.devices_failed);
  const NodeReport report = fill_roster(roster, got);
  EXPECT_EQ(report.node, "node-a");
  EXPECT_EQ(report.elapsed_s, 2.5);
  EXPECT_EQ(report.devices[1].name, "gpu1 H100");
  EXPECT_EQ(report.devices[1].energy_j, 200.0);
  EXPECT_EQ(report.total_energy_j(), 600.0);
  // A node of 8 GPUs, 2 packages and 2 DRAM zones: well under a few hundred bytes.
  WindowMessage eight_gpus;
  eight_gpus.energies_j.assign(12, 1234.5);
  EXPECT_LE(encode(eight_gpus).size(), 140u);

  ClusterReport job;
  job.nodes = {report};
  EXPECT_FALSE(job.complete());  // a device was lost
  EXPECT_NE(to_text(job).find("PARTIAL: node node-a lost a device"), std::string::npos) << to_text(job);
  EXPECT_EQ(to_json(job)["complete"], false);
}

TEST(NodeReportTest, AMessageThatIsNotOneIsRefusedSayingWhy) {
  NodeReport roster = two_gpus_and_a_package();
  const std::string bytes = encode(a_message(roster));
  auto refused_with = [](const std::string& b, const std::string& expected) {
    try {
      decode_window_message(b);
      ADD_FAILURE() << "accepted " << b.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused_with(bytes.substr(0, bytes.size() - 3), "ends at byte");
  refused_with(bytes + "x", "left over");
  std::string other_order = bytes;
  std::swap(other_order[0], other_order[3]);
  std::swap(other_order[1], other_order[2]);
  refused_with(other_order, "byte order");
  refused_with("", "ends at byte 0");
  // Numbers that do not fit the roster.
  WindowMessage short_one = a_message(roster);
  short_one.energies_j.pop_back();
  EXPECT_THROW(fill_roster(roster, short_one), Error);
  WindowMessage failed = a_message(roster);
  failed.error = "NVML could not be loaded";
  try {
    fill_roster(roster, failed);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "NVML could not be loaded");
  }
}

TEST(NodeReportTest, TheJobsGpusComeFromItsRanksVisibleDevices) {
  using Visible = std::vector<std::optional<std::string>>;
  EXPECT_EQ(job_gpus_of(Visible{"0", "1"}), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(job_gpus_of(Visible{"2,3", "3"}), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(job_gpus_of(Visible{"0", std::nullopt}), std::nullopt);  // one rank sees them all
  EXPECT_EQ(job_gpus_of(Visible{"MIG-abc"}), std::nullopt);
  EXPECT_EQ(job_gpus_of(Visible{""}), std::vector<std::string>{});  // no GPU at all

  DiscoveryOptions options;
  options.backend = GpuBackend::kSim;
  options.sim_spec = "count=4";
  Devices devices = discover_hardware(options);
  const std::string uuid_of_2 = devices.gpus[2]->uuid();
  keep_job_gpus(devices, {"3", uuid_of_2.substr(0, 12)});
  ASSERT_EQ(devices.gpus.size(), 2u);
  EXPECT_EQ(devices.gpus[0]->index(), 3u);
  EXPECT_EQ(devices.gpus[1]->index(), 2u);
  try {
    keep_job_gpus(devices, {"7"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'7'"), std::string::npos) << e.what();
  }
}

// A node of one vendor's GPUs (each fake driver's): the job's visible
// devices in that vendor's variable (CUDA_VISIBLE_DEVICES on NVIDIA,
// HIP_VISIBLE_DEVICES on AMD) keep its GPUs by index or UUID; an index past
// them is refused naming the variable.
class NodeOnFakeDriverTest : public ::testing::TestWithParam<testing::FakeDriver> {};

TEST_P(NodeOnFakeDriverTest, TheJobsVisibleDevicesKeepItsGpus) {
  const testing::FakeDriver& driver = GetParam();
  testing::TempDir tmp;
  // NVML's UUIDs are uuid=, ROCm SMI's unique_id= (each fake ignores the other's key).
  const auto fake = driver.use(tmp, "device uuid=GPU-aaaa unique_id=0xaaaa\n"
                                    "device uuid=GPU-18ee07be unique_id=0x18ee07be9b5d9d3c\n"
                                    "device uuid=GPU-cccc unique_id=0xcccc\n");
  DiscoveryOptions options;
  driver.point_discovery(options, fake);
  options.powercap_root = "/nonexistent";
  const Devices node = discover_hardware(options);
  ASSERT_EQ(node.gpus.size(), 3u);
  const bool nvidia = driver.backend == GpuBackend::kNvml;
  const auto kept_indices = [&](const std::string& visible) {
    Devices devices = node;
    const auto entries = nvidia ? visible_gpus_of(visible, std::nullopt, std::nullopt)
                                : visible_gpus_of(std::nullopt, visible, std::nullopt);
    keep_job_gpus(devices, *job_gpus_of({entries}));
    std::vector<unsigned> indices;
    for (const auto& gpu : devices.gpus) indices.push_back(gpu->index());
    return indices;
  };
  EXPECT_EQ(kept_indices("2,0"), (std::vector<unsigned>{2, 0}));
  EXPECT_EQ(kept_indices("GPU-18ee07"), (std::vector<unsigned>{1}));
  EXPECT_EQ(kept_indices(""), (std::vector<unsigned>{}));  // no GPU at all
  try {
    kept_indices("3");
    FAIL();
  } catch (const UsageError& e) {
    const std::string variable = nvidia ? "CUDA_VISIBLE_DEVICES" : "HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES";
    EXPECT_NE(std::string(e.what()).find(variable + " names '3', which is none of this node's 3 " +
                                         (nvidia ? "NVIDIA" : "AMD") + " GPUs"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, NodeOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

// Each vendor's runtime numbers its own GPUs: on a mixed node (two NVIDIA
// GPUs, gpu0-1, then two AMD ones, gpu2-3) CUDA_VISIBLE_DEVICES=1 is gpu1 and
// HIP_VISIBLE_DEVICES=0 is gpu2, the first AMD GPU.
TEST(NodeReportTest, EachVendorsVisibleDevicesNameItsOwnGpus) {
  using std::nullopt;
  EXPECT_EQ(visible_gpus_of(nullopt, nullopt, nullopt), nullopt);  // sees every GPU
  EXPECT_EQ(visible_gpus_of("0,1", nullopt, nullopt), "0,1,amd:all");
  EXPECT_EQ(visible_gpus_of(nullopt, "1", nullopt), "nvidia:all,amd:1");
  EXPECT_EQ(visible_gpus_of(nullopt, nullopt, "2,GPU-18ee"), "nvidia:all,amd:2,amd:GPU-18ee");
  EXPECT_EQ(visible_gpus_of(nullopt, "1", "2,3"), "nvidia:all,amd:3");  // HIP counts within what ROCR left
  EXPECT_EQ(visible_gpus_of("", "", nullopt), "");  // no GPU at all
  EXPECT_THROW(visible_gpus_of(nullopt, "2", "0,1"), UsageError);

  testing::TempDir tmp;
  const auto nvml = testing::use_fake_nvml(tmp, "device\ndevice\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device unique_id=0x18ee07be9b5d9d3c\ndevice unique_id=0x77aa\n");
  DiscoveryOptions options;
  options.nvml_library = nvml.library_path;
  options.rocm_library = rocm.library_path;
  options.powercap_root = "/nonexistent";
  const Devices node = discover_hardware(options);
  ASSERT_EQ(node.gpu_backend, "nvml+rocm");
  ASSERT_EQ(node.gpus.size(), 4u);
  EXPECT_EQ(node.first_amd_index, 2u);
  EXPECT_EQ(vendor_index(node, *node.gpus[1]), 1u);
  EXPECT_EQ(vendor_index(node, *node.gpus[3]), 1u);

  const auto kept_indices = [&](const std::optional<std::string>& cuda, const std::optional<std::string>& hip,
                                const std::optional<std::string>& rocr) {
    Devices devices = node;
    keep_job_gpus(devices, *job_gpus_of({visible_gpus_of(cuda, hip, rocr)}));
    std::vector<unsigned> indices;
    for (const auto& gpu : devices.gpus) indices.push_back(gpu->index());
    return indices;
  };
  EXPECT_EQ(kept_indices("1", "0", nullopt), (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(kept_indices(nullopt, "1", nullopt), (std::vector<unsigned>{0, 1, 3}));  // NVIDIA GPUs unrestricted
  EXPECT_EQ(kept_indices("", "1", nullopt), (std::vector<unsigned>{3}));
  EXPECT_EQ(kept_indices("0", nullopt, nullopt), (std::vector<unsigned>{0, 2, 3}));
  EXPECT_EQ(kept_indices("", nullopt, "GPU-18EE07"), (std::vector<unsigned>{2}));  // ROCm's UUID form
  // Two ranks, one on each vendor's GPU: the union.
  Devices both = node;
  keep_job_gpus(both, *job_gpus_of({visible_gpus_of("0", "", nullopt), visible_gpus_of("", "1", nullopt)}));
  ASSERT_EQ(both.gpus.size(), 2u);
  EXPECT_EQ(both.gpus[0]->index(), 0u);
  EXPECT_EQ(both.gpus[1]->index(), 3u);
  try {
    Devices devices = node;
    keep_job_gpus(devices, {"amd:2"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES names '2', which is none of this "
                                         "node's 2 AMD GPUs"),
              std::string::npos)
        << e.what();
  }
  try {
    Devices devices = node;
    keep_job_gpus(devices, {"2"});  // gpu2 is AMD: CUDA's 2 does not exist
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES names '2'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace joule::cluster
