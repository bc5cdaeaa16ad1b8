// `joule info` end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

TEST(InfoCliTest, ListsFakeNvmlGpusWithEachCapability) {
  TempDir tmp;
  const auto fake = testing::use_fake_nvml(
      tmp, "driver_version 580.95.05\n"
           "device name=\"NVIDIA H100 80GB HBM3\" arch=9 min_limit_w=200 max_limit_w=700 limit_w=650\n"
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
  EXPECT_DOUBLE_EQ(gpu["power_limit_w"].get<double>(), 650.0);
  EXPECT_DOUBLE_EQ(gpu["default_limit_w"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(gpu["min_limit_w"].get<double>(), 200.0);
  EXPECT_TRUE(gpu["capabilities"]["energy_counter"]["available"].get<bool>());
  EXPECT_FALSE(gpu["capabilities"]["temperature"]["available"].get<bool>());
  EXPECT_NE(gpu["capabilities"]["temperature"]["reason"].get<std::string>().find("not supported"), std::string::npos);
  EXPECT_EQ(info["cpu_problems"].size(), 1u);
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

}  // namespace
}  // namespace joule
