// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule exporter` end to end: the real binary on the fake NVML, scraped
// with curl, stopped with SIGTERM.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <regex>
#include <thread>

#include "common/test_support.h"
#include "joule/daemon/client.h"
#include "joule/accounting/job_identity.h"

namespace joule {
namespace {

using testing::TempDir;

// The value of the sample of `name` whose labels contain `label`; -1 if none.
double value_of(const std::string& text, const std::string& name, const std::string& label) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos) {
      return std::stod(line.substr(line.rfind('}') + 2));
    }
  }
  return -1;
}

// The Unix time the exporter's counters are accounted up to, as served
// beside them (its gauge is converted from the monotonic clock each scrape:
// it may move by microseconds while the step it names stays).
double accounted_until_s(const std::string& text) {
  return value_of(text, "joule_exporter_accounted_until_seconds", "");
}

// A scrape whose counters are accounted up to `unix_s` or later, waiting up
// to 10 s: on two busy cores the exporter's sampler may fall behind by most
// of a second.
std::string scrape_accounted_past(const std::string& url, double unix_s) {
  std::string text;
  for (int attempt = 0; attempt < 100; ++attempt) {
    text = testing::run_process({"curl", "-s", url}).out;
    if (accounted_until_s(text) >= unix_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(accounted_until_s(text), unix_s) << text;
  return text;
}

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// `joule exporter` on the fake NVML in tmp, on a free loopback port.
struct RunningExporter {
  pid_t pid = -1;
  std::string url;  // .../metrics
};

// No library that is not asked for answers: a fake ROCm SMI set up by an
// earlier test in this process (its variables stay set) or the machine's own.
constexpr const char* kNoNvml = "/nonexistent/libnvidia-ml.so.1";
constexpr const char* kNoRocmSmi = "/nonexistent/librocm_smi64.so.1";

RunningExporter start_exporter_with(const TempDir& tmp, std::map<std::string, std::string> env,
                                    std::vector<std::string> extra = {}) {
  const std::string port_file = tmp.file("port");
  // An exporter started before in this directory left its port here: read
  // before this one writes its own, it sent the test to a closed port.
  std::filesystem::remove(port_file);
  std::vector<std::string> args = {JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--port-file", port_file,
                                   "--interval-s", "0.2"};
  args.insert(args.end(), extra.begin(), extra.end());
  env.emplace("JOULE_POWERCAP_ROOT", "/nonexistent");
  RunningExporter exporter;
  exporter.pid = testing::start_process(args, env, tmp.file("out"), tmp.file("err"));
  const int port = testing::wait_for_port_file(port_file);
  EXPECT_NE(port, 0) << testing::read_file(tmp.file("err"));
  exporter.url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  return exporter;
}

RunningExporter start_exporter(const TempDir& tmp, const testing::FakeNvml& fake, std::vector<std::string> extra = {},
                               const std::string& powercap_root = "/nonexistent") {
  return start_exporter_with(tmp,
                             {{"JOULE_NVML_LIBRARY", fake.library_path},
                              {"JOULE_ROCM_SMI_LIBRARY", kNoRocmSmi},
                              {"JOULE_POWERCAP_ROOT", powercap_root}},
                             std::move(extra));
}

TEST(ExporterCliTest, ServesEveryGpuAndThisProcesssJobUntilStopped) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(tmp, "driver_version 580.95.05\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\" power_w=300 mem_mhz=2619 "
                                                "pci=00000000:9A:00.0\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\" power_w=100\n"
                                                "process device=0 pid=" + me + " used_mib=512\n");
  const RunningExporter exporter = start_exporter(tmp, fake, {"--jouled-socket", ""});
  const pid_t pid = exporter.pid;
  const std::string& url = exporter.url;
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const std::string first = testing::run_process({"curl", "-s", url}).out;
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string second = testing::run_process({"curl", "-s", url}).out;

  EXPECT_EQ(value_of(second, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"0\""), 300) << second;
  EXPECT_EQ(value_of(second, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"1\""), 100) << second;
  EXPECT_NE(second.find("DCGM_FI_DRIVER_VERSION=\"580.95.05\""), std::string::npos) << second;
  EXPECT_NE(second.find("modelName=\"NVIDIA H100 80GB HBM3\""), std::string::npos) << second;
  EXPECT_EQ(value_of(second, "DCGM_FI_DEV_MEM_CLOCK", "pci_bus_id=\"00000000:9A:00.0\""), 2619) << second;
  EXPECT_EQ(value_of(second, "DCGM_FI_DEV_POWER_USAGE", "pci_bus_id=\"00000000:19:00.0\""), 100) << second;
  EXPECT_EQ(second.find("joule_jouled_up"), std::string::npos) << "jouled was not to be asked\n" << second;
  // About 1 s at 300 W between the scrapes, all of it this process's job's.
  const double added_j = value_of(second, "joule_gpu_energy_joules_total", "gpu=\"0\"") -
                         value_of(first, "joule_gpu_energy_joules_total", "gpu=\"0\"");
  EXPECT_GT(added_j, 150) << first << second;
  EXPECT_LT(added_j, 600) << first << second;
  std::smatch job;
  ASSERT_TRUE(std::regex_search(second, job, std::regex(R"re(joule_job_gpu_energy_joules_total\{joule_job="([^"]+)",user="[^"]+",gpu="0")re")))
      << second;
  EXPECT_GT(value_of(second, "joule_job_gpu_energy_joules_total", "joule_job=\"" + job[1].str() + "\""), 0);
  EXPECT_GT(value_of(second, "joule_gpu_unattributed_energy_joules_total", "gpu=\"1\""), 0);  // no process there

  kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(pid, 10.0), 0) << testing::read_file(tmp.file("err"));
}

// --carbon-region/--pue: a CO2e counter per job beside its energy counter, at
// the table's intensity (US-VT: 25.8 g/kWh, eGRID 2016) times the PUE.
TEST(ExporterCliTest, CountsEachJobsCo2eWithACarbonRegion) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n"
                                                "process device=0 pid=" + me + " used_mib=512\n");
  const RunningExporter exporter =
      start_exporter(tmp, fake, {"--jouled-socket", "", "--carbon-region", "us-vt", "--pue", "1.25"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string text = testing::run_process({"curl", "-s", exporter.url}).out;
  std::smatch job;
  ASSERT_TRUE(std::regex_search(text, job, std::regex(R"re(joule_job_gpu_energy_joules_total\{(joule_job="[^"]+"))re")))
      << text;
  const double energy_j = value_of(text, "joule_job_gpu_energy_joules_total", job[1].str());
  const double grams = value_of(text, "joule_job_gpu_co2e_grams_total", job[1].str());
  EXPECT_GT(energy_j, 0) << text;
  EXPECT_NEAR(grams, energy_j / 3.6e6 * 1.25 * 25.8, 1e-9 * (1 + grams)) << text;
  EXPECT_EQ(value_of(text, "joule_carbon_intensity_grams_per_kwh", "region=\"US-VT\""), 25.8) << text;
  EXPECT_NE(text.find("year=\"2016\",pue=\"1.25\""), std::string::npos) << text;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0);
  EXPECT_NE(testing::read_file(tmp.file("err")).find("CO2e per job at 25.8 g CO2e/kWh x PUE 1.25 (US-VT (Vermont)"),
            std::string::npos)
      << testing::read_file(tmp.file("err"));

  const auto refused = testing::run_process({JOULE_BINARY, "exporter", "--carbon-intensity", "-5"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--carbon-intensity: -5 is outside [0, 5000]"), std::string::npos) << refused.err;
}

// Polls the exporter until `until` holds for its text (at most ~10 s).
// A lease taken through a real jouled shows up with its holder's user and
// job, goes when the lease ends, and a jouled that dies reads as down.
TEST(ExporterCliTest, ShowsWhoHoldsAGpusLimitThroughJouled) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"NVIDIA A40\" min_limit_w=100 max_limit_w=300\n"
                                                "device name=\"NVIDIA A40\" min_limit_w=100 max_limit_w=300\n");
  const passwd* me = getpwuid(getuid());
  ASSERT_NE(me, nullptr);
  const std::string socket = tmp.file("jouled.sock");
  testing::write_file(tmp.file("jouled.conf"), R"({"socket": ")" + socket + R"(", "state_file": ")" +
                                                   tmp.file("jouled.state") + R"(", "allow": [{"user": ")" +
                                                   me->pw_name + R"(", "gpus": [1]}]})");
  const pid_t jouled = testing::start_process({JOULED_BINARY, "--config", tmp.file("jouled.conf")},
                                              {{"JOULE_NVML_LIBRARY", fake.library_path}}, tmp.file("jouled.out"),
                                              tmp.file("jouled.err"));
  for (int i = 0; i < 500 && access(socket.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(access(socket.c_str(), F_OK), 0) << testing::read_file(tmp.file("jouled.err"));
  const RunningExporter exporter = start_exporter(tmp, fake, {"--jouled-socket", socket});
  const auto has_lease = [](const std::string& text) {
    return text.find("joule_gpu_lease_power_limit_watts{gpu=\"1\"") != std::string::npos;
  };

  std::string text;
  {
    daemon::DaemonClient client(socket);
    client.call({{"op", "set_power_limit"}, {"gpu", 1}, {"limit_w", 150}});
    text = testing::http_get_until(exporter.url, has_lease);
    const std::optional<JobIdentity> my_job = identify_job(static_cast<uint32_t>(getpid()));
    ASSERT_TRUE(my_job);
    EXPECT_EQ(value_of(text, "joule_gpu_lease_power_limit_watts",
                       "holder_user=\"" + std::string(me->pw_name) + "\",holder_job=\"" + my_job->job_label() + "\""),
              150)
        << text;
    EXPECT_EQ(text.find("joule_gpu_lease_power_limit_watts{gpu=\"0\""), std::string::npos) << text;
    EXPECT_EQ(value_of(text, "joule_jouled_up", "Hostname"), 1) << text;
  }  // the connection ends, and with it the lease

  text = testing::http_get_until(exporter.url, [&](const std::string& t) { return !has_lease(t); });
  EXPECT_FALSE(has_lease(text)) << text;
  kill(jouled, SIGTERM);
  EXPECT_EQ(testing::wait_process(jouled, 10.0), 0) << testing::read_file(tmp.file("jouled.err"));
  text = testing::http_get_until(exporter.url, [](const std::string& t) { return value_of(t, "joule_jouled_up", "Hostname") == 0; });
  EXPECT_EQ(value_of(text, "joule_jouled_up", "Hostname"), 0) << text;
  EXPECT_NE(value_of(text, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"1\""), -1) << "the GPUs are still served\n" << text;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
}

// gpu1 falls off the bus 1.5 s in (every call fails with GPU_IS_LOST) while
// this process's job runs on both GPUs: gpu1 is marked down with why, in
// the metrics and the log, its counters and the job's energy on it keep
// what they had, its gauges go, and gpu0 is served, counted and billed as
// before.
TEST(ExporterCliTest, KeepsServingWhenAGpuIsLost) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(tmp, "device power_w=300\n"
                                                "device power_w=200\n"
                                                "process device=0 pid=" + me + "\n"
                                                "process device=1 pid=" + me + "\n"
                                                "error function=* device=1 code=15 after_ms=1500\n");
  const RunningExporter exporter = start_exporter(tmp, fake, {"--jouled-socket", ""});
  const auto up = [](const std::string& text, const char* gpu) {
    return value_of(text, "joule_gpu_up", std::string("gpu=\"") + gpu + "\"");
  };
  const std::string before = testing::http_get_until(exporter.url, [&](const std::string& t) {
    return value_of(t, "joule_gpu_energy_joules_total", "gpu=\"1\"") > 0;
  });
  EXPECT_EQ(up(before, "1"), 1) << before;
  const std::string lost = testing::http_get_until(exporter.url, [&](const std::string& t) { return up(t, "1") == 0; });
  ASSERT_EQ(up(lost, "1"), 0) << lost;
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string after = testing::run_process({"curl", "-s", exporter.url}).out;

  EXPECT_EQ(up(after, "1"), 0) << after;
  EXPECT_EQ(up(after, "0"), 1) << after;
  // gpu1's counter stays where it stopped (about 1.5 s at 200 W), neither reset nor growing.
  const double lost_j = value_of(lost, "joule_gpu_energy_joules_total", "gpu=\"1\"");
  EXPECT_GT(lost_j, 150) << lost;
  EXPECT_LT(lost_j, 450) << lost;
  EXPECT_EQ(value_of(after, "joule_gpu_energy_joules_total", "gpu=\"1\""), lost_j) << after;
  EXPECT_EQ(value_of(after, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"1\""), -1) << "no reading of a lost GPU\n" << after;
  EXPECT_EQ(value_of(after, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"0\""), 300) << after;
  EXPECT_GT(value_of(after, "joule_gpu_energy_joules_total", "gpu=\"0\""),
            value_of(lost, "joule_gpu_energy_joules_total", "gpu=\"0\"") + 150)
      << "gpu0 is still counted\n" << lost << after;
  // Why, beside the up series, and in the log.
  EXPECT_EQ(value_of(after, "joule_gpu_down_info", "gpu=\"1\""), 1) << after;
  EXPECT_EQ(value_of(after, "joule_gpu_down_info", "gpu=\"0\""), -1) << after;
  EXPECT_NE(after.find("GPU is lost"), std::string::npos) << after;
  // This process's job: billed for gpu1 up to the loss and not after, and
  // still billed for gpu0.
  const std::optional<JobIdentity> my_job = identify_job(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(my_job);
  const std::string job_label = "joule_job=\"" + my_job->job_label() + "\"";
  const auto job_j = [&](const std::string& text, const char* gpu) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("joule_job_gpu_energy_joules_total{", 0) == 0 && line.find(job_label) != std::string::npos &&
          line.find(std::string("gpu=\"") + gpu + "\"") != std::string::npos) {
        return std::stod(line.substr(line.rfind('}') + 2));
      }
    }
    return -1.0;
  };
  EXPECT_GT(job_j(lost, "1"), 0) << lost;
  EXPECT_EQ(job_j(after, "1"), job_j(lost, "1")) << "billed for a lost GPU\n" << lost << after;
  EXPECT_GT(job_j(after, "0"), job_j(lost, "0") + 150) << lost << after;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  const std::string log = testing::read_file(tmp.file("err"));
  EXPECT_NE(log.find("gpu1"), std::string::npos) << log;
  EXPECT_NE(log.find("is down"), std::string::npos) << log;
}

// `joule exporter` with no flags on a node whose NVIDIA driver cannot be
// loaded (as with --backend auto, what the packaged unit says): it serves
// no GPU at all, simulated or other, says why in its log and in
// joule_nvml_up and joule_exporter_backend_info, and keeps serving the CPU
// zones. (It used to serve two simulated GPUs under dcgm-exporter's names.)
TEST(ExporterCliTest, WithoutAUsableDriverServesNoGpuAndSaysWhy) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  for (const std::vector<std::string>& flags : {std::vector<std::string>{}, {"--backend", "nvml"}}) {
    SCOPED_TRACE(::testing::PrintToString(flags));
    TempDir tmp;
    testing::write_file(tmp.file("powercap/intel-rapl:0/name"), "package-0\n");
    testing::write_file(tmp.file("powercap/intel-rapl:0/max_energy_range_uj"), "262143328850\n");
    testing::write_file(tmp.file("powercap/intel-rapl:0/energy_uj"), "1000000\n");
    const std::string port_file = tmp.file("port");
    std::vector<std::string> args = {JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--port-file", port_file,
                                     "--interval-s", "0.2", "--jouled-socket", ""};
    args.insert(args.end(), flags.begin(), flags.end());
    const pid_t pid = testing::start_process(args,
                                             {{"JOULE_NVML_LIBRARY", kNoNvml},
                                              {"JOULE_ROCM_SMI_LIBRARY", kNoRocmSmi},
                                              {"JOULE_POWERCAP_ROOT", tmp.file("powercap")},
                                              {"JOULE_SIM", "count=2,load=0.5"}},
                                             tmp.file("out"), tmp.file("err"));
    const int port = testing::wait_for_port_file(port_file);
    ASSERT_NE(port, 0) << testing::read_file(tmp.file("err"));
    const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
    const std::string text = testing::http_get_until(url, [](const std::string& t) {
      return value_of(t, "joule_exporter_accounting_steps_total", "Hostname") >= 2;
    });
    EXPECT_EQ(value_of(text, "joule_nvml_up", "Hostname"), 0) << text;
    EXPECT_EQ(value_of(text, "joule_rocm_smi_up", "Hostname"), 0) << text;
    EXPECT_EQ(value_of(text, "joule_exporter_backend_info", "backend=\"none\""), 1) << text;
    EXPECT_NE(text.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << "the reason\n" << text;
    for (const char* series : {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                               "joule_gpu_energy_joules_total", "joule_gpu_up", "joule_job_gpu_energy_joules_total"}) {
      EXPECT_EQ(text.find(std::string(series) + "{"), std::string::npos) << series << " served\n" << text;
    }
    EXPECT_EQ(text.find("SIMULATED"), std::string::npos) << text;
    EXPECT_EQ(text.find("Simulated"), std::string::npos) << text;
    EXPECT_EQ(value_of(text, "joule_cpu_energy_joules_total", "domain=\"package\""), 0) << "CPU zones still served\n"
                                                                                          << text;
    kill(pid, SIGTERM);
    EXPECT_EQ(testing::wait_process(pid, 10.0), 0) << testing::read_file(tmp.file("err"));
    const std::string log = testing::read_file(tmp.file("err"));
    EXPECT_NE(log.find("NO GPU served"), std::string::npos) << log;
    EXPECT_NE(log.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << log;
    EXPECT_EQ(log.find("SIMULATED"), std::string::npos) << log;
  }
}

// Simulated GPUs only when asked for: --backend sim serves them and says
// so (log, joule_exporter_backend_info; NVML not asked); --sim alone is a
// usage error rather than a silent choice between them and the driver's.
TEST(ExporterCliTest, SimulatedGpusOnlyWithBackendSimAndSaidSo) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string port_file = tmp.file("port");
  const pid_t pid = testing::start_process({JOULE_BINARY, "exporter", "--backend", "sim", "--sim", "count=2,load=0.5",
                                            "--listen", "127.0.0.1:0", "--port-file", port_file, "--interval-s", "0.2",
                                            "--jouled-socket", ""},
                                           testing::simulated_only_env(), tmp.file("out"), tmp.file("err"));
  const int port = testing::wait_for_port_file(port_file);
  ASSERT_NE(port, 0) << testing::read_file(tmp.file("err"));
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  const std::string text = testing::http_get_until(url, [](const std::string& t) {
    return value_of(t, "joule_gpu_energy_joules_total", "gpu=\"1\"") > 0;
  });
  EXPECT_GT(value_of(text, "joule_gpu_energy_joules_total", "gpu=\"1\""), 0) << text;
  EXPECT_EQ(value_of(text, "joule_exporter_backend_info", "backend=\"sim\""), 1) << text;
  EXPECT_EQ(value_of(text, "joule_nvml_up", "Hostname"), -1) << "NVML was not asked\n" << text;
  EXPECT_EQ(value_of(text, "joule_rocm_smi_up", "Hostname"), -1) << "ROCm SMI was not asked\n" << text;
  EXPECT_EQ(text.find("joule_gpu_library_info{"), std::string::npos) << text;
  kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  const std::string log = testing::read_file(tmp.file("err"));
  EXPECT_NE(log.find("2 GPUs SIMULATED"), std::string::npos) << log;

  const auto alone = testing::run_process({JOULE_BINARY, "exporter", "--sim", "count=2", "--listen", "127.0.0.1:0"},
                                          testing::simulated_only_env(), 10.0);
  EXPECT_EQ(alone.exit_code, 2) << alone.err;
  EXPECT_NE(alone.err.find("--backend sim"), std::string::npos) << alone.err;
}

// --ledger: the totals of a stopped exporter are where the next one starts,
// and a ledger that is not one stops the start, naming it, left as it was.
// (Charging the time away from the counter: EnergyExporterTest.)
TEST(ExporterCliTest, WithALedgerTheNextStartGoesOnFromTheTotalsOfTheLast) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n"
                                                "process device=0 pid=" + me + " used_mib=512\n");
  const std::string ledger = tmp.file("ledger.json");
  const auto job_energy = [&](const std::string& text) {
    std::smatch job;
    const bool found = std::regex_search(text, job, std::regex(R"re(joule_job_gpu_energy_joules_total\{[^}]*gpu="0"[^}]*\} ([0-9.e+]+))re"));
    return found ? std::stod(job[1].str()) : -1.0;
  };
  RunningExporter first = start_exporter(tmp, fake, {"--jouled-socket", "", "--ledger", ledger});
  const std::string before = testing::http_get_until(first.url, [&](const std::string& t) { return job_energy(t) > 100; });
  kill(first.pid, SIGTERM);
  ASSERT_EQ(testing::wait_process(first.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  const double saved_j = job_energy(before);
  ASSERT_GT(saved_j, 100) << before;
  const std::string file = testing::read_file(ledger);
  EXPECT_NE(file.find("\"joule_ledger\": 1"), std::string::npos) << file;
  RunningExporter second = start_exporter(tmp, fake, {"--jouled-socket", "", "--ledger", ledger});
  const std::string after = testing::run_process({"curl", "-s", second.url}).out;
  // At once, before its first step: the totals it was stopped with, and more.
  EXPECT_GE(job_energy(after), saved_j) << after;
  kill(second.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(second.pid, 10.0), 0);
  // The fake driver's counter starts at zero in each process, as a reloaded
  // driver's does: what was drawn meanwhile is not known, said, not guessed.
  const std::string log = testing::read_file(tmp.file("err"));
  EXPECT_NE(log.find("its energy counter went from"), std::string::npos) << log;
  EXPECT_NE(log.find("is not known, and not charged"), std::string::npos) << log;

  testing::write_file(ledger, "{\"joule_ledger\": 1, \"saved_unix_s\": \"\xff\"}");
  const auto refused = testing::run_process({JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--jouled-socket", "",
                                             "--ledger", ledger},
                                            {{"JOULE_NVML_LIBRARY", fake.library_path},
                                             {"JOULE_ROCM_SMI_LIBRARY", kNoRocmSmi},
                                             {"JOULE_POWERCAP_ROOT", "/nonexistent"}},
                                            10.0);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find(ledger + ": the file: not JSON"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::read_file(ledger), "{\"joule_ledger\": 1, \"saved_unix_s\": \"\xff\"}");
}

// The driver's energy counter restarts from 0 1.5 s in (a driver reload):
// the exporter's counters only grow, at the power the GPU draws.
TEST(ExporterCliTest, ItsCountersKeepGrowingWhenTheDriversCounterRestarts) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "device power_w=300 energy_update_ms=100 sample_ms=20 energy_reset_ms=1500\n");
  const RunningExporter exporter = start_exporter(tmp, fake, {"--jouled-socket", ""});
  // Each counter with the time it is accounted up to, served beside it:
  // what the energy is judged against, not the test's own clock (the
  // sampler may fall behind on busy cores).
  struct Reading {
    double joules, accounted_until_s;
  };
  std::vector<Reading> readings;
  for (int i = 0; i < 8; ++i) {
    const std::string text = testing::run_process({"curl", "-s", exporter.url}).out;
    readings.push_back({value_of(text, "joule_gpu_energy_joules_total", "gpu=\"0\""), accounted_until_s(text)});
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (std::size_t i = 1; i < readings.size(); ++i) {
    EXPECT_GE(readings[i].joules, readings[i - 1].joules) << i;
    EXPECT_GE(readings[i].accounted_until_s, readings[i - 1].accounted_until_s - 1e-3) << i;
  }
  // From the second reading (past start-up) to the last: 300 W over the
  // time accounted between them (~3 s, the restart inside), to within one
  // of the counter's 100 ms updates.
  const double accounted_s = readings.back().accounted_until_s - readings[1].accounted_until_s;
  EXPECT_GT(accounted_s, 2.0);
  EXPECT_NEAR(readings.back().joules - readings[1].joules, 300 * accounted_s, 300 * 0.1);
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
}

// A RAPL package zone (a fixture tree the test advances at 50 W, through the
// counter's wrap at max_energy_range_uj) and its DRAM zone: served as
// counters in joules that grow at the zone's power across the wrap.
TEST(ExporterCliTest, ServesRaplEnergyAcrossTheCountersWrap) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "device power_w=100\n");
  const std::string package = tmp.file("powercap/intel-rapl:0");
  constexpr uint64_t kMaxUj = 262143328850;
  const auto set_uj = [&](const std::string& zone, uint64_t uj) {  // replaced whole: a read never sees half a write
    testing::write_file(zone + "/energy_uj.new", std::to_string(uj) + "\n");
    std::filesystem::rename(zone + "/energy_uj.new", zone + "/energy_uj");
  };
  testing::write_file(package + "/name", "package-0\n");
  testing::write_file(package + "/max_energy_range_uj", std::to_string(kMaxUj) + "\n");
  testing::write_file(package + "/intel-rapl:0:0/name", "dram\n");
  testing::write_file(package + "/intel-rapl:0:0/max_energy_range_uj", std::to_string(kMaxUj) + "\n");
  uint64_t package_uj = kMaxUj - 60'000'000;  // 60 J before the wrap
  set_uj(package, package_uj);
  set_uj(package + "/intel-rapl:0:0", 0);
  const RunningExporter exporter = start_exporter(tmp, fake, {"--jouled-socket", ""}, tmp.file("powercap"));
  const auto package_j = [](const std::string& text) {
    return value_of(text, "joule_cpu_energy_joules_total", "package=\"0\",domain=\"package\"");
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double first_j = package_j(testing::run_process({"curl", "-s", exporter.url}).out);
  // 3 s at 50 W (5 J every 100 ms), wrapping 1.2 s in.
  for (int tick = 0; tick < 30; ++tick) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    package_uj = (package_uj + 5'000'000) % (kMaxUj + 1);
    set_uj(package, package_uj);
  }
  // Accounted past a read after the last write (the zone is read every 0.2 s).
  const std::string text = scrape_accounted_past(exporter.url, unix_now_s() + 0.5);
  EXPECT_NEAR(package_j(text) - first_j, 150, 0.5) << "50 W for 3 s: 30 writes of 5 J";
  EXPECT_EQ(value_of(text, "joule_cpu_energy_joules_total", "domain=\"dram\""), 0) << text;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
}

// The lines of `name`'s samples (whatever their labels).
std::vector<std::string> samples_of(const std::string& text, const std::string& name) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) == 0) found.push_back(line);
  }
  return found;
}

// This process's job, as the exporter labels it.
std::string my_job_label() {
  const std::optional<JobIdentity> me = identify_job(static_cast<uint32_t>(getpid()));
  return me ? "joule_job=\"" + me->job_label() + "\"" : "no job";
}

// An AMD-only node (fake ROCm SMI, no NVIDIA driver): an MI300X whose power
// is its current socket power, running this process, and an MI250X-like GPU
// with only an average. Both are served under dcgm-exporter's names
// (device="amdN", no NVIDIA driver label) and AMD's exporter's, with the
// fake's scripted readings; the job on gpu0 is billed; ROCm SMI is up and
// NVML down, each library with its version or its reason.
TEST(ExporterCliTest, ServesAmdGpusUnderDcgmAndAmdNamesOnAnAmdNode) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_rocm_smi(
      tmp, "version 6.1.2\n"
           "device name=\"AMD Instinct MI300X\" power_w=300 util_gpu=80 util_mem=40 junction_temp_c=65 "
           "mem_used_mib=1024 sys_clocks_mhz=500,1300,2100 sys_mhz=1300 mem_clocks_mhz=900,1300 unique_id=0xabc "
           "pci=0000:c1:00.0\n"
           "device name=\"AMD Instinct MI250X\" power_w=200 current_socket_power=0 edge_temp=1\n"
           "process device=0 pid=" + me + " used_mib=512\n"
           // An MI300X keeps no average power (RSMI_STATUS_NOT_SUPPORTED).
           "error function=rsmi_dev_power_ave_get device=0 code=2\n");
  const RunningExporter exporter = start_exporter_with(
      tmp, {{"JOULE_NVML_LIBRARY", kNoNvml}, {"JOULE_ROCM_SMI_LIBRARY", fake.library_path}}, {"--jouled-socket", ""});
  const std::string first = testing::http_get_until(exporter.url, [](const std::string& t) {
    return value_of(t, "joule_gpu_energy_joules_total", "gpu=\"0\"") > 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string text = testing::run_process({"curl", "-s", exporter.url}).out;

  // dcgm-exporter's names, labelled by vendor.
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_POWER_USAGE", "device=\"amd0\""), 300) << text;
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_POWER_USAGE", "device=\"amd1\""), 200) << text;
  EXPECT_NE(text.find("UUID=\"0x0000000000000abc\",pci_bus_id=\"0000:C1:00.0\",device=\"amd0\",modelName=\"AMD Instinct MI300X\""),
            std::string::npos) << text;
  EXPECT_EQ(text.find("device=\"nvidia"), std::string::npos) << text;
  EXPECT_EQ(text.find("DCGM_FI_DRIVER_VERSION"), std::string::npos) << "no NVIDIA driver here\n" << text;
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_GPU_UTIL", "device=\"amd0\""), 80) << text;
  // AMD's names and labels, with the same readings.
  const std::string gpu0 = "gpu_id=\"0\",gpu_uuid=\"0x0000000000000abc\",card_model=\"AMD Instinct MI300X\"";
  EXPECT_EQ(value_of(text, "gpu_power_usage", gpu0), 300) << text;
  EXPECT_EQ(value_of(text, "gpu_power_usage", "gpu_id=\"1\""), 200) << text;
  EXPECT_EQ(value_of(text, "gpu_package_power", "gpu_id=\"0\""), 300) << "MI300X: current socket power\n" << text;
  EXPECT_EQ(value_of(text, "gpu_package_power", "gpu_id=\"1\""), -1) << text;
  EXPECT_EQ(value_of(text, "gpu_average_package_power", "gpu_id=\"1\""), 200) << "no socket power: the average\n" << text;
  EXPECT_EQ(value_of(text, "gpu_average_package_power", "gpu_id=\"0\""), -1) << text;
  EXPECT_EQ(value_of(text, "gpu_gfx_activity", gpu0), 80) << text;
  EXPECT_EQ(value_of(text, "gpu_umc_activity", gpu0), 40) << text;
  EXPECT_EQ(value_of(text, "gpu_junction_temperature", gpu0), 65) << text;
  EXPECT_EQ(value_of(text, "gpu_used_vram", gpu0), 1024) << text;
  EXPECT_EQ(value_of(text, "gpu_clock", "clock_type=\"system\"," + gpu0), 1300) << text;
  EXPECT_EQ(value_of(text, "gpu_clock", "clock_type=\"memory\"," + gpu0), 1300) << text;
  EXPECT_EQ(value_of(text, "gpu_nodes_total", "hostname="), 2) << text;
  // Energy: the same count in uJ as joule's in J, growing at 300 W.
  const double energy_j = value_of(text, "joule_gpu_energy_joules_total", "gpu=\"0\"");
  EXPECT_NEAR(value_of(text, "gpu_energy_consumed", gpu0), energy_j * 1e6, 1e-6 * energy_j * 1e6) << text;
  const double added_j = energy_j - value_of(first, "joule_gpu_energy_joules_total", "gpu=\"0\"");
  EXPECT_GT(added_j, 300 * 0.8) << first << text;
  EXPECT_LT(added_j, 300 * 1.8) << first << text;
  // This process's job is billed for gpu0; gpu1 has no process.
  const std::string job = my_job_label();
  EXPECT_GT(value_of(text, "joule_job_gpu_energy_joules_total", job + ",user="), 0) << text;
  EXPECT_EQ(samples_of(text, "joule_job_gpu_energy_joules_total").size(), 1u) << text;
  EXPECT_GT(value_of(text, "joule_gpu_unattributed_energy_joules_total", "gpu=\"1\""), 0) << text;
  // Where the GPUs come from.
  EXPECT_EQ(value_of(text, "joule_rocm_smi_up", "Hostname"), 1) << text;
  EXPECT_EQ(value_of(text, "joule_nvml_up", "Hostname"), 0) << text;
  EXPECT_EQ(value_of(text, "joule_exporter_backend_info", "backend=\"rocm\""), 1) << text;
  EXPECT_EQ(value_of(text, "joule_gpu_library_info", "library=\"rocm_smi\",path=\"" + fake.library_path +
                                                         "\",version=\"6.1.2\",problem=\"\""),
            1) << text;
  EXPECT_NE(text.find(std::string("library=\"nvml\",path=\"") + kNoNvml + "\",version=\"\",problem=\"no NVIDIA GPU"),
            std::string::npos) << text;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  EXPECT_NE(testing::read_file(tmp.file("err")).find("2 GPUs (ROCm SMI 6.1.2"), std::string::npos)
      << testing::read_file(tmp.file("err"));
}

// Two jobs' processes share a GPU; the driver samples one at 75% of the SMs
// and the other at 25%: their energy goes 3 to 1, and the exporter says so.
TEST(ExporterCliTest, SplitsASharedGpuByTheDriversPerProcessUtilisation) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  std::vector<pid_t> sleepers;
  for (const char* job : {"101", "102"}) {
    sleepers.push_back(testing::start_process({"sleep", "30"}, {{"SLURM_JOB_ID", job}}, "/dev/null", "/dev/null"));
  }
  testing::ProcessReaper first(sleepers[0]), second(sleepers[1]);
  const auto fake = testing::use_fake_nvml(
      tmp, fmt::format("device power_w=400\nprocess device=0 pid={} sm_util=75\nprocess device=0 pid={} sm_util=25\n",
                       sleepers[0], sleepers[1]));
  const RunningExporter exporter = start_exporter(tmp, fake, {"--jouled-socket", ""});
  testing::ProcessReaper reaper(exporter.pid);
  const std::string text = testing::http_get_until(exporter.url, [&](const std::string& t) {
    return value_of(t, "joule_job_gpu_energy_joules_total", "joule_job=\"slurm/102\"") > 200;
  });
  const double one_j = value_of(text, "joule_job_gpu_energy_joules_total", "joule_job=\"slurm/101\"");
  const double two_j = value_of(text, "joule_job_gpu_energy_joules_total", "joule_job=\"slurm/102\"");
  EXPECT_NEAR(one_j / two_j, 3.0, 0.01) << text;
  EXPECT_EQ(value_of(text, "joule_gpu_energy_split_by_utilization", "gpu=\"0\""), 1) << text;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  reaper.waited();
}

// A mixed node (fake NVML with one GPU, fake ROCm SMI with two), serving
// GPUs 0 and 2: the NVIDIA GPU keeps dcgm-exporter's labels with its driver
// version and is absent from AMD's names; joule's GPU 2 is the second AMD
// GPU (device="amd1", gpu_id="1") and the job on it is billed. Both
// libraries are up.
TEST(ExporterCliTest, ServesAMixedNodeWithEachGpuLabelledByItsVendor) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto nvml = testing::use_fake_nvml(tmp, "driver_version 580.95.05\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device power_w=250\n"
                                                    "device power_w=150 unique_id=0x2\n"
                                                    "process device=1 pid=" + me + "\n");
  const RunningExporter exporter = start_exporter_with(
      tmp, {{"JOULE_NVML_LIBRARY", nvml.library_path}, {"JOULE_ROCM_SMI_LIBRARY", rocm.library_path}},
      {"--jouled-socket", "", "--gpus", "0,2"});
  const std::string text = testing::http_get_until(exporter.url, [&](const std::string& t) {
    return value_of(t, "joule_job_gpu_energy_joules_total", my_job_label()) > 0;
  });
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"0\""), 300) << text;
  EXPECT_NE(text.find("device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname="), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"580.95.05\""), std::string::npos) << text;
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"2\""), 150) << text;
  EXPECT_EQ(value_of(text, "DCGM_FI_DEV_POWER_USAGE", "device=\"amd1\""), 150) << text;
  EXPECT_EQ(samples_of(text, "DCGM_FI_DEV_POWER_USAGE").size(), 2u) << "GPU 1 (amd0) not served\n" << text;
  for (const std::string& line : samples_of(text, "DCGM_FI_DEV_POWER_USAGE")) {
    EXPECT_EQ(line.find("device=\"amd") != std::string::npos, line.find("DCGM_FI_DRIVER_VERSION") == std::string::npos)
        << "the NVIDIA driver's version on NVIDIA GPUs only: " << line;
  }
  // AMD's names: the AMD GPU alone, numbered among the AMD GPUs.
  EXPECT_EQ(samples_of(text, "gpu_power_usage").size(), 1u) << text;
  EXPECT_EQ(value_of(text, "gpu_power_usage", "gpu_id=\"1\",gpu_uuid=\"0x0000000000000002\""), 150) << text;
  EXPECT_NE(text.find("gpu_id=\"1\",gpu_uuid=\"0x0000000000000002\",card_model=\"AMD Instinct MI300X\",hostname="), std::string::npos)
      << text;
  EXPECT_EQ(value_of(text, "gpu_nodes_total", "hostname="), 1) << text;
  // The job on the AMD GPU, and nothing billed on the idle NVIDIA one.
  EXPECT_GT(value_of(text, "joule_job_gpu_energy_joules_total", my_job_label() + ",user="), 0) << text;
  EXPECT_NE(samples_of(text, "joule_job_gpu_energy_joules_total").at(0).find("gpu=\"2\""), std::string::npos) << text;
  EXPECT_GT(value_of(text, "joule_gpu_unattributed_energy_joules_total", "gpu=\"0\""), 0) << text;
  EXPECT_EQ(value_of(text, "joule_nvml_up", "Hostname"), 1) << text;
  EXPECT_EQ(value_of(text, "joule_rocm_smi_up", "Hostname"), 1) << text;
  EXPECT_EQ(value_of(text, "joule_exporter_backend_info", "backend=\"nvml+rocm\""), 1) << text;
  EXPECT_EQ(value_of(text, "joule_gpu_library_info", "library=\"nvml\",path=\"" + nvml.library_path +
                                                         "\",version=\"580.95.05\",problem=\"\""),
            1) << text;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
}

// ROCm SMI that fails to initialise, beside a working NVML and alone: no AMD
// GPU is invented, joule_rocm_smi_up is 0 with the library's reason, and
// the NVIDIA GPU (where there is one) is served as before; with neither, no
// GPU at all.
TEST(ExporterCliTest, ARocmSmiThatFailsToInitialiseGivesNoAmdGpu) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  for (const bool with_nvidia : {true, false}) {
    SCOPED_TRACE(with_nvidia ? "beside NVML" : "alone");
    TempDir tmp;
    const auto nvml = testing::use_fake_nvml(tmp, "device power_w=300\n");
    const auto rocm = testing::use_fake_rocm_smi(tmp, "init_error code=8\ndevice power_w=250\n");
    const RunningExporter exporter = start_exporter_with(
        tmp, {{"JOULE_NVML_LIBRARY", with_nvidia ? nvml.library_path : kNoNvml},
              {"JOULE_ROCM_SMI_LIBRARY", rocm.library_path}},
        {"--jouled-socket", ""});
    const std::string text = testing::http_get_until(exporter.url, [](const std::string& t) {
      return value_of(t, "joule_exporter_accounting_steps_total", "Hostname") >= 2;
    });
    EXPECT_EQ(value_of(text, "joule_rocm_smi_up", "Hostname"), 0) << text;
    EXPECT_EQ(value_of(text, "joule_nvml_up", "Hostname"), with_nvidia ? 1 : 0) << text;
    EXPECT_NE(text.find("library=\"rocm_smi\",path=\"" + rocm.library_path + "\",version=\"\",problem=\"no AMD GPU usable"),
              std::string::npos) << text;
    EXPECT_EQ(text.find("device=\"amd"), std::string::npos) << text;
    for (const char* amd_name : {"gpu_power_usage", "gpu_energy_consumed", "gpu_nodes_total"}) {
      EXPECT_TRUE(samples_of(text, amd_name).empty()) << amd_name << "\n" << text;
    }
    EXPECT_EQ(samples_of(text, "DCGM_FI_DEV_POWER_USAGE").size(), with_nvidia ? 1u : 0u) << text;
    EXPECT_EQ(value_of(text, "joule_exporter_backend_info", with_nvidia ? "backend=\"nvml\"" : "backend=\"none\""), 1)
        << text;
    EXPECT_EQ(text.find("SIMULATED"), std::string::npos) << text;
    kill(exporter.pid, SIGTERM);
    EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  }
}

// AMD gpu1 falls off the bus 1.5 s in (every call fails with
// RSMI_STATUS_NOT_FOUND) while this process's job runs on both: it is down
// with why, its gauges go under both names, its counters (AMD's
// gpu_energy_consumed too) and the job's energy on it stay, and gpu0 is
// served and billed as before.
TEST(ExporterCliTest, KeepsServingWhenAnAmdGpuIsLost) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device power_w=300\n"
                                                    "device power_w=200\n"
                                                    "process device=0 pid=" + me + "\n"
                                                    "process device=1 pid=" + me + "\n"
                                                    "error function=* device=1 code=10 after_ms=1500\n");
  const RunningExporter exporter = start_exporter_with(
      tmp, {{"JOULE_NVML_LIBRARY", kNoNvml}, {"JOULE_ROCM_SMI_LIBRARY", rocm.library_path}}, {"--jouled-socket", ""});
  const auto up = [](const std::string& text, const char* gpu) {
    return value_of(text, "joule_gpu_up", std::string("gpu=\"") + gpu + "\"");
  };
  const std::string before = testing::http_get_until(exporter.url, [&](const std::string& t) {
    return value_of(t, "joule_gpu_energy_joules_total", "gpu=\"1\"") > 0;
  });
  EXPECT_EQ(up(before, "1"), 1) << before;
  EXPECT_EQ(value_of(before, "gpu_power_usage", "gpu_id=\"1\""), 200) << before;
  const std::string lost = testing::http_get_until(exporter.url, [&](const std::string& t) { return up(t, "1") == 0; });
  ASSERT_EQ(up(lost, "1"), 0) << lost;
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string after = testing::run_process({"curl", "-s", exporter.url}).out;

  EXPECT_EQ(up(after, "0"), 1) << after;
  EXPECT_EQ(value_of(after, "joule_gpu_down_info", "device=\"amd1\""), 1) << after;
  EXPECT_EQ(value_of(after, "joule_gpu_down_info", "gpu=\"0\""), -1) << after;
  const double lost_j = value_of(lost, "joule_gpu_energy_joules_total", "gpu=\"1\"");
  EXPECT_GT(lost_j, 150) << lost;
  EXPECT_LT(lost_j, 450) << lost;
  EXPECT_EQ(value_of(after, "joule_gpu_energy_joules_total", "gpu=\"1\""), lost_j) << after;
  EXPECT_EQ(value_of(after, "gpu_energy_consumed", "gpu_id=\"1\""), value_of(lost, "gpu_energy_consumed", "gpu_id=\"1\""))
      << lost << after;
  for (const char* gauge : {"DCGM_FI_DEV_POWER_USAGE", "gpu_power_usage", "gpu_gfx_activity", "gpu_clock"}) {
    for (const std::string& line : samples_of(after, gauge)) {
      EXPECT_EQ(line.find("gpu=\"1\""), std::string::npos) << "a reading of a lost GPU: " << line;
    }
  }
  EXPECT_EQ(value_of(after, "gpu_power_usage", "gpu_id=\"0\""), 300) << after;
  EXPECT_GT(value_of(after, "joule_gpu_energy_joules_total", "gpu=\"0\""),
            value_of(lost, "joule_gpu_energy_joules_total", "gpu=\"0\"") + 150)
      << "gpu0 is still counted\n" << lost << after;
  const auto job_j = [&](const std::string& text, const char* gpu) {
    for (const std::string& line : samples_of(text, "joule_job_gpu_energy_joules_total")) {
      if (line.find(my_job_label()) != std::string::npos && line.find(std::string("gpu=\"") + gpu + "\"") != std::string::npos) {
        return std::stod(line.substr(line.rfind('}') + 2));
      }
    }
    return -1.0;
  };
  EXPECT_GT(job_j(lost, "1"), 0) << lost;
  EXPECT_EQ(job_j(after, "1"), job_j(lost, "1")) << "billed for a lost GPU\n" << lost << after;
  EXPECT_GT(job_j(after, "0"), job_j(lost, "0") + 150) << lost << after;
  kill(exporter.pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(exporter.pid, 10.0), 0) << testing::read_file(tmp.file("err"));
  EXPECT_NE(testing::read_file(tmp.file("err")).find("gpu1 (0x5a17000000000001) is down"), std::string::npos)
      << testing::read_file(tmp.file("err"));
}

TEST(ExporterCliTest, ABadListenAddressIsAUsageError) {
  const auto r = testing::run_process(
      {JOULE_BINARY, "exporter", "--backend", "sim", "--sim", "count=1", "--listen", "127.0.0.1:99999"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--listen '127.0.0.1:99999'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace joule
