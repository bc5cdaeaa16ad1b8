// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Dependencies point down: the device layer talks to hardware and its fakes
// only, so nothing under src/device or include/joule/device may include a
// header from the floors above it; the attribution core rests on common only.
// And the map in docs/architecture.md is the rule: every module on its floor,
// every include pointing to a lower one, every path it names present.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

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
// of the module reads the measure layer's data, and what lies below it, and
// nothing above it.
TEST(LayeringTest, TheAttributionCoreIncludesOnlyCommonAndTheModuleNothingAboveMeasure) {
  // "attribution/": the module's private headers (src/attribution).
  const std::vector<std::string> core_allowed = {"\"joule/attribution/", "\"attribution/", "\"joule/error.h\"",
                                                 "\"joule/clock.h\"", "\"joule/common/"};
  std::vector<std::string> module_allowed = core_allowed;
  // Below measure: device's public headers, and common's private ones (src/common: the dlopen wrapper).
  for (const char* below : {"\"joule/measure/", "\"joule/device/", "\"common/"}) module_allowed.push_back(below);
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

// The floors of docs/architecture.md's map (the rows between its markers).
std::map<std::string, int> floors_of_the_map() {
  std::ifstream in(std::string(JOULE_SOURCE_DIR) + "/docs/architecture.md");
  std::map<std::string, int> floors;
  bool inside = false;
  const std::regex row(R"(^\| (\d+) \| ([a-z_]+) \| .+\|$)");
  for (std::string line; std::getline(in, line);) {
    if (line == "<!-- layering-map: begin -->") inside = true;
    if (line == "<!-- layering-map: end -->") break;
    std::smatch match;
    if (inside && std::regex_match(line, match, row)) floors[match[2]] = std::stoi(match[1]);
  }
  return floors;
}

// The module an include names, or "" for one of the including module's own
// files: "joule/<module>/...", a private "<module>/..." under src/, and the
// top-level headers (joule/joule_c.h is the C interface's; the rest common's).
std::string included_module(const std::string& target, const std::map<std::string, int>& floors) {
  static const std::regex joule_dir(R"(^joule/([a-z_]+)/)"), joule_top(R"(^joule/([a-z_]+)\.h$)"),
      private_dir(R"(^([a-z_]+)/)");
  std::smatch match;
  if (std::regex_search(target, match, joule_dir)) return match[1];
  if (std::regex_search(target, match, joule_top)) return match[1] == "joule_c" ? "capi" : "common";
  if (std::regex_search(target, match, private_dir) && floors.count(match[1])) return match[1];
  return "";
}

TEST(LayeringTest, EveryModuleIncludesOnlyModulesOnLowerFloorsOfTheArchitectureMap) {
  const std::map<std::string, int> floors = floors_of_the_map();
  ASSERT_GE(floors.size(), 10u) << "docs/architecture.md: the layering map's rows were not found";
  const std::string root = JOULE_SOURCE_DIR;
  int includes = 0;
  for (const auto& module : std::filesystem::directory_iterator(root + "/src")) {
    if (!module.is_directory()) continue;
    const std::string name = module.path().filename().string();
    const auto floor = floors.find(name);
    if (floor == floors.end()) {
      ADD_FAILURE() << "src/" << name << " is not on the map in docs/architecture.md";
      continue;
    }
    for (const std::string& dir : {root + "/src/" + name, root + "/include/joule/" + name}) {
      if (!std::filesystem::is_directory(dir)) continue;
      for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        std::ifstream in(entry.path());
        int number = 0;
        for (std::string line; std::getline(in, line);) {
          ++number;
          if (line.rfind("#include \"", 0) != 0) continue;
          const std::string target = line.substr(10, line.find('"', 10) - 10);
          const std::string to = included_module(target, floors);
          if (to.empty() || to == name) continue;
          ++includes;
          const auto to_floor = floors.find(to);
          ASSERT_NE(to_floor, floors.end()) << entry.path().string() << ":" << number << ": " << to << " is not on the map";
          EXPECT_LT(to_floor->second, floor->second)
              << entry.path().string() << ":" << number << ": " << name << " (floor " << floor->second
              << ") includes " << to << " (floor " << to_floor->second << ")";
        }
      }
    }
  }
  for (const auto& [name, floor] : floors) {
    EXPECT_TRUE(std::filesystem::is_directory(root + "/src/" + name)) << "the map names " << name << ", not in src/";
  }
  EXPECT_GT(includes, 100);
}

// Every path the map section names in backquotes (src/..., include/...,
// tests/...) exists, so the walk of a window and the recipes stay true.
TEST(LayeringTest, EveryPathTheArchitectureMapNamesExists) {
  const std::string root = JOULE_SOURCE_DIR;
  std::ifstream in(root + "/docs/architecture.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string page = text.str();
  const auto begin = page.find("## The map in five minutes");
  const auto end = page.find("\n## ", begin + 1);
  ASSERT_NE(begin, std::string::npos);
  const std::string map = page.substr(begin, end - begin);
  const std::regex path(R"(`((?:src|include|tests)/[A-Za-z0-9_./<>-]+)`)");
  int paths = 0;
  for (auto it = std::sregex_iterator(map.begin(), map.end(), path); it != std::sregex_iterator(); ++it) {
    const std::string named = (*it)[1];
    if (named.find('<') != std::string::npos) continue;  // a pattern, e.g. src/cli/<name>_command.cc
    ++paths;
    EXPECT_TRUE(std::filesystem::exists(root + "/" + named)) << "docs/architecture.md names " << named;
  }
  EXPECT_GE(paths, 15);
}

}  // namespace
}  // namespace joule
