// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "joule/error.h"

namespace joule {
namespace {

TEST(SimGpuModelTest, PowerFollowsLoadAndIsCappedByTheLimit) {
  SimGpuModel model;  // idle 70 W, full load 650 W
  EXPECT_DOUBLE_EQ(model.power_w(0.0, 700), 70.0);
  EXPECT_DOUBLE_EQ(model.power_w(0.5, 700), 70.0 + 0.5 * 580.0);
  EXPECT_DOUBLE_EQ(model.power_w(1.0, 700), 650.0);
  EXPECT_DOUBLE_EQ(model.power_w(1.0, 300), 300.0);
}

TEST(SimGpuModelTest, SpeedFallsWithTheCubeRootOfDynamicPower) {
  SimGpuModel model;
  EXPECT_DOUBLE_EQ(model.relative_speed(1.0, 700), 1.0);
  // Limit 360 W leaves (360-70)/(650-70) = 1/2 of the dynamic power.
  EXPECT_NEAR(model.relative_speed(1.0, 360), std::cbrt(0.5), 1e-12);
  // A light load under a high limit is not slowed at all.
  EXPECT_DOUBLE_EQ(model.relative_speed(0.2, 300), 1.0);
}

TEST(SimGpuModelTest, AnSmClockCapSlowsInProportionAndCutsDynamicPowerByItsCube) {
  SimGpuModel model;  // max SM clock 1980 MHz
  const SimGpuModel::Settings capped{700, 990, 0};
  EXPECT_DOUBLE_EQ(model.relative_speed(1.0, capped), 0.5);
  EXPECT_NEAR(model.power_w(1.0, capped), 70.0 + 580.0 * 0.125, 1e-9);
  EXPECT_DOUBLE_EQ(model.sm_clock_fraction(1.0, capped), 0.5);
  // A cap above the clock the power limit allows changes nothing.
  const SimGpuModel::Settings loose{360, 1900, 0};
  EXPECT_NEAR(model.relative_speed(1.0, loose), std::cbrt(0.5), 1e-12);
  EXPECT_NEAR(model.power_w(1.0, loose), 360.0, 1e-9);
  // An idle GPU draws idle power whatever its cap; a light load is slowed by the cap alone.
  EXPECT_DOUBLE_EQ(model.power_w(0.0, capped), 70.0);
  EXPECT_DOUBLE_EQ(model.relative_speed(0.0, capped), 0.5);
}

TEST(SimGpuModelTest, AMemoryClockCapSavesItsShareOfPowerAndStretchesMemoryBoundWork) {
  SimGpuModel model;  // highest memory clock 2619 MHz, 20% memory-bound, memory 15% of dynamic power
  const double m = 1593.0 / 2619.0;
  const SimGpuModel::Settings capped{700, 0, 1593};
  EXPECT_NEAR(model.relative_speed(1.0, capped), 1.0 / (1.0 + 0.2 * (1.0 / m - 1.0)), 1e-12);
  EXPECT_NEAR(model.power_w(1.0, capped), 70.0 + 580.0 * (1.0 - 0.15 * (1.0 - m)), 1e-9);
  // Under a binding limit the power saved on memory lets the SM clock rise.
  const SimGpuModel::Settings limited{360, 0, 1593};
  EXPECT_GT(model.sm_clock_fraction(1.0, limited), model.sm_clock_fraction(1.0, SimGpuModel::Settings{360}));
  EXPECT_NEAR(model.power_w(1.0, limited), 360.0, 1e-9);
}

TEST(SimGpuModelTest, ClockCapsScaleAMeasuredTable) {
  SimGpuModel model;
  model.measured = {{300'000, {250.0, 0.8}}, {700'000, {600.0, 1.0}}};
  const SimGpuModel::Settings capped{700, 990, 0};
  EXPECT_DOUBLE_EQ(model.relative_speed(1.0, capped), 0.5);
  EXPECT_NEAR(model.power_w(1.0, capped), 70.0 + 530.0 * 0.125, 1e-9);
  EXPECT_DOUBLE_EQ(model.relative_speed(1.0, SimGpuModel::Settings{300}), 0.8);
}

TEST(SimGpuTest, LocksClocksWithinTheSupportedListsAndResetsThem) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(1, SimGpuModel{}, clock);
  const auto sm = gpu.supported_clocks_mhz(ClockDomain::kSm);
  ASSERT_FALSE(sm.empty());
  EXPECT_EQ(sm.front(), 210u);
  EXPECT_EQ(sm.back(), 1980u);
  EXPECT_TRUE(std::is_sorted(sm.begin(), sm.end()));
  EXPECT_EQ(gpu.supported_clocks_mhz(ClockDomain::kMemory), (std::vector<uint32_t>{1593, 2619}));
  EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kSm));

  gpu.set_load(1.0);
  const ClockLock cap = clock_cap_lock(gpu, ClockDomain::kSm, 1200);
  EXPECT_EQ(cap, (ClockLock{210, 1200}));
  gpu.lock_clock_mhz(ClockDomain::kSm, cap);
  EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), cap);
  EXPECT_EQ(gpu.sm_clock_mhz(), 1200u);
  EXPECT_NEAR(gpu.relative_speed(), 1200.0 / 1980.0, 1e-12);
  clock->advance_s(1.0);
  const double capped_j = gpu.energy_j();
  EXPECT_NEAR(capped_j, 70.0 + 580.0 * std::pow(1200.0 / 1980.0, 3.0), 1e-6);

  gpu.lock_clock_mhz(ClockDomain::kMemory, {1593, 1593});
  EXPECT_EQ(gpu.memory_clock_mhz(), 1593u);
  gpu.reset_clock_lock(ClockDomain::kSm);
  gpu.reset_clock_lock(ClockDomain::kMemory);
  EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kSm));
  EXPECT_EQ(gpu.sm_clock_mhz(), 1980u);
  EXPECT_EQ(gpu.memory_clock_mhz(), 2619u);
  EXPECT_DOUBLE_EQ(gpu.relative_speed(), 1.0);
}

TEST(SimGpuTest, RefusesClockLocksOutsideTheSupportedClocksWithoutChangingAnything) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(2, SimGpuModel{}, clock);
  gpu.lock_clock_mhz(ClockDomain::kSm, {210, 1500});
  const std::pair<ClockDomain, ClockLock> bad[] = {
      {ClockDomain::kSm, {100, 1500}},   // below the lowest clock
      {ClockDomain::kSm, {210, 2500}},   // above the highest
      {ClockDomain::kSm, {1500, 1200}},  // empty
      {ClockDomain::kMemory, {1593, 3000}},
  };
  for (const auto& [domain, lock] : bad) {
    try {
      gpu.lock_clock_mhz(domain, lock);
      FAIL() << "expected a refusal of " << lock.min_mhz << "-" << lock.max_mhz;
    } catch (const DeviceError& e) {
      EXPECT_EQ(e.code(), DeviceErrc::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("gpu2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(to_string(domain)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(gpu.clock_lock_mhz(ClockDomain::kSm), (ClockLock{210, 1500}));
  EXPECT_FALSE(gpu.clock_lock_mhz(ClockDomain::kMemory));
  EXPECT_THROW(clock_cap_lock(gpu, ClockDomain::kSm, 5000), DeviceError);
}

TEST(SimGpuTest, EnergyIntegratesPowerOverVirtualTimeAcrossChanges) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(0, SimGpuModel{}, clock);
  clock->advance_s(2.0);  // idle: 2 s * 70 W
  gpu.set_load(1.0);
  clock->advance_s(1.0);  // 650 W
  gpu.set_power_limit_mw(300'000);
  clock->advance_s(0.5);  // capped at 300 W
  EXPECT_NEAR(gpu.energy_j(), 140.0 + 650.0 + 150.0, 1e-9);
  EXPECT_EQ(gpu.total_energy_mj(), 940'000u);
  EXPECT_EQ(gpu.power_mw(), 300'000u);
  EXPECT_EQ(gpu.power_limit_mw(), 300'000u);
  gpu.restore_default_power_limit();
  EXPECT_EQ(gpu.power_limit_mw(), 700'000u);
}

TEST(SimGpuTest, AtPowerCapWhileTheLimitLowersTheDraw) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(0, SimGpuModel{}, clock);  // full load 650 W, limit 700 W
  EXPECT_FALSE(gpu.at_power_cap());     // idle
  gpu.set_load(1.0);
  EXPECT_FALSE(gpu.at_power_cap());
  gpu.set_power_limit_mw(650'000);  // exactly its draw: the limit takes nothing
  EXPECT_FALSE(gpu.at_power_cap());
  gpu.set_power_limit_mw(649'000);
  EXPECT_TRUE(gpu.at_power_cap());
  gpu.set_load(0.5);  // 360 W under the 649 W limit
  EXPECT_FALSE(gpu.at_power_cap());
  SimGpuModel measured;
  measured.measured = {{300'000, {250.0, 0.8}}, {700'000, {600.0, 1.0}}};
  EXPECT_TRUE(measured.power_capped(1.0, SimGpuModel::Settings{300}));
  EXPECT_FALSE(measured.power_capped(1.0, SimGpuModel::Settings{700}));
}

// Buffered power samples, as a driver keeps them: each the exact mean over a
// span that ends at every change, so a 2 ms stall is not smeared into the
// steps beside it; none unless the model keeps them.
TEST(SimGpuTest, BufferedPowerSamplesAreExactMeansBetweenChanges) {
  auto clock = std::make_shared<VirtualClock>(10.0);
  SimGpuModel model;
  SimGpu plain(0, model, clock);
  EXPECT_FALSE(plain.has_power_samples());
  model.keeps_power_samples = true;
  SimGpu gpu(0, model, clock);
  EXPECT_TRUE(gpu.has_power_samples());
  clock->advance_s(1.0);       // idle: one sample of 70 W
  gpu.set_load(1.0);
  clock->advance_s(0.011);     // 650 W
  gpu.set_load(0.0);
  clock->advance_s(0.002);     // 70 W
  gpu.set_load(1.0);
  gpu.set_power_limit_mw(300'000);  // no time at the old limit: no sample
  clock->advance_s(0.004);     // capped at 300 W; read mid-span
  std::vector<PowerSample> samples;
  gpu.read_power_samples(samples);
  ASSERT_EQ(samples.size(), 4u);
  const std::vector<std::pair<uint64_t, uint32_t>> expected = {
      {11'000'000, 70'000}, {11'011'000, 650'000}, {11'013'000, 70'000}, {11'017'000, 300'000}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(samples[i].timestamp_us, expected[i].first) << i;
    EXPECT_EQ(samples[i].power_mw, expected[i].second) << i;
  }
  clock->advance_s(0.003);
  samples.clear();
  gpu.read_power_samples(samples);  // only what came since
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].timestamp_us, 11'020'000u);
  EXPECT_EQ(samples[0].power_mw, 300'000u);
}

// With a sample period, samples end on the clock's grid of it whatever the
// load does, each the exact mean over its period: a driver's coarse buffer,
// through which attribution per region sees the regions.
TEST(SimGpuTest, PeriodicPowerSamplesAreExactMeansOverEachPeriod) {
  auto clock = std::make_shared<VirtualClock>(10.0);
  SimGpuModel model;  // idle 70 W, full load 650 W
  model.keeps_power_samples = true;
  model.power_sample_period_s = 0.02;
  SimGpu gpu(0, model, clock);
  EXPECT_DOUBLE_EQ(gpu.power_sample_period_s(), 0.02);
  clock->advance_s(0.015);  // 10.015: idle
  gpu.set_load(1.0);
  clock->advance_s(0.010);  // 10.025: at 650 W since 10.015
  gpu.set_load(0.5);        // 360 W
  clock->advance_s(0.012);  // 10.037: the period [10.02, 10.04] not over yet
  std::vector<PowerSample> samples;
  gpu.read_power_samples(samples);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].timestamp_us, 10'020'000u);
  EXPECT_EQ(samples[0].power_mw, 215'000u);  // (15 x 70 + 5 x 650) / 20
  gpu.energy_j();           // accounting the energy ends no period by itself
  clock->advance_s(0.044);  // 10.081: three more periods, all read at once
  samples.clear();
  gpu.read_power_samples(samples);
  const std::vector<std::pair<uint64_t, uint32_t>> expected = {
      {10'040'000, 432'500}, {10'060'000, 360'000}, {10'080'000, 360'000}};  // (5 x 650 + 15 x 360) / 20
  ASSERT_EQ(samples.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(samples[i].timestamp_us, expected[i].first) << i;
    EXPECT_EQ(samples[i].power_mw, expected[i].second) << i;
  }
  EXPECT_NEAR(gpu.energy_j(), 0.015 * 70 + 0.010 * 650 + 0.056 * 360, 1e-9);
}

TEST(SimGpuTest, RefusesLimitsOutsideItsRangeWithoutChangingAnything) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(3, SimGpuModel{}, clock);
  try {
    gpu.set_power_limit_mw(150'000);
    FAIL() << "expected a refusal";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), DeviceErrc::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("gpu3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("200.0-700.0 W"), std::string::npos);
  }
  EXPECT_EQ(gpu.power_limit_mw(), 700'000u);
  EXPECT_THROW(gpu.set_load(1.5), UsageError);
  EXPECT_THROW(gpu.set_load(std::nan("")), UsageError);
}

TEST(SimGpuTest, SaysItIsSimulated) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(1, SimGpuModel{}, clock);
  EXPECT_TRUE(gpu.simulated());
  EXPECT_EQ(gpu.backend(), "sim");
  EXPECT_NE(gpu.label().find("SIMULATED"), std::string::npos);
}

TEST(SimSpecTest, ParsesKeysAndRejectsBadOnes) {
  const SimSpec spec = parse_sim_spec("count=4,load=0.6,name=Fake A100,idle_w=50,full_w=400,min_w=100,max_w=400,default_w=400");
  EXPECT_EQ(spec.count, 4u);
  EXPECT_DOUBLE_EQ(spec.load, 0.6);
  EXPECT_EQ(spec.model.name, "Fake A100");
  EXPECT_EQ(spec.model.max_limit_mw, 400'000u);
  EXPECT_EQ(parse_sim_spec("").count, 2u);
  EXPECT_EQ(parse_sim_spec("max_w=300").model.default_limit_mw, 300'000u);
  EXPECT_FALSE(spec.model.keeps_power_samples);
  const SimGpuModel sampled = parse_sim_spec("sample_ms=20").model;
  EXPECT_TRUE(sampled.keeps_power_samples);
  EXPECT_DOUBLE_EQ(sampled.power_sample_period_s, 0.02);

  for (const char* bad : {"count=0", "count=2.5", "load=2", "speed=3", "count", "idle_w=abc", "min_w=800",
                          "sample_ms=0", "sample_ms=-5", "sample_ms=2000"}) {
    EXPECT_THROW(parse_sim_spec(bad), UsageError) << bad;
  }
  try {
    parse_sim_spec("colour=red");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'colour'"), std::string::npos);
  }
}

TEST(SimGpuTest, ListsTheProcessesItIsGivenByPid) {
  auto clock = std::make_shared<VirtualClock>();
  SimGpu gpu(0, SimGpuModel{}, clock);
  EXPECT_TRUE(gpu.running_processes().empty());
  gpu.set_processes({{300, std::nullopt}, {100, 1ull << 30}});
  const std::vector<GpuProcess> expected = {{100, 1ull << 30}, {300, std::nullopt}};
  EXPECT_EQ(gpu.running_processes(), expected);
  for (const CapabilityStatus& c : gpu.probe_capabilities()) {
    if (c.capability == GpuCapability::kRunningProcesses) {
      EXPECT_TRUE(c.available);
    }
  }
}

}  // namespace
}  // namespace joule
