#include "joule/device/sim.h"

#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_THROW(gpu.set_load(1.5), Error);
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

  for (const char* bad : {"count=0", "count=2.5", "load=2", "speed=3", "count", "idle_w=abc", "min_w=800"}) {
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
