// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule ledger`: what each job cost, read from a job ledger as the exporter
// writes it (LedgerFile), by the real binary.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_support.h"
#include "joule/accounting/ledger_file.h"

namespace joule {
namespace {

using testing::TempDir;

// Two jobs: slurm/4711 on both GPUs (3.6 MJ = 1 kWh in all), alice's on one.
std::string write_ledger(const TempDir& dir) {
  JobLedger ledger(2, 1);
  const JobIdentities ids = {{100, JobIdentity{JobIdentity::Scheduler::kSlurm, "4711", "bob", "0"}},
                             {200, JobIdentity{JobIdentity::Scheduler::kNone, "", "alice"}},
                             {300, JobIdentity{JobIdentity::Scheduler::kSlurm, "4711", "bob", "batch"}}};
  ledger.charge_gpu(0, 2.4e6, std::vector<uint32_t>{100}, ids);
  ledger.charge_gpu(1, 1.2e6, std::vector<uint32_t>{100}, ids);
  ledger.charge_gpu(1, 1000.0, std::vector<uint32_t>{200}, ids);  // shared with 100 (listed at the start)
  ledger.charge_gpu(0, 50.0, std::vector<uint32_t>{}, ids);        // 100 listed at the start
  ledger.charge_gpu(0, 10.0, std::vector<uint32_t>{300}, ids);     // the job's batch step
  ledger.charge_gpu(0, 10.0, std::vector<uint32_t>{}, ids);
  const std::string path = dir.file("ledger.json");
  ledger.charge_cpu_jobs(0, 720.0, {{"slurm/4711", "bob", 0.5}});  // 360 J of the package's
  LedgerFile(path, {"GPU-a", "GPU-b"}, {"package-0"}).save(ledger, {}, 1.7645e9);
  return path;
}

TEST(LedgerCliTest, SaysWhatEachJobCostFromTheLedger) {
  TempDir dir;
  const std::string path = write_ledger(dir);
  const auto all = testing::run_process({JOULE_BINARY, "ledger", "--file", path});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("(saved 2025-11-30 10:53:20 UTC)"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("slurm/4711"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("GPU energy 3.60 MJ (1.00 kWh), CPU 360 J"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("user/alice"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("GPU-a: 2.40 MJ in all, 0 J of it no job's"), std::string::npos) << all.out;

  // One job by its number, with its carbon and price: 1 kWh x 1.2 x 50 g, x 0.25 EUR.
  const auto one = testing::run_process({JOULE_BINARY, "ledger", "4711", "--file", path, "--carbon-intensity", "50",
                                         "--pue", "1.2", "--price", "0.25", "--currency", "EUR", "--json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto doc = nlohmann::json::parse(one.out);
  ASSERT_EQ(doc["jobs"].size(), 1u) << one.out;
  const auto& job = doc["jobs"][0];
  EXPECT_EQ(job["job"], "slurm/4711");
  EXPECT_EQ(job["user"], "bob");
  EXPECT_NEAR(job["gpu_energy_j"].get<double>(), 3.6e6 + 500 + 50 + 20, 1e-6);
  EXPECT_NEAR(job["by_gpu_j"]["GPU-a"].get<double>(), 2.4e6 + 50 + 20, 1e-6);
  EXPECT_NEAR(job["by_step_j"]["0"].get<double>(), 3.6e6 + 500 + 50, 1e-6);
  EXPECT_NEAR(job["by_step_j"]["batch"].get<double>(), 20, 1e-6);
  EXPECT_NEAR(job["cpu_energy_j"].get<double>(), 360, 1e-6);
  // CO2e and price of the GPU and CPU energy both.
  EXPECT_NEAR(job["carbon"]["co2e_g"].get<double>(), (3.6e6 + 570 + 360) / 3.6e6 * 1.2 * 50, 1e-6);
  EXPECT_NEAR(job["carbon"]["cost"].get<double>(), (3.6e6 + 570 + 360) / 3.6e6 * 1.2 * 0.25, 1e-9);
}

TEST(LedgerCliTest, AJobNotThereOrNoLedgerIsAClearError) {
  TempDir dir;
  const std::string path = write_ledger(dir);
  const auto missing = testing::run_process({JOULE_BINARY, "ledger", "9999", "--file", path});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no job '9999' in the ledger " + path), std::string::npos) << missing.err;
  const auto none = testing::run_process({JOULE_BINARY, "ledger", "--file", dir.file("nothing.json")});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no job ledger there (joule exporter --ledger writes one)"), std::string::npos) << none.err;
  testing::write_file(path, "\xff\xfe not a ledger");
  const auto broken = testing::run_process({JOULE_BINARY, "ledger", "--file", path});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find(path + ": the file: not JSON"), std::string::npos) << broken.err;
}

}  // namespace
}  // namespace joule
