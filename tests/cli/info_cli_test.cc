// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule info` end to end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

TEST(InfoCliTest, ListsFakeNvmlGpusWithEachCapability) {
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(
      tmp, "driver_version 580.95.05\n"
           "device name=\"NVIDIA H100 80GB HBM3\" arch=9 min_limit_w=200 max_limit_w=700 limit_w=650 "
           "pci=00000000:9A:00.0\n"
           "error function=nvmlDeviceGetTemperature device=0 code=3\n");
  const auto r = run_process({JOULE_BINARY, "info", "--json"},
                             {{"JOULE_NVML_LIBRARY", fake.library_path}, {"JOULE_POWERCAP_ROOT", "/nonexistent"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_TRUE(info["joule_version"].is_string());
  EXPECT_EQ(info["gpu_backend"], "nvml");
  EXPECT_FALSE(info["simulated"].get<bool>());
  EXPECT_EQ(info["driver_version"], "580.95.05");
  ASSERT_EQ(info["gpus"].size(), 1u);
  const auto& gpu = info["gpus"][0];
  EXPECT_EQ(gpu["architecture"], "Hopper");
  EXPECT_EQ(gpu["pci_bus_id"], "00000000:9A:00.0");
  EXPECT_TRUE(gpu["capabilities"]["memory_clock"]["available"].get<bool>());
  EXPECT_DOUBLE_EQ(gpu["power_limit_w"].get<double>(), 650.0);
  EXPECT_DOUBLE_EQ(gpu["default_limit_w"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(gpu["min_limit_w"].get<double>(), 200.0);
  EXPECT_TRUE(gpu["capabilities"]["energy_counter"]["available"].get<bool>());
  EXPECT_FALSE(gpu["capabilities"]["temperature"]["available"].get<bool>());
  EXPECT_NE(gpu["capabilities"]["temperature"]["reason"].get<std::string>().find("not supported"), std::string::npos);
  EXPECT_EQ(info["cpu_problems"].size(), 1u);
}

// A power-limit fact the driver refuses is null, the others stay, and why is
// said (read_power_limit_facts: the same field in jouled's state and the
// Python module's devices).
TEST(InfoCliTest, APowerLimitFactTheDriverRefusesIsNamedAndTheOthersKept) {
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(
      tmp, "device name=\"NVIDIA H100 80GB HBM3\" min_limit_w=200 max_limit_w=700 limit_w=650\n"
           "error function=nvmlDeviceGetPowerManagementLimitConstraints device=0 code=3\n");
  const std::map<std::string, std::string> env = {{"JOULE_NVML_LIBRARY", fake.library_path},
                                                  {"JOULE_POWERCAP_ROOT", "/nonexistent"}};
  const auto r = run_process({JOULE_BINARY, "info", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto gpu = nlohmann::json::parse(r.out)["gpus"][0];
  EXPECT_DOUBLE_EQ(gpu["power_limit_w"].get<double>(), 650.0);
  EXPECT_DOUBLE_EQ(gpu["default_limit_w"].get<double>(), 700.0);
  EXPECT_TRUE(gpu["min_limit_w"].is_null());
  EXPECT_TRUE(gpu["max_limit_w"].is_null());
  const std::string error = gpu["power_limit_error"].get<std::string>();
  EXPECT_EQ(error.rfind("range: ", 0), 0u) << error;
  EXPECT_NE(error.find("nvmlDeviceGetPowerManagementLimitConstraints"), std::string::npos) << error;
  const auto text = run_process({JOULE_BINARY, "info"}, env);
  EXPECT_NE(text.out.find("  power limit 650.0 W (default 700.0 W, range unreadable)\n  power limit unreadable: range: "),
            std::string::npos) << text.out;
}

TEST(InfoCliTest, ShowsEachClockWithTheSupportedRange) {
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(
      tmp, "device name=\"NVIDIA H100 80GB HBM3\" max_sm_mhz=1980 min_sm_mhz=210 sm_step_mhz=15 mem_clocks_mhz=1593,2619\n"
           "device name=\"NVIDIA H100 80GB HBM3\"\n"
           "error function=nvmlDeviceGetSupportedMemoryClocks device=1 code=3\n");
  const std::map<std::string, std::string> env = {{"JOULE_NVML_LIBRARY", fake.library_path},
                                                  {"JOULE_POWERCAP_ROOT", "/nonexistent"}};
  const auto r = run_process({JOULE_BINARY, "info", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  const auto& sm = info["gpus"][0]["clocks"]["sm"];
  EXPECT_EQ(sm["current_mhz"].get<int>(), 1980);
  EXPECT_EQ(sm["supported_min_mhz"].get<int>(), 210);
  EXPECT_EQ(sm["supported_max_mhz"].get<int>(), 1980);
  EXPECT_EQ(sm["supported_count"].get<int>(), 119);
  EXPECT_TRUE(sm["lock"].is_null());
  EXPECT_EQ(info["gpus"][0]["clocks"]["memory"]["supported_min_mhz"].get<int>(), 1593);
  EXPECT_TRUE(info["gpus"][0]["capabilities"]["lock_sm_clock"]["available"].get<bool>());
  EXPECT_TRUE(info["gpus"][1]["clocks"]["sm"]["supported_min_mhz"].is_null());  // refused: shown as unknown
  EXPECT_FALSE(info["gpus"][1]["capabilities"]["supported_clocks"]["available"].get<bool>());

  const auto text = run_process({JOULE_BINARY, "info"}, env);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("clock SM 1980 MHz (supported 210-1980 MHz, 119 clocks; no lock set through joule)"),
            std::string::npos) << text.out;
  EXPECT_NE(text.out.find("clock memory 2619 MHz (supported 1593-2619 MHz, 2 clocks;"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("supported clocks unreadable"), std::string::npos) << text.out;
}

// The processes on each GPU and their jobs: this test's own process (a real
// /proc entry) and one that has ended.
TEST(InfoCliTest, ListsTheProcessesOnEachGpuWithTheirJobs) {
  TempDir tmp;
  const std::string me = std::to_string(getpid());
  const auto fake = testing::use_fake_nvml(tmp, "device power_w=300\ndevice power_w=100\n"
                                                "process device=0 pid=" + me + " used_mib=512\n"
                                                "process device=0 pid=4194303 used_mib=na\n");
  const auto r = run_process({JOULE_BINARY, "info", "--json"},
                             {{"JOULE_NVML_LIBRARY", fake.library_path}, {"JOULE_POWERCAP_ROOT", "/nonexistent"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  const auto& listed = info["gpus"][0]["processes"];
  ASSERT_EQ(listed.size(), 2u) << listed;
  EXPECT_EQ(listed[0]["pid"].get<int>(), getpid());
  EXPECT_EQ(listed[0]["used_memory_bytes"].get<uint64_t>(), 512ull << 20);
  EXPECT_FALSE(listed[0]["user"].get<std::string>().empty());
  EXPECT_TRUE(listed[0]["job"].is_string());
  EXPECT_TRUE(listed[1]["used_memory_bytes"].is_null());
  EXPECT_TRUE(listed[1]["job"].is_null());  // no such process
  EXPECT_TRUE(info["gpus"][1]["processes"].empty());
  const auto text = run_process({JOULE_BINARY, "info"}, {{"JOULE_NVML_LIBRARY", fake.library_path}});
  EXPECT_NE(text.out.find("process " + me), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("512 MiB"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(ended)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("processes: none"), std::string::npos) << text.out;
}

TEST(InfoCliTest, OldDriverNamesTheMissingFunctions) {
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(tmp, "device name=\"Tesla P100-PCIE-16GB\"\n", /*old_driver=*/true);
  const auto r = run_process({JOULE_BINARY, "info"}, {{"JOULE_NVML_LIBRARY", fake.library_path}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NVML functions this driver lacks: nvmlDeviceGetArchitecture, "
                       "nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetFieldValues"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("energy_counter     no"), std::string::npos) << r.out;
}

TEST(InfoCliTest, WithoutADriverTheGpusAreLabelledSimulated) {
  const auto r = run_process({JOULE_BINARY, "info"}, {{"JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"},
                                                       {"JOULE_SIM", "count=1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU backend: sim"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpu0 Simulated GPU (H100-like) [SIMULATED]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("gpu1"), std::string::npos);
}

// The environment of a machine with the given libraries (empty: none there)
// and no RAPL tree or jouled.
std::map<std::string, std::string> env_with(const std::string& nvml, const std::string& rocm) {
  std::map<std::string, std::string> env = testing::simulated_only_env();
  if (!nvml.empty()) env["JOULE_NVML_LIBRARY"] = nvml;
  if (!rocm.empty()) env["JOULE_ROCM_SMI_LIBRARY"] = rocm;
  return env;
}

TEST(InfoCliTest, ListsAmdGpusWithTheRocmSmiLibraryBesideNvml) {
  TempDir tmp;
  const auto fake = testing::use_fake_rocm_smi(
      tmp, "version 6.1.2\n"
           "device name=\"AMD Instinct MI300X\" limit_w=700 max_limit_w=750 min_limit_w=200 pci=0000:c1:00.0\n"
           "device name=\"AMD Instinct MI250X\" current_socket_power=0 max_limit_w=560 limit_w=560\n"
           "error function=rsmi_dev_temp_metric_get device=1 code=2\n");
  auto env = env_with("", fake.library_path);
  env["JOULE_CONTROL"] = "direct";
  const auto r = run_process({JOULE_BINARY, "info", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["gpu_backend"], "rocm");
  EXPECT_FALSE(info["simulated"].get<bool>());
  EXPECT_EQ(info["rocm_library"], fake.library_path);
  EXPECT_TRUE(info["rocm_loaded"].get<bool>());
  EXPECT_EQ(info["rocm_problem"], "");
  EXPECT_EQ(info["rocm_version"], "6.1.2");
  EXPECT_TRUE(info["rocm_missing_functions"].empty());
  EXPECT_FALSE(info["nvml_loaded"].get<bool>());
  EXPECT_NE(info["nvml_problem"].get<std::string>().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  ASSERT_EQ(info["gpus"].size(), 2u);
  const auto& mi300 = info["gpus"][0];
  EXPECT_EQ(mi300["backend"], "rocm");
  EXPECT_EQ(mi300["name"], "AMD Instinct MI300X");
  EXPECT_EQ(mi300["architecture"], "CDNA3");
  EXPECT_DOUBLE_EQ(mi300["power_limit_w"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(mi300["max_limit_w"].get<double>(), 750.0);
  EXPECT_TRUE(mi300["capabilities"]["energy_counter"]["available"].get<bool>());
  EXPECT_FALSE(mi300["capabilities"]["power_samples"]["available"].get<bool>());
  EXPECT_NE(mi300["capabilities"]["power_samples"]["reason"].get<std::string>().find("ROCm SMI"), std::string::npos);
  const auto& mi250 = info["gpus"][1];
  EXPECT_EQ(mi250["index"], 1);
  EXPECT_EQ(mi250["architecture"], "CDNA2");
  EXPECT_FALSE(mi250["capabilities"]["temperature"]["available"].get<bool>());
  EXPECT_NE(mi250["capabilities"]["temperature"]["reason"].get<std::string>().find("rsmi_dev_temp_metric_get"),
            std::string::npos) << mi250["capabilities"]["temperature"];

  const auto text = run_process({JOULE_BINARY, "info"}, env);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("ROCm SMI: " + fake.library_path + ", loaded (version 6.1.2)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("NVML: /nonexistent/libnvidia-ml.so.1, not loaded; no NVIDIA GPU usable"),
            std::string::npos) << text.out;
  EXPECT_NE(text.out.find("backend rocm"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Power-limit control: direct ROCm SMI calls"), std::string::npos) << text.out;
}

TEST(InfoCliTest, AnOldRocmSmiLibraryNamesTheMissingFunction) {
  TempDir tmp;
  const auto fake = testing::use_fake_rocm_smi(tmp, "device name=\"AMD Instinct MI210\"\n", /*old_library=*/true);
  const auto r = run_process({JOULE_BINARY, "info"}, env_with("", fake.library_path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ROCm SMI functions this library lacks: rsmi_dev_current_socket_power_get"),
            std::string::npos) << r.out;
  const auto json = run_process({JOULE_BINARY, "info", "--json"}, env_with("", fake.library_path));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto missing = nlohmann::json::parse(json.out)["rocm_missing_functions"];
  EXPECT_NE(std::find(missing.begin(), missing.end(), "rsmi_dev_current_socket_power_get"), missing.end()) << missing;
}

// Neither library there: joule says which files it tried and why each failed.
TEST(InfoCliTest, WithNeitherLibraryItSaysWhatItLookedFor) {
  auto env = env_with("/nowhere/nvml/libnvidia-ml.so.1", "/nowhere/rocm/librocm_smi64.so.1");
  env["JOULE_SIM"] = "count=1";
  const auto r = run_process({JOULE_BINARY, "info"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU backend: sim"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVML: /nowhere/nvml/libnvidia-ml.so.1, not loaded; no NVIDIA GPU usable: cannot load"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ROCm SMI: /nowhere/rocm/librocm_smi64.so.1, not loaded; no AMD GPU usable: cannot load"),
            std::string::npos) << r.out;

  const auto json = run_process({JOULE_BINARY, "info", "--json"}, env);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto info = nlohmann::json::parse(json.out);
  EXPECT_EQ(info["nvml_library"], "/nowhere/nvml/libnvidia-ml.so.1");
  EXPECT_EQ(info["rocm_library"], "/nowhere/rocm/librocm_smi64.so.1");
  EXPECT_FALSE(info["nvml_loaded"].get<bool>());
  EXPECT_FALSE(info["rocm_loaded"].get<bool>());
  EXPECT_NE(info["nvml_problem"].get<std::string>().find("/nowhere/nvml/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(info["rocm_problem"].get<std::string>().find("/nowhere/rocm/librocm_smi64.so.1"), std::string::npos);
  EXPECT_NE(info["gpu_backend_reason"].get<std::string>().find("no AMD GPU usable"), std::string::npos);
}

// NVIDIA and AMD GPUs in one node: both listed, NVIDIA first, indices unique.
TEST(InfoCliTest, AMixedNodeListsBothVendorsWithUniqueIndices) {
  TempDir tmp;
  const auto nvml = testing::use_fake_nvml(tmp, "driver_version 580.95.05\ndevice name=\"NVIDIA H100 80GB HBM3\"\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\"\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device name=\"AMD Instinct MI300X\"\n");
  auto env = env_with(nvml.library_path, rocm.library_path);
  env["JOULE_CONTROL"] = "direct";
  const auto r = run_process({JOULE_BINARY, "info", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["gpu_backend"], "nvml+rocm");
  EXPECT_TRUE(info["nvml_loaded"].get<bool>());
  EXPECT_TRUE(info["rocm_loaded"].get<bool>());
  EXPECT_EQ(info["driver_version"], "580.95.05");
  EXPECT_EQ(info["rocm_version"], "5.2.3");
  ASSERT_EQ(info["gpus"].size(), 3u);
  const std::vector<std::string> backends = {"nvml", "nvml", "rocm"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(info["gpus"][i]["index"].get<size_t>(), i);
    EXPECT_EQ(info["gpus"][i]["backend"], backends[i]);
  }
  EXPECT_EQ(info["gpus"][2]["name"], "AMD Instinct MI300X");

  const auto text = run_process({JOULE_BINARY, "info"}, env);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("NVML: " + nvml.library_path + ", loaded (driver 580.95.05)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("ROCm SMI: " + rocm.library_path + ", loaded (version 5.2.3)"), std::string::npos);
  EXPECT_NE(text.out.find("gpu2 AMD Instinct MI300X"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Power-limit control: direct NVML and ROCm SMI calls"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace joule
