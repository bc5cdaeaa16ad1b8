// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A node with NVIDIA and AMD GPUs (the fake NVML and the fake ROCm SMI both
// loaded): `joule measure` measures them together, one report, indices
// unique across vendors, each GPU's power and energy its own driver's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;
using testing::TempDir;

TEST(MixedNodeCliTest, MeasureCountsNvidiaAndAmdGpusTogether) {
  TempDir tmp;
  const auto nvml = testing::use_fake_nvml(tmp, "device name=\"NVIDIA H100 80GB HBM3\" power_w=300\n"
                                                "device name=\"NVIDIA H100 80GB HBM3\" power_w=100\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device name=\"AMD Instinct MI300X\" power_w=200\n");
  auto env = testing::simulated_only_env();
  env["JOULE_NVML_LIBRARY"] = nvml.library_path;
  env["JOULE_ROCM_SMI_LIBRARY"] = rocm.library_path;
  const auto r = run_process({JOULE_BINARY, "measure", "--json", "--", "sleep", "0.4"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_FALSE(report["simulated"].get<bool>());
  ASSERT_EQ(report["devices"].size(), 3u) << r.out;
  const double elapsed_s = report["elapsed_s"].get<double>();
  const std::vector<std::pair<std::string, double>> expected = {
      {"NVIDIA H100 80GB HBM3", 300.0}, {"NVIDIA H100 80GB HBM3", 100.0}, {"AMD Instinct MI300X", 200.0}};
  double total_j = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& device = report["devices"][i];
    EXPECT_EQ(device["id"], "gpu" + std::to_string(i));
    EXPECT_EQ(device["name"], expected[i].first);
    EXPECT_NEAR(device["avg_power_w"].get<double>(), expected[i].second, 0.01 * expected[i].second) << device;
    EXPECT_NEAR(device["energy_j"].get<double>(), expected[i].second * elapsed_s, 0.01 * expected[i].second * elapsed_s)
        << device;
    total_j += device["energy_j"].get<double>();
  }
  EXPECT_NEAR(report["total_energy_j"].get<double>(), total_j, 1e-6 * total_j);

  // --gpus picks across vendors by the same indices.
  const auto picked = run_process({JOULE_BINARY, "measure", "--json", "--gpus", "2,0", "--", "sleep", "0.2"}, env);
  ASSERT_EQ(picked.exit_code, 0) << picked.err;
  const auto two = nlohmann::json::parse(picked.out);
  ASSERT_EQ(two["devices"].size(), 2u);
  EXPECT_EQ(two["devices"][0]["name"], "AMD Instinct MI300X");
  EXPECT_EQ(two["devices"][1]["name"], "NVIDIA H100 80GB HBM3");
}

}  // namespace
}  // namespace joule
