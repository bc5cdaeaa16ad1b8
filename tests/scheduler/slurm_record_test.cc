// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What joule slurm-epilog makes of its nodes' replies: every hostile reply
// refused naming the node and the field, the comment one token that
// sacctmgr stores as written, another tool's words kept.
#include "joule/scheduler/slurm_record.h"

#include <gtest/gtest.h>

#include "joule/common/command_output.h"
#include "joule/error.h"

namespace joule::slurm {
namespace {

TEST(SlurmRecordTest, AJobsEntriesAreSummedPerStepAndOthersLeftOut) {
  const std::string reply = R"({"joule_jobs": 1, "jobs": [
      {"job": "slurm/7", "step": "0", "gpu": 0, "energy_j": 100.5},
      {"job": "slurm/7", "step": "0", "gpu": 1, "energy_j": 50},
      {"job": "slurm/7", "step": "batch", "gpu": 0, "energy_j": 10},
      {"job": "slurm/77", "step": "0", "gpu": 0, "energy_j": 999}]})";
  const NodeJobEnergy energy = parse_jobs_reply(reply, "slurm/7", "node1");
  EXPECT_EQ(energy.gpu_energy_by_step_j, (std::map<std::string, double>{{"0", 150.5}, {"batch", 10}}));
  EXPECT_FALSE(energy.cpu_energy_j);  // an exporter with no RAPL zone (or before CPU shares)
  EXPECT_TRUE(parse_jobs_reply(R"({"jobs": []})", "slurm/7", "node1").gpu_energy_by_step_j.empty());
  const auto with_cpu = parse_jobs_reply(R"({"jobs": [], "cpu_zones": 2, "cpu": [
      {"job": "slurm/7", "zone": "package-0", "energy_j": 40}, {"job": "slurm/7", "zone": "dram", "energy_j": 2.5},
      {"job": "slurm/8", "zone": "dram", "energy_j": 99}]})",
                                         "slurm/7", "node1");
  EXPECT_EQ(with_cpu.cpu_energy_j, 42.5);
  EXPECT_EQ(parse_jobs_reply(R"({"jobs": [], "cpu_zones": 1, "cpu": []})", "slurm/7", "n").cpu_energy_j, 0.0);
}

TEST(SlurmRecordTest, AReplyThatIsNotTheExportersIsRefusedNamingTheNodeAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "node1: the reply is not JSON"},
      {"\xff\xfe{", "node1: the reply is not JSON"},
      {R"({"jobs": [{"job": "slurm/7", "energy_j": "\xff"}]})", "node1: the reply is not JSON"},
      {R"({"metrics": 1})", "node1: the reply is not a joule exporter's /jobs"},
      {R"([1, 2])", "node1: the reply is not a joule exporter's /jobs"},
      {R"({"jobs": [{"job": "slurm/7", "step": "0", "energy_j": -1}]})", "node1: jobs[0].energy_j: not a finite number >= 0"},
      {R"({"jobs": [{"job": "slurm/7", "step": "0", "energy_j": 1e400}]})", "node1: the reply is not JSON"},
      {R"({"jobs": [{"job": "slurm/7", "step": "0", "energy_j": "12"}]})", "node1: jobs[0].energy_j: not a finite number >= 0"},
      {R"({"jobs": [{"job": "slurm/7", "step": 3, "energy_j": 1}]})", "node1: jobs[0].step: not text"},
      {R"({"jobs": [{"job": 7, "energy_j": 1}]})", "node1: jobs[0].job: not text"},
      {R"({"jobs": [3]})", "node1: jobs[0].job: not text"},
      {R"({"jobs": [], "cpu_zones": -1})", "node1: cpu_zones: not a count"},
      {R"({"jobs": [], "cpu_zones": 1})", "node1: cpu: not a list"},
      {R"({"jobs": [], "cpu_zones": 1, "cpu": [{"job": "slurm/7", "energy_j": null}]})",
       "node1: cpu[0].energy_j: not a finite number >= 0"},
  };
  for (const auto& [reply, expected] : cases) {
    try {
      parse_jobs_reply(reply, "slurm/7", "node1");
      ADD_FAILURE() << "accepted: " << reply;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(SlurmRecordTest, TheCommentIsOneTokenWithTheTotalEachStepAndTheNodesThatGaveNone) {
  std::vector<NodeJobEnergy> nodes = {{"gpu01", {{"0", 1000.04}, {"batch", 20}}, 30.0, ""},
                                      {"gpu02", {{"0", 500}, {"", 5}, {"x\"y z", 1}}, std::nullopt, ""},
                                      {"gpu03", {}, std::nullopt, "gpu03: Could not establish connection"}};
  const std::string comment = joule_comment(nodes);
  EXPECT_EQ(comment, "joule:gpu_energy_j=1526.0,cpu_energy_j=30.0,step_0_j=1500.0,step_batch_j=20.0,step_unknown_j=5.0,"
                     "step_xyz_j=1.0,nodes=2/3,missing=gpu03");
  EXPECT_EQ(comment.find_first_of(" \"'`"), std::string::npos);
  EXPECT_EQ(joule_comment({{"n1"}}), "joule:gpu_energy_j=0.0,nodes=1/1");
}

TEST(SlurmRecordTest, AnotherToolsWordsAreKeptAndAnOlderJouleTokenReplaced) {
  EXPECT_EQ(merged_admin_comment("", "joule:gpu_energy_j=1.0"), "joule:gpu_energy_j=1.0");
  EXPECT_EQ(merged_admin_comment("JS1:abc", "joule:gpu_energy_j=1.0"), "JS1:abc joule:gpu_energy_j=1.0");
  EXPECT_EQ(merged_admin_comment("JS1:abc joule:gpu_energy_j=9.0 note", "joule:gpu_energy_j=1.0"),
            "JS1:abc note joule:gpu_energy_j=1.0");
}

TEST(CommandOutputTest, CapturesOutputAndStatusAndStopsWhatRunsTooLong) {
  const CommandOutput said = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10.0);
  EXPECT_EQ(said.exit_status, 3);
  EXPECT_FALSE(said.timed_out);
  EXPECT_NE(said.output.find("out\n"), std::string::npos);
  EXPECT_NE(said.output.find("err\n"), std::string::npos);
  const CommandOutput slow = run_command({"sleep", "30"}, 0.3);
  EXPECT_TRUE(slow.timed_out);
  EXPECT_EQ(slow.exit_status, 128 + 9);
  const CommandOutput missing = run_command({"/nonexistent/program"}, 1.0);
  EXPECT_EQ(missing.exit_status, 127);
  EXPECT_NE(missing.output.find("/nonexistent/program"), std::string::npos);
}

}  // namespace
}  // namespace joule::slurm
