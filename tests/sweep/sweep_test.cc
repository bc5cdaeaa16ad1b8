#include "joule/sweep/sweep.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>

#include "common/test_support.h"
#include "sweep/load_error.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

using testing::sweep_load_error;

TEST(SweepConfigTest, ErrorsNameFileAndLine) {
  EXPECT_EQ(sweep_load_error("command = \"x\"\nrepeats = [\n"), "s.toml:2:13: Error while parsing array: encountered end-of-file");
  EXPECT_EQ(sweep_load_error("command = \"x\"\ncolour = 1\n"), "s.toml:2: unknown key \"colour\" (command, launcher, repeats, store, "
                                                   "gpus_per_node, launcher_options, grid)");
  EXPECT_EQ(sweep_load_error("repeats = 2\n"), "s.toml:1: \"command\" is required");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nrepeats = 0\n"), "s.toml:2: \"repeats\" must be a whole number from 1");
  EXPECT_EQ(sweep_load_error("command = \"x\"\nlauncher = \"ssh\"\n"),
            "s.toml:2: \"launcher\" must be local, torchrun, mpirun or srun");
  EXPECT_EQ(sweep_load_error("command = \"x\"\n[grid]\ngpus = [\"two\"]\n"), "s.toml:1: grid.gpus: 'two' must be a positive number");
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

TEST_F(SweepFixture, NoControlRefusesPowerLimitGridsAndLimitsAreRestoredAfterEachRun) {
  const auto c = config("command = \"true\"\n[grid]\npower_limit = [250, 200]\n");
  options.no_control = true;
  try {
    run_sweep(c, options);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the grid sets power_limit, but GPU control is off (--no-control)"),
              std::string::npos);
  }
  // Through the fake NVML library: each run sets its limit and puts 300 W back.
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"NVIDIA A40\" min_limit_w=100 max_limit_w=300\n");
  options.no_control = false;
  options.discovery.backend = GpuBackend::kNvml;
  options.discovery.nvml_library = fake.library_path;
  options.discovery.control = "direct";
  run_sweep(c, options);
  EXPECT_EQ(testing::read_lines(fake.log_path),
            (std::vector<std::string>{"nvmlDeviceSetPowerManagementLimit device=0 limit_mw=250000",
                                      "nvmlDeviceSetPowerManagementLimit device=0 limit_mw=300000",
                                      "nvmlDeviceSetPowerManagementLimit device=0 limit_mw=200000",
                                      "nvmlDeviceSetPowerManagementLimit device=0 limit_mw=300000"}));
}

// Clock caps as grid axes: every GPU of the run locked, the lock reset after
// each run (also after a failing one), a cap the GPUs do not support refused
// with nothing changed, and --no-control naming the knobs.
TEST_F(SweepFixture, ClockCapsAreAppliedToEveryGpuOfARunAndResetAfter) {
  const auto c = config("command = \"test {sm_clock_mhz} != 990\"\n[grid]\ngpus = [2]\nsm_clock_mhz = [1980, 990]\n");
  options.no_control = true;
  try {
    run_sweep(c, options);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the grid sets sm_clock_mhz, but GPU control is off"), std::string::npos)
        << e.what();
  }
  const std::string gpu = "device name=\"NVIDIA H100\" max_sm_mhz=1980 min_sm_mhz=210 sm_step_mhz=15\n";
  const auto fake = testing::use_fake_nvml(tmp, gpu + gpu);
  options.no_control = false;
  options.discovery.backend = GpuBackend::kNvml;
  options.discovery.nvml_library = fake.library_path;
  options.discovery.control = "direct";
  const SweepSummary s = run_sweep(c, options);
  EXPECT_EQ(s.ran, 2);
  EXPECT_EQ(s.failed, 1);  // the command fails at 990 MHz: its lock is reset all the same
  std::vector<std::string> expected;
  for (int cap : {1980, 990}) {
    for (int d = 0; d < 2; ++d) {
      expected.push_back("nvmlDeviceSetGpuLockedClocks device=" + std::to_string(d) + " min_mhz=210 max_mhz=" +
                         std::to_string(cap));
    }
    for (int d = 1; d >= 0; --d) expected.push_back("nvmlDeviceResetGpuLockedClocks device=" + std::to_string(d));
  }
  EXPECT_EQ(testing::read_lines(fake.log_path), expected);

  const auto too_fast = config("command = \"true\"\nstore = \"" + tmp.file("fast.sqlite") +
                               "\"\n[grid]\nsm_clock_mhz = [2500]\n");
  const SweepSummary refused = run_sweep(too_fast, options);
  EXPECT_EQ(refused.failed, 1);
  EXPECT_EQ(testing::read_lines(fake.log_path).size(), expected.size());  // no driver call
  const auto bad = [&] { return config("command = \"true\"\n[grid]\nsm_clock_mhz = [-5]\n"); };
  EXPECT_THROW(bad(), UsageError);
}

TEST_F(SweepFixture, PlanCountsWhatTheStoreHoldsAndEstimatesFromIt) {
  const std::string store = tmp.file("s.sqlite");
  const SweepPlan fresh = plan_sweep(config("command = \"sleep 0.05\"\nrepeats = 2\n[grid]\nbatch = [1, 2]\n"), store);
  EXPECT_EQ(fresh.total, 4);
  EXPECT_EQ(fresh.to_run.size(), 4u);
  EXPECT_EQ(fresh.mean_run_s, 0.0);
  EXPECT_FALSE(std::filesystem::exists(store));  // planning writes nothing
  EXPECT_NE(fresh.describe(store).find("(how long: said after the first run)"), std::string::npos);
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

}  // namespace
}  // namespace joule
