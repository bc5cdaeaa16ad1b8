// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The job ledger: a GPU's energy split among its processes' jobs, and the
// file that keeps it across restarts (every malformed file refused whole,
// naming the field, and left as it was).
#include "joule/accounting/job_ledger.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/test_support.h"
#include "joule/accounting/ledger_file.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::TempDir;

JobIdentity slurm_job(const std::string& id, const std::string& user) {
  return {JobIdentity::Scheduler::kSlurm, id, user};
}

double job_energy(const JobLedger& ledger, const std::string& job, std::size_t gpu) {
  double total = 0.0;
  for (const auto& [key, energy_j] : ledger.job_gpu_energy_j()) {
    if (key.job == job && key.gpu == gpu) total += energy_j;
  }
  return total;
}

TEST(JobLedgerTest, SplitsAStepOverTheProcessesListedAtItsStartAndEnd) {
  JobLedger ledger(2, 1);
  const JobIdentities ids = {{100, slurm_job("7", "alice")}, {200, slurm_job("8", "bob")}, {300, std::nullopt}};
  ledger.charge_gpu(0, 100.0, std::vector<uint32_t>{100}, ids);
  ledger.finish_step(ids);
  // 200 starts (looked up this step; 100 is known from the last): the step
  // is shared by 100 (listed at its start) and 200.
  const JobIdentities new_ones = {{200, slurm_job("8", "bob")}};
  ledger.charge_gpu(0, 100.0, std::vector<uint32_t>{100, 200}, new_ones);
  ledger.finish_step(new_ones);
  // Not listed this step (the driver failed): the last list stands.
  ledger.charge_gpu(0, 60.0, std::nullopt, {});
  // 300's job was not found: its share is nobody's.
  ledger.charge_gpu(1, 40.0, std::vector<uint32_t>{300}, ids);
  ledger.charge_gpu(1, 10.0, std::vector<uint32_t>{}, ids);
  ledger.charge_cpu(0, 25.0);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/7", 0), 100 + 50 + 30);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/8", 0), 50 + 30);
  EXPECT_DOUBLE_EQ(ledger.gpu_energy_j(0), 260);
  EXPECT_DOUBLE_EQ(ledger.unattributed_j(0), 0);
  EXPECT_DOUBLE_EQ(ledger.gpu_energy_j(1), 50);
  EXPECT_DOUBLE_EQ(ledger.unattributed_j(1), 40 + 10);
  EXPECT_DOUBLE_EQ(ledger.cpu_energy_j(0), 25);
  // Only the processes the next step may charge are remembered.
  ledger.finish_step({});
  EXPECT_EQ(ledger.known_identities().count(100), 1u);
  EXPECT_EQ(ledger.known_identities().count(300), 0u);
}

// A Slurm job's steps each keep their own total, and the job's is their sum.
TEST(JobLedgerTest, KeepsEachSlurmStepsTotalBesideItsJobs) {
  JobLedger ledger(1, 0);
  JobIdentity batch = slurm_job("7", "alice"), step0 = slurm_job("7", "alice");
  batch.step = "batch";
  step0.step = "0";
  const JobIdentities ids = {{100, batch}, {101, step0}, {200, slurm_job("8", "bob")}};
  ledger.charge_gpu(0, 90.0, std::vector<uint32_t>{100, 101, 200}, ids);
  ledger.finish_step(ids);
  ledger.charge_gpu(0, 40.0, std::vector<uint32_t>{101}, {});
  const auto& steps = ledger.job_step_gpu_energy_j();
  ASSERT_EQ(steps.size(), 3u);
  // The second step is shared by all three listed at its start, and 101.
  EXPECT_DOUBLE_EQ(steps.at({{"slurm/7", "alice", 0}, "batch"}), 30 + 40.0 / 3);
  EXPECT_DOUBLE_EQ(steps.at({{"slurm/7", "alice", 0}, "0"}), 30 + 40.0 / 3);
  EXPECT_DOUBLE_EQ(steps.at({{"slurm/8", "bob", 0}, ""}), 30 + 40.0 / 3);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/7", 0), 60 + 80.0 / 3);
  // Restored per step, the job's total is again their sum, whatever the order.
  JobLedger restored(1, 0);
  restored.restore_job({{"slurm/7", "alice", 0}, "0"}, 5.0);
  restored.restore_job({{"slurm/7", "alice", 0}, "batch"}, 7.0);
  restored.restore_job({{"slurm/7", "alice", 0}, "0"}, 6.0);
  EXPECT_DOUBLE_EQ(job_energy(restored, "slurm/7", 0), 13.0);
}

// Where the driver sampled the sharing processes' SM utilisation, a shared
// step goes by it; a process with no sample then gets nothing; with no
// sample at all (or none usable), equal shares.
TEST(JobLedgerTest, SplitsASharedStepByTheProcessesUtilisationWhereSampled) {
  JobLedger ledger(1, 0);
  const JobIdentities ids = {{100, slurm_job("7", "alice")}, {200, slurm_job("8", "bob")}, {300, slurm_job("9", "carol")}};
  ledger.charge_gpu(0, 100.0, std::vector<uint32_t>{100, 200, 300}, ids, {{100, 300.0}, {200, 100.0}});
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/7", 0), 75.0);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/8", 0), 25.0);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/9", 0), 0.0);
  EXPECT_TRUE(ledger.split_by_utilization(0));
  ledger.finish_step(ids);
  ledger.charge_gpu(0, 90.0, std::vector<uint32_t>{100, 200, 300}, ids,
                    {{100, std::nan("")}, {200, -5.0}, {300, std::numeric_limits<double>::infinity()}});
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/7", 0), 75.0 + 30);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/9", 0), 30.0);
  EXPECT_FALSE(ledger.split_by_utilization(0));
  EXPECT_DOUBLE_EQ(ledger.gpu_energy_j(0), 190.0);
  EXPECT_DOUBLE_EQ(ledger.unattributed_j(0), 0.0);
}

// A job charged nothing for keep_s is forgotten, its steps, CPU energy and
// container too; the GPU's totals keep its energy; a job still charged, or
// any job with keep_s 0, stays. The stamps go on across a restart.
TEST(JobLedgerTest, ForgetsJobsChargedNothingForTheKeepTime) {
  JobLedger ledger(1, 1);
  const JobIdentities ids = {{100, JobIdentity{JobIdentity::Scheduler::kKubernetes, "uid-1", "root"}},
                             {200, slurm_job("8", "bob")}};
  const KubernetesPod pod{"ml", "trainer-0", "pytorch"};
  ledger.charge_gpu(0, 100.0, std::vector<uint32_t>{100}, ids);
  ledger.charge_pods(0, 100.0, {pod}, ids);
  ledger.charge_cpu_jobs(0, 10.0, {{"kubernetes/uid-1", "root", 0.5}});
  ledger.finish_step(ids);
  EXPECT_EQ(ledger.forget_idle(1000.0, 60.0), 0u);
  // From now on only bob's job runs.
  ledger.charge_gpu(0, 50.0, std::vector<uint32_t>{200}, ids);
  ledger.finish_step(ids);
  ledger.charge_gpu(0, 50.0, std::vector<uint32_t>{200}, ids);
  EXPECT_EQ(ledger.forget_idle(1030.0, 60.0), 0u);
  EXPECT_EQ(ledger.forget_idle(1030.0, 0.0), 0u);  // 0: keep every job
  // (The second step was the pod's too: its process was listed at its start.)
  ledger.charge_gpu(0, 50.0, std::vector<uint32_t>{200}, ids);
  EXPECT_EQ(ledger.forget_idle(1061.0, 60.0), 0u);
  ledger.charge_gpu(0, 50.0, std::vector<uint32_t>{200}, ids);
  EXPECT_EQ(ledger.forget_idle(1095.0, 60.0), 1u);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "kubernetes/uid-1", 0), 0.0);
  EXPECT_TRUE(ledger.job_cpu_energy_j().empty());
  EXPECT_TRUE(ledger.pod_gpu_energy_j().empty());
  EXPECT_TRUE(ledger.job_pods().empty());
  EXPECT_GT(job_energy(ledger, "slurm/8", 0), 0.0);
  EXPECT_DOUBLE_EQ(ledger.gpu_energy_j(0), 300.0);
  EXPECT_EQ(ledger.last_charged_unix_s().count("kubernetes/uid-1"), 0u);
  EXPECT_DOUBLE_EQ(ledger.last_charged_unix_s().at("slurm/8"), 1095.0);

  TempDir dir;
  LedgerFile(dir.file("ledger.json"), {"GPU-a"}, {"package-0"}).save(ledger, {std::nullopt}, 1095.0);
  JobLedger after(1, 1);
  LedgerFile(dir.file("ledger.json"), {"GPU-a"}, {"package-0"}).load(after);
  EXPECT_DOUBLE_EQ(after.last_charged_unix_s().at("slurm/8"), 1095.0);
  EXPECT_EQ(after.forget_idle(1200.0, 60.0), 1u);  // idle since its stamp, across the restart
}

TEST(JobLedgerTest, AnEnergyThatIsNotAFiniteNonNegativeNumberIsRefusedAndNothingCharged) {
  JobLedger ledger(1, 1);
  for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_THROW(ledger.charge_gpu(0, bad, std::vector<uint32_t>{}, {}), UsageError) << bad;
    EXPECT_THROW(ledger.charge_cpu(0, bad), UsageError) << bad;
  }
  EXPECT_EQ(ledger.gpu_energy_j(0), 0.0);
  EXPECT_EQ(ledger.unattributed_j(0), 0.0);
  EXPECT_EQ(ledger.cpu_energy_j(0), 0.0);
}

TEST(LedgerFileTest, WhatIsSavedIsRestoredAndWhatThisNodeLacksIsKept) {
  TempDir dir;
  const std::string path = dir.file("ledger.json");
  JobLedger before(2, 1);
  JobIdentity stepped = slurm_job("7", "alice");
  stepped.step = "batch";
  const JobIdentities ids = {{100, stepped}, {300, std::nullopt}};
  before.charge_gpu(0, 100.0, std::vector<uint32_t>{100, 300}, ids);
  before.charge_gpu(1, 30.0, std::vector<uint32_t>{}, ids);
  before.charge_cpu(0, 12.5);
  before.finish_step(ids);
  LedgerFile(path, {"GPU-a", "GPU-b"}, {"cpu0-package"}).save(before, {CounterMark{5000.0, 100.0}, std::nullopt}, 1.7e9);

  // Restarted on a node where GPU-b is gone and GPU-c is new.
  JobLedger after(2, 1);
  LedgerFile file(path, {"GPU-c", "GPU-a"}, {"cpu0-package"});
  const LedgerFile::Restored restored = file.load(after);
  ASSERT_TRUE(restored.found);
  EXPECT_DOUBLE_EQ(restored.saved_unix_s, 1.7e9);
  EXPECT_FALSE(restored.marks[0]);
  ASSERT_TRUE(restored.marks[1]);
  EXPECT_DOUBLE_EQ(restored.marks[1]->counter_j, 5000.0);
  EXPECT_DOUBLE_EQ(restored.marks[1]->accounted_j, 100.0);
  EXPECT_DOUBLE_EQ(after.gpu_energy_j(1), 100.0);
  EXPECT_DOUBLE_EQ(after.unattributed_j(1), 50.0);
  EXPECT_DOUBLE_EQ(job_energy(after, "slurm/7", 1), 50.0);
  EXPECT_DOUBLE_EQ(after.job_step_gpu_energy_j().at({{"slurm/7", "alice", 1}, "batch"}), 50.0);
  EXPECT_EQ(after.listed_pids(1), (std::vector<uint32_t>{100, 300}));
  EXPECT_EQ(after.known_identities().at(100), stepped);
  EXPECT_FALSE(after.known_identities().at(300));
  EXPECT_DOUBLE_EQ(after.gpu_energy_j(0), 0.0);
  EXPECT_DOUBLE_EQ(after.cpu_energy_j(0), 12.5);
  // GPU-b's totals travel on in the file, untouched.
  file.save(after, restored.marks, 1.8e9);
  JobLedger again(2, 1);
  LedgerFile(path, {"GPU-b", "GPU-a"}, {"cpu0-package"}).load(again);
  EXPECT_DOUBLE_EQ(again.gpu_energy_j(0), 30.0);
  EXPECT_DOUBLE_EQ(again.unattributed_j(0), 30.0);
  EXPECT_DOUBLE_EQ(again.gpu_energy_j(1), 100.0);
}

// A file written before per-step totals has no step: its jobs come back whole.
TEST(LedgerFileTest, AJobWithoutAStepIsRestoredWhole) {
  TempDir dir;
  const std::string path = dir.file("ledger.json");
  testing::write_file(path, R"({"joule_ledger": 1, "saved_unix_s": 1, "gpus": [{"uuid": "GPU-a", "energy_j": 9, )"
                            R"("unattributed_j": 0, "listed_pids": [], "counter_mark": null}], "cpu_zones": [], )"
                            R"("jobs": [{"job": "slurm/1", "user": "a", "gpu_uuid": "GPU-a", "energy_j": 9}], "processes": []})");
  JobLedger ledger(1, 0);
  LedgerFile file(path, {"GPU-a"}, {});
  file.load(ledger);
  EXPECT_DOUBLE_EQ(job_energy(ledger, "slurm/1", 0), 9.0);
  EXPECT_DOUBLE_EQ(ledger.job_step_gpu_energy_j().at({{"slurm/1", "a", 0}, ""}), 9.0);
  file.save(ledger, {std::nullopt}, 2.0);
  EXPECT_NE(testing::read_file(path).find("\"step\": \"\""), std::string::npos) << testing::read_file(path);
}

// Each container's energy and the container each Kubernetes job ran in go
// on across a restart too.
TEST(LedgerFileTest, KeepsEachContainersEnergyAndWhereEachKubernetesJobRan) {
  TempDir dir;
  const std::string path = dir.file("ledger.json");
  JobLedger before(1, 0);
  const JobIdentities ids = {{100, JobIdentity{JobIdentity::Scheduler::kKubernetes, "uid-1", "root"}}};
  const KubernetesPod pod{"ml", "trainer-0", "pytorch"};
  before.charge_gpu(0, 80.0, std::vector<uint32_t>{100}, ids);
  before.charge_pods(0, 80.0, {pod}, ids);
  before.finish_step(ids);
  LedgerFile(path, {"GPU-a"}, {}).save(before, {std::nullopt}, 3.0);
  JobLedger after(1, 0);
  LedgerFile(path, {"GPU-a"}, {}).load(after);
  EXPECT_DOUBLE_EQ(after.pod_gpu_energy_j().at({pod, 0}), 80.0);
  EXPECT_EQ(after.job_pods().at("kubernetes/uid-1"), pod);

  testing::write_file(path, R"({"joule_ledger": 1, "saved_unix_s": 1, "gpus": [], "cpu_zones": [], "jobs": [], )"
                            R"("pods": [{"namespace": "ml", "pod": "p", "gpu_uuid": "GPU-a", "energy_j": 1}], "processes": []})");
  JobLedger refused(1, 0);
  try {
    LedgerFile(path, {"GPU-a"}, {}).load(refused);
    ADD_FAILURE() << "a pod without its container was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pods[0]: \"container\" is missing"), std::string::npos) << e.what();
  }
}

TEST(LedgerFileTest, NoFileYetRestoresNothing) {
  TempDir dir;
  JobLedger ledger(1, 0);
  const auto restored = LedgerFile(dir.file("none.json"), {"GPU-a"}, {}).load(ledger);
  EXPECT_FALSE(restored.found);
  EXPECT_EQ(ledger.gpu_energy_j(0), 0.0);
}

TEST(LedgerFileTest, AMalformedFileIsRefusedNamingTheFieldAndLeftAsItIs) {
  TempDir dir;
  const std::string path = dir.file("ledger.json");
  const std::string good_gpu = R"({"uuid": "GPU-a", "energy_j": 1, "unattributed_j": 0, "listed_pids": [], "counter_mark": null})";
  const auto ledger_with = [&](const std::string& gpu, const std::string& rest = R"("cpu_zones": [], "jobs": [], "processes": [])") {
    return R"({"joule_ledger": 1, "saved_unix_s": 1, "gpus": [)" + gpu + "], " + rest + "}";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json at all", "not JSON"},
      {"{\"joule_ledger\": 1, \"saved_unix_s\": 1, \"gpus\": [\"\xff\xfe\"]}", "not JSON"},
      {R"({"some": "other file"})", "not a joule job ledger"},
      {R"({"joule_ledger": 2})", "joule_ledger: version 2"},
      {ledger_with(R"({"uuid": "GPU-a", "energy_j": -5, "unattributed_j": 0, "listed_pids": [], "counter_mark": null})"),
       "gpus[0].energy_j: -5 is not a finite, non-negative number"},
      {ledger_with(R"({"uuid": "GPU-a", "energy_j": "lots", "unattributed_j": 0, "listed_pids": [], "counter_mark": null})"),
       "gpus[0].energy_j: not a number"},
      {ledger_with(R"({"uuid": "GPU-a", "energy_j": 1e400, "unattributed_j": 0, "listed_pids": [], "counter_mark": null})"),
       "number overflow"},
      {ledger_with(R"({"uuid": "GPU-a", "energy_j": 1, "unattributed_j": 0, "listed_pids": [-3], "counter_mark": null})"),
       "gpus[0].listed_pids[0]: not a process id"},
      {ledger_with(R"({"uuid": "GPU-a", "energy_j": 1, "listed_pids": [], "counter_mark": null})"),
       "gpus[0]: \"unattributed_j\" is missing"},
      {ledger_with(good_gpu, R"("cpu_zones": [], "jobs": [{"job": "slurm/1", "user": "a", "gpu_uuid": "GPU-a", "energy_j": -1}], "processes": [])"),
       "jobs[0].energy_j"},
      {ledger_with(good_gpu, R"("cpu_zones": [], "jobs": [], "processes": [{"pid": 1, "job": {"scheduler": "pbs", "job_id": "1", "user": "a"}}])"),
       "processes[0].job.scheduler: not slurm, kubernetes, systemd or none"},
  };
  for (const auto& [content, expected] : cases) {
    testing::write_file(path, content);
    JobLedger ledger(1, 0);
    try {
      LedgerFile(path, {"GPU-a"}, {}).load(ledger);
      ADD_FAILURE() << "accepted: " << content;
    } catch (const UsageError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
      EXPECT_NE(message.find("left as it is"), std::string::npos) << message;
    }
    EXPECT_EQ(testing::read_file(path), content);
    EXPECT_EQ(ledger.gpu_energy_j(0), 0.0);
  }
}

}  // namespace
}  // namespace joule
