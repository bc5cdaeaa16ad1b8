// Dependencies point down: the device layer talks to hardware and its fakes
// only, so nothing under src/device or include/joule/device may include a
// header from the floors above it.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace joule
