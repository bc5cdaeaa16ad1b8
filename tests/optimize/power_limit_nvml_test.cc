// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The power-limit optimizer against the fake libnvidia-ml.so.1, in real
// processes: the set-calls it makes, in order, and the original limit put
// back however the process ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::TempDir;

// Two GPUs at 300 W (limits 200-300 W): candidates 300, 250, 200 with 50 W
// steps. They would draw 400 W, so each limit caps the power; step times do
// not change (the loop sleeps), so the energy objective picks 200 W.
constexpr const char* kTwoGpus =
    "device name=\"NVIDIA A40\" power_w=400 min_limit_w=200 max_limit_w=300\n"
    "device name=\"NVIDIA A40\" power_w=400 min_limit_w=200 max_limit_w=300\n";

std::vector<std::string> set_calls(int device, const std::vector<int>& limits_w) {
  std::vector<std::string> lines;
  for (int w : limits_w) {
    lines.push_back("nvmlDeviceSetPowerManagementLimit device=" + std::to_string(device) +
                    " limit_mw=" + std::to_string(w * 1000));
  }
  return lines;
}

// The log interleaves the GPUs per limit: gpu0 then gpu1.
std::vector<std::string> interleaved(const std::vector<int>& limits_w) {
  std::vector<std::string> lines;
  for (int w : limits_w) {
    for (int d = 0; d < 2; ++d) lines.push_back(set_calls(d, {w})[0]);
  }
  return lines;
}

struct FakeGpus {
  TempDir dir;
  testing::FakeNvml fake;
  std::map<std::string, std::string> env;
  explicit FakeGpus(const std::string& config) : fake(testing::use_fake_nvml(dir, config)) {
    env = {{"JOULE_NVML_LIBRARY", fake.library_path}, {"JOULE_POWERCAP_ROOT", "/nonexistent"}};
  }
};

TEST(PowerLimitNvmlTest, NormalEndSetsEachCandidateThenTheChoiceThenRestores) {
  FakeGpus run(kTwoGpus);
  const auto r = testing::run_process({JOULE_TRAIN_LOOP_BINARY, "normal", run.dir.file("ready")}, run.env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 300 W is the current limit (not set again); 200 W, the last candidate,
  // is the choice (already set); the end of training restores 300 W.
  EXPECT_EQ(testing::read_lines(run.fake.log_path), interleaved({250, 200, 300}));
  EXPECT_NE(r.err.find("chose 200 W"), std::string::npos) << r.err;
}

TEST(PowerLimitNvmlTest, ExceptionUnwindingRestoresTheOriginalLimit) {
  FakeGpus run(kTwoGpus);
  const auto r = testing::run_process({JOULE_TRAIN_LOOP_BINARY, "throw", run.dir.file("ready")}, run.env);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  // It throws while measuring 250 W (from step 5); unwinding puts 300 W back.
  EXPECT_EQ(testing::read_lines(run.fake.log_path), interleaved({250, 300}));
}

TEST(PowerLimitNvmlTest, SigtermRestoresTheOriginalLimitThenTerminates) {
  FakeGpus run(kTwoGpus);
  const pid_t pid = testing::start_process({JOULE_TRAIN_LOOP_BINARY, "wait", run.dir.file("ready")}, run.env,
                                           run.dir.file("out"), run.dir.file("err"));
  for (int i = 0; i < 500 && access(run.dir.file("ready").c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(access(run.dir.file("ready").c_str(), F_OK), 0);
  kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(pid, 20), 128 + SIGTERM);
  const auto calls = testing::read_lines(run.fake.log_path);
  ASSERT_GE(calls.size(), 4u);
  // Whatever limit it was profiling, the last calls put 300 W back on both.
  EXPECT_EQ(std::vector<std::string>(calls.end() - 2, calls.end()), interleaved({300}));
}

TEST(PowerLimitNvmlTest, NoPermissionFallsBackToObserverModeAndKeepsTraining) {
  FakeGpus run(std::string(kTwoGpus) + "error function=nvmlDeviceSetPowerManagementLimit code=4\n");
  const auto r = testing::run_process({JOULE_TRAIN_LOOP_BINARY, "normal", run.dir.file("ready")}, run.env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::read_lines(run.fake.log_path).empty());
  EXPECT_NE(r.err.find("needs root or the joule daemon"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("OBSERVER MODE"), std::string::npos) << r.err;
}

// Two H100-like GPUs whose SM clocks the optimizer caps at 1980, 1485 and
// 990 MHz: steps take 20 ms / (cap / 1980), the power above 100 W falls with
// the cube of the clock, so the energy objective picks 990 MHz.
constexpr const char* kTwoClockedGpus =
    "device name=\"NVIDIA H100\" power_w=400 idle_w=100 min_limit_w=200 max_limit_w=300 max_sm_mhz=1980 "
    "min_sm_mhz=210 sm_step_mhz=15\n"
    "device name=\"NVIDIA H100\" power_w=400 idle_w=100 min_limit_w=200 max_limit_w=300 max_sm_mhz=1980 "
    "min_sm_mhz=210 sm_step_mhz=15\n";

std::vector<std::string> clock_calls(const std::vector<int>& caps_mhz) {
  std::vector<std::string> lines;
  for (int cap : caps_mhz) {
    for (int d = 0; d < 2; ++d) {
      lines.push_back(cap == 0 ? "nvmlDeviceResetGpuLockedClocks device=" + std::to_string(d)
                               : "nvmlDeviceSetGpuLockedClocks device=" + std::to_string(d) +
                                     " min_mhz=210 max_mhz=" + std::to_string(cap));
    }
  }
  return lines;
}

TEST(PowerLimitNvmlTest, SmClockKnobLocksEachCapThenTheChoiceThenResets) {
  FakeGpus run(kTwoClockedGpus);
  const auto r = testing::run_process({JOULE_TRAIN_LOOP_BINARY, "normal", run.dir.file("ready"), "sm_clock"}, run.env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 1980 MHz is the unlocked clock (nothing to set); 990 MHz, the last cap,
  // is the choice (already set); the end of training resets the locks.
  EXPECT_EQ(testing::read_lines(run.fake.log_path), clock_calls({1485, 990, 0}));
  EXPECT_NE(r.err.find("chose SM clock cap 990 MHz"), std::string::npos) << r.err;
}

TEST(PowerLimitNvmlTest, ExceptionsAndSigtermResetTheClockLocks) {
  {
    FakeGpus run(kTwoClockedGpus);
    const auto r = testing::run_process({JOULE_TRAIN_LOOP_BINARY, "throw", run.dir.file("ready"), "sm_clock"}, run.env);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(testing::read_lines(run.fake.log_path), clock_calls({1485, 0}));
  }
  FakeGpus run(kTwoClockedGpus);
  const pid_t pid = testing::start_process({JOULE_TRAIN_LOOP_BINARY, "wait", run.dir.file("ready"), "sm_clock"},
                                           run.env, run.dir.file("out"), run.dir.file("err"));
  for (int i = 0; i < 500 && access(run.dir.file("ready").c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(access(run.dir.file("ready").c_str(), F_OK), 0);
  kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(pid, 20), 128 + SIGTERM);
  const auto calls = testing::read_lines(run.fake.log_path);
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(calls.end() - 2, calls.end()), clock_calls({0}));
}

}  // namespace
}  // namespace joule
