// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/sweep/sweep.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "common/fake_drivers.h"
#include "common/test_support.h"
#include "sweep/load_error.h"
#include "joule/analyze/sweep_analysis.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

using testing::sweep_load_error;

TEST(SweepConfigTest, ErrorsNameFileAndLine) {
  EXPECT_EQ(sweep_load_error("command = \"x\"\nrepeats = [\n"), "s.toml:2:13: Error while parsing array: encountered end-of-file");
  EXPECT_EQ(sweep_load_error("command = \"x\"\ncolour = 1\n"), "s.toml:2:10: unknown key \"colour\" (command, launcher, repeats, "
                                                   "store, gpus_per_node, launcher_options, kill_grace_s, grid)");
  EXPECT_EQ(sweep_load_error("repeats = 2\n"), "s.toml: \"command\" is required");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nrepeats = 0\n"), "s.toml:2:11: \"repeats\" must be a whole number from 1 to 1000");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nlauncher = \"ssh\"\n"),
            "s.toml:2:12: \"launcher\" must be local, torchrun, mpirun or srun");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n[grid]\ngpus = [\"two\"]\n"), "s.toml:3:9: grid.gpus: 'two' must be a positive number");
}

// Issue 31: a bad value on line 4 was reported on line 1. Every value is
// named at its own line and column (toml++'s source regions).
TEST(SweepConfigTest, ABadValueIsNamedAtItsOwnLineAndColumn) {
  EXPECT_EQ(sweep_load_error("command = \"x\"\nrepeats = 2\n[grid]\ngpus = [1, 2, \"two\"]\n"),
            "s.toml:4:15: grid.gpus: 'two' must be a positive number");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n\n[grid]\nbatch = [8]\npower_limit = [300,\n   -5]\n"),
            "s.toml:6:4: grid.power_limit: '-5' must be a positive number");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n[grid]\ngpus = [1.5]\n"),
            "s.toml:3:9: grid.gpus: '1.5' must be a whole number of GPUs");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n[grid]\nsm_clock_mhz = [1e9]\n"),
            "s.toml:3:17: grid.sm_clock_mhz: '1000000000' is beyond any GPU's range");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n[grid]\nx = [1, inf]\n"), "s.toml:3:9: grid.x: inf is not a finite number");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n[grid]\nx = [1, [2]]\n"),
            "s.toml:3:9: grid.x: grid values must be numbers or strings");
  std::string huge = "command = \"x\"\nrepeats = 1000\n[grid]\n";
  for (const char* key : {"a", "b", "c"}) huge += std::string(key) + " = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]\n";
  EXPECT_EQ(sweep_load_error(huge), "s.toml: the grid has more than 1000000 runs (grid points x repeats); no sweep can run it");
}

TEST(SweepConfigTest, GridExpandsWithRepeatsAndCommandsFillPlaceholders) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"train --bs {batch_size} --seed {repeat}\"\nrepeats = 2\n"
                                 "launcher = \"torchrun\"\n[grid]\nbatch_size = [32, 64]\ngpus = [1, 2]\n");
  const SweepConfig config = SweepConfig::load(tmp.file("s.toml"));
  EXPECT_EQ(config.store_path, tmp.file("s.sqlite"));
  const auto runs = expand_grid(config);
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(run_command(config, runs[0]), "torchrun --nproc-per-node 1 --no-python train --bs 32 --seed 0");
  EXPECT_EQ(run_command(config, runs[7]), "torchrun --nproc-per-node 2 --no-python train --bs 64 --seed 1");
  SweepConfig mpi = config;
  mpi.launcher = "mpirun";
  EXPECT_EQ(run_command(mpi, runs[2]).rfind("mpirun -np 2 train", 0), 0u);
  SweepConfig bad = config;
  bad.command = "train --lr {lr}";
  EXPECT_THROW(run_command(bad, runs[0]), UsageError);
}

struct SweepFixture : ::testing::Test {
  TempDir tmp;
  SweepOptions options;
  void SetUp() override {
    options.discovery.backend = GpuBackend::kSim;
    options.discovery.sim_spec = "count=2,load=1";
    options.discovery.powercap_root = "/nonexistent";
    options.log = [](const std::string&) {};
  }
  SweepConfig config(const std::string& toml) {
    write_file(tmp.file("s.toml"), toml);
    return SweepConfig::load(tmp.file("s.toml"));
  }
  std::vector<std::string> csv() {
    export_sweep_csv(tmp.file("s.sqlite"), tmp.file("s.csv"));
    return testing::read_lines(tmp.file("s.csv"));
  }
};

// The sweeps that set or lose GPUs, once per fake driver (NVML, ROCm SMI).
class SweepOnFakeDriverTest : public SweepFixture, public ::testing::WithParamInterface<testing::FakeDriver> {
 protected:
  const testing::FakeDriver& driver() const { return GetParam(); }
  // The fake's GPUs, changed directly (not through jouled).
  testing::FakeLibrary use_fake(const std::string& config) {
    const testing::FakeLibrary fake = driver().use(tmp, config);
    driver().point_discovery(options.discovery, fake);
    options.discovery.control = "direct";
    return fake;
  }
};

TEST_F(SweepFixture, MeasuresEveryRunAndResumesWhereItStopped) {
  const auto c = config(
      "command = \"sleep 0.05; echo samples=64 steps=2 >> $JOULE_REPORT_FILE; exit {code}\"\nrepeats = 2\n"
      "[grid]\npower_limit = [300, 200]\ngpus = [1]\ncode = [0, 3]\n");
  const SweepSummary first = run_sweep(c, options);
  EXPECT_EQ(first.total, 8);
  EXPECT_EQ(first.ran, 8);
  EXPECT_EQ(first.failed, 4);  // exit 3 is recorded as failed, not lost
  const SweepSummary again = run_sweep(c, options);
  EXPECT_EQ(again.ran, 0);
  EXPECT_EQ(again.skipped, 8);
  EXPECT_EQ(again.failed_kept, 4);  // said, not silently skipped
  const auto rows = csv();
  ASSERT_EQ(rows.size(), 9u);
  int ok = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].find(",ok,0,") == std::string::npos) {
      EXPECT_NE(rows[i].find(",failed,3,"), std::string::npos) << rows[i];
      continue;
    }
    ++ok;
    // One simulated GPU at full load draws the limit: energy / time = limit.
    const bool at_300 = rows[i].find("\"\"power_limit\"\":\"\"300\"\"") != std::string::npos;
    EXPECT_NE(rows[i].find(at_300 ? ",300.0,64.0,2.0," : ",200.0,64.0,2.0,"), std::string::npos) << rows[i];
  }
  EXPECT_EQ(ok, 4);
}

TEST_F(SweepFixture, RunsInterruptedByACrashedSweepAreRunAgain) {
  const auto c = config("command = \"true\"\n[grid]\nx = [1, 2]\n");
  run_sweep(c, options);
  sqlite3* db = nullptr;
  sqlite3_open(tmp.file("s.sqlite").c_str(), &db);
  sqlite3_exec(db, "UPDATE runs SET status = 'running' WHERE id = 2", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  const SweepSummary s = run_sweep(c, options);
  EXPECT_EQ(s.ran, 1);
  const auto rows = csv();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_NE(rows[2].find(",interrupted,"), std::string::npos) << rows[2];
  EXPECT_NE(rows[3].find(",ok,0,"), std::string::npos) << rows[3];
}

TEST_P(SweepOnFakeDriverTest, NoControlRefusesPowerLimitGridsAndLimitsAreRestoredAfterEachRun) {
  const auto c = config("command = \"true\"\n[grid]\npower_limit = [250, 200]\n");
  options.no_control = true;
  try {
    run_sweep(c, options);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the grid sets power_limit, but GPU control is off (--no-control)"),
              std::string::npos);
  }
  // Through the fake driver library: each run sets its limit and puts 300 W back.
  const auto fake = use_fake("device min_limit_w=100 max_limit_w=300 limit_w=300 default_limit_w=300\n");
  options.no_control = false;
  run_sweep(c, options);
  std::vector<std::string> expected;
  for (int w : {250, 300, 200, 300}) {
    for (const auto& line : driver().power_limit_log(0, w)) expected.push_back(line);
  }
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);
}

// Clock caps as grid axes: every GPU of the run locked, the lock reset after
// each run (also after a failing one), a cap the GPUs do not support refused
// with nothing changed, and --no-control naming the knobs.
TEST_P(SweepOnFakeDriverTest, ClockCapsAreAppliedToEveryGpuOfARunAndResetAfter) {
  const auto c = config("command = \"test {sm_clock_mhz} != 990\"\n[grid]\ngpus = [2]\nsm_clock_mhz = [1980, 990]\n");
  options.no_control = true;
  try {
    run_sweep(c, options);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the grid sets sm_clock_mhz, but GPU control is off"), std::string::npos)
        << e.what();
  }
  // Core clocks up to 1980 MHz, 990 among them.
  const auto fake = use_fake("device core_clocks\ndevice core_clocks\n");
  options.no_control = false;
  const SweepSummary s = run_sweep(c, options);
  EXPECT_EQ(s.ran, 2);
  EXPECT_EQ(s.failed, 1);  // the command fails at 990 MHz: its lock is reset all the same
  std::vector<std::string> expected;
  for (unsigned cap : {1980u, 990u}) {
    for (int d = 0; d < 2; ++d) {
      for (const auto& line : driver().clock_lock_log(d, cap)) expected.push_back(line);
    }
    for (int d = 1; d >= 0; --d) {
      for (const auto& line : driver().clock_reset_log(d)) expected.push_back(line);
    }
  }
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);

  // A cap the GPUs do not support is refused before the sweep starts (it
  // used to fail at run time): no store, no driver call.
  const auto too_fast = config("command = \"true\"\nstore = \"" + tmp.file("fast.sqlite") +
                               "\"\n[grid]\nsm_clock_mhz = [2500]\n");
  try {
    run_sweep(too_fast, options);
    FAIL();
  } catch (const UsageError& e) {
    const auto& clocks = driver().core_clocks_mhz;
    EXPECT_NE(std::string(e.what()).find(":4:17: grid.sm_clock_mhz: 2500 MHz is outside the sm clocks gpu0 (" +
                                         driver().gpu_name + ") supports: " + std::to_string(clocks.front()) + "-" +
                                         std::to_string(clocks.back()) + " MHz"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(tmp.file("fast.sqlite")));
  EXPECT_EQ(testing::read_lines(fake.log_path).size(), expected.size());  // no driver call
  const auto bad = [&] { return config("command = \"true\"\n[grid]\nsm_clock_mhz = [-5]\n"); };
  EXPECT_THROW(bad(), UsageError);
}

// Issue 31: a 150 W limit on GPUs whose floor is 200 W passed load and
// failed at run time. Now the grid is checked against the GPUs first
// (Gpu::power_limit_range_mw), naming the value, where it stands, the GPU
// and its range; nothing is stored or set.
TEST_P(SweepOnFakeDriverTest, SettingsOutsideTheGpusRangeAreRefusedBeforeAnyRun) {
  const auto fake = use_fake("device name=\"GPU A\" min_limit_w=200 max_limit_w=300 limit_w=300\n");
  const auto refused = [&](const std::string& toml) -> std::string {
    try {
      run_sweep(config(toml), options);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "not refused";
  };
  const std::string low = refused("command = \"true\"\nrepeats = 3\n[grid]\npower_limit = [250, 150]\n");
  EXPECT_NE(low.find("s.toml:4:21: grid.power_limit: 150 W is outside what gpu0 (GPU A) supports: 200-300 W"),
            std::string::npos)
      << low;
  const std::string high = refused("command = \"true\"\n[grid]\npower_limit = [5000]\n");
  EXPECT_NE(high.find("s.toml:3:16: grid.power_limit: 5000 W is outside what gpu0 (GPU A) supports: 200-300 W"),
            std::string::npos)
      << high;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("s.sqlite")));
  EXPECT_FALSE(std::filesystem::exists(fake.log_path) && !testing::read_lines(fake.log_path).empty());  // no set-call
  // Simulated GPUs have a range too (200-700 W).
  options.discovery = {};
  options.discovery.backend = GpuBackend::kSim;
  options.discovery.sim_spec = "count=2";
  options.discovery.powercap_root = "/nonexistent";
  const std::string sim = refused("command = \"true\"\n[grid]\ngpus = [1, 2]\npower_limit = [300, 5000]\n");
  EXPECT_NE(sim.find("grid.power_limit: 5000 W is outside what gpu0 (Simulated GPU (H100-like), simulated) supports: "
                     "200-700 W"),
            std::string::npos)
      << sim;
}

// Issue 31 (part 8): a GPU lost in the middle of a run (the fake driver's
// lost-device error from 0.4 s on) was stored as ok, its energy short. It is
// partial, with the lost GPU named: not used by the analysis, listed, and run
// again on resume.
TEST_P(SweepOnFakeDriverTest, AGpuLostMidRunIsRecordedPartialWithItsError) {
  use_fake("device power_w=300 real_sources\nerror function=* device=0 code=@lost after_ms=400\n");
  const SweepSummary s = run_sweep(config("command = \"sleep 1\"\n[grid]\nx = [1]\n"), options);
  EXPECT_EQ(s.ran, 1);
  EXPECT_EQ(s.failed, 1);
  const auto runs = load_sweep_runs(tmp.file("s.sqlite"));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "partial") << runs[0].error;
  EXPECT_NE(runs[0].error.find("gpu0"), std::string::npos) << runs[0].error;
  EXPECT_NE(runs[0].error.find("lost"), std::string::npos) << runs[0].error;
  EXPECT_EQ(plan_sweep(config("command = \"sleep 1\"\n[grid]\nx = [1]\n"), tmp.file("s.sqlite")).to_run.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, SweepOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

// Failed runs are kept by a plain resume (said so), and run again with
// retry_failed: a new attempt beside the old one, which stays in the store.
TEST_F(SweepFixture, FailedRunsAreRunAgainWithRetryFailed) {
  const std::string marker = tmp.file("fixed");
  const auto c = config("command = \"test {x} != 2 || test -e " + marker + "\"\n[grid]\nx = [1, 2]\n");
  EXPECT_EQ(run_sweep(c, options).failed, 1);
  EXPECT_EQ(plan_sweep(c, tmp.file("s.sqlite")).failed_kept, 1);
  EXPECT_NE(plan_sweep(c, tmp.file("s.sqlite")).describe("s").find("1 of them failed: kept as they are; --retry-failed"),
            std::string::npos);
  testing::write_file(marker, "");
  EXPECT_EQ(run_sweep(c, options).ran, 0);
  options.retry_failed = true;
  const SweepPlan retry = plan_sweep(c, tmp.file("s.sqlite"), true);
  EXPECT_EQ(retry.failed_retried, 1);
  ASSERT_EQ(retry.to_run.size(), 1u);
  const SweepSummary again = run_sweep(c, options);
  EXPECT_EQ(again.ran, 1);
  EXPECT_EQ(again.failed, 0);
  const auto runs = load_sweep_runs(tmp.file("s.sqlite"));
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].status, "failed");
  EXPECT_EQ(runs[1].error, "the command exited with status 1");
  const SweepAnalysis a = analyze_sweep(runs);
  EXPECT_EQ(a.counts.configurations, 2);
  EXPECT_EQ(a.counts.ok, 2);
  EXPECT_EQ(a.counts.failed, 0);
  EXPECT_EQ(a.counts.earlier_attempts, 1);
  EXPECT_TRUE(a.failed_runs.empty());
}

TEST_F(SweepFixture, PlanCountsWhatTheStoreHoldsAndEstimatesFromIt) {
  const std::string store = tmp.file("s.sqlite");
  const SweepPlan fresh = plan_sweep(config("command = \"sleep 0.05\"\nrepeats = 2\n[grid]\nbatch = [1, 2]\n"), store);
  EXPECT_EQ(fresh.total, 4);
  EXPECT_EQ(fresh.to_run.size(), 4u);
  EXPECT_EQ(fresh.mean_run_s, 0.0);
  EXPECT_FALSE(std::filesystem::exists(store));  // planning writes nothing
  EXPECT_TRUE(fresh.describe(store).ends_with("4 to run (how long: said after the first run)")) << fresh.describe(store);
  run_sweep(config("command = \"sleep 0.05\"\nrepeats = 2\n[grid]\nbatch = [1, 2]\n"), options);
  const SweepPlan grown = plan_sweep(config("command = \"sleep 0.05\"\nrepeats = 2\n[grid]\nbatch = [1, 2, 3]\n"), store);
  EXPECT_EQ(grown.total, 6);
  EXPECT_EQ(grown.configurations, 3);
  EXPECT_EQ(grown.finished, 4);
  ASSERT_EQ(grown.to_run.size(), 2u);
  EXPECT_EQ(grown.to_run[0].values.at("batch"), "3");
  EXPECT_GE(grown.mean_run_s, 0.05);
  EXPECT_LT(grown.mean_run_s, 5.0);
  const std::string text = grown.describe(store);
  EXPECT_NE(text.find("6 runs (3 configurations x 2 repeats), 4 already in " + store + ", 2 to run: about "),
            std::string::npos)
      << text;
}

TEST(SweepPlanTest, RoughDurationsReadAsPeopleSayThem) {
  EXPECT_EQ(rough_duration(0.24), "0.2 s");
  EXPECT_EQ(rough_duration(45), "45 s");
  EXPECT_EQ(rough_duration(720), "12 min");
  EXPECT_EQ(rough_duration(3.4 * 3600), "3.4 h");
  EXPECT_EQ(rough_duration(3 * 86400), "3.0 days");
}

TEST(SweepCliTest, DryRunListsTheRunsAndRunsNothing) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"echo {batch_size} > /dev/null\"\nrepeats = 2\n[grid]\nbatch_size = [8, 16]\n");
  const auto r = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"batch_size\":\"16\"} repeat 1: echo 16 > /dev/null"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 runs (2 configurations x 2 repeats), 0 already in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(dry run: nothing ran)"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("s.sqlite")));
}

TEST(SweepCliTest, RunsAGridAndExportsCsv) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"echo epochs=1 >> $JOULE_REPORT_FILE\"\nrepeats = 3\n[grid]\nbatch_size = [8, 16]\n");
  const auto r = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--sim", "count=1", "--export",
                                       tmp.file("out.csv")},
                                      {{"JOULE_NVML_LIBRARY", "/nonexistent"}, {"JOULE_POWERCAP_ROOT", "/nonexistent"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("6 runs in the grid; 6 ran (0 failed)"), std::string::npos) << r.out;
  EXPECT_EQ(testing::read_lines(tmp.file("out.csv")).size(), 7u);
  write_file(tmp.file("big.toml"), "command = \"true\"\n[grid]\ngpus = [1, 8]\n");
  const auto big = testing::run_process({JOULE_BINARY, "sweep", tmp.file("big.toml"), "--backend", "sim", "--sim", "count=2"});
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_NE(big.err.find("grid.gpus asks for 8 GPUs; this machine has 2"), std::string::npos) << big.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("big.sqlite")));  // refused before any run or store
  const auto bad = testing::run_process({JOULE_BINARY, "sweep", tmp.file("missing.toml")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("missing.toml"), std::string::npos) << bad.err;
}

// Rows of a store as "a|b|c" lines (a read-write connection: it rolls back
// what a killed writer left, as any later opener does).
std::vector<std::string> store_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> rows;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return {"cannot open"};
  }
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    rows.push_back(std::string("error: ") + sqlite3_errmsg(db));
  } else {
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
        row += (c ? "|" : "") + std::string(text ? text : "NULL");
      }
      rows.push_back(row);
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

std::map<std::string, std::string> sim_env() {
  auto env = testing::simulated_only_env();
  env["JOULE_SIM"] = "count=2,load=1";
  return env;
}

// Issue 50: a sweep on a laptop's simulated GPUs said nothing of it, and its
// analysis and report read like measurements. Now every output says so, the
// store records what measured each run, and one store never mixes the two.
TEST(SweepCliTest, SimulatedGpusAreSaidEverywhereAndNeverMixedWithMeasurements) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"true\"\nrepeats = 2\n[grid]\nbatch_size = [8]\n");
  const auto r = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml")}, sim_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 ran (0 failed), 0 already in " + tmp.file("s.sqlite") +
                       "; on SIMULATED GPUs: the energies are joule's model, not measurements"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("joule sweep: the GPUs are SIMULATED"), std::string::npos) << r.err;
  EXPECT_EQ(store_rows(tmp.file("s.sqlite"), "SELECT DISTINCT backend, devices FROM runs"),
            std::vector<std::string>{"sim|gpu0 (Simulated GPU (H100-like), simulated), gpu1 (Simulated GPU (H100-like), "
                                     "simulated)"});
  const auto text = testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite")});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("SIMULATED GPUs: 2 of the 2 successful runs ran on simulated GPUs; their energies are "
                           "joule's model, not measurements\n",
                           0),
            0u)
      << text.out;
  const auto json = testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite"), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_TRUE(parsed["simulated"].get<bool>());
  EXPECT_EQ(parsed["counts"]["simulated"], 2);
  const auto report = testing::run_process({JOULE_BINARY, "report", tmp.file("s.sqlite"), "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(testing::read_file(tmp.file("r.html")).find("<p class=\"simulated\" role=\"alert\"><strong>SIMULATED GPUs: 2 of the 2"),
            std::string::npos);

  // A store of measurements (a fake H100 stands in for a real GPU) takes no simulated runs, nor the other way round.
  auto measured_env = testing::simulated_only_env();
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n");
  measured_env["JOULE_NVML_LIBRARY"] = fake.library_path;
  measured_env["JOULE_FAKE_NVML_CONFIG"] = fake.config_path;
  const auto measured = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--store", tmp.file("m.sqlite")},
                                             measured_env);
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  EXPECT_EQ(measured.out.find("SIMULATED"), std::string::npos) << measured.out;
  EXPECT_EQ(store_rows(tmp.file("m.sqlite"), "SELECT DISTINCT backend, devices FROM runs"),
            std::vector<std::string>{"nvml|gpu0 (NVIDIA H100 80GB HBM3)"});
  write_file(tmp.file("more.toml"), "command = \"true\"\nrepeats = 2\n[grid]\nbatch_size = [8, 16]\n");
  const auto mixed = testing::run_process(
      {JOULE_BINARY, "sweep", tmp.file("more.toml"), "--store", tmp.file("m.sqlite"), "--backend", "sim"}, sim_env());
  EXPECT_EQ(mixed.exit_code, 2) << mixed.out;
  EXPECT_NE(mixed.err.find(tmp.file("m.sqlite") + ": its runs were measured on real GPUs (nvml), but this sweep's GPUs "
                                                   "are SIMULATED: a store holds measurements or simulations, never both"),
            std::string::npos)
      << mixed.err;
  EXPECT_EQ(store_rows(tmp.file("m.sqlite"), "SELECT COUNT(*) FROM runs"), std::vector<std::string>{"2"});
  const auto other_way = testing::run_process(
      {JOULE_BINARY, "sweep", tmp.file("more.toml"), "--store", tmp.file("s.sqlite")}, measured_env);
  EXPECT_EQ(other_way.exit_code, 2);
  EXPECT_NE(other_way.err.find("its runs were measured on SIMULATED GPUs, but this sweep's GPUs are real"),
            std::string::npos)
      << other_way.err;
}

// Issue 31: 150 W on GPUs whose floor is 200 W (and 5000 W) passed
// --dry-run. The dry run checks the grid against the GPUs a sweep would use.
TEST(SweepCliTest, DryRunRefusesSettingsTheGpusCannotTake) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\n\n\npower_limit = [300, 150, 5000]\n");
  const auto r = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--dry-run"}, sim_env());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("s.toml:5:21: grid.power_limit: 150 W is outside what gpu0 (Simulated GPU (H100-like), "
                       "simulated) supports: 200-700 W"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("repeat 0"), std::string::npos) << r.out;
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\npower_limit = [300, 5000]\n");
  const auto high = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--dry-run"}, sim_env());
  EXPECT_EQ(high.exit_code, 2);
  EXPECT_NE(high.err.find("s.toml:3:21: grid.power_limit: 5000 W is outside what gpu0"), std::string::npos) << high.err;
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\npower_limit = [300, 200]\n");
  const auto fine = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--dry-run"}, sim_env());
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("s.sqlite")));
}

// Issue 31: failed configurations appeared nowhere ("failed 0" in joule
// analyze, "36 runs of 9 configurations (9 failed)" in the report of a
// 12-configuration grid) and a resume never retried them. Now they are
// counted, listed with their error in analyze (text and JSON) and the
// report, kept by a plain resume (which says so and exits 1) and run again
// with --retry-failed.
TEST(SweepCliTest, FailedConfigurationsAreCountedListedAndRetried) {
  TempDir tmp;
  const std::string marker = tmp.file("fixed");
  write_file(tmp.file("s.toml"), "command = \"test {a} != 4 || test -e " + marker +
                                     "\"\n[grid]\na = [1, 2, 3, 4]\nb = [1, 2, 3]\n");
  const auto env = sim_env();
  const auto sweep = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, env);
  EXPECT_EQ(sweep.exit_code, 1) << sweep.err;
  EXPECT_NE(sweep.out.find("12 runs in the grid; 12 ran (3 failed)"), std::string::npos) << sweep.out;

  const auto text = testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite")});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("12 configurations, 3 failed (no successful run); 12 runs: 9 ok, 3 failed"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("configurations without a successful run"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("a=4 b=3 repeat 0: failed (exit status 1): the command exited with status 1"), std::string::npos)
      << text.out;
  const auto json = testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite"), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["counts"]["configurations"], 12);
  EXPECT_EQ(j["counts"]["configurations_failed"], 3);
  EXPECT_EQ(j["counts"]["failed"], 3);
  EXPECT_EQ(j["configs"].size(), 9u);
  ASSERT_EQ(j["configs_without_success"].size(), 3u);
  EXPECT_EQ(j["configs_without_success"][0]["config"]["a"], "4");
  ASSERT_EQ(j["failed_runs"].size(), 3u);
  EXPECT_EQ(j["failed_runs"][0]["exit_code"], 1);
  EXPECT_EQ(j["failed_runs"][0]["error"], "the command exited with status 1");

  const auto report = testing::run_process({JOULE_BINARY, "report", tmp.file("s.sqlite"), "-o", tmp.file("r.html")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("(12 configurations, 3 failed (no successful run); 12 runs: 9 ok, 3 failed)"),
            std::string::npos)
      << report.out;
  const std::string html = testing::read_file(tmp.file("r.html"));
  EXPECT_NE(html.find("12 configurations, 3 failed (no successful run); 12 runs: 9 ok, 3 failed"), std::string::npos);
  EXPECT_NE(html.find("<h2 id=\"failed-runs\">Failed runs</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td>a=4 b=2</td><td data-sort=\"0\">0</td><td>failed</td><td data-sort=\"1\">1</td><td>the "
                      "command exited with status 1</td>"),
            std::string::npos);

  const auto resumed = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, env);
  EXPECT_EQ(resumed.exit_code, 1);  // the grid still has failed runs
  EXPECT_NE(resumed.err.find("3 of them failed: kept as they are; --retry-failed runs them again"), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.out.find("0 ran (0 failed), 12 already in"), std::string::npos) << resumed.out;
  write_file(marker, "");
  const auto retried =
      testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--retry-failed"}, env);
  EXPECT_EQ(retried.exit_code, 0) << retried.err;
  EXPECT_NE(retried.err.find("3 to run (3 failed before, run again)"), std::string::npos) << retried.err;
  const auto after = testing::run_process({JOULE_BINARY, "analyze", tmp.file("s.sqlite")});
  EXPECT_NE(after.out.find("12 configurations; 12 runs: 12 ok (3 earlier attempts run again since, kept in the store)"),
            std::string::npos)
      << after.out;
  EXPECT_EQ(store_rows(tmp.file("s.sqlite"), "SELECT COUNT(*) FROM runs WHERE status = 'failed'"),
            std::vector<std::string>{"3"});
}

// Issue 31: a 100,000-run grid started without a word. Past 1000 runs to
// run, the sweep says how many and how long, and wants --yes.
TEST(SweepCliTest, LargeGridsSayHowManyRunsAndWantYes) {
  TempDir tmp;
  std::string values;
  for (int i = 0; i < 100; ++i) values += (i ? ", " : "") + std::to_string(i);
  write_file(tmp.file("s.toml"), "command = \"true\"\nrepeats = 1000\n[grid]\nx = [" + values + "]\n");
  const auto r = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, sim_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("100000 runs (100 configurations x 1000 repeats), 0 already in " + tmp.file("s.sqlite") +
                       ", 100000 to run (how long: said after the first run)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("100000 runs to run is more than 1000: pass --yes to start them (each second a run takes adds "
                       "27.8 h;"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("s.sqlite")));
  // A dry run lists them without --yes.
  const auto dry = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim", "--dry-run"}, sim_env());
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
}

// Polls until a run is 'running' in the store and its command has started:
// the command creates `started_marker` as it starts. A run is 'running' in the
// store a little before its command is spawned, and a signal in between stops
// the sweep with the run "not started" (a true outcome, not this test's).
bool wait_for_running_run(const std::string& store, const std::string& started_marker, double timeout_s) {
  for (int i = 0; i < timeout_s * 100; ++i) {
    if (std::filesystem::exists(started_marker) && std::filesystem::exists(store) &&
        store_rows(store, "SELECT COUNT(*) FROM runs WHERE status = 'running'") == std::vector<std::string>{"1"}) {
      return true;
    }
    usleep(10'000);
  }
  return false;
}

// Issue 31: after Ctrl-C the run stayed 'running'. SIGINT (and SIGTERM) to
// the sweep: the run's command gets it, the run is recorded interrupted with
// the signal, the power limit is put back, no further run starts, the exit
// status is 128 + the signal; a resume runs it again. Past 1000 runs
// (--yes) as well.
class SweepCliOnFakeDriverTest : public ::testing::TestWithParam<testing::FakeDriver> {};

TEST_P(SweepCliOnFakeDriverTest, SigintAndSigtermMarkTheRunInterruptedAndRestoreTheLimit) {
  const testing::FakeDriver& driver = GetParam();
  TempDir tmp;
  const auto fake = driver.use(tmp, "device min_limit_w=100 max_limit_w=300 limit_w=300 default_limit_w=300\n");
  auto env = driver.env(fake);
  env["JOULE_CONTROL"] = "direct";
  std::string values;
  for (int i = 0; i < 1001; ++i) values += (i ? ", " : "") + std::to_string(i);
  const std::string started_marker = tmp.file("started");
  write_file(tmp.file("s.toml"), "command = \"touch '" + started_marker + "' && exec sleep 20\"\n[grid]\npower_limit = [250]\nx = [" +
                                     values + "]\n");
  for (const int signal_number : {SIGINT, SIGTERM}) {
    std::filesystem::remove(tmp.file("s.sqlite"));
    std::filesystem::remove(fake.log_path);
    std::filesystem::remove(started_marker);
    const pid_t pid = testing::start_process(
        {JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", driver.name, "--yes"}, env, tmp.file("out"),
        tmp.file("err"));
    ASSERT_TRUE(wait_for_running_run(tmp.file("s.sqlite"), started_marker, 8)) << testing::read_file(tmp.file("err"));
    if (signal_number == SIGINT) {
      // A second sweep on the same store is refused: it would take the
      // first one's run for a killed one.
      const auto second =
          testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", driver.name, "--yes"}, env);
      EXPECT_EQ(second.exit_code, 1);
      EXPECT_NE(second.err.find("results store '" + tmp.file("s.sqlite") + "' is in use by another joule sweep"),
                std::string::npos)
          << second.err;
      EXPECT_EQ(store_rows(tmp.file("s.sqlite"), "SELECT status FROM runs"), std::vector<std::string>{"running"});
    }
    kill(pid, signal_number);
    EXPECT_EQ(testing::wait_process(pid, 10), 128 + signal_number) << testing::read_file(tmp.file("err"));
    const std::string name = signal_number == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_NE(testing::read_file(tmp.file("err")).find("stopped by " + name), std::string::npos)
        << testing::read_file(tmp.file("err"));
    const auto rows = store_rows(tmp.file("s.sqlite"), "SELECT status, exit_code, error FROM runs");
    ASSERT_EQ(rows.size(), 1u);  // no further run started
    EXPECT_EQ(rows[0].rfind("interrupted|" + std::to_string(128 + signal_number) + "|the sweep was stopped by " + name +
                                " during this run (exit status " + std::to_string(128 + signal_number) + ")",
                            0),
              0u)
        << rows[0];
    std::vector<std::string> expected = driver.power_limit_log(0, 250);
    for (const auto& line : driver.power_limit_log(0, 300)) expected.push_back(line);
    EXPECT_EQ(testing::read_lines(fake.log_path), expected);
  }
  // A resume runs the interrupted run again (here: one configuration, quickly).
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\npower_limit = [250]\nx = [0]\n");
  const auto resumed = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", driver.name}, env);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(store_rows(tmp.file("s.sqlite"), "SELECT status FROM runs ORDER BY id"),
            (std::vector<std::string>{"interrupted", "ok"}));
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, SweepCliOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

// Issue 31 (part 8): SIGKILL of joule sweep at seeded random points (before,
// during and between runs, and while a run's outcome is written). After
// each kill the store opens, passes SQLite's integrity check, every run
// finished before is intact (with its node row and timeline: a run's
// outcome is one transaction), at most the killed run is left 'running';
// the next sweep marks it interrupted and runs it again, and the last one
// completes the grid.
TEST(SweepCliTest, SigkillAtSeededPointsLeavesAStoreThatResumes) {
  TempDir tmp;
  write_file(tmp.file("s.toml"), "command = \"echo samples=1 >> $JOULE_REPORT_FILE; sleep 0.1\"\n[grid]\n"
                                 "x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n");
  const auto env = sim_env();
  const std::vector<std::string> argv = {JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"};
  const std::string store = tmp.file("s.sqlite");
  const std::string finished_sql =
      "SELECT id, config, status, elapsed_s, gpu_energy_j, (SELECT COUNT(*) FROM run_nodes WHERE run_id = id),"
      " (SELECT COUNT(*) > 0 FROM timelines WHERE run_id = id) FROM runs WHERE status != 'running' AND"
      " status != 'interrupted' ORDER BY id";
  std::mt19937 random(31);  // the same points every time
  std::uniform_int_distribution<int> delay_ms(30, 900);
  std::vector<std::string> finished_before;
  std::vector<std::string> left_running;
  for (int kill_number = 0; kill_number < 4; ++kill_number) {
    const int after_ms = delay_ms(random);
    const pid_t pid = testing::start_process(argv, env, tmp.file("out"), tmp.file("err"));
    usleep(after_ms * 1000);
    kill(pid, SIGKILL);
    testing::wait_process(pid, 10);
    if (!std::filesystem::exists(store)) continue;  // killed before the store was made
    EXPECT_EQ(store_rows(store, "PRAGMA integrity_check"), std::vector<std::string>{"ok"}) << "kill at " << after_ms;
    const auto finished = store_rows(store, finished_sql);
    ASSERT_GE(finished.size(), finished_before.size());
    for (std::size_t i = 0; i < finished_before.size(); ++i) EXPECT_EQ(finished[i], finished_before[i]);
    for (const auto& row : finished) {
      if (row.find("|ok|") != std::string::npos) {
        EXPECT_EQ(row.substr(row.size() - 4), "|1|1") << row;  // node row, timeline
      }
    }
    finished_before = finished;
    const auto running = store_rows(store, "SELECT id FROM runs WHERE status = 'running'");
    EXPECT_LE(running.size(), 1u);
    // A sweep that got as far as starting a run had marked the run killed
    // before it interrupted (one killed earlier, while starting, had not).
    const int newest = std::stoi(store_rows(store, "SELECT MAX(id) FROM runs").at(0));
    for (const auto& id : left_running) {
      if (std::stoi(id) >= newest) continue;
      EXPECT_EQ(store_rows(store, "SELECT status FROM runs WHERE id = " + id), std::vector<std::string>{"interrupted"})
          << "run " << id;
    }
    left_running.insert(left_running.end(), running.begin(), running.end());
  }
  std::cout << "joule test: " << left_running.size() << " of 4 kills landed inside a run, " << finished_before.size()
            << " runs had finished before the last kill" << std::endl;
  const auto last = testing::run_process(argv, env);
  EXPECT_EQ(last.exit_code, 0) << last.err;
  EXPECT_EQ(store_rows(store, "SELECT COUNT(DISTINCT config) FROM runs WHERE status = 'ok'"), std::vector<std::string>{"12"});
  EXPECT_EQ(store_rows(store, "SELECT COUNT(*) FROM runs WHERE status = 'running'"), std::vector<std::string>{"0"});
  for (const auto& id : left_running) {
    EXPECT_EQ(store_rows(store, "SELECT status FROM runs WHERE id = " + id), std::vector<std::string>{"interrupted"});
  }
  const auto analysis = testing::run_process({JOULE_BINARY, "analyze", store});
  EXPECT_EQ(analysis.exit_code, 0) << analysis.err;
  EXPECT_NE(analysis.out.find("12 configurations; 12 runs: 12 ok"), std::string::npos) << analysis.out;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) {  // the killed runs' files removed
    EXPECT_EQ(entry.path().filename().string().find(".run"), std::string::npos) << entry.path();
  }
}

// Issue 31: a corrupt store exited 2 (usage); a data error exits 1, naming
// the store. A store that is not there is still a usage error (2).
TEST(SweepCliTest, ACorruptStoreIsADataError) {
  TempDir tmp;
  write_file(tmp.file("s.sqlite"), std::string(4096, 'x'));
  for (const auto& argv : std::vector<std::vector<std::string>>{
           std::vector<std::string>{JOULE_BINARY, "analyze", tmp.file("s.sqlite")},
        std::vector<std::string>{JOULE_BINARY, "analyze", tmp.file("s.sqlite"), "--json"},
        std::vector<std::string>{JOULE_BINARY, "report", tmp.file("s.sqlite"), "-o", tmp.file("r.html")}}) {
    const auto r = testing::run_process(argv);
    EXPECT_EQ(r.exit_code, 1) << argv[1] << ": " << r.err;
    EXPECT_NE(r.err.find(tmp.file("s.sqlite")), std::string::npos) << r.err;
  }
  write_file(tmp.file("s.toml"), "command = \"true\"\n[grid]\nx = [1]\n");
  const auto sweep = testing::run_process({JOULE_BINARY, "sweep", tmp.file("s.toml"), "--backend", "sim"}, sim_env());
  EXPECT_EQ(sweep.exit_code, 1) << sweep.err;
  EXPECT_NE(sweep.err.find(tmp.file("s.sqlite")), std::string::npos) << sweep.err;
  // A store with no successful run is a data error too, its failures named.
  write_file(tmp.file("f.toml"), "command = \"exit 3\"\n[grid]\nx = [1]\n");
  testing::run_process({JOULE_BINARY, "sweep", tmp.file("f.toml"), "--backend", "sim"}, sim_env());
  const auto none = testing::run_process({JOULE_BINARY, "analyze", tmp.file("f.sqlite")});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no successful run to analyse: 1 configuration, 1 failed (no successful run); 1 run: 0 ok, 1 "
                          "failed; run 1 (x=1 repeat 0) failed (exit status 3): the command exited with status 3"),
            std::string::npos)
      << none.err;
  const auto missing = testing::run_process({JOULE_BINARY, "analyze", tmp.file("nothing.sqlite")});
  EXPECT_EQ(missing.exit_code, 2);
}

// A run on N GPUs is given them through each vendor's variable, numbered by
// that vendor's runtime: on a mixed node (two NVIDIA GPUs, then two AMD ones)
// a run on three gets CUDA_VISIBLE_DEVICES=0,1 and HIP_VISIBLE_DEVICES=0; on
// an AMD node HIP_VISIBLE_DEVICES alone.
struct SweepVisibleDevicesTest : SweepFixture {
  // What each run saw, one line per run: "gpus=N cuda=... hip=...".
  std::vector<std::string> runs_saw(const std::string& gpus) {
    const std::string seen = tmp.file("seen");
    const auto c = config("command = \"echo gpus={gpus} cuda=$(printenv CUDA_VISIBLE_DEVICES || echo unset) "
                          "hip=$(printenv HIP_VISIBLE_DEVICES || echo unset) >> " + seen + "\"\n[grid]\ngpus = [" +
                          gpus + "]\n");
    options.discovery.backend = GpuBackend::kAuto;
    options.discovery.control = "direct";
    run_sweep(c, options);
    return testing::read_lines(seen);
  }
};

TEST_F(SweepVisibleDevicesTest, OnAMixedNodeEachVendorsGpusAreNumberedByItsOwnRuntime) {
  const auto nvml = testing::use_fake_nvml(tmp, "device\ndevice\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device\ndevice\n");
  options.discovery.nvml_library = nvml.library_path;
  options.discovery.rocm_library = rocm.library_path;
  EXPECT_EQ(runs_saw("1, 3, 4"), (std::vector<std::string>{"gpus=1 cuda=0 hip=", "gpus=3 cuda=0,1 hip=0",
                                                            "gpus=4 cuda=0,1 hip=0,1"}));
}

TEST_F(SweepVisibleDevicesTest, OnAnAmdNodeRunsGetHipVisibleDevicesAndCudaIsLeftAlone) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device\ndevice\n");
  options.discovery.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options.discovery.rocm_library = rocm.library_path;
  EXPECT_EQ(runs_saw("1, 2"), (std::vector<std::string>{"gpus=1 cuda=unset hip=0", "gpus=2 cuda=unset hip=0,1"}));
}

TEST_F(SweepVisibleDevicesTest, OnAnNvidiaNodeRunsGetCudaVisibleDevicesAsBefore) {
  unsetenv("HIP_VISIBLE_DEVICES");
  const auto nvml = testing::use_fake_nvml(tmp, "device\ndevice\n");
  options.discovery.nvml_library = nvml.library_path;
  options.discovery.rocm_library = "/nonexistent/librocm_smi64.so.1";
  EXPECT_EQ(runs_saw("2"), (std::vector<std::string>{"gpus=2 cuda=0,1 hip=unset"}));
}

}  // namespace
}  // namespace joule
