// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A real Prometheus (Debian's) scrapes the real `joule exporter` running on
// a mixed node (two GPUs on the fake NVML, one on the fake ROCm SMI), and
// what it stored is checked through its query API against what the fake
// drivers were scripted to draw: rates per GPU, the split per job,
// increase() over a window, the AMD GPU under AMD's exporter's names too.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/prometheus_server.h"
#include "common/test_support.h"
#include "joule/accounting/job_identity.h"

namespace joule {
namespace {

using testing::TempDir;

// The one value an instant query returns; fails the test otherwise.
double only_value(const testing::PrometheusServer& prometheus, const std::string& promql) {
  const auto samples = prometheus.query(promql);
  EXPECT_EQ(samples.size(), 1u) << promql;
  return samples.empty() ? -1.0 : samples.front().value;
}

TEST(PrometheusScrapeTest, RatesAndJobTotalsMatchWhatTheDriverDrew) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  // Two processes on gpu0, each its own Slurm job as far as its environment
  // says (a cgroup that names a job or pod would win: the expected split is
  // taken from identify_job, not assumed).
  std::vector<pid_t> workers;
  for (const char* job : {"4711", "4712"}) {
    workers.push_back(testing::start_process({"sleep", "300"}, {{"SLURM_JOB_ID", job}}, "/dev/null", "/dev/null"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // exec'd: /proc shows sleep's environment
  std::map<std::string, int> processes_per_job;
  for (const pid_t pid : workers) {
    const std::optional<JobIdentity> id = identify_job(static_cast<uint32_t>(pid));
    ASSERT_TRUE(id);
    ++processes_per_job[id->job_label()];
  }
  // gpu0 alternates 200 W and 400 W every 100 ms (a mean of 300 W); gpu1 idles at 100 W.
  const auto fake = testing::use_fake_nvml(
      tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=200 pulse_w=400 pulse_period_ms=200 max_limit_w=700\n"
           "device name=\"NVIDIA H100 80GB HBM3\" power_w=100 max_limit_w=700\n"
           "process device=0 pid=" + std::to_string(workers[0]) + "\n"
           "process device=0 pid=" + std::to_string(workers[1]) + "\n");
  // gpu2, an AMD GPU, idles at 250 W.
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device name=\"AMD Instinct MI300X\" power_w=250\n");
  const std::string port_file = tmp.file("port");
  const pid_t exporter = testing::start_process(
      {JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--port-file", port_file, "--interval-s", "0.2",
       "--jouled-socket", ""},
      {{"JOULE_NVML_LIBRARY", fake.library_path},
       {"JOULE_ROCM_SMI_LIBRARY", rocm.library_path},
       {"JOULE_POWERCAP_ROOT", "/nonexistent"}},
      tmp.file("out"), tmp.file("err"));
  const int port = testing::wait_for_port_file(port_file);
  ASSERT_NE(port, 0) << testing::read_file(tmp.file("err"));

  {
    testing::PrometheusServer prometheus({"127.0.0.1:" + std::to_string(port)}, 1);
    if (!prometheus.running()) {
      kill(exporter, SIGTERM);
      testing::wait_process(exporter, 10.0);
      for (const pid_t pid : workers) kill(pid, SIGKILL), testing::wait_process(pid, 10.0);
      JOULE_SKIP_WITHOUT_SERVER(prometheus.skip_reason());
    }
    // 18 scrapes: a 15 s window with room on both sides.
    for (int i = 0; i < 400 && prometheus.successful_scrapes() < 18; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_GE(prometheus.successful_scrapes(), 18) << prometheus.log() << testing::read_file(tmp.file("err"));

    // Rates within 5%: a counter's value is the energy up to the last
    // accounting step (every 0.2 s), stamped at the scrape, so a 15 s rate
    // may be off by up to 0.2 / 15 either end, and the sampler's own error.
    EXPECT_NEAR(only_value(prometheus, R"(rate(joule_gpu_energy_joules_total{gpu="0"}[15s]))"), 300, 15);
    EXPECT_NEAR(only_value(prometheus, R"(rate(joule_gpu_energy_joules_total{gpu="1"}[15s]))"), 100, 5);
    EXPECT_NEAR(only_value(prometheus, R"(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"}[15s]) / 1000)"), 300, 15);
    EXPECT_NEAR(only_value(prometheus, R"(rate(joule_gpu_unattributed_energy_joules_total{gpu="1"}[15s]))"), 100, 5);
    EXPECT_EQ(only_value(prometheus, R"(DCGM_FI_DEV_POWER_USAGE{gpu="1"})"), 100);
    // The AMD GPU: under dcgm-exporter's names with the others, and under
    // AMD's exporter's names alone, its energy in uJ as AMD's dashboards
    // take its delta.
    EXPECT_EQ(only_value(prometheus, "count(DCGM_FI_DEV_POWER_USAGE)"), 3);
    EXPECT_NEAR(only_value(prometheus, R"(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{device="amd0"}[15s]) / 1000)"), 250,
                12.5);
    EXPECT_EQ(only_value(prometheus, "count(gpu_power_usage)"), 1);
    EXPECT_EQ(only_value(prometheus, R"(gpu_power_usage{gpu_id="0",card_model="AMD Instinct MI300X"})"), 250);
    EXPECT_NEAR(only_value(prometheus, R"(delta(gpu_energy_consumed{hostname=~".+"}[15s]) / 1e6 / 15)"), 250, 12.5);
    EXPECT_EQ(only_value(prometheus, "joule_rocm_smi_up + joule_nvml_up"), 2);

    // Each job's share: 150 W per process, as the fake listed them.
    const auto per_job = prometheus.query("sum by (joule_job) (increase(joule_job_gpu_energy_joules_total[15s]))");
    ASSERT_EQ(per_job.size(), processes_per_job.size());
    for (const testing::PromSample& s : per_job) {
      const std::string job = s.labels.at("joule_job");
      ASSERT_TRUE(processes_per_job.count(job)) << job;
      EXPECT_NEAR(s.value, 150.0 * 15 * processes_per_job[job], 0.05 * 150 * 15 * processes_per_job[job]) << job;
    }
    // All of gpu0's energy went to jobs, none to the unattributed counter.
    EXPECT_NEAR(only_value(prometheus, R"(sum(increase(joule_job_gpu_energy_joules_total{gpu="0"}[15s])) / )"
                                       R"(sum(increase(joule_gpu_energy_joules_total{gpu="0"}[15s])))"),
                1.0, 1e-6);
    EXPECT_EQ(only_value(prometheus, R"(increase(joule_gpu_unattributed_energy_joules_total{gpu="0"}[15s]))"), 0);

    // Every query of the Grafana dashboard runs, with Grafana's variables as
    // it would fill them, and returns data, except where this machine has
    // none to give: no jouled, no RAPL, no GPU down.
    const std::set<std::string> nothing_here = {"Limits held through jouled", "jouled reachable",
                                                "CPU package and DRAM power", "GPUs down"};
    const auto dashboard = nlohmann::json::parse(
        testing::read_file(std::string(JOULE_SOURCE_DIR) + "/packaging/grafana/joule-dashboard.json"));
    int queries = 0;
    for (const auto& panel : dashboard["panels"]) {
      for (const auto& target : panel.value("targets", nlohmann::json::array())) {
        std::string expr = target.value("expr", "");
        for (const auto& [variable, value] : std::map<std::string, std::string>{
                 {"$__rate_interval", "5s"}, {"$__range", "15s"}, {"$Hostname", ".*"}}) {
          for (std::size_t at; (at = expr.find(variable)) != std::string::npos;) expr.replace(at, variable.size(), value);
        }
        const std::string title = panel.value("title", "");
        std::vector<testing::PromSample> result;
        EXPECT_NO_THROW(result = prometheus.query(expr)) << title;
        EXPECT_EQ(result.empty(), nothing_here.count(title) == 1) << title << ": " << expr;
        ++queries;
      }
    }
    EXPECT_GE(queries, 10);
  }
  kill(exporter, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter, 10.0), 0) << testing::read_file(tmp.file("err"));
  for (const pid_t pid : workers) {
    kill(pid, SIGKILL);
    testing::wait_process(pid, 10.0);
  }
}

}  // namespace
}  // namespace joule
