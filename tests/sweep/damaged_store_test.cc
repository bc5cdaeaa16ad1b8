// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Issue 47: a results store as joule analyze, joule report and the export
// find it, whatever it holds. SQLite is dynamically typed and keeps any
// bytes: a number stored as text was read as 0, text that is not UTF-8
// ended the JSON output, and a directory given as the store was a
// "disk I/O error".
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

std::map<std::string, std::string> sim_env() {
  auto env = testing::simulated_only_env();
  env["JOULE_SIM"] = "count=2,load=1";
  return env;
}

void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string why = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << why;
}

// A real store: three configurations of one repeat, all ok, run by joule sweep.
struct DamagedStoreTest : ::testing::Test {
  TempDir tmp;
  std::string store;
  void SetUp() override {
    write_file(tmp.file("s.toml"), "command = \"sleep 0.05\"\n[grid]\nx = [1, 2, 3]\n");
    const auto sweep = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, sim_env());
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
    store = tmp.file("s.sqlite");
  }
  testing::RunResult joule(std::vector<std::string> args) {
    args.insert(args.begin(), JOULE_BINARY);
    return testing::run_process(args, sim_env());
  }
};

// elapsed_s = 'abc' was read as 0 and named "elapsed_s = 0"; gpu_energy_j =
// 'abc' was read as 0 J and averaged in, unseen. Each run is now damaged:
// listed with the column and what the store holds, in the text, the JSON,
// the report and the export's messages, and its numbers are not used.
TEST_F(DamagedStoreTest, ANumberStoredAsTextNamesTheRunDamagedInAnalyzeReportAndExport) {
  exec_sql(store, "UPDATE runs SET elapsed_s = 'abc' WHERE id = 1; UPDATE runs SET gpu_energy_j = 'abc' WHERE id = 2");
  const auto runs = load_sweep_runs(store);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].status, "failed");
  EXPECT_NE(runs[0].error.find("damaged: the store '" + store + "' holds elapsed_s = 'abc' for this run (stored as ok)"),
            std::string::npos)
      << runs[0].error;
  EXPECT_EQ(runs[1].status, "failed");
  EXPECT_NE(runs[1].error.find("holds gpu_energy_j = 'abc' for this run (stored as ok)"), std::string::npos)
      << runs[1].error;
  EXPECT_EQ(runs[2].status, "ok");

  const auto text = joule({"analyze", store});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("3 runs: 1 ok, 2 failed"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("x=1 repeat 0: failed: damaged:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("elapsed_s = 'abc'"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("gpu_energy_j = 'abc'"), std::string::npos) << text.out;

  const auto json = joule({"analyze", store, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["failed_runs"].size(), 2u) << json.out;
  EXPECT_EQ(j["failed_runs"][0]["id"], 1);
  EXPECT_NE(j["failed_runs"][1]["error"].get<std::string>().find("gpu_energy_j = 'abc'"), std::string::npos);
  ASSERT_EQ(j["configs"].size(), 1u);  // x=3 alone: no energy of 0 J averaged in
  EXPECT_EQ(j["configs"][0]["config"]["x"], "3");

  const auto report = joule({"report", store, "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = testing::read_file(tmp.file("r.html"));
  EXPECT_NE(html.find("gpu_energy_j = 'abc'"), std::string::npos);

  // The export keeps what the store holds and names the damaged runs.
  const auto exported = joule({"sweep", tmp.file("s.toml"), "--export", tmp.file("e.csv"), "--export-only"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.err.find("joule sweep: run 1 is damaged: the store '" + store + "' holds elapsed_s = 'abc'"),
            std::string::npos)
      << exported.err;
  EXPECT_NE(exported.err.find("joule sweep: run 2 is damaged:"), std::string::npos) << exported.err;
  EXPECT_EQ(exported.err.find("run 3"), std::string::npos) << exported.err;
}

// Not finite, NULL, negative, a blob; a statistic and a node row too: each
// names its column and value. Runs that failed keep their error as it is
// (their numbers are not used).
TEST_F(DamagedStoreTest, EveryStoredNumberOfAFinishedRunIsCheckedItsNodesToo) {
  exec_sql(store,
           "UPDATE runs SET cpu_energy_j = NULL WHERE id = 1; UPDATE runs SET gpu_util_mean = 'high' WHERE id = 2;"
           "UPDATE run_nodes SET dram_energy_j = X'00ff' WHERE run_id = 3");
  const auto runs = load_sweep_runs(store);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_NE(runs[0].error.find("holds cpu_energy_j = NULL for this run (stored as ok), not a finite number >= 0"),
            std::string::npos)
      << runs[0].error;
  EXPECT_NE(runs[1].error.find("holds gpu_util_mean = 'high'"), std::string::npos) << runs[1].error;
  EXPECT_NE(runs[2].error.find("holds run_nodes.dram_energy_j of node '"), std::string::npos) << runs[2].error;
  EXPECT_NE(runs[2].error.find("= a blob of 2 bytes"), std::string::npos) << runs[2].error;
  for (const auto& r : runs) EXPECT_EQ(r.status, "failed") << r.id;

  exec_sql(store, "UPDATE runs SET status = 'failed', error = 'the command exited with status 1' WHERE id = 2");
  EXPECT_EQ(load_sweep_runs(store)[1].error, "the command exited with status 1");
}

// Text that is not UTF-8 (a hand-edited store, or one written by other
// tools) ended `joule analyze --json` with nlohmann's type_error (exit 1):
// it is shown escaped, and the JSON is valid.
TEST_F(DamagedStoreTest, TextThatIsNotUtf8IsShownEscapedAndTheJsonStaysValid) {
  exec_sql(store,
           "UPDATE runs SET config = '{\"x\":\"' || CAST(X'ff22' AS TEXT) || '\"}', status = 'failed',"
           " error = 'bad ' || CAST(X'c3' AS TEXT) || ' end' WHERE id = 1;"
           "UPDATE run_nodes SET node = CAST(X'6e6f6465ff' AS TEXT) WHERE run_id = 2");
  const auto json = joule({"analyze", store, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(is_valid_utf8(json.out));
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["failed_runs"].size(), 1u) << json.out;
  EXPECT_EQ(j["failed_runs"][0]["error"], "bad \\xC3 end");
  const auto text = joule({"analyze", store});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(is_valid_utf8(text.out));
  const auto report = joule({"report", store, "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_TRUE(is_valid_utf8(testing::read_file(tmp.file("r.html"))));
}

// `joule analyze DIR` exited 1 with "disk I/O error". A directory is no
// store: a usage error (exit 2) naming it, as a path with nothing there is.
// A file that is there but not a store stays a data error (exit 1).
TEST_F(DamagedStoreTest, ADirectoryIsAUsageErrorNamingItForAnalyzeReportAndExport) {
  const std::string dir = tmp.file("results");
  std::filesystem::create_directory(dir);
  for (const auto& args : std::vector<std::vector<std::string>>{{"analyze", dir},
                                                                 {"analyze", dir, "--json"},
                                                                 {"report", dir, "-o", tmp.file("r.html")},
                                                                 {"sweep", tmp.file("s.toml"), "--store", dir,
                                                                  "--export", tmp.file("e.csv"), "--export-only"}}) {
    const auto r = joule(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("'" + dir + "' is a directory, not a results store"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("disk I/O error"), std::string::npos) << r.err;
  }
  write_file(tmp.file("notes.txt"), "not a database, but long enough to be read as one: " + std::string(600, 'x'));
  const auto text = joule({"analyze", tmp.file("notes.txt")});
  EXPECT_EQ(text.exit_code, 1) << text.err;
  EXPECT_NE(text.err.find("'" + tmp.file("notes.txt") + "' is not a joule results store"), std::string::npos)
      << text.err;
}

}  // namespace
}  // namespace joule
