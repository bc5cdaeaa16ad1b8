// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Runs across nodes give each node's ranks their GPUs through each vendor's
// variable, as runs on one machine do (issue 35): on AMD nodes
// HIP_VISIBLE_DEVICES, on NVIDIA nodes CUDA_VISIBLE_DEVICES, on mixed nodes
// both, each numbered by its own runtime. The nodes are taken to be like the
// machine the sweep runs on (here the fake NVML and the fake ROCm SMI).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/sweep/sweep.h"

namespace joule {
namespace {

using testing::read_lines;
using testing::TempDir;
using testing::write_file;

struct SweepNodesVisibilityTest : ::testing::Test {
  TempDir tmp;
  SweepOptions options;
  int sweeps = 0;

  void SetUp() override {
    options.discovery.backend = GpuBackend::kAuto;
    options.discovery.powercap_root = "/nonexistent";
    options.discovery.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    options.discovery.rocm_library = "/nonexistent/librocm_smi64.so.1";
    options.log = [](const std::string&) {};
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("HIP_VISIBLE_DEVICES");
    unsetenv("ROCR_VISIBLE_DEVICES");
    unsetenv("JOULE_SIM");
  }

  // A stand-in launcher first on PATH: it writes the GPU variables it was
  // started with ("cuda=... hip=...") and its arguments, and no report (the
  // run is failed for that; what it was given is what is tested).
  void fake_launcher(const std::string& name) {
    const std::string dir = tmp.file("bin");
    std::filesystem::create_directories(dir);
    write_file(dir + "/" + name, "#!/bin/sh\n"
                                 "echo \"cuda=${CUDA_VISIBLE_DEVICES-unset} hip=${HIP_VISIBLE_DEVICES-unset}\" > " +
                                     tmp.file("seen") + "\nprintf '%s\\n' \"$@\" > " + tmp.file("argv") + "\n");
    std::filesystem::permissions(dir + "/" + name, std::filesystem::perms::owner_all);
    setenv("PATH", (dir + ":" + std::getenv("PATH")).c_str(), 1);
  }

  // What a run of `gpus` GPUs across nodes of gpus_per_node saw.
  std::string run_saw(const std::string& launcher, int gpus_per_node, int gpus) {
    fake_launcher(launcher);
    write_file(tmp.file("s.toml"), "command = \"true\"\nlauncher = \"" + launcher + "\"\ngpus_per_node = " +
                                       std::to_string(gpus_per_node) + "\n[grid]\ngpus = [" + std::to_string(gpus) +
                                       "]\n");
    options.store_override = tmp.file("s" + std::to_string(++sweeps) + ".sqlite");  // each sweep runs its point
    run_sweep(SweepConfig::load(tmp.file("s.toml")), options);
    const auto seen = read_lines(tmp.file("seen"));
    return seen.empty() ? "" : seen[0];
  }

  // The -x NAME pairs the launcher was given (mpirun).
  std::vector<std::string> forwarded() {
    const auto argv = read_lines(tmp.file("argv"));
    std::vector<std::string> names;
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "-x") names.push_back(argv[i + 1]);
    }
    return names;
  }
};

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

TEST_F(SweepNodesVisibilityTest, AnAmdNodesRanksGetHipVisibleDevicesAndMpirunForwardsIt) {
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device\ndevice\ndevice\n");
  options.discovery.rocm_library = rocm.library_path;
  EXPECT_EQ(run_saw("mpirun", 2, 4), "cuda=unset hip=0,1");
  EXPECT_TRUE(contains(forwarded(), "HIP_VISIBLE_DEVICES"));
}

TEST_F(SweepNodesVisibilityTest, AMixedNodesRanksGetEachVendorsVariable) {
  const auto nvml = testing::use_fake_nvml(tmp, "device\ndevice\n");
  const auto rocm = testing::use_fake_rocm_smi(tmp, "device\ndevice\n");
  options.discovery.nvml_library = nvml.library_path;
  options.discovery.rocm_library = rocm.library_path;
  EXPECT_EQ(run_saw("srun", 3, 6), "cuda=0,1 hip=0");  // NVIDIA GPUs first, as on one machine
}

TEST_F(SweepNodesVisibilityTest, AnNvidiaNodesRanksGetCudaVisibleDevicesAsBefore) {
  const auto nvml = testing::use_fake_nvml(tmp, "device\ndevice\n");
  options.discovery.nvml_library = nvml.library_path;
  EXPECT_EQ(run_saw("mpirun", 2, 4), "cuda=0,1 hip=unset");
  EXPECT_FALSE(contains(forwarded(), "HIP_VISIBLE_DEVICES"));
}

// A login node (no GPU): the sweep's backend says which vendor's variable.
TEST_F(SweepNodesVisibilityTest, WithNoGpuHereTheBackendDecides) {
  options.discovery.backend = GpuBackend::kRocm;
  EXPECT_EQ(run_saw("srun", 2, 4), "cuda=unset hip=0,1");
  options.discovery.backend = GpuBackend::kAuto;
  EXPECT_EQ(run_saw("srun", 2, 4), "cuda=0,1 hip=unset");
}

}  // namespace
}  // namespace joule
