// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The C interface, as a ctypes caller would use it, on simulated GPUs.
#include "joule/joule_c.h"

#include <gtest/gtest.h>
#include <cmath>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace {

struct SimEnvironment {
  SimEnvironment() {
    // Neither driver, even where one is installed (an AMD machine's real
    // ROCm SMI would otherwise answer for auto).
    setenv("JOULE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("JOULE_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1", 1);
    setenv("JOULE_SIM", "count=2,load=1", 1);
    setenv("JOULE_POWERCAP_ROOT", "/nonexistent", 1);
  }
};

TEST(JouleCTest, WindowsReturnEnergyAsJson) {
  SimEnvironment env;
  joule_session* s = joule_session_open(R"({"interval_ms": 10})");
  ASSERT_NE(s, nullptr) << joule_last_error();
  ASSERT_EQ(joule_begin_window(s, "w"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  char out[4096];
  ASSERT_EQ(joule_end_window(s, "w", out, sizeof out), 0) << joule_last_error();
  const auto m = nlohmann::json::parse(out);
  ASSERT_EQ(m["gpu_energy_j"].size(), 2u);
  const double elapsed = m["elapsed_s"];
  EXPECT_NEAR(m["gpu_energy_j"][0].get<double>(), 650.0 * elapsed, 0.02 * 650.0 * elapsed);
  EXPECT_EQ(joule_end_window(s, "w", out, sizeof out), -1);
  EXPECT_STREQ(joule_last_error(), "measurement window 'w' is not open");
  EXPECT_EQ(joule_power_limit_report(s, out, sizeof out), -1);  // no optimizer
  joule_session_close(s);
}

TEST(JouleCTest, SettledValuesArePolledOrAwaited) {
  SimEnvironment env;
  joule_session* s = joule_session_open(R"({"interval_ms": 500})");
  ASSERT_NE(s, nullptr) << joule_last_error();
  char out[4096];
  ASSERT_EQ(joule_begin_window(s, "w"), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(joule_end_window(s, "w", out, sizeof out), 0) << joule_last_error();
  const auto immediate = nlohmann::json::parse(out);
  // With one reading per 500 ms, the next one after the end is not in yet.
  EXPECT_FALSE(immediate["settled"].get<bool>());
  ASSERT_EQ(immediate["gpu_sources"].size(), 2u);
  EXPECT_EQ(immediate["gpu_sources"][0]["method"], "power-readings");
  EXPECT_FALSE(immediate["gpu_sources"][0]["counter_anchored"].get<bool>());  // simulated: no counter steps
  EXPECT_NE(immediate["gpu_sources"][0]["description"].get<std::string>().find("model read every 500 ms"),
            std::string::npos);
  // Polling (timeout 0) recomputes without waiting; waiting brings the data.
  ASSERT_EQ(joule_settle_window(s, "w", 0.0, out, sizeof out), 0) << joule_last_error();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(joule_settle_window(s, "w", 2.0, out, sizeof out), 0) << joule_last_error();
  const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto settled = nlohmann::json::parse(out);
  EXPECT_TRUE(settled["settled"].get<bool>());
  EXPECT_LT(waited_s, 0.4);  // the sampling thread read right after the end, not at its next tick
  EXPECT_DOUBLE_EQ(settled["begin_s"].get<double>(), immediate["begin_s"].get<double>());
  const double elapsed = settled["elapsed_s"];
  EXPECT_NEAR(settled["gpu_energy_j"][0].get<double>(), 650.0 * elapsed, 0.01 * 650.0 * elapsed);

  ASSERT_EQ(joule_begin_window(s, "both"), 0);
  ASSERT_EQ(joule_end_window_settled(s, "both", 2.0, out, sizeof out), 0) << joule_last_error();
  EXPECT_TRUE(nlohmann::json::parse(out)["settled"].get<bool>());
  EXPECT_EQ(joule_settle_window(s, "never", 1.0, out, sizeof out), -1);
  EXPECT_STREQ(joule_last_error(), "no ended measurement window named 'never'");
  joule_session_close(s);
}

TEST(JouleCTest, PowerLimitCallbacksProfileAndReport) {
  SimEnvironment env;
  joule_session* s = joule_session_open(
      R"({"interval_ms": 5, "power_limit": {"objective": "energy", "observer": true, "step_w": 250,
          "warmup_steps": 1, "measure_steps": 2, "min_warmup_s": 0, "min_measure_s": 0,
          "screening_rounds": 2, "confirming_rounds": 0}})");
  ASSERT_NE(s, nullptr) << joule_last_error();
  char out[8192];
  joule_on_epoch_begin(s);
  int state = 0;
  for (int i = 0; i < 60 && state != 1; ++i) {  // two rounds of 3 limits x 3 steps
    ASSERT_EQ(joule_on_step_begin(s), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(joule_on_step_end(s), 0);
    state = joule_power_limit_report(s, out, sizeof out);
  }
  joule_on_epoch_end(s);
  EXPECT_EQ(state, 1);
  EXPECT_NE(std::string(out).find("OBSERVER MODE"), std::string::npos) << out;
  joule_session_close(s);
}

TEST(JouleCTest, BadOptionsReturnNullWithTheReason) {
  SimEnvironment env;
  EXPECT_EQ(joule_session_open("{not json"), nullptr);
  EXPECT_NE(std::string(joule_last_error()).find("parse error"), std::string::npos) << joule_last_error();
  EXPECT_EQ(joule_session_open(R"({"gpus": [7]})"), nullptr);
  EXPECT_NE(std::string(joule_last_error()).find("GPU index 7 does not exist"), std::string::npos);
  EXPECT_EQ(joule_session_open(R"({"power_limit": {"objective": "speed"}})"), nullptr);
  EXPECT_NE(std::string(joule_last_error()).find("unknown objective"), std::string::npos);
}

}  // namespace

namespace {

// Per-region attribution through the C interface: regions nest, the settled
// window is split per GPU as JSON, and misuse names what is wrong.
TEST(JouleCTest, RegionsSplitASettledWindowPerGpu) {
  SimEnvironment env;
  joule_session* s = joule_session_open(R"({"interval_ms": 5})");
  ASSERT_NE(s, nullptr) << joule_last_error();
  std::vector<char> out(1 << 16);
  EXPECT_EQ(joule_attribute_window(s, "train", nullptr, out.data(), out.size()), -1);
  EXPECT_STREQ(joule_last_error(), "no ended measurement window named 'train'");
  ASSERT_EQ(joule_begin_window(s, "train"), 0);
  for (int step = 0; step < 30; ++step) {
    ASSERT_EQ(joule_region_begin(s, "step"), 0) << joule_last_error();
    ASSERT_EQ(joule_region_begin(s, "forward"), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    EXPECT_EQ(joule_region_end(s, "step"), -1);  // forward is open inside it
    EXPECT_STREQ(joule_last_error(), "region 'step' ended while 'forward' inside it is open");
    ASSERT_EQ(joule_region_end(s, "forward"), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(joule_region_end(s, "step"), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(joule_end_window_settled(s, "train", 5.0, out.data(), out.size()), 0) << joule_last_error();
  const double window_j = nlohmann::json::parse(out.data())["gpu_energy_j"][0].get<double>();
  ASSERT_EQ(joule_attribute_window(s, "train", R"({"bootstrap_rounds": 50, "block_s": 0.05})", out.data(),
                                   out.size()),
            0)
      << joule_last_error();
  const auto gpus = nlohmann::json::parse(out.data());
  ASSERT_EQ(gpus.size(), 2u);
  const auto& gpu0 = gpus[0];
  ASSERT_EQ(gpu0["regions"].size(), 2u);
  EXPECT_EQ(gpu0["regions"][0]["name"], "step");
  EXPECT_EQ(gpu0["regions"][1]["name"], "forward");
  EXPECT_EQ(gpu0["regions"][0]["calls"], 30);  // split around forward, counted once a step
  EXPECT_EQ(gpu0["regions"][1]["calls"], 30);
  double parts_j = gpu0["idle_energy_j"].get<double>();
  for (const auto& r : gpu0["regions"]) parts_j += r["energy_j"].get<double>();
  EXPECT_NEAR(parts_j, window_j, 1e-6 * window_j);
  EXPECT_NEAR(gpu0["window_energy_j"].get<double>(), window_j, 1e-9 * window_j);
  EXPECT_EQ(joule_attribute_window(s, "train", "{not json", out.data(), out.size()), -1);
  // The counter's options: simulated GPUs have no counter steps, so no
  // increments either way; a lag that is no number is refused.
  ASSERT_EQ(joule_attribute_window(s, "train", R"({"bootstrap_rounds": 0, "counter_increments": false, "counter_lag_ms": 16})",
                                   out.data(), out.size()),
            0)
      << joule_last_error();
  EXPECT_EQ(nlohmann::json::parse(out.data())[0]["notes"].dump().find("energy-counter"), std::string::npos);
  EXPECT_EQ(joule_attribute_window(s, "train", R"({"counter_lag_ms": "16"})", out.data(), out.size()), -1);
  EXPECT_EQ(joule_attribute_window(s, "train", R"({"counter_lag_ms": 1e999})", out.data(), out.size()), -1);
  // The model's bias (applied with a measured response): a share of each region's energy, within [0, 1].
  EXPECT_EQ(joule_attribute_window(s, "train", R"({"bootstrap_rounds": 0, "model_bias": 0.1})", out.data(), out.size()),
            0)
      << joule_last_error();
  EXPECT_EQ(joule_attribute_window(s, "train", R"({"model_bias": -0.1})", out.data(), out.size()), -1);
  EXPECT_NE(std::string(joule_last_error()).find("model bias -0.1: must be within [0, 1]"), std::string::npos)
      << joule_last_error();
  EXPECT_EQ(joule_attribute_window(s, "train", R"({"model_bias": "0.1"})", out.data(), out.size()), -1);
  joule_session_close(s);
  joule_session* reading = joule_session_open(R"({"read_counter_every_step": true})");
  ASSERT_NE(reading, nullptr) << joule_last_error();
  joule_session_close(reading);
}

// Edges measured elsewhere (a GPU's timestamps mapped to the session's
// clock) go in with their instants: the regions get exactly those spans, and
// an edge before the last one, or not finite, is refused by name.
TEST(JouleCTest, RegionEdgesAtGivenInstantsAreKeptAsGiven) {
  SimEnvironment env;
  joule_session* s = joule_session_open(R"({"interval_ms": 5})");
  ASSERT_NE(s, nullptr) << joule_last_error();
  std::vector<char> out(1 << 16);
  double now_s = 0;
  ASSERT_EQ(joule_clock_s(s, &now_s), 0) << joule_last_error();
  EXPECT_EQ(joule_clock_s(s, nullptr), -1);
  ASSERT_EQ(joule_begin_window(s, "train"), 0);
  // Ten steps of 6 ms laid out ahead of the clock: "matmul" 4 ms, then idle.
  double t = now_s + 0.01;
  for (int step = 0; step < 10; ++step, t += 0.006) {
    ASSERT_EQ(joule_region_begin_at(s, "matmul", t), 0) << joule_last_error();
    ASSERT_EQ(joule_region_end_at(s, "matmul", t + 0.004), 0) << joule_last_error();
  }
  EXPECT_EQ(joule_region_begin_at(s, "late", t - 0.003), -1);
  EXPECT_NE(std::string(joule_last_error()).find("region 'late': edge at"), std::string::npos) << joule_last_error();
  EXPECT_NE(std::string(joule_last_error()).find("precedes the edge before it"), std::string::npos);
  EXPECT_EQ(joule_region_begin_at(s, "nan", std::nan("")), -1);
  EXPECT_NE(std::string(joule_last_error()).find("is not finite"), std::string::npos) << joule_last_error();
  EXPECT_EQ(joule_region_end_at(s, "matmul", t + 1.0), -1);  // not open
  // An all-reduce beside the steps: its edges come after the steps' and
  // overlap them; two calls open at once; an end before its call is refused.
  const double first_s = now_s + 0.01;
  ASSERT_EQ(joule_region_begin_concurrent_at(s, "allreduce", first_s + 0.003), 0) << joule_last_error();
  ASSERT_EQ(joule_region_begin_concurrent_at(s, "allreduce", first_s + 0.004), 0) << joule_last_error();
  EXPECT_EQ(joule_region_end_concurrent_at(s, "allreduce", first_s + 0.002), -1);
  EXPECT_NE(std::string(joule_last_error()).find("precedes its earliest open call's beginning"), std::string::npos)
      << joule_last_error();
  ASSERT_EQ(joule_region_end_concurrent_at(s, "allreduce", first_s + 0.005), 0) << joule_last_error();
  ASSERT_EQ(joule_region_end_concurrent_at(s, "allreduce", first_s + 0.008), 0) << joule_last_error();
  EXPECT_EQ(joule_region_end_concurrent_at(s, "allreduce", first_s + 0.009), -1);  // none open
  EXPECT_EQ(joule_region_begin_concurrent_at(s, "matmul", t), -1);                 // nested already
  EXPECT_NE(std::string(joule_last_error()).find("region 'matmul' was recorded as nested"), std::string::npos)
      << joule_last_error();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the window reaches past the last edge
  ASSERT_EQ(joule_end_window_settled(s, "train", 5.0, out.data(), out.size()), 0) << joule_last_error();
  ASSERT_EQ(joule_attribute_window(s, "train", R"({"bootstrap_rounds": 20})", out.data(), out.size()), 0)
      << joule_last_error();
  const auto gpu0 = nlohmann::json::parse(out.data())[0];
  ASSERT_EQ(gpu0["regions"].size(), 2u);
  EXPECT_EQ(gpu0["regions"][0]["name"], "matmul");
  EXPECT_EQ(gpu0["regions"][0]["calls"], 10);
  EXPECT_EQ(gpu0["regions"][0]["concurrent"], false);
  EXPECT_NEAR(gpu0["regions"][0]["gpu_time_s"].get<double>(), 0.040, 1e-9);
  EXPECT_EQ(gpu0["regions"][1]["name"], "allreduce");
  EXPECT_EQ(gpu0["regions"][1]["concurrent"], true);
  EXPECT_EQ(gpu0["regions"][1]["calls"], 2);
  EXPECT_NEAR(gpu0["regions"][1]["gpu_time_s"].get<double>(), 0.005, 1e-9);  // [3, 8) ms: the time either ran
  joule_session_close(s);
}

}  // namespace
