// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Issue 47: what a sweep reads from outside (the sweep file, the counts a
// workload writes) and what it says while it runs.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/sweep/sweep.h"
#include "sweep/load_error.h"

namespace joule {
namespace {

using testing::sweep_load_error;
using testing::TempDir;
using testing::write_file;

std::map<std::string, std::string> sim_env() {
  auto env = testing::simulated_only_env();
  env["JOULE_SIM"] = "count=2,load=1";
  return env;
}

std::string store_value(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string value = "cannot open";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    value = "no row";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      value = text ? text : "NULL";
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return value;
}

// Invalid UTF-8 anywhere in a sweep file (a command, a grid key, a value,
// a comment, an overlong form, a surrogate) is refused at its line and
// column, before the TOML parser; nothing of it reaches the store or JSON.
TEST(SweepFileBytesTest, InvalidUtf8AnywhereIsAnErrorNamingFileLineAndColumn) {
  EXPECT_EQ(sweep_load_error("command = \"train \xff\"\n"),
            "s.toml:1:18: byte 0xff is not UTF-8 (a sweep file is UTF-8 text)");
  EXPECT_EQ(sweep_load_error("command = 'x'\n[grid]\n\"b\xc3\" = [1]\n"),
            "s.toml:3:3: byte 0xc3 is not UTF-8 (a sweep file is UTF-8 text)");
  EXPECT_EQ(sweep_load_error("command = 'x'\n[grid]\nb = [\"v\xc0\xaf\"]\n"),
            "s.toml:3:8: byte 0xc0 is not UTF-8 (a sweep file is UTF-8 text)");
  EXPECT_EQ(sweep_load_error("# \xfe\ncommand = 'x'\n"), "s.toml:1:3: byte 0xfe is not UTF-8 (a sweep file is UTF-8 text)");
  EXPECT_EQ(sweep_load_error("command = \"caf\xc3\xa9 \xed\xa0\x80\"\n"),
            "s.toml:1:17: byte 0xed is not UTF-8 (a sweep file is UTF-8 text)");
}

// What the sweep-file fuzzer found in toml++ 3.3: characters from U+00A0 to
// U+FEFF where it scans outside a string reached __builtin_unreachable
// (undefined behaviour), and a table header without a key tripped an
// assertion. Each is an error at its line and column; characters beyond
// ASCII in strings come through as they were written.
TEST(SweepFileBytesTest, TextTomlPlusPlusCouldNotTakeIsAnErrorAndStringsKeepEveryCharacter) {
  EXPECT_EQ(sweep_load_error("command = 'x'\n[grid]\nmo\xc3\xa9 = [1]\n"),
            "s.toml:3:3: Error while parsing key-value pair: expected '=', saw '\xc3\xa9'");
  EXPECT_NE(sweep_load_error("command = 'x'\n[grid]\nmodel = 0[\"r\xc3\xa9seau\"]\n").find("s.toml:3:"), std::string::npos);
  EXPECT_NE(sweep_load_error("command = 'x'\n[, 64]\n").find("s.toml:2:2: Error while parsing key"), std::string::npos);
  EXPECT_NE(sweep_load_error("s = \"\"\"\\\n\xc2\xa7\"\"\"\n").find("unknown key \"s\""), std::string::npos);

  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"train --name caf\xc3\xa9 \xe2\x82\xac {model}\"\n[grid]\n"
                                 "model = [\"r\xc3\xa9seau\", '\xe4\xb8\xad', \"\xf0\x9f\x94\xa5\"]\n\"cl\xc3\xa9\" = [1]\n");
  const SweepConfig config = SweepConfig::load(tmp.file("s.toml"));
  EXPECT_EQ(config.command, "train --name caf\xc3\xa9 \xe2\x82\xac {model}");
  ASSERT_EQ(config.grid.size(), 2u);
  EXPECT_EQ(config.grid[0].first, "cl\xc3\xa9");
  EXPECT_EQ(config.grid[1].second, (std::vector<std::string>{"r\xc3\xa9seau", "\xe4\xb8\xad", "\xf0\x9f\x94\xa5"}));
  EXPECT_EQ(config.where("model", 2), tmp.file("s.toml") + ":3:25");
}

// During a 2-run --retry-failed of a 4-run grid the line said "about 0.8 s
// for the 3 left": it counted the grid's points still ahead, finished or not.
TEST(SweepOutsideBytesCliTest, TheFirstRunsEstimateCountsOnlyTheRunsLeftToRun) {
  TempDir tmp;
  const std::string marker = tmp.file("fixed");
  write_file(tmp.file("s.toml"), "command = \"test {a} -gt 2 || test -e " + marker + "\"\n[grid]\na = [1, 2, 3, 4]\n");
  const auto env = sim_env();
  const auto first = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, env);
  EXPECT_EQ(first.exit_code, 1) << first.err;
  EXPECT_NE(first.err.find("for the 3 left"), std::string::npos) << first.err;
  write_file(marker, "");
  const auto retried =
      testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--retry-failed"}, env);
  EXPECT_EQ(retried.exit_code, 0) << retried.err;
  EXPECT_NE(retried.err.find("2 to run (2 failed before, run again)"), std::string::npos) << retried.err;
  EXPECT_NE(retried.err.find("for the 1 left"), std::string::npos) << retried.err;
  EXPECT_EQ(retried.err.find("for the 3 left"), std::string::npos) << retried.err;
}

// The workload writes $JOULE_REPORT_FILE: "samples=inf" and "steps=-5" were
// stored as they came. A count that is no finite number >= 0 is left out
// and the run says so; the others are kept.
TEST(SweepOutsideBytesCliTest, CountsThatAreNotFiniteOrNegativeAreLeftOutAndSaid) {
  TempDir tmp;
  write_file(tmp.file("s.toml"),
             "command = \"echo samples=inf steps=-5 epochs=2 > $JOULE_REPORT_FILE\"\n[grid]\nx = [1]\n");
  const auto sweep = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, sim_env());
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  const std::string store = tmp.file("s.sqlite");
  EXPECT_EQ(store_value(store, "SELECT status FROM runs"), "ok");
  EXPECT_EQ(store_value(store, "SELECT samples FROM runs"), "NULL");
  EXPECT_EQ(store_value(store, "SELECT steps FROM runs"), "NULL");
  EXPECT_EQ(store_value(store, "SELECT epochs FROM runs"), "2.0");
  const std::string error = store_value(store, "SELECT error FROM runs");
  EXPECT_NE(error.find("$JOULE_REPORT_FILE: 'samples=inf' is not a count (a finite number >= 0): left out"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("'steps=-5'"), std::string::npos) << error;
  const auto analyze = testing::run_process({JOULE_BINARY, "analyze", store, "--json"});
  EXPECT_EQ(analyze.exit_code, 0) << analyze.err;
}

// `joule measure --json` (each rank's report in a sweep across nodes): a
// command argument that is not UTF-8 ended the report in nlohmann's
// type_error.316 (exit 1) after the command had run. The argument is shown
// escaped and the report is valid JSON.
TEST(MeasureReportBytesCliTest, ACommandArgumentThatIsNotUtf8LeavesTheJsonReportValid) {
  auto env = sim_env();
  const auto r = testing::run_process({JOULE_BINARY, "measure", "--backend", "sim", "--json", "--", "true", "caf\xc3\xa9",
                                       "\xff\"x"},
                                      env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["command"], (std::vector<std::string>{"true", "caf\xc3\xa9", "\\xFF\"x"}));
}

}  // namespace
}  // namespace joule
