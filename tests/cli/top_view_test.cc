// `joule top`'s layout, without a terminal.
#include "cli/top_view.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "joule/error.h"

namespace joule::cli {
namespace {

TopSnapshot snapshot_of(std::size_t gpu_count, std::size_t zone_count) {
  TopSnapshot snapshot;
  snapshot.backend = "nvml";
  snapshot.since_reset_s = 3725.0;
  for (std::size_t i = 0; i < gpu_count; ++i) {
    TopGpuRow gpu;
    gpu.id = fmt::format("gpu{}", i);
    gpu.name = "NVIDIA H100 80GB HBM3 with a name long enough to need cutting";
    gpu.power_w = 100.0 * static_cast<double>(i + 1);
    for (int k = 0; k < 100; ++k) gpu.power_history_w.push_back(7.0 * k);
    gpu.energy_j = 123456.7;
    gpu.power_limit_w = 700.0;
    gpu.max_power_limit_w = 700.0;
    gpu.limit_holder = "alice (uid 1000, pid 4242)";
    gpu.gpu_util_percent = 97;
    gpu.sm_clock_mhz = 1980;
    gpu.temperature_c = 71;
    snapshot.gpus.push_back(gpu);
  }
  for (std::size_t i = 0; i < zone_count; ++i) {
    snapshot.zones.push_back({fmt::format("cpu{} package-{}", i, i), 85.0, 4000.0, std::nullopt});
  }
  snapshot.daemon_status = "not reachable (cannot connect to jouled at '/run/joule/jouled.sock': No such file)";
  return snapshot;
}

void expect_fits(const std::vector<std::string>& lines, int width_cols, int height_rows) {
  EXPECT_LE(lines.size(), static_cast<std::size_t>(height_rows));
  for (const auto& line : lines) EXPECT_LE(display_width(line), width_cols) << line;
}

TEST(TopViewTest, FourGpusAndTwoZonesFitEightyByTwentyFourWithEveryField) {
  const TopSnapshot snapshot = snapshot_of(4, 2);
  const auto lines = render_frame(snapshot, {80, 24, EnergyUnit::kKilojoule, true, false});
  expect_fits(lines, 80, 24);
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  for (int i = 0; i < 4; ++i) EXPECT_NE(all.find(fmt::format("gpu{} NVIDIA H100", i)), std::string::npos) << all;
  EXPECT_NE(all.find("400.0 W"), std::string::npos) << all;
  EXPECT_NE(all.find("123.457 kJ"), std::string::npos) << all;
  EXPECT_NE(all.find("limit 700 W  held by alice (uid 1000, pid 4242)"), std::string::npos) << all;
  EXPECT_NE(all.find("97%"), std::string::npos) << all;
  EXPECT_NE(all.find("1980 MHz"), std::string::npos) << all;
  EXPECT_NE(all.find("71 C"), std::string::npos) << all;
  EXPECT_NE(all.find("cpu1 package-1"), std::string::npos) << all;
  EXPECT_NE(all.find("since reset 1:02:05"), std::string::npos) << all;
  EXPECT_NE(all.find("[kJ]"), std::string::npos) << all;
  EXPECT_NE(all.find("█"), std::string::npos) << all;
  // Total: 4 GPUs (100+200+300+400 W) and 2 zones (85 W each).
  EXPECT_NE(all.find("1170.0 W"), std::string::npos) << all;
}

TEST(TopViewTest, GpusThatDoNotFitAreCountedAndTheFrameNeverExceedsTheScreen) {
  const TopSnapshot snapshot = snapshot_of(16, 2);
  for (const auto& [width, height] : std::vector<std::pair<int, int>>{{80, 24}, {40, 10}, {200, 60}, {20, 3}}) {
    const auto lines = render_frame(snapshot, {width, height, EnergyUnit::kJoule, true, false});
    expect_fits(lines, width, height);
    std::string all;
    for (const auto& line : lines) all += line + "\n";
    // 16 GPUs take 32 rows; the header, total, zones and jouled 6 more.
    if (height >= 10 && height < 38) {
      EXPECT_NE(all.find("more GPU"), std::string::npos) << width << "x" << height << "\n" << all;
    }
    if (height >= 38) {
      EXPECT_EQ(all.find("more GPU"), std::string::npos) << all;
      EXPECT_NE(all.find("gpu15"), std::string::npos) << all;
    }
  }
}

TEST(TopViewTest, AsciiFramesHaveOnlyAsciiBytes) {
  const auto lines = render_frame(snapshot_of(2, 1), {80, 24, EnergyUnit::kWattHour, false, false});
  for (const auto& line : lines) {
    for (unsigned char c : line) EXPECT_LT(c, 0x80) << line;
  }
}

TEST(TopViewTest, SparklineScalesToFullScaleAndPadsShortHistories) {
  EXPECT_EQ(sparkline({0.0, 350.0, 700.0}, 700.0, 5, true), "   ▄█");
  EXPECT_EQ(sparkline({0.0, 350.0, 700.0}, 700.0, 5, false), "   =@");
  EXPECT_EQ(sparkline({700.0, 0.0, 700.0}, 700.0, 2, false), " @");  // only the newest fit
  EXPECT_EQ(sparkline({900.0}, 700.0, 1, false), "@");                // above full scale: full
  EXPECT_EQ(display_width(sparkline({1, 2, 3, 4}, 4, 10, true)), 10);
  EXPECT_EQ(sparkline({1.0}, 1.0, 0, true), "");
}

TEST(TopViewTest, UnitsCycleAndConvert) {
  EXPECT_EQ(next_unit(EnergyUnit::kJoule), EnergyUnit::kKilojoule);
  EXPECT_EQ(next_unit(EnergyUnit::kKilojoule), EnergyUnit::kWattHour);
  EXPECT_EQ(next_unit(EnergyUnit::kWattHour), EnergyUnit::kJoule);
  EXPECT_EQ(format_energy(1500.0, EnergyUnit::kJoule), "1500.0 J");
  EXPECT_EQ(format_energy(1500.0, EnergyUnit::kKilojoule), "1.500 kJ");
  EXPECT_EQ(format_energy(7200.0, EnergyUnit::kWattHour), "2.000 Wh");
  EXPECT_EQ(parse_energy_unit("KJ"), EnergyUnit::kKilojoule);
  EXPECT_THROW(parse_energy_unit("cal"), UsageError);
}

TEST(TopViewTest, PlainLinesAreOnePerDeviceWithoutEscapes) {
  TopSnapshot snapshot = snapshot_of(2, 1);
  snapshot.gpus[1].power_w.reset();
  snapshot.gpus[1].temperature_c.reset();
  const auto lines = render_plain(snapshot, EnergyUnit::kKilojoule);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "t=3725.0s gpu0 power_w=100.0 energy_kj=123.457 limit_w=700.0 holder=\"alice (uid 1000, pid 4242)\" "
            "util_percent=97 sm_clock_mhz=1980 temperature_c=71");
  EXPECT_NE(lines[1].find("power_w=- "), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("temperature_c=-"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2], "t=3725.0s cpu0-package-0 power_w=85.0 energy_kj=4.000");
  for (const auto& line : lines) EXPECT_EQ(line.find('\x1b'), std::string::npos);
}

TEST(TopViewTest, HelpPageReplacesTheDevicesAndAFailedGpuSaysWhy) {
  TopSnapshot snapshot = snapshot_of(1, 0);
  snapshot.gpus[0].problem = "GPU is lost";
  snapshot.zone_problems = {"no RAPL: /sys/class/powercap does not exist"};
  const auto frame = render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false});
  std::string all;
  for (const auto& line : frame) all += line + "\n";
  EXPECT_NE(all.find("failed: GPU is lost"), std::string::npos) << all;
  EXPECT_NE(all.find("RAPL: no RAPL: /sys/class/powercap"), std::string::npos) << all;
  const auto help = render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, true});
  std::string help_text;
  for (const auto& line : help) help_text += line + "\n";
  EXPECT_NE(help_text.find("reset energy counters"), std::string::npos) << help_text;
  EXPECT_EQ(help_text.find("gpu0"), std::string::npos) << help_text;
  expect_fits(help, 80, 24);
}

}  // namespace
}  // namespace joule::cli
