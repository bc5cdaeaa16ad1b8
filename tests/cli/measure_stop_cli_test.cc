// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Issue 47: a stop signal sent to `joule measure` reached only the command's
// first process; what it had started went on, orphaned. The command runs in
// a process group of its own that gets the signal, then SIGKILL after
// --kill-grace-s; joule exits once the group is gone, with 128 + the signal.
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>
#include <ostream>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "sweep/workload_processes.h"

namespace joule {
namespace {

using testing::TempDir;

constexpr double kGraceS = 1.5;

struct MeasureStopCase {
  testing::StopWorkload workload;
  int signal_number;
};

void PrintTo(const MeasureStopCase& c, std::ostream* out) {
  *out << c.workload.name << " " << testing::signal_name(c.signal_number);
}

class MeasureStopSignalTest : public ::testing::TestWithParam<MeasureStopCase> {};

TEST_P(MeasureStopSignalTest, NoProcessOfTheCommandSurvivesJoule) {
  const MeasureStopCase& c = GetParam();
  TempDir tmp;
  const std::string pids = tmp.file("pids");
  testing::write_file(tmp.file("workload.sh"), c.workload.script);
  const pid_t joule = testing::start_in_own_session(
      {JOULE_BINARY, "measure", "--sim", "count=1", "--kill-grace-s", std::to_string(kGraceS), "--", "sh",
       tmp.file("workload.sh"), pids, "/dev/null"},
      testing::simulated_only_env(), tmp.file("out"), tmp.file("err"));
  ASSERT_TRUE(testing::wait_for_pids(pids, c.workload.expected_pids, 20)) << testing::read_file(tmp.file("err"));

  const auto signalled = std::chrono::steady_clock::now();
  kill(joule, c.signal_number);
  const std::optional<int> exit_code = testing::wait_at_most(joule, kGraceS + 1.0);
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  const std::vector<pid_t> survivors = testing::surviving_pids(pids);
  const bool cleaned_up = std::filesystem::exists(pids + ".seen");
  testing::kill_leftovers(joule, pids);

  ASSERT_TRUE(exit_code.has_value()) << "joule measure still running " << kGraceS + 1.0 << " s after "
                                     << testing::signal_name(c.signal_number);
  EXPECT_EQ(*exit_code, 128 + c.signal_number) << testing::read_file(tmp.file("err"));
  EXPECT_TRUE(survivors.empty()) << survivors.size() << " process(es) of the command outlived joule measure, e.g. pid "
                                 << survivors.front();
  if (c.workload.needs_sigkill) {
    EXPECT_GE(took_s, kGraceS - 0.05) << "SIGKILL before the grace period ended";
  }
  if (c.workload.cleans_up) {
    EXPECT_TRUE(cleaned_up) << "the command's child did not get the signal to clean up";
  }
  // The measurement of what ran is still reported.
  EXPECT_NE(testing::read_file(tmp.file("err")).find("total"), std::string::npos) << testing::read_file(tmp.file("err"));
}

std::vector<MeasureStopCase> measure_stop_cases() {
  std::vector<MeasureStopCase> cases;
  for (const auto& workload : testing::stop_workloads()) {
    for (const int signal_number : {SIGTERM, SIGINT, SIGHUP}) cases.push_back({workload, signal_number});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Workloads, MeasureStopSignalTest, ::testing::ValuesIn(measure_stop_cases()),
                         [](const ::testing::TestParamInfo<MeasureStopCase>& test) {
                           return test.param.workload.name + "_" + testing::signal_name(test.param.signal_number);
                         });

// A command that exits by itself leaves joule's exit status its own, and a
// command that catches the signal and exits keeps the status it chose.
TEST(MeasureStopTest, ACommandThatHandlesTheSignalKeepsItsExitStatus) {
  TempDir tmp;
  const std::string pids = tmp.file("pids");
  testing::write_file(tmp.file("workload.sh"),
                      "trap 'exit 3' TERM\necho $$ >> \"$1\"\nwhile :; do sleep 0.05; done\n");
  const pid_t joule = testing::start_in_own_session(
      {JOULE_BINARY, "measure", "--sim", "count=1", "--", "sh", tmp.file("workload.sh"), pids},
      testing::simulated_only_env(), tmp.file("out"), tmp.file("err"));
  ASSERT_TRUE(testing::wait_for_pids(pids, 1, 20)) << testing::read_file(tmp.file("err"));
  kill(joule, SIGTERM);
  const std::optional<int> exit_code = testing::wait_at_most(joule, 5);
  testing::kill_leftovers(joule, pids);
  ASSERT_TRUE(exit_code.has_value());
  EXPECT_EQ(*exit_code, 3) << testing::read_file(tmp.file("err"));
}

// Whether a child of `parent` named `name` runs (from /proc), waiting up to
// timeout_s: a Ctrl-C before the shell started its `sleep` would reach the
// shell alone, which would then sleep on.
bool wait_for_child(pid_t parent, const std::string& name, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string stat = testing::read_file(entry.path().string() + "/stat");
      const auto open = stat.find('('), close = stat.rfind(')');
      if (open == std::string::npos || close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      std::string state;
      pid_t ppid = 0;
      if (stat.substr(open + 1, close - open - 1) == name && rest >> state >> ppid && ppid == parent) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// In the foreground of a terminal the command stays in joule's group (the
// terminal's foreground): it can read the terminal (in a group of its own
// it would be stopped by SIGTTIN), and Ctrl-C, which the terminal sends to
// every process of the group, reaches it.
TEST(MeasureStopTest, AtATerminalTheCommandReadsItAndCtrlCReachesIt) {
  TempDir tmp;
  const std::string pids = tmp.file("pids");
  const std::string script = "trap 'echo INT >> \"$1.ints\"' INT\nread line\necho \"got $line\" > \"$1.read\"\n"
                             "echo $$ >> \"$1\"\nsleep 60\n";
  testing::write_file(tmp.file("workload.sh"), script);
  int terminal = -1;
  const pid_t joule = forkpty(&terminal, nullptr, nullptr, nullptr);
  ASSERT_GE(joule, 0);
  if (joule == 0) {
    for (const auto& [key, value] : testing::simulated_only_env()) {
      if (value.empty()) {
        unsetenv(key.c_str());
      } else {
        setenv(key.c_str(), value.c_str(), 1);
      }
    }
    execl(JOULE_BINARY, JOULE_BINARY, "measure", "--sim", "count=1", "--", "sh", tmp.file("workload.sh").c_str(),
          pids.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_EQ(write(terminal, "hello\n", 6), 6);
  const bool started = testing::wait_for_pids(pids, 1, 20);
  if (started) {
    const std::vector<std::string> shell = testing::read_lines(pids);
    EXPECT_TRUE(wait_for_child(std::stoi(shell.at(0)), "sleep", 10)) << "the shell did not start its sleep";
    ASSERT_EQ(write(terminal, "\x03", 1), 1);  // Ctrl-C
  }
  const std::optional<int> exit_code = testing::wait_at_most(joule, 5);
  const std::vector<pid_t> survivors = testing::surviving_pids(pids);
  testing::kill_leftovers(joule, pids);
  close(terminal);
  ASSERT_TRUE(started) << "the command did not get past reading the terminal";
  EXPECT_EQ(testing::read_file(pids + ".read"), "got hello\n");
  ASSERT_TRUE(exit_code.has_value()) << "joule measure still running after Ctrl-C";
  EXPECT_EQ(testing::read_lines(pids + ".ints"), std::vector<std::string>{"INT"});
  // The shell's last command, sleep, was ended by the SIGINT: 130 as at a shell.
  EXPECT_EQ(*exit_code, 130);
  EXPECT_TRUE(survivors.empty());
}

}  // namespace
}  // namespace joule
