// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// SampleResponseStore: a response kept per GPU model and driver comes back
// whole, with where it came from; another driver has none; and a file that
// is not one (damaged, edited, another GPU's, bytes that are not text) is
// refused with its path and what is wrong, never used.
#include "joule/attribution/response_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/test_support.h"
#include "joule/error.h"

namespace joule::attribution {
namespace {

SampleResponse measured() {
  SampleResponse r;
  r.response_ms = {0.1, 0.2, 0.4, 0.2, 0.1};
  r.first_lag_ms = 2;
  r.rounds = {{0.1, 0.25, 0.35, 0.2, 0.1}, {0.15, 0.2, 0.4, 0.15, 0.1}};
  r.rounds_first_lag_ms = 2;
  r.low_w = 118.5;
  r.high_w = 640.25;
  r.residual_rms_w = 3.5;
  r.samples = 1990;
  r.lag10_ms = 2.0;
  r.lag50_ms = 4.5;
  r.lag90_ms = 6.0;
  r.smoothing = 0.01;
  return r;
}

TEST(SampleResponseStoreTest, KeepsAResponsePerGpuModelAndDriver) {
  testing::TempDir tmp;
  const SampleResponseStore store(tmp.path() + "/responses");  // made on the first save
  const GpuModel h200{"NVIDIA H200", "580.159.04"};
  EXPECT_FALSE(store.load(h200));
  EXPECT_TRUE(store.drivers_for("NVIDIA H200").empty());

  store.save(h200, measured(), "2026-11-30T12:00:00Z");
  EXPECT_EQ(store.path_for(h200).filename(), "nvidia-h200--580.159.04.json");
  const std::optional<SampleResponse> back = store.load(h200);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->response_ms, measured().response_ms);
  EXPECT_EQ(back->first_lag_ms, 2);
  EXPECT_EQ(back->rounds, measured().rounds);
  EXPECT_EQ(back->samples, 1990u);
  EXPECT_DOUBLE_EQ(back->high_w, 640.25);
  EXPECT_EQ(back->source, "stored for NVIDIA H200, driver 580.159.04, measured 2026-11-30T12:00:00Z (" +
                              store.path_for(h200).string() + ")");

  // A new driver: nothing for it, and the drivers that have one are listed.
  EXPECT_FALSE(store.load({"NVIDIA H200", "590.10"}));
  store.save({"NVIDIA H200", "570.1"}, measured(), "2026-10-01T00:00:00Z");
  EXPECT_EQ(store.drivers_for("NVIDIA H200"), (std::vector<std::string>{"570.1", "580.159.04"}));
  EXPECT_TRUE(store.drivers_for("NVIDIA H100 80GB HBM3").empty());

  // A name with spaces, slashes and bytes that are not text stays one file in the directory.
  const GpuModel odd{"GPU / \xff model", "1.0"};
  store.save(odd, measured(), "2026-11-30T12:00:00Z");
  EXPECT_EQ(store.path_for(odd).filename(), "gpu-model--1.0.json");
  EXPECT_EQ(store.path_for(odd).parent_path(), store.dir());
}

TEST(SampleResponseStoreTest, RefusesAResponseThatFailsTheChecksOnSave) {
  testing::TempDir tmp;
  const SampleResponseStore store(tmp.path());
  SampleResponse empty = measured();
  empty.response_ms.clear();
  EXPECT_THROW(store.save({"NVIDIA H200", "580"}, empty, "now"), UsageError);
  SampleResponse unnormalised = measured();
  unnormalised.response_ms = {0.5, 0.9};
  EXPECT_THROW(store.save({"NVIDIA H200", "580"}, unnormalised, "now"), UsageError);
  EXPECT_FALSE(std::filesystem::exists(store.path_for({"NVIDIA H200", "580"})));
}

TEST(SampleResponseStoreTest, RefusesADamagedFileWithItsPathAndWhatIsWrong) {
  testing::TempDir tmp;
  const SampleResponseStore store(tmp.path());
  const GpuModel gpu{"NVIDIA H200", "580.159.04"};
  store.save(gpu, measured(), "2026-11-30T12:00:00Z");
  const std::string path = store.path_for(gpu).string();
  const std::string good = testing::read_file(path);
  const auto refused_with = [&](const std::string& content, const std::string& why) {
    testing::write_file(path, content);
    try {
      store.load(gpu);
      ADD_FAILURE() << "loaded: " << content.substr(0, 80);
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
  };
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  refused_with("", "not JSON");
  refused_with(good.substr(0, good.size() / 2), "not JSON");
  refused_with("{\"format\": \"joule sample response 1\", \"gpu_name\": \"\xc3\x28\"}", "not JSON");
  refused_with("[1, 2, 3]", "not a joule sample response");
  refused_with(edited("\"joule sample response 1\"", "\"something else\""), "not a joule sample response");
  refused_with(edited("\"gpu_name\": \"NVIDIA H200\"", "\"gpu_name\": \"NVIDIA H100\""), "another GPU's response");
  refused_with(edited("\"first_lag_ms\": 2", "\"first_lag_ms\": \"two\""), "'first_lag_ms' is not");
  refused_with(edited("\"first_lag_ms\": 2", "\"first_lag_ms\": 5000"), "'first_lag_ms' is 5000 ms");
  refused_with(edited("\"high_w\": 640.25", "\"high_w\": 1e400"), "number overflow");
  refused_with(edited("\"high_w\": 640.25", "\"high_w\": -1e9"), "'high_w' is -1000000000");
  refused_with(edited("\"low_w\": 118.5", "\"lowest_w\": 118.5"), "'low_w' is missing");
  refused_with(edited("0.4", "4.0"), "'response_ms' holds 4");
  refused_with(edited("0.4", "0.9"), "'response_ms' sums to 1.5000");
  testing::write_file(path, good);
  EXPECT_TRUE(store.load(gpu));
}

TEST(SampleResponseStoreTest, ItsDirectoryComesFromTheEnvironment) {
  const auto with_env = [](const char* name, const char* value) {
    value ? setenv(name, value, 1) : unsetenv(name);
  };
  const char* saved_dir = std::getenv("JOULE_SAMPLE_RESPONSE_DIR");
  const char* saved_cache = std::getenv("XDG_CACHE_HOME");
  const std::string dir_copy = saved_dir ? saved_dir : "", cache_copy = saved_cache ? saved_cache : "";
  with_env("JOULE_SAMPLE_RESPONSE_DIR", "/srv/joule/responses");
  EXPECT_EQ(SampleResponseStore::default_dir(), "/srv/joule/responses");
  with_env("JOULE_SAMPLE_RESPONSE_DIR", nullptr);
  with_env("XDG_CACHE_HOME", "/var/cache/me");
  EXPECT_EQ(SampleResponseStore::default_dir(), "/var/cache/me/joule/sample-response");
  with_env("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(SampleResponseStore::default_dir().filename(), "sample-response");
  EXPECT_EQ(SampleResponseStore::default_dir().parent_path().parent_path().filename(), ".cache");
  with_env("JOULE_SAMPLE_RESPONSE_DIR", saved_dir ? dir_copy.c_str() : nullptr);
  with_env("XDG_CACHE_HOME", saved_cache ? cache_copy.c_str() : nullptr);
}

}  // namespace
}  // namespace joule::attribution
