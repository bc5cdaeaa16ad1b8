// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Short windows through the samples' response, end to end: joule's NVML
// backend on the fake libnvidia-ml.so.1 set up with samples that come late,
// as an H200's do (each the mean power 20-40 ms before its stamp), under a
// training-like load that stalls at random (phases of 10-150 ms), on a
// virtual clock shared with the fake. Two samplers pinned to counter steps
// measure the same windows laid end to end (0.3 s: ten steps of a small
// model; 1 s): one reads the samples linearly between a step and an edge,
// the other through the response it is given. Every window is compared with
// the load's exact energy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "common/fake_drivers.h"
#include "common/on_off_load.h"
#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/measure/sampler.h"

namespace joule {
namespace {

using testing::OnOffLoad;
using testing::TempDir;
using testing::write_file;

struct Errors {
  std::vector<double> linear, response;
  static double mean_abs(const std::vector<double>& e) {
    double sum = 0.0;
    for (double x : e) sum += std::fabs(x);
    return sum / static_cast<double>(e.size());
  }
  static double max_abs(const std::vector<double>& e) {
    double most = 0.0;
    for (double x : e) most = std::max(most, std::fabs(x));
    return most;
  }
};

TEST(ResponseWindowsTest, LateSamplesReadThroughTheirResponseSplitCounterStepsRight) {
  const OnOffLoad load(5, 120.0, 600.0, 0.01, 0.15, 130.0);
  TempDir tmp;
  write_file(tmp.file("load.txt"), load.profile_file());
  // Sample i holds the mean over (20i - 20, 20i] ms, stamped 15.5 ms after
  // its span ends; joule moves NVML stamps 4.5 ms later: lags 20-39 ms.
  const auto& driver = testing::fake_nvml_driver();
  const auto fake = driver.use(tmp, "clock virtual\ndevice profile_file=" + tmp.file("load.txt") +
                                        " min_limit_w=200 max_limit_w=700 real_sources energy_phase_ms=37"
                                        " energy_call_ms=4 sample_stamp_lead_ms=-15.5 sample_latency_ms=16\n");
  auto for_linear = driver.open(fake);
  auto for_response = driver.open(fake);
  auto* set_fake_time = driver.helper<void (*)(double)>(fake, "set_time_s");

  auto clock = std::make_shared<VirtualClock>();
  SamplerOptions options;
  options.background_thread = false;
  options.history_s = 1000.0;
  options.counter_anchors.history_s = 1000.0;
  options.counter_anchors.reads_per_s = 20.0;  // reads cost nothing here; every edge is pinned
  options.counter_anchors.burst_reads = 40.0;
  options.power_samples_drain_s = 0.1;
  Sampler linear(for_linear, {}, clock, options);
  options.sample_responses = {PowerSampleResponse{std::vector<double>(20, 0.05), 20, "a delayed boxcar"}};
  Sampler through_response(for_response, {}, clock, options);
  linear.start();
  through_response.start();

  // Windows end to end from 35 s: 0.3 s ones, then 1 s ones.
  std::vector<std::pair<double, double>> windows;
  double t = 35.0;
  for (; t + 0.3 < 80.0; t += 0.3) windows.emplace_back(t, t + 0.3);
  for (; t + 1.0 < 125.0; t += 1.0) windows.emplace_back(t, t + 1.0);
  std::vector<double> edges;  // every window's begin, and the last one's end
  for (const auto& w : windows) edges.push_back(w.first);
  edges.push_back(windows.back().second);
  auto next = edges.begin();
  for (int64_t step = 1; step * 1e-4 <= 127.0; ++step) {
    const double now_s = static_cast<double>(step) * 1e-4;
    clock->set_s(now_s);
    set_fake_time(now_s);
    for (; next != edges.end() && *next <= now_s + 1e-9; ++next) {
      linear.note_window_edge(*next);
      through_response.note_window_edge(*next);
    }
    if (step % 5 == 0) {
      linear.poll_counter_anchors();
      through_response.poll_counter_anchors();
    }
    if (step % 1000 == 0) {
      linear.sample_now();
      through_response.sample_now();
    }
  }
  EXPECT_NE(through_response.gpu_method_description(0).find("edges split counter steps through a delayed boxcar"),
            std::string::npos)
      << through_response.gpu_method_description(0);
  EXPECT_EQ(linear.gpu_method_description(0).find("split counter steps"), std::string::npos);

  std::map<double, Errors> by_length;
  for (const auto& [begin_s, end_s] : windows) {
    const double truth_j = load.energy_j(begin_s, end_s);
    const EnergyEstimate a = linear.gpu_energy(0, begin_s, end_s);
    const EnergyEstimate b = through_response.gpu_energy(0, begin_s, end_s);
    ASSERT_TRUE(a.counter_anchored && b.counter_anchored) << begin_s;
    ASSERT_TRUE(a.settled && b.settled) << begin_s;
    Errors& e = by_length[std::round((end_s - begin_s) * 10.0) / 10.0];
    e.linear.push_back(a.energy_j / truth_j - 1.0);
    e.response.push_back(b.energy_j / truth_j - 1.0);
  }
  for (const auto& [length_s, e] : by_length) {
    std::printf("%.1f s, %zu windows, mean / max abs %%: linear %.3f / %.2f, through the response %.3f / %.2f\n",
                length_s, e.linear.size(), 100 * Errors::mean_abs(e.linear), 100 * Errors::max_abs(e.linear),
                100 * Errors::mean_abs(e.response), 100 * Errors::max_abs(e.response));
    EXPECT_LT(Errors::mean_abs(e.response), 0.5 * Errors::mean_abs(e.linear)) << length_s;
    EXPECT_LT(Errors::max_abs(e.response), Errors::max_abs(e.linear)) << length_s;
    EXPECT_LT(Errors::mean_abs(e.response), length_s < 1.0 ? 0.005 : 0.002) << length_s;
  }
}

}  // namespace
}  // namespace joule
