// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/device/rapl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/test_support.h"
#include "joule/error.h"
#include "joule/measure/sampler.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

// A powercap tree laid out as Linux does: package zones with nested
// sub-zones, and the sub-zones also linked at the top level.
void make_zone(const std::string& dir, const std::string& name, uint64_t energy_uj, uint64_t max_uj) {
  write_file(dir + "/name", name + "\n");
  write_file(dir + "/energy_uj", std::to_string(energy_uj) + "\n");
  write_file(dir + "/max_energy_range_uj", std::to_string(max_uj) + "\n");
}

std::string make_two_socket_tree(const TempDir& tmp) {
  const std::string root = tmp.file("powercap");
  make_zone(root + "/intel-rapl:0", "package-0", 1000, 262143328850);
  make_zone(root + "/intel-rapl:0/intel-rapl:0:0", "core", 10, 262143328850);
  make_zone(root + "/intel-rapl:0/intel-rapl:0:1", "dram", 20, 65712999613);
  make_zone(root + "/intel-rapl:1", "package-1", 3000, 262143328850);
  make_zone(root + "/intel-rapl:2", "psys", 5, 262143328850);
  std::filesystem::create_directory_symlink(root + "/intel-rapl:0/intel-rapl:0:1", root + "/intel-rapl:0:1");
  std::filesystem::create_directories(root + "/intel-rapl");  // the control type, not a zone
  return root;
}

TEST(RaplScanTest, FindsPackagesAndDramOnceAndSkipsOverlappingZones) {
  TempDir tmp;
  const RaplScan scan = scan_rapl(make_two_socket_tree(tmp));
  ASSERT_EQ(scan.zones.size(), 3u) << (scan.problems.empty() ? "" : scan.problems[0]);
  EXPECT_EQ(scan.zones[0]->name(), "package-0");
  EXPECT_EQ(scan.zones[0]->domain(), CpuDomain::kPackage);
  EXPECT_EQ(scan.zones[1]->name(), "dram");
  EXPECT_EQ(scan.zones[1]->domain(), CpuDomain::kDram);
  EXPECT_EQ(scan.zones[1]->package_index(), 0u);
  EXPECT_EQ(scan.zones[1]->max_energy_range_uj(), 65712999613u);
  EXPECT_EQ(scan.zones[2]->name(), "package-1");
  EXPECT_EQ(scan.zones[2]->package_index(), 1u);
  EXPECT_EQ(scan.zones[2]->energy_uj(), 3000u);
  EXPECT_TRUE(scan.problems.empty());
}

TEST(RaplScanTest, AmdZonesAreFoundToo) {
  TempDir tmp;
  const std::string root = tmp.file("powercap");
  make_zone(root + "/amd-rapl:0", "package-0", 7, 1000);
  const RaplScan scan = scan_rapl(root);
  ASSERT_EQ(scan.zones.size(), 1u);
  EXPECT_EQ(scan.zones[0]->label(), "cpu0 package-0");
}

TEST(RaplScanTest, MissingTreeIsReportedNotThrown) {
  const RaplScan scan = scan_rapl("/nonexistent/powercap");
  EXPECT_TRUE(scan.zones.empty());
  ASSERT_EQ(scan.problems.size(), 1u);
  EXPECT_NE(scan.problems[0].find("/nonexistent/powercap does not exist"), std::string::npos);
}

TEST(RaplScanTest, GarbageInCounterFileIsNamed) {
  TempDir tmp;
  const std::string root = tmp.file("powercap");
  make_zone(root + "/intel-rapl:0", "package-0", 0, 1000);
  write_file(root + "/intel-rapl:0/energy_uj", "lots\n");
  const RaplScan scan = scan_rapl(root);
  EXPECT_TRUE(scan.zones.empty());
  ASSERT_FALSE(scan.problems.empty());
  EXPECT_NE(scan.problems[0].find("intel-rapl:0/energy_uj: not an unsigned integer"), std::string::npos);
}

TEST(CounterDeltaTest, HandlesWrapAround) {
  EXPECT_EQ(counter_delta_uj(100, 250, 1000), 150u);
  // 990 -> wraps after 1000 -> 5: 10 to reach 1000, 1 to reach 0, 5 more.
  EXPECT_EQ(counter_delta_uj(990, 5, 1000), 16u);
  EXPECT_EQ(counter_delta_uj(1000, 0, 1000), 1u);
}

TEST(RaplSamplerTest, EnergyAccumulatesAcrossCounterWrapAround) {
  TempDir tmp;
  const std::string root = tmp.file("powercap");
  const uint64_t max_uj = 10'000'000;  // wraps every 10 J
  make_zone(root + "/intel-rapl:0", "package-0", max_uj - 2'000'000, max_uj);
  RaplScan scan = scan_rapl(root);
  ASSERT_EQ(scan.zones.size(), 1u);

  auto clock = std::make_shared<VirtualClock>();
  SamplerOptions options;
  options.background_thread = false;
  Sampler sampler({}, scan.zones, clock, options);
  sampler.start();  // reads max-2 J at t=0
  // 4 J per second for 3 s: the counter wraps once between the 1st and 2nd s.
  uint64_t counter = max_uj - 2'000'000;
  for (int second = 1; second <= 3; ++second) {
    clock->advance_s(1.0);
    counter = (counter + 4'000'000) % (max_uj + 1);
    write_file(root + "/intel-rapl:0/energy_uj", std::to_string(counter));
    sampler.sample_now();
  }
  EXPECT_NEAR(sampler.cpu_energy(0, 0.0, 3.0).energy_j, 12.0, 1e-5);
  EXPECT_NEAR(sampler.cpu_energy(0, 0.5, 2.5).energy_j, 8.0, 1e-5);
  const auto samples = sampler.timeline().samples();
  ASSERT_EQ(samples.size(), 3u);  // power needs two readings
  EXPECT_NEAR(samples[1].power_w, 4.0, 1e-5);
}

// energy_uj is root-only on current kernels. Tests run as root in CI, so the
// check runs in a child that drops to an unprivileged user.
TEST(RaplPermissionTest, UnreadableCounterExplainsTheFix) {
  TempDir tmp;
  const std::string root = tmp.file("powercap");
  make_zone(root + "/intel-rapl:0", "package-0", 5, 1000);
  chmod((root + "/intel-rapl:0/energy_uj").c_str(), 0400);
  chmod(tmp.path().c_str(), 0755);
  // The unprivileged child writes its findings inside the test's own
  // directory (a name in /tmp could be left over, owned by another user).
  const std::string out_dir = tmp.file("out");
  ASSERT_EQ(mkdir(out_dir.c_str(), 0777), 0);
  chmod(out_dir.c_str(), 0777);
  const std::string message_file = out_dir + "/message";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    const RaplScan scan = scan_rapl(root);
    FILE* out = std::fopen(message_file.c_str(), "w");
    if (out == nullptr) _exit(4);
    std::fprintf(out, "%zu\n%s", scan.zones.size(), scan.problems.empty() ? "" : scan.problems[0].c_str());
    std::fclose(out);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::string message = testing::read_file(message_file);
  std::remove(message_file.c_str());
  EXPECT_EQ(message.substr(0, 2), "0\n");
  EXPECT_NE(message.find("intel-rapl:0/energy_uj: permission denied"), std::string::npos) << message;
  EXPECT_NE(message.find("chmod"), std::string::npos) << message;
}

}  // namespace
}  // namespace joule
