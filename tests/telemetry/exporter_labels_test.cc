// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Issue 47: label values come from outside (a driver's GPU name, a
// process's environment, the host name): whatever their bytes, the scrape
// is valid Prometheus text and valid UTF-8.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "common/test_support.h"
#include "joule/common/utf8.h"
#include "joule/device/sim.h"
#include "joule/telemetry/energy_exporter.h"
#include "joule/accounting/job_identity.h"

namespace joule {
namespace {

using namespace std::string_literals;
using testing::TempDir;

// Every line of text is a HELP, a TYPE or a sample with well-formed labels.
void expect_prometheus_text(const std::string& text) {
  EXPECT_TRUE(is_valid_utf8(text)) << "byte " << first_invalid_utf8(text).value_or(0) << " is not UTF-8";
  const std::regex comment(R"(# (HELP|TYPE) [A-Za-z_:][A-Za-z0-9_:]* .+)");
  const std::regex sample(R"([A-Za-z_:][A-Za-z0-9_:]*\{([A-Za-z_][A-Za-z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\} [-+0-9.eE]+)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(std::regex_match(line, comment) || std::regex_match(line, sample)) << line;
  }
}

TEST(ExporterLabelsTest, OutsideBytesInLabelsAreEscapedAndTheTextStaysValid) {
  TempDir proc;
  // A process whose environment claims a "job" of hostile bytes, and one of a real Slurm job.
  for (const auto& [pid, environ] : {std::pair{100, "SLURM_JOB_ID=7\"} 1\n\xff\0"s}, std::pair{200, "SLURM_JOB_ID=4711\0"s}}) {
    const std::string dir = proc.file(std::to_string(pid));
    std::filesystem::create_directories(dir);
    testing::write_file(dir + "/status", "Uid:\t0\t0\t0\t0\n");
    testing::write_file(dir + "/cgroup", "0::/user.slice\n");
    testing::write_file(dir + "/environ", environ);
  }
  auto clock = std::make_shared<VirtualClock>();
  SimGpuModel model;
  model.name = "A40 \"fake\"\nbad\xff\xc3 \\ end";  // what a driver could hand over
  auto gpu = std::make_shared<SimGpu>(0, model, clock);
  gpu->set_load(1.0);
  gpu->set_processes({{100, std::nullopt}, {200, std::nullopt}});
  ExporterOptions options;
  options.hostname = "node\xfe";
  options.driver_version = "580";
  options.proc_root = proc.file("");
  options.sampler.background_thread = false;
  EnergyExporter exporter({gpu}, {}, clock, options);
  exporter.start();
  for (int tick = 1; tick <= 20; ++tick) {
    clock->advance_s(0.1);
    exporter.sampler().sample_now();
    if (tick % 10 == 0) exporter.account_now();
  }
  const std::string text = exporter.metrics_text();
  expect_prometheus_text(text);
  // The name as Prometheus will read it back: text that is not UTF-8 is
  // shown as printable() shows it (\xHH for those bytes and the newline, a
  // backslash doubled), then escaped for the format.
  EXPECT_NE(text.find(R"(modelName="A40 \"fake\"\\x0Abad\\xFF\\xC3 \\\\ end")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(Hostname="node\\xFE")"), std::string::npos);
  // An environment's SLURM_JOB_ID that is not a job id names no job.
  EXPECT_NE(text.find(R"(joule_job="slurm/4711")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(joule_job="user/root")"), std::string::npos) << text;
  EXPECT_EQ(text.find("slurm/7"), std::string::npos) << text;
}

}  // namespace
}  // namespace joule
