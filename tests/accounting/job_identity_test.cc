// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Jobs of processes, read from fixture /proc trees (and this process's own).
#include "joule/accounting/job_identity.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::TempDir;

// A /proc/PID with the given cgroup and environ (NUL-separated) files.
void fake_process(const TempDir& proc, uint32_t pid, uid_t uid, const std::string& cgroup,
                  const std::string& environ = {}) {
  const std::string dir = proc.file(std::to_string(pid));
  std::filesystem::create_directories(dir);
  testing::write_file(dir + "/status", "Name:\tpython3\nUid:\t" + std::to_string(uid) + "\t" + std::to_string(uid) +
                                           "\t" + std::to_string(uid) + "\t" + std::to_string(uid) + "\n");
  testing::write_file(dir + "/cgroup", cgroup);
  if (!environ.empty()) testing::write_file(dir + "/environ", environ);
}

JobIdentity identify(const TempDir& proc, uint32_t pid) {
  const auto id = identify_job(pid, proc.file(""));
  if (!id) throw std::runtime_error("no identity for " + std::to_string(pid));
  return *id;
}

TEST(JobIdentityTest, SlurmJobsComeFromTheCgroupPathInEitherHierarchy) {
  TempDir proc;
  fake_process(proc, 10, 0, "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
  fake_process(proc, 11, 0,
               "12:pids:/slurm/uid_0/job_77/step_batch/task_0\n4:memory:/slurm/uid_0/job_77/step_batch\n");
  fake_process(proc, 12, 0, "0::/system.slice/slurmstepd.scope/job_4712/user/task_0\n");
  EXPECT_EQ(identify(proc, 10), (JobIdentity{JobIdentity::Scheduler::kSlurm, "4711", "root", "0"}));
  EXPECT_EQ(identify(proc, 10).job_label(), "slurm/4711");
  EXPECT_EQ(identify(proc, 11).job_id, "77");
  EXPECT_EQ(identify(proc, 11).step, "batch");
  EXPECT_EQ(identify(proc, 12), (JobIdentity{JobIdentity::Scheduler::kSlurm, "4712", "root", ""}));  // no step named
}

TEST(JobIdentityTest, KubernetesPodsComeFromTheKubeletsCgroupNames) {
  TempDir proc;
  // systemd driver: the uid's dashes written as underscores.
  fake_process(proc, 20, 0,
               "0::/kubepods.slice/kubepods-burstable.slice/"
               "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/cri-containerd-abc.scope\n");
  fake_process(proc, 21, 0, "0::/kubepods/besteffort/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/0123abcd\n");
  const JobIdentity pod{JobIdentity::Scheduler::kKubernetes, "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "root"};
  EXPECT_EQ(identify(proc, 20), pod);
  EXPECT_EQ(identify(proc, 21), pod);
  EXPECT_EQ(pod.job_label(), "kubernetes/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b");
}

TEST(JobIdentityTest, TheEnvironmentNamesASlurmJobTheCgroupDoesNot) {
  TempDir proc;
  using namespace std::string_literals;
  fake_process(proc, 30, 0, "0::/user.slice/user-0.slice/session-1.scope\n",
               "HOME=/root\0SLURM_JOB_ID=\0SLURM_JOB_ID=9001\0PATH=/bin\0"s);
  fake_process(proc, 31, 0, "0::/user.slice/user-0.slice/session-1.scope\n",
               "SLURM_STEP_ID=3\0SLURM_JOB_ID=9002\0"s);
  // No step id: srun gives one to every step's tasks, so this is the batch script's.
  EXPECT_EQ(identify(proc, 30), (JobIdentity{JobIdentity::Scheduler::kSlurm, "9001", "root", "batch"}));
  EXPECT_EQ(identify(proc, 31), (JobIdentity{JobIdentity::Scheduler::kSlurm, "9002", "root", "3"}));
}

// A process no scheduler owns, in a system service: the service is its job.
TEST(JobIdentityTest, ASystemServicesUnitIsTheJobOfItsProcesses) {
  TempDir proc;
  fake_process(proc, 50, 0, "0::/system.slice/ollama.service\n");
  fake_process(proc, 51, 0, "12:pids:/system.slice/tritonserver.service\n1:name=systemd:/system.slice/tritonserver.service\n");
  fake_process(proc, 52, 0, "0::/system.slice/bad\xff\\\"name.service\n");  // not a unit name: the user's
  fake_process(proc, 53, 0, "0::/user.slice/user-0.slice/user@0.service/app.slice/foo.service\n");  // a user's own unit
  EXPECT_EQ(identify(proc, 50), (JobIdentity{JobIdentity::Scheduler::kSystemd, "ollama.service", "root"}));
  EXPECT_EQ(identify(proc, 50).job_label(), "systemd/ollama.service");
  EXPECT_EQ(identify(proc, 51).job_label(), "systemd/tritonserver.service");
  EXPECT_EQ(identify(proc, 52).job_label(), "user/root");
  EXPECT_EQ(identify(proc, 53).job_label(), "user/root");
}

TEST(JobIdentityTest, WithoutAJobTheUserIsTheJob) {
  TempDir proc;
  // job_ followed by more than digits is not Slurm's.
  fake_process(proc, 40, 0, "0::/user.slice/job_12x/app.scope\n");
  fake_process(proc, 41, 4242424, "0::/\n");  // a uid without a passwd entry
  EXPECT_EQ(identify(proc, 40), (JobIdentity{JobIdentity::Scheduler::kNone, "", "root"}));
  EXPECT_EQ(identify(proc, 40).job_label(), "user/root");
  EXPECT_EQ(identify(proc, 41).user, "4242424");
  EXPECT_EQ(identify_job(42, proc.file("")), std::nullopt);  // gone
}

TEST(JobIdentityTest, ReadsARealProcess) {
  const auto id = identify_job(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(id.has_value());
  const passwd* me = getpwuid(getuid());
  EXPECT_EQ(id->user, me ? std::string(me->pw_name) : std::to_string(getuid()));
}

}  // namespace
}  // namespace joule
