// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
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

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  return all;
}

TEST(TopViewTest, WrapBreaksAtSpacesAndCutsOnlyPastTheLastLine) {
  EXPECT_EQ(wrap_to_width("jouled: 0 leases", 80, 2), std::vector<std::string>{"jouled: 0 leases"});
  EXPECT_EQ(wrap_to_width("aaa bbb ccc", 8, 2), (std::vector<std::string>{"aaa bbb", "  ccc"}));
  EXPECT_EQ(wrap_to_width("aaa bbb ccc ddd eee", 8, 2), (std::vector<std::string>{"aaa bbb", "  ccc..."}));
  // A word longer than a line is broken inside.
  EXPECT_EQ(wrap_to_width("abcdefghij", 6, 2), (std::vector<std::string>{"abcdef", "  ghij"}));
  // Breaking at the space would leave most of the line empty: the word is broken.
  EXPECT_EQ(wrap_to_width("jouled: " + std::string(40, 'z'), 20, 2),
            (std::vector<std::string>{"jouled: " + std::string(12, 'z'), "  " + std::string(15, 'z') + "..."}));
  for (const auto& line : wrap_to_width(std::string(300, 'x'), 10, 2)) EXPECT_LE(display_width(line), 10) << line;
}

// Issue 34: at 80x24 the RAPL and jouled messages ran off the right edge.
// They now wrap onto at most three lines, broken at spaces; nothing is lost
// that fits, and GPUs give way to them when rows are short.
TEST(TopViewTest, RaplAndJouledMessagesWrapToFitEightyColumns) {
  TopSnapshot snapshot = snapshot_of(4, 0);
  snapshot.zone_problems = {"no RAPL zones: /sys/class/powercap/intel-rapl:0/energy_uj is readable only by root "
                            "(run as root or chmod the counters)"};
  // jouled's own message as it reads on a machine without it: three lines at 80 columns.
  snapshot.daemon_status = "not reachable (cannot connect to jouled at '/run/joule/jouled.sock': No such file or "
                           "directory (jouled is not running, or is starting again; settings it had changed are "
                           "restored when it starts))";
  const auto lines = render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false});
  expect_fits(lines, 80, 24);
  const std::string all = joined(lines);
  // Re-joined, each message is whole.
  std::string flat;
  for (const auto& line : lines) flat += (line.rfind("  ", 0) == 0 ? line.substr(1) : "\n" + line);
  EXPECT_NE(flat.find("RAPL: " + snapshot.zone_problems[0]), std::string::npos) << all;
  EXPECT_NE(flat.find("jouled: " + snapshot.daemon_status), std::string::npos) << all;
  EXPECT_NE(all.find("restored when it starts))"), std::string::npos) << all;
  EXPECT_NE(all.find("chmod the counters)"), std::string::npos) << all;
  for (int i = 0; i < 4; ++i) EXPECT_NE(all.find(fmt::format("gpu{} NVIDIA", i)), std::string::npos) << all;
  // A message longer than three lines ends in "..." on the third.
  snapshot.daemon_status = std::string(400, 'z');
  const auto cut = render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false});
  expect_fits(cut, 80, 24);
  EXPECT_EQ(cut.back().substr(cut.back().size() - 3), "...") << joined(cut);
  EXPECT_EQ(cut[cut.size() - 3].rfind("jouled: zzz", 0), 0u) << joined(cut);
}

// Issue 34: at 160 columns a wide blank gap sat between the power and the
// sparkline (the part of the sparkline no history covers yet). That part is
// now a baseline, and wide rows give columns to memory and processes.
TEST(TopViewTest, WideRowsHaveNoGapBetweenPowerAndSparkline) {
  TopSnapshot snapshot = snapshot_of(2, 1);
  for (auto& gpu : snapshot.gpus) {
    gpu.power_history_w = {300.0, 310.0, 320.0};
    gpu.memory_used_bytes = 12ull << 30;
    gpu.process_count = 2;
  }
  for (bool unicode : {true, false}) {
    for (int width : {80, 120, 160, 240}) {
      const auto lines = render_frame(snapshot, {width, 24, EnergyUnit::kJoule, unicode, false});
      expect_fits(lines, width, 24);
      const std::string all = joined(lines);
      const std::size_t row = all.find("100.0 W ");
      ASSERT_NE(row, std::string::npos) << all;
      const std::string line = all.substr(row, all.find('\n', row) - row);
      // The sparkline starts right after the power value.
      EXPECT_NE(line[8], ' ') << width << ": " << line;
      EXPECT_NE(line.find(unicode ? "·" : "_"), std::string::npos) << line;
      // Every line of the GPU row spans the width: nothing left blank at the right either.
      EXPECT_GE(display_width(line) + 2, width - 2) << line;
      if (width >= 160) {
        EXPECT_NE(line.find("mem  12.0 GiB"), std::string::npos) << line;
        EXPECT_NE(line.find("procs  2"), std::string::npos) << line;
      }
      if (width == 80) {
        EXPECT_EQ(line.find("mem "), std::string::npos) << line;
      }
    }
  }
}

TopSnapshot snapshot_with_processes() {
  TopSnapshot snapshot = snapshot_of(3, 1);
  snapshot.gpus[0].process_count = 2;
  snapshot.gpus[1].process_count = 0;
  snapshot.gpus[2].processes_problem = "the driver cannot list processes (Not Supported)";
  TopProcessRow train{"gpu0", 4242, "alice", "slurm/12345", "python train.py --epochs 90", 512ull << 20};
  TopProcessRow other{"gpu0", 5151, "bob", "-", "[python3]", std::nullopt};
  snapshot.processes = {train, other};
  return snapshot;
}

// Issue 34: who uses each GPU, as nvtop and nvidia-smi show it: the `p` key's
// view and the plain lines.
TEST(TopViewTest, ProcessViewListsEachGpusProcessesWithUserJobAndMemory) {
  const TopSnapshot snapshot = snapshot_with_processes();
  const auto lines = render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false, true});
  expect_fits(lines, 80, 24);
  const std::string all = joined(lines);
  EXPECT_NE(all.find("p GPUs"), std::string::npos) << all;
  EXPECT_NE(all.find("PID  USER"), std::string::npos) << all;
  EXPECT_NE(all.find("GPU MEM  COMMAND"), std::string::npos) << all;
  EXPECT_NE(all.find("gpu0      4242  alice      slurm/12345      512 MiB  python train.py --epochs 90"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("gpu0      5151  bob        -                      -  [python3]"), std::string::npos) << all;
  EXPECT_NE(all.find("gpu1  no processes"), std::string::npos) << all;
  EXPECT_NE(all.find("gpu2  processes unknown: the driver cannot list"), std::string::npos) << all;
  EXPECT_NE(all.find("jouled: "), std::string::npos) << all;  // the tail stays
  EXPECT_EQ(all.find("util"), std::string::npos) << all;        // instead of the GPU rows
  // The GPU view names the key.
  EXPECT_NE(joined(render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false})).find("p processes"),
            std::string::npos);
  // Too many to fit: the rest are counted.
  TopSnapshot many = snapshot;
  for (uint32_t pid = 1; pid <= 40; ++pid) many.processes.push_back({"gpu0", pid, "carol", "-", "worker", 1ull << 30});
  const auto crowded = render_frame(many, {80, 24, EnergyUnit::kJoule, true, false, true});
  expect_fits(crowded, 80, 24);
  EXPECT_NE(joined(crowded).find("more rows"), std::string::npos) << joined(crowded);
}

TEST(TopViewTest, PlainLinesListProcessesAfterTheDevices) {
  const auto lines = render_plain(snapshot_with_processes(), EnergyUnit::kJoule);
  ASSERT_EQ(lines.size(), 7u);  // 3 GPUs, 1 zone, 2 processes, 1 GPU that cannot tell
  EXPECT_EQ(lines[4], "t=3725.0s gpu0 process pid=4242 user=\"alice\" job=\"slurm/12345\" used_mib=512 "
                      "command=\"python train.py --epochs 90\"");
  EXPECT_EQ(lines[5], "t=3725.0s gpu0 process pid=5151 user=\"bob\" job=\"-\" used_mib=- command=\"[python3]\"");
  EXPECT_EQ(lines[6], "t=3725.0s gpu2 processes_unknown=\"the driver cannot list processes (Not Supported)\"");
}

// The refresh interval as given: 250 ms was shown as "every 0.2 s".
TEST(TopViewTest, HeaderShowsTheIntervalAsGiven) {
  TopSnapshot snapshot = snapshot_of(1, 0);
  snapshot.interval_s = 0.25;
  EXPECT_NE(render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false})[0].find("every 0.25 s"),
            std::string::npos);
  snapshot.interval_s = 1.0;
  EXPECT_NE(render_frame(snapshot, {80, 24, EnergyUnit::kJoule, true, false})[0].find("every 1 s"), std::string::npos);
}

}  // namespace
}  // namespace joule::cli
