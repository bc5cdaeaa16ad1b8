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

#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/device/nvml.h"
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

// Through the NVML backend (the fake driver's scripted processes): memory as
// the driver reports it; a GPU whose driver cannot list processes says why,
// lasting (not supported: top stops asking) or not (an unknown error).
TEST(TopProcessesTest, NvmlProcessesAndWhyAGpuCannotListThem) {
  TempDir tmp;
  const std::string pid = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(
      tmp, "device name=\"NVIDIA H100 80GB HBM3\"\ndevice name=\"NVIDIA H100 80GB HBM3\"\n"
           "device name=\"NVIDIA H100 80GB HBM3\"\n"
           "process device=0 pid=" + pid + " used_mib=2048 kind=compute\n"
           "error function=nvmlDeviceGetComputeRunningProcesses_v3 device=1 code=3\n"
           "error function=nvmlDeviceGetComputeRunningProcesses_v3 device=2 code=999\n");
  NvmlDevices devices = open_nvml_gpus(fake.library_path);
  ASSERT_EQ(devices.gpus.size(), 3u);
  const GpuProcessList listed = list_gpu_processes(*devices.gpus[0], "gpu0");
  ASSERT_EQ(listed.rows.size(), 1u);
  EXPECT_EQ(std::to_string(listed.rows[0].pid), pid);
  EXPECT_EQ(listed.rows[0].used_memory_bytes, 2048ull << 20);
  EXPECT_EQ(listed.rows[0].user, my_user_name());
  const GpuProcessList unsupported = list_gpu_processes(*devices.gpus[1], "gpu1");
  ASSERT_TRUE(unsupported.problem);
  EXPECT_TRUE(unsupported.problem_is_lasting) << *unsupported.problem;
  EXPECT_NE(unsupported.problem->find("nvmlDeviceGetComputeRunningProcesses_v3"), std::string::npos);
  const GpuProcessList failed = list_gpu_processes(*devices.gpus[2], "gpu2");
  ASSERT_TRUE(failed.problem);
  EXPECT_FALSE(failed.problem_is_lasting) << *failed.problem;
}

}  // namespace
}  // namespace joule::cli
