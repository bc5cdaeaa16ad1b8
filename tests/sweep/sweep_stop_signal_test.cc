// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Issue 47: a stop signal sent to `joule sweep` reached only the run's
// /bin/sh; the workload's other processes went on, orphaned, on GPUs whose
// settings joule had just restored. Every process of the run must be gone
// (signalled, SIGKILLed after the grace period) before the settings are put
// back and joule exits.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <signal.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "common/fake_drivers.h"
#include "common/test_support.h"
#include "sweep/workload_processes.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

constexpr double kGraceS = 1.5;

std::vector<std::string> run_rows(const std::string& store) {
  sqlite3* db = nullptr;
  std::vector<std::string> rows;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT status, error FROM runs ORDER BY id", -1, &statement, nullptr) == SQLITE_OK) {
      while (sqlite3_step(statement) == SQLITE_ROW) {
        const auto* status = sqlite3_column_text(statement, 0);
        const auto* error = sqlite3_column_text(statement, 1);
        rows.push_back(std::string(status ? reinterpret_cast<const char*>(status) : "") + "|" +
                       (error ? reinterpret_cast<const char*>(error) : ""));
      }
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return rows;
}

struct StopCase {
  testing::FakeDriver driver;
  testing::StopWorkload workload;
  int signal_number;
};

void PrintTo(const StopCase& c, std::ostream* out) {
  *out << c.driver.name << " " << c.workload.name << " " << testing::signal_name(c.signal_number);
}

class SweepStopSignalTest : public ::testing::TestWithParam<StopCase> {};

TEST_P(SweepStopSignalTest, NoProcessOfTheRunSurvivesAndLimitsAreRestoredAfterItIsGone) {
  const StopCase& c = GetParam();
  TempDir tmp;
  const auto fake = c.driver.use(tmp, "device min_limit_w=100 max_limit_w=300 limit_w=300 default_limit_w=300\n");
  auto env = c.driver.env(fake);
  env["JOULE_CONTROL"] = "direct";
  const std::string pids = tmp.file("pids");
  write_file(tmp.file("workload.sh"), c.workload.script);
  // The grace period from the sweep file; --kill-grace-s is tested on measure.
  write_file(tmp.file("s.toml"), "command = \"sh " + tmp.file("workload.sh") + " " + pids + " " + fake.log_path +
                                     "\"\nkill_grace_s = " + std::to_string(kGraceS) +
                                     "\n[grid]\npower_limit = [250]\nx = [1, 2]\n");
  const pid_t joule = testing::start_in_own_session(
      {JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", c.driver.name}, env, tmp.file("out"), tmp.file("err"));
  ASSERT_TRUE(testing::wait_for_pids(pids, c.workload.expected_pids, 20)) << testing::read_file(tmp.file("err"));

  const auto signalled = std::chrono::steady_clock::now();
  kill(joule, c.signal_number);
  const std::optional<int> exit_code = testing::wait_at_most(joule, kGraceS + 1.0);
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  const std::vector<pid_t> survivors = testing::surviving_pids(pids);
  testing::kill_leftovers(joule, pids);

  ASSERT_TRUE(exit_code.has_value()) << "joule sweep still running " << kGraceS + 1.0 << " s after "
                                     << testing::signal_name(c.signal_number);
  EXPECT_EQ(*exit_code, 128 + c.signal_number) << testing::read_file(tmp.file("err"));
  EXPECT_TRUE(survivors.empty()) << survivors.size() << " process(es) of the run outlived joule sweep, e.g. pid "
                                 << survivors.front();
  if (c.workload.needs_sigkill) {
    EXPECT_GE(took_s, kGraceS - 0.05) << "SIGKILL before the grace period ended";
  }
  const auto rows = run_rows(tmp.file("s.sqlite"));
  ASSERT_EQ(rows.size(), 1u);  // no further run started
  EXPECT_EQ(rows[0].rfind("interrupted|the sweep was stopped by " + testing::signal_name(c.signal_number), 0), 0u)
      << rows[0];
  std::vector<std::string> expected = c.driver.power_limit_log(0, 250);
  if (c.workload.cleans_up) {
    // The set-call log as the run's last process saw it: the limit not yet restored.
    EXPECT_EQ(testing::read_lines(pids + ".seen"), expected);
  }
  for (const auto& line : c.driver.power_limit_log(0, 300)) expected.push_back(line);
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

std::vector<StopCase> stop_cases() {
  std::vector<StopCase> cases;
  for (const auto& driver : testing::fake_drivers()) {
    for (const auto& workload : testing::stop_workloads()) {
      for (const int signal_number : {SIGTERM, SIGINT, SIGHUP}) cases.push_back({driver, workload, signal_number});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Workloads, SweepStopSignalTest, ::testing::ValuesIn(stop_cases()),
                         [](const ::testing::TestParamInfo<StopCase>& test) {
                           return test.param.driver.name + "_" + test.param.workload.name + "_" +
                                  testing::signal_name(test.param.signal_number);
                         });

// The sweep file's grace period is checked like every number it holds:
// negative, too long, not finite or not a number is refused where it stands.
TEST(SweepStopSignalConfigTest, KillGraceIsASweepFileKeyWithARange) {
  TempDir tmp;
  for (const std::string value : {"-1", "3601", "nan", "inf", "\"10\""}) {
    write_file(tmp.file("s.toml"), "command = \"true\"\nkill_grace_s = " + value + "\n[grid]\nx = [1]\n");
    const auto r = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--dry-run"},
                                        testing::simulated_only_env());
    EXPECT_EQ(r.exit_code, 2) << value << ": " << r.err;
    EXPECT_NE(r.err.find("s.toml:2:16: \"kill_grace_s\" must be a number of seconds from 0 to 3600"), std::string::npos)
        << value << ": " << r.err;
  }
}

}  // namespace
}  // namespace joule
