// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule top`'s per-process rows (issue 34): the device layer's process
// listing of a simulated GPU, with user, job and command read from /proc
// (this process's own, and fixture trees through identify_job).
#include "cli/top_processes.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>

#include "common/fake_drivers.h"
#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/device/sim.h"

namespace joule::cli {
namespace {

using testing::TempDir;

std::string my_user_name() {
  const passwd* pw = getpwuid(getuid());
  return pw ? pw->pw_name : std::to_string(getuid());
}

TEST(TopProcessesTest, ListsTheSimulatedGpusProcessesWithUserAndCommand) {
  SimGpu gpu(0, SimGpuModel{}, std::make_shared<VirtualClock>());
  EXPECT_TRUE(list_gpu_processes(gpu, "gpu0").rows.empty());
  const auto self = static_cast<uint32_t>(getpid());
  // A pid that no process has: its row keeps pid and memory.
  const uint32_t gone = 0x7ffffff0u;
  gpu.set_processes({{gone, std::nullopt}, {self, 512ull << 20}});
  const GpuProcessList list = list_gpu_processes(gpu, "gpu0");
  EXPECT_FALSE(list.problem);
  ASSERT_EQ(list.rows.size(), 2u);
  const TopProcessRow& mine = list.rows[0];  // by pid
  EXPECT_EQ(mine.gpu_id, "gpu0");
  EXPECT_EQ(mine.pid, self);
  EXPECT_EQ(mine.used_memory_bytes, 512ull << 20);
  EXPECT_EQ(mine.user, my_user_name());
  EXPECT_NE(mine.command.find("joule_tests"), std::string::npos) << mine.command;
  const TopProcessRow& other = list.rows[1];
  EXPECT_EQ(other.pid, gone);
  EXPECT_EQ(other.user, "-");
  EXPECT_EQ(other.job, "-");
  EXPECT_EQ(other.command, "-");
  EXPECT_FALSE(other.used_memory_bytes);
}

// The job comes from the telemetry module's identify_job (here a Slurm job's
// cgroup in a fixture /proc); the command from cmdline, else [comm].
TEST(TopProcessesTest, JobAndCommandComeFromProc) {
  TempDir proc;
  using namespace std::string_literals;
  const std::string dir = proc.file("4242");
  std::filesystem::create_directories(dir);
  testing::write_file(dir + "/status", "Name:\tpython3\nUid:\t0\t0\t0\t0\n");
  testing::write_file(dir + "/cgroup", "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
  testing::write_file(dir + "/cmdline", "python3\0train.py\0--lr\0" "0.1\0"s);
  const std::string kthread = proc.file("77");
  std::filesystem::create_directories(kthread);
  testing::write_file(kthread + "/status", "Name:\tworker\nUid:\t0\t0\t0\t0\n");
  testing::write_file(kthread + "/cgroup", "0::/\n");
  testing::write_file(kthread + "/cmdline", "");
  testing::write_file(kthread + "/comm", "worker\n");

  SimGpu gpu(1, SimGpuModel{}, std::make_shared<VirtualClock>());
  gpu.set_processes({{4242, 80ull << 30}, {77, 0}});
  const GpuProcessList list = list_gpu_processes(gpu, "gpu1", proc.file(""));
  ASSERT_EQ(list.rows.size(), 2u);
  EXPECT_EQ(list.rows[0].pid, 77u);
  EXPECT_EQ(list.rows[0].command, "[worker]");
  EXPECT_EQ(list.rows[0].job, "-");
  EXPECT_EQ(list.rows[0].user, "root");
  EXPECT_EQ(list.rows[1].job, "slurm/4711");
  EXPECT_EQ(list.rows[1].command, "python3 train.py --lr 0.1");
  EXPECT_EQ(process_command(4242, proc.file("")), "python3 train.py --lr 0.1");
  EXPECT_FALSE(process_command(99, proc.file("")));
}

// Through each driver's backend (the fake's scripted processes): memory as
// the driver reports it; a GPU whose driver cannot list processes says why,
// lasting (not supported: top stops asking) or not (an unknown error).
class TopProcessesOnFakeDriverTest : public ::testing::TestWithParam<testing::FakeDriver> {};

TEST_P(TopProcessesOnFakeDriverTest, ProcessesAndWhyAGpuCannotListThem) {
  const testing::FakeDriver& driver = GetParam();
  TempDir tmp;
  const auto self = static_cast<uint32_t>(getpid());
  const uint32_t gone = 0x7ffffff0u;  // on both GPUs; no process has its pid
  {
    const auto fake = driver.use(tmp, "device\ndevice\nprocess device=0 pid=" + std::to_string(self) +
                                          " used_mib=2048\nprocess device=0 pid=" + std::to_string(gone) +
                                          " used_mib=512\nprocess device=1 pid=" + std::to_string(gone) +
                                          " used_mib=256\n");
    const auto gpus = driver.open(fake);
    ASSERT_EQ(gpus.size(), 2u);
    const GpuProcessList first = list_gpu_processes(*gpus[0], "gpu0");
    ASSERT_FALSE(first.problem) << *first.problem;
    ASSERT_EQ(first.rows.size(), 2u);
    EXPECT_EQ(first.rows[0].pid, self);
    EXPECT_EQ(first.rows[0].used_memory_bytes, 2048ull << 20);
    EXPECT_EQ(first.rows[0].user, my_user_name());
    EXPECT_EQ(first.rows[1].pid, gone);
    const GpuProcessList second = list_gpu_processes(*gpus[1], "gpu1");
    ASSERT_EQ(second.rows.size(), 1u);
    EXPECT_EQ(second.rows[0].pid, gone);
    if (driver.backend == GpuBackend::kNvml) {  // NVML: each GPU's memory of the process
      EXPECT_EQ(first.rows[1].used_memory_bytes, 512ull << 20);
      EXPECT_EQ(second.rows[0].used_memory_bytes, 256ull << 20);
    } else {  // ROCm SMI: one VRAM figure over all its GPUs, so none for a process on two
      EXPECT_FALSE(first.rows[1].used_memory_bytes);
      EXPECT_FALSE(second.rows[0].used_memory_bytes);
    }
  }
  const auto failing = [&](const std::string& code) {
    const auto fake = driver.use(tmp, "device\nerror function=@processes code=" + code + "\n");
    const auto gpus = driver.open(fake);
    return list_gpu_processes(*gpus.at(0), "gpu0");
  };
  const GpuProcessList unsupported = failing("@not_supported");
  ASSERT_TRUE(unsupported.problem);
  EXPECT_TRUE(unsupported.problem_is_lasting) << *unsupported.problem;
  EXPECT_NE(unsupported.problem->find(driver.words.at("@processes")), std::string::npos) << *unsupported.problem;
  const GpuProcessList failed = failing("@unknown");
  ASSERT_TRUE(failed.problem);
  EXPECT_FALSE(failed.problem_is_lasting) << *failed.problem;
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, TopProcessesOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

}  // namespace
}  // namespace joule::cli
