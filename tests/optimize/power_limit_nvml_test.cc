// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The power-limit optimizer against the fake driver libraries (NVML and ROCm
// SMI, each test once per driver), in real processes: the set-calls it
// makes, in order, and the original limit put back however the process ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "common/fake_drivers.h"
#include "common/test_support.h"

namespace joule {
namespace {

using testing::FakeDriver;
using testing::TempDir;

// Two GPUs at 300 W (limits 200-300 W): candidates 300, 250, 200 with 50 W
// steps. They would draw 400 W, so each limit caps the power; step times do
// not change (the loop sleeps), so the energy objective picks 200 W.
constexpr const char* kTwoGpus =
    "device power_w=400 min_limit_w=200 max_limit_w=300 limit_w=300 default_limit_w=300\n"
    "device power_w=400 min_limit_w=200 max_limit_w=300 limit_w=300 default_limit_w=300\n";

class PowerLimitOnFakeDriverTest : public ::testing::TestWithParam<FakeDriver> {
 protected:
  const FakeDriver& driver() const { return GetParam(); }

  void use(const std::string& config) {
    fake = driver().use(dir, config);
    env = driver().env(fake);
  }
  std::vector<std::string> train_loop(const std::string& mode, const std::string& knob) const {
    return {JOULE_TRAIN_LOOP_BINARY, mode, dir.file("ready"), knob, driver().name};
  }
  // Starts the loop in `wait` mode and kills it with SIGTERM once it is
  // profiling its second setting; the set calls it made.
  std::vector<std::string> sigterm_while_profiling(const std::string& knob) const {
    const pid_t pid = testing::start_process(train_loop("wait", knob), env, dir.file("out"), dir.file("err"));
    for (int i = 0; i < 500 && access(dir.file("ready").c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(access(dir.file("ready").c_str(), F_OK), 0);
    kill(pid, SIGTERM);
    EXPECT_EQ(testing::wait_process(pid, 20), 128 + SIGTERM);
    return testing::read_lines(fake.log_path);
  }

  // The log lines setting each limit in turn, per limit gpu0 then gpu1.
  std::vector<std::string> limit_calls(const std::vector<int>& limits_w) const {
    std::vector<std::string> lines;
    for (int w : limits_w) {
      for (int d = 0; d < 2; ++d) {
        for (const auto& line : driver().power_limit_log(d, w)) lines.push_back(line);
      }
    }
    return lines;
  }
  // The same for SM clock caps; 0: the locks reset.
  std::vector<std::string> clock_calls(const std::vector<unsigned>& caps_mhz) const {
    std::vector<std::string> lines;
    for (unsigned cap : caps_mhz) {
      for (int d = 0; d < 2; ++d) {
        const auto calls = cap == 0 ? driver().clock_reset_log(d) : driver().clock_lock_log(d, cap);
        lines.insert(lines.end(), calls.begin(), calls.end());
      }
    }
    return lines;
  }
  static std::vector<std::string> last(const std::vector<std::string>& lines, std::size_t n) {
    return std::vector<std::string>(lines.end() - static_cast<std::ptrdiff_t>(std::min(n, lines.size())), lines.end());
  }

  TempDir dir;
  testing::FakeLibrary fake;
  std::map<std::string, std::string> env;
};

TEST_P(PowerLimitOnFakeDriverTest, NormalEndSetsEachCandidateThenTheChoiceThenRestores) {
  use(kTwoGpus);
  const auto r = testing::run_process(train_loop("normal", "power_limit"), env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 300 W is the current limit (not set again); 200 W, the last candidate,
  // is the choice (already set); the end of training restores 300 W.
  EXPECT_EQ(testing::read_lines(fake.log_path), limit_calls({250, 200, 300}));
  EXPECT_NE(r.err.find("chose 200 W"), std::string::npos) << r.err;
}

TEST_P(PowerLimitOnFakeDriverTest, ExceptionUnwindingRestoresTheOriginalLimit) {
  use(kTwoGpus);
  const auto r = testing::run_process(train_loop("throw", "power_limit"), env);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  // It throws while measuring 250 W (from step 5); unwinding puts 300 W back.
  EXPECT_EQ(testing::read_lines(fake.log_path), limit_calls({250, 300}));
}

TEST_P(PowerLimitOnFakeDriverTest, SigtermRestoresTheOriginalLimitThenTerminates) {
  use(kTwoGpus);
  const auto calls = sigterm_while_profiling("power_limit");
  ASSERT_GE(calls.size(), 4u);
  // Whatever limit it was profiling, the last calls put 300 W back on both.
  const auto restore = limit_calls({300});
  EXPECT_EQ(last(calls, restore.size()), restore);
}

TEST_P(PowerLimitOnFakeDriverTest, NoPermissionFallsBackToObserverModeAndKeepsTraining) {
  use(std::string(kTwoGpus) + "error function=@set_power_limit code=@no_permission\n");
  const auto r = testing::run_process(train_loop("normal", "power_limit"), env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::read_lines(fake.log_path).empty());
  EXPECT_NE(r.err.find("needs root or the joule daemon"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("OBSERVER MODE"), std::string::npos) << r.err;
}

// Two GPUs whose core clocks (core_clocks: among them 1980, 1485 and 990 MHz)
// the optimizer caps at those three: steps take 20 ms / (cap / 1980), the
// power above 100 W falls with the cube of the clock, so the energy
// objective picks 990 MHz.
constexpr const char* kTwoClockedGpus =
    "device power_w=400 idle_w=100 min_limit_w=200 max_limit_w=300 limit_w=300 core_clocks\n"
    "device power_w=400 idle_w=100 min_limit_w=200 max_limit_w=300 limit_w=300 core_clocks\n";

TEST_P(PowerLimitOnFakeDriverTest, SmClockKnobLocksEachCapThenTheChoiceThenResets) {
  use(kTwoClockedGpus);
  const auto r = testing::run_process(train_loop("normal", "sm_clock"), env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 1980 MHz is the unlocked clock (nothing to set); 990 MHz, the last cap,
  // is the choice (already set); the end of training resets the locks.
  EXPECT_EQ(testing::read_lines(fake.log_path), clock_calls({1485, 990, 0}));
  EXPECT_NE(r.err.find("chose SM clock cap 990 MHz"), std::string::npos) << r.err;
}

TEST_P(PowerLimitOnFakeDriverTest, AnExceptionResetsTheClockLocks) {
  use(kTwoClockedGpus);
  const auto r = testing::run_process(train_loop("throw", "sm_clock"), env);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(testing::read_lines(fake.log_path), clock_calls({1485, 0}));
}

TEST_P(PowerLimitOnFakeDriverTest, SigtermResetsTheClockLocks) {
  use(kTwoClockedGpus);
  const auto calls = sigterm_while_profiling("sm_clock");
  ASSERT_GE(calls.size(), 4u);
  const auto reset = clock_calls({0});
  EXPECT_EQ(last(calls, reset.size()), reset);
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, PowerLimitOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

}  // namespace
}  // namespace joule
