// `joule exporter` end to end: the real binary on the fake NVML, scraped
// with curl, stopped with SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <thread>

#include "common/test_support.h"

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

TEST(ExporterCliTest, ServesEveryGpuAndThisProcesssJobUntilStopped) {
  if (testing::run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(tmp, "driver_version 580.95.05\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\" power_w=100\n"
                                                "process device=0 pid=" + me + " used_mib=512\n");
  const std::string port_file = tmp.file("port");
  const pid_t pid = testing::start_process(
      {JOULE_BINARY, "exporter", "--listen", "127.0.0.1:0", "--port-file", port_file, "--interval-s", "0.2"},
      {{"JOULE_NVML_LIBRARY", fake.library_path}, {"JOULE_POWERCAP_ROOT", "/nonexistent"}}, tmp.file("out"),
      tmp.file("err"));
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string text = std::filesystem::exists(port_file) ? testing::read_file(port_file) : "";
    if (!text.empty() && text.back() == '\n') port = std::stoi(text);
  }
  ASSERT_NE(port, 0) << testing::read_file(tmp.file("err"));
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const std::string first = testing::run_process({"curl", "-s", url}).out;
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const std::string second = testing::run_process({"curl", "-s", url}).out;

  EXPECT_EQ(value_of(second, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"0\""), 300) << second;
  EXPECT_EQ(value_of(second, "DCGM_FI_DEV_POWER_USAGE", "gpu=\"1\""), 100) << second;
  EXPECT_NE(second.find("DCGM_FI_DRIVER_VERSION=\"580.95.05\""), std::string::npos) << second;
  EXPECT_NE(second.find("modelName=\"NVIDIA H100 80GB HBM3\""), std::string::npos) << second;
  // About 1 s at 300 W between the scrapes, all of it this process's job's.
  const double added_j = value_of(second, "joule_gpu_energy_joules_total", "gpu=\"0\"") -
                         value_of(first, "joule_gpu_energy_joules_total", "gpu=\"0\"");
  EXPECT_GT(added_j, 150) << first << second;
  EXPECT_LT(added_j, 600) << first << second;
  std::smatch job;
  ASSERT_TRUE(std::regex_search(second, job, std::regex(R"re(joule_job_gpu_energy_joules_total\{job="([^"]+)",user="[^"]+",gpu="0")re")))
      << second;
  EXPECT_GT(value_of(second, "joule_job_gpu_energy_joules_total", "job=\"" + job[1].str() + "\""), 0);
  EXPECT_GT(value_of(second, "joule_gpu_unattributed_energy_joules_total", "gpu=\"1\""), 0);  // no process there

  kill(pid, SIGTERM);
  EXPECT_EQ(testing::wait_process(pid, 10.0), 0) << testing::read_file(tmp.file("err"));
}

TEST(ExporterCliTest, ABadListenAddressIsAUsageError) {
  const auto r = testing::run_process({JOULE_BINARY, "exporter", "--sim", "count=1", "--listen", "127.0.0.1:99999"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--listen '127.0.0.1:99999'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace joule
