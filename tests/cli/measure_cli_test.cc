// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule measure` end to end: the real binary, real child processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "common/fake_drivers.h"
#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

const std::map<std::string, std::string>& kSimEnv = testing::simulated_only_env();

std::map<std::string, std::string> with(std::map<std::string, std::string> env,
                                        const std::map<std::string, std::string>& more) {
  for (const auto& [k, v] : more) env[k] = v;
  return env;
}

TEST(MeasureCliTest, ReportsEnergyOfSimulatedGpusAsJson) {
  const auto r = run_process({JOULE_BINARY, "measure", "--json", "--sim", "count=3,load=0.5", "--", "sleep", "0.3"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_TRUE(report["simulated"].get<bool>());
  EXPECT_EQ(report["command"], nlohmann::json({"sleep", "0.3"}));
  // The version that made it, the same as `joule --version` says.
  const auto version = run_process({JOULE_BINARY, "--version"});
  EXPECT_EQ("joule " + report["joule_version"].get<std::string>() + "\n", version.out);
  const double elapsed_s = report["elapsed_s"];
  EXPECT_GE(elapsed_s, 0.3);
  EXPECT_LT(elapsed_s, 3.0);
  ASSERT_EQ(report["devices"].size(), 3u);
  const double power_w = 70.0 + 0.5 * 580.0;  // the sim model at load 0.5
  for (const auto& device : report["devices"]) {
    EXPECT_TRUE(device["simulated"].get<bool>());
    EXPECT_NEAR(device["avg_power_w"].get<double>(), power_w, 0.01 * power_w);
    EXPECT_NEAR(device["energy_j"].get<double>(), power_w * elapsed_s, 0.01 * power_w * elapsed_s);
    EXPECT_DOUBLE_EQ(device["peak_power_w"].get<double>(), power_w);
  }
  EXPECT_NEAR(report["total_energy_j"].get<double>(), 3 * power_w * elapsed_s, 0.03 * power_w * elapsed_s);
}

TEST(MeasureCliTest, HumanReportGoesToStderrAndLabelsSimulation) {
  const auto r = run_process({JOULE_BINARY, "measure", "--", "sh", "-c", "echo from-child"}, kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "from-child\n");
  // One short line says so (the drivers' whole story is joule info's), and each device row.
  EXPECT_NE(r.err.find("joule: GPUs are SIMULATED, not measured: no NVIDIA or AMD GPU usable here ('joule info' "
                       "says why)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("gpu0 Simulated GPU (H100-like) [SIMULATED]"), std::string::npos) << r.err;
  // A run too short for the counter's calibration says how far it got, not "pending".
  EXPECT_NE(r.err.find("not counter-calibrated ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("total"), std::string::npos);
  EXPECT_NE(r.err.find("no RAPL"), std::string::npos);
}

TEST(MeasureCliTest, PropagatesTheExitStatusAndDeathBySignal) {
  EXPECT_EQ(run_process({JOULE_BINARY, "measure", "--", "sh", "-c", "exit 7"}, kSimEnv).exit_code, 7);
  EXPECT_EQ(run_process({JOULE_BINARY, "measure", "--", "sh", "-c", "kill -KILL $$"}, kSimEnv).exit_code, 128 + 9);
  // Without "--" the first word that is not an option starts the command.
  EXPECT_EQ(run_process({JOULE_BINARY, "measure", "sh", "-c", "exit 4"}, kSimEnv).exit_code, 4);
}

TEST(MeasureCliTest, ForwardsTerminationToTheChildAndStillReports) {
  TempDir tmp;
  const std::string ready = tmp.file("ready");
  const pid_t joule = testing::start_process(
      {JOULE_BINARY, "measure", "--json", "--", "sh", "-c",
       "trap 'echo got-term > " + tmp.file("child") + "; exit 42' TERM; touch " + ready + "; while :; do sleep 0.05; done"},
      kSimEnv, tmp.file("out"), tmp.file("err"));
  for (int i = 0; i < 400 && access(ready.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(access(ready.c_str(), F_OK), 0) << "child never started";
  kill(joule, SIGTERM);
  EXPECT_EQ(testing::wait_process(joule, 20), 42);
  EXPECT_EQ(testing::read_file(tmp.file("child")), "got-term\n");
  const auto report = nlohmann::json::parse(testing::read_file(tmp.file("out")));
  EXPECT_EQ(report["exit_status"], 42);
}

TEST(MeasureCliTest, TimelineCsvHasOneRowPerDevicePerSample) {
  TempDir tmp;
  const std::string csv = tmp.file("timeline.csv");
  const auto r = run_process({JOULE_BINARY, "measure", "--interval-ms", "10", "--timeline", csv, "--sample",
                              "util,clock,temp,mem,cap", "--sim", "count=2,load=1", "--", "sleep", "0.3"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = testing::read_lines(csv);
  ASSERT_GT(lines.size(), 30u);
  EXPECT_EQ(lines[0],
            "time_s,device,power_w,gpu_util_percent,memory_util_percent,sm_clock_mhz,temperature_c,memory_used_bytes,"
            "power_capped");
  int gpu0 = 0, gpu1 = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].find(",gpu0,") != std::string::npos) ++gpu0;
    if (lines[i].find(",gpu1,") != std::string::npos) ++gpu1;
  }
  EXPECT_EQ(gpu0, gpu1);
  EXPECT_GE(gpu0, 20);  // ~30 samples at 100 Hz in 0.3 s
  EXPECT_NE(lines[1].find(",gpu0,650.000,100,50,1980,82,1073741824,0"), std::string::npos) << lines[1];
}

TEST(MeasureCliTest, TheTimelineSaysWhenTheLimitHoldsTheGpuAtItsCap) {
  TempDir tmp;
  const std::string csv = tmp.file("timeline.csv");
  // Full load wants 800 W under the 700 W limit.
  const auto r = run_process({JOULE_BINARY, "measure", "--interval-ms", "10", "--timeline", csv, "--sample", "cap",
                              "--sim", "count=1,load=1,full_w=800", "--", "sleep", "0.2"},
                             kSimEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("joule: gpu0 at its power cap in 100.0% of samples"), std::string::npos) << r.err;
  const auto lines = testing::read_lines(csv);
  ASSERT_GT(lines.size(), 10u);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    EXPECT_NE(lines[i].find(",gpu0,700.000,,,,,,1"), std::string::npos) << lines[i];
  }
  // Under the limit: 0%, in the JSON too; without --sample cap the report says nothing of it.
  const auto under = run_process({JOULE_BINARY, "measure", "--json", "--sample", "cap", "--sim", "count=1,load=1",
                                  "--", "sleep", "0.1"},
                                 kSimEnv);
  ASSERT_EQ(under.exit_code, 0) << under.err;
  EXPECT_EQ(nlohmann::json::parse(under.out)["devices"][0]["power_capped_share"], 0.0);
  const auto unsampled = run_process({JOULE_BINARY, "measure", "--json", "--sim", "count=1,load=1,full_w=800", "--",
                                      "sleep", "0.1"},
                                     kSimEnv);
  ASSERT_EQ(unsampled.exit_code, 0) << unsampled.err;
  EXPECT_FALSE(nlohmann::json::parse(unsampled.out)["devices"][0].contains("power_capped_share"));
  const auto unknown = run_process({JOULE_BINARY, "measure", "--sample", "cap,caps", "--sim", "count=1", "--", "true"},
                                   kSimEnv);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown field 'caps' (expected util, clock, temp, mem or cap)"), std::string::npos)
      << unknown.err;
}

// On each fake driver's GPUs (the fake NVML's default sources; ROCm SMI's
// MI300X with its 1 ms counter steps).
class MeasureOnFakeDriverTest : public ::testing::TestWithParam<testing::FakeDriver> {};

TEST_P(MeasureOnFakeDriverTest, MeasuresTheGpusAndSelectsThemByIndex) {
  const testing::FakeDriver& driver = GetParam();
  TempDir tmp;
  const auto fake = driver.use(tmp,
                               "device power_w=300\ndevice power_w=100\ndevice power_w=200\n");
  const auto r = run_process({JOULE_BINARY, "measure", "--json", "--gpus", "2,0", "--", "sleep", "0.3"},
                             driver.env(fake));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_FALSE(report["simulated"].get<bool>());
  ASSERT_EQ(report["devices"].size(), 2u);
  EXPECT_EQ(report["devices"][0]["id"], "gpu2");
  EXPECT_EQ(report["devices"][1]["id"], "gpu0");
  EXPECT_EQ(report["devices"][0]["name"], driver.gpu_name);
  EXPECT_NEAR(report["devices"][0]["avg_power_w"].get<double>(), 200.0, 2.0);
  EXPECT_NEAR(report["devices"][1]["avg_power_w"].get<double>(), 300.0, 3.0);
  EXPECT_NEAR(report["devices"][0]["energy_j"].get<double>(), 200.0 * report["elapsed_s"].get<double>(), 2.0);
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, MeasureOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

TEST(MeasureCliTest, IncludesRaplZonesFromThePowercapTree) {
  TempDir tmp;
  const std::string root = tmp.file("powercap");
  testing::write_file(root + "/intel-rapl:0/name", "package-0\n");
  testing::write_file(root + "/intel-rapl:0/energy_uj", "1000\n");
  testing::write_file(root + "/intel-rapl:0/max_energy_range_uj", "262143328850\n");
  const auto r = run_process({JOULE_BINARY, "measure", "--json", "--", "true"},
                             with(kSimEnv, {{"JOULE_POWERCAP_ROOT", root}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["devices"].size(), 3u);
  EXPECT_EQ(report["devices"][2]["id"], "cpu0-package");
  EXPECT_EQ(report["devices"][2]["backend"], "rapl");
}

struct BadInput {
  std::vector<std::string> args;
  int exit_code;
  std::string message;
};

// What --interval-ms accepts is what the sampler takes: 0.5 ms and up (a
// second check in the command had refused anything under 1 ms).
TEST(MeasureCliTest, AnIntervalTheSamplerTakesIsAccepted) {
  const auto r = run_process({JOULE_BINARY, "measure", "--interval-ms", "0.7", "--", "true"}, kSimEnv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(MeasureCliTest, BadInputGetsOneClearLineAndANonZeroExit) {
  const std::vector<BadInput> cases = {
      {{"measure", "--frobnicate", "--", "true"}, 2, "unknown option '--frobnicate'"},
      {{"measure"}, 2, "no command given"},
      {{"measure", "--json", "--"}, 2, "no command given"},
      {{"measure", "--gpus", "5", "--", "true"}, 2, "GPU index 5 does not exist (this machine has 2 GPUs: 0-1)"},
      {{"measure", "--gpus", "a", "--", "true"}, 2, "--gpus: GPU index 'a' is not a whole number in [0, 1023]"},
      {{"measure", "--timeline", "/nonexistent/dir/t.csv", "--", "true"}, 2, "/nonexistent/dir/t.csv"},
      {{"measure", "--interval-ms", "0", "--", "true"}, 2, "--interval-ms: 0 is outside [0.5, 3600000]"},
      {{"measure", "--sample", "colour", "--", "true"}, 2, "--sample: unknown field 'colour'"},
      {{"measure", "--sim", "count=x", "--", "true"}, 2, "'count=x' is not a number"},
      {{"measure", "--", "/nonexistent/command"}, 127, "cannot run '/nonexistent/command'"},
      {{"measure", "--backend", "nvml", "--", "true"}, 1, "/nonexistent/libnvidia-ml.so.1"},
      {{"frobnicate"}, 2, "frobnicate"},
      // A mistake points at the help of the command it was made in.
      {{"analyze", "--carbon-region", "DE"}, 2, "unknown option '--carbon-region' (see 'joule analyze --help')"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {JOULE_BINARY};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_process(argv, kSimEnv);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.exit_code, c.exit_code) << joined << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << joined << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("joule: ", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace joule
