// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Dependencies point down: the device layer talks to hardware and its fakes
// only, so nothing under src/device or include/joule/device may include a
// header from the floors above it; the attribution core rests on common only.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace joule {
namespace {

TEST(LayeringTest, TheDeviceLayerIncludesNothingFromTheFloorsAbove) {
  const std::vector<std::string> above = {"joule/control/", "joule/daemon/", "joule/measure/", "joule/optimize/",
                                          "joule/simulate/", "joule/sweep/", "joule/analyze/", "joule/telemetry/", "cli/"};
  int files = 0;
  for (const char* dir : {"/src/device", "/include/joule/device"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(JOULE_SOURCE_DIR) + dir)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      std::ifstream in(entry.path());
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        ++number;
        if (line.rfind("#include", 0) != 0) continue;
        for (const auto& floor : above) {
          EXPECT_EQ(line.find("\"" + floor), std::string::npos) << entry.path().string() << ":" << number << ": " << line;
        }
      }
    }
  }
  EXPECT_GT(files, 5);
}

// The fit itself (attribution.h/.cc) is numbers only: of joule's modules it
// may include common (error.h, clock.h, common/) and its own module; the rest
// of the module reads the measure layer's data and nothing above it.
TEST(LayeringTest, TheAttributionCoreIncludesOnlyCommonAndTheModuleNothingAboveMeasure) {
  const std::vector<std::string> core_allowed = {"\"joule/attribution/", "\"joule/error.h\"", "\"joule/clock.h\"",
                                                 "\"joule/common/"};
  std::vector<std::string> module_allowed = core_allowed;
  for (const char* below : {"\"joule/measure/", "\"joule/device/"}) module_allowed.push_back(below);
  int files = 0;
  for (const char* dir : {"/src/attribution", "/include/joule/attribution"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(JOULE_SOURCE_DIR) + dir)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      const bool core = entry.path().stem() == "attribution";
      const auto& allowed = core ? core_allowed : module_allowed;
      std::ifstream in(entry.path());
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        ++number;
        if (line.rfind("#include \"", 0) != 0) continue;
        const std::string target = line.substr(std::string("#include ").size());
        const bool ok = std::any_of(allowed.begin(), allowed.end(),
                                    [&](const std::string& a) { return target.rfind(a, 0) == 0; });
        EXPECT_TRUE(ok) << entry.path().string() << ":" << number << ": " << line;
      }
    }
  }
  EXPECT_GE(files, 6);
}

// Carbon and cost is numbers and a table: it rests on common only.
TEST(LayeringTest, TheCarbonModuleIncludesOnlyCommonAndItself) {
  const std::vector<std::string> allowed = {"\"joule/carbon/", "\"joule/error.h\"", "\"joule/common/"};
  int files = 0;
  for (const char* dir : {"/src/carbon", "/include/joule/carbon"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(JOULE_SOURCE_DIR) + dir)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      std::ifstream in(entry.path());
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        ++number;
        if (line.rfind("#include \"", 0) != 0) continue;
        const std::string target = line.substr(std::string("#include ").size());
        const bool ok = std::any_of(allowed.begin(), allowed.end(),
                                    [&](const std::string& a) { return target.rfind(a, 0) == 0; });
        EXPECT_TRUE(ok) << entry.path().string() << ":" << number << ": " << line;
      }
    }
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace joule
