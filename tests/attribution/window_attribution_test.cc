// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Attribution through the whole path: a scripted GPU whose power follows the
// regions of a training step (each region a power of its own, varying a
// little per call), its buffered 20 ms samples read by a Sampler on a
// virtual clock, a RegionRecorder marking the regions on that clock, nested,
// and the window's exact energy. The fit recovers each region's energy and
// power, the idle power, the calls of a region split around the ones nested
// in it, and the parts sum to the window's energy. And the recorder's own
// rules: nesting, errors that name the regions, cutting at window edges.
#include "joule/attribution/window.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "common/scripted_gpu.h"
#include "common/fake_drivers.h"
#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/common/root_sum_square.h"
#include "joule/error.h"
#include "joule/measure/sampler.h"

namespace joule::attribution {
namespace {

using testing::ScriptedGpu;

constexpr double kIdleW = 90.0;

// Piecewise-constant power: segment i runs from start_s[i] at power_w[i].
struct PowerScript {
  std::vector<double> start_s{0.0};
  std::vector<double> power_w{kIdleW};
  std::vector<double> energy_before_j{0.0};  // energy from 0 to start_s[i]

  void set(double from_s, double power) {
    energy_before_j.push_back(energy_before_j.back() + power_w.back() * (from_s - start_s.back()));
    start_s.push_back(from_s);
    power_w.push_back(power);
  }
  std::size_t segment(double t) const {
    return static_cast<std::size_t>(std::upper_bound(start_s.begin(), start_s.end(), t) - start_s.begin()) - 1;
  }
  double power_at(double t) const { return power_w[segment(std::max(t, 0.0))]; }
  double energy_to(double t) const {
    const std::size_t i = segment(std::max(t, 0.0));
    return energy_before_j[i] + power_w[i] * (t - start_s[i]);
  }
};

// One region call of the schedule: what runs from begin_s to end_s (nested
// calls are separate entries; the outer one's own work is its pieces).
struct Call {
  std::string region;
  double begin_s, end_s;
};

// A step: "step" opens, "matmul" (650 W, 8 ms) and "elementwise" (300 W,
// 3 ms) run inside it, then the step's own work (420 W, 1 ms) after them,
// then a 4 ms gap at idle. Durations jitter 5% and powers 3% per call, so
// the step's phase drifts against the 20 ms samples.
struct Run {
  PowerScript script;
  std::vector<std::pair<double, std::string>> edges;  // (time, "+name" or "-name"), in order
  std::map<std::string, double> true_energy_j, true_time_s;
  double end_s = 0.0;

  Run(int steps, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> jitter(1.0, 0.05), power_jitter(1.0, 0.03);
    double t = 0.5;  // idle before the first step
    const auto run = [&](const std::string& region, double seconds, double power_w) {
      const double d = seconds * jitter(rng);
      const double p = power_w * power_jitter(rng);
      script.set(t, p);
      true_energy_j[region] += p * d;
      true_time_s[region] += d;
      t += d;
    };
    for (int i = 0; i < steps; ++i) {
      edges.emplace_back(t, "+step");
      edges.emplace_back(t, "+matmul");
      run("matmul", 0.008, 650.0);
      edges.emplace_back(t, "-matmul");
      edges.emplace_back(t, "+elementwise");
      run("elementwise", 0.003, 300.0);
      edges.emplace_back(t, "-elementwise");
      run("step", 0.001, 420.0);
      edges.emplace_back(t, "-step");
      script.set(t, kIdleW);
      t += 0.004 * jitter(rng);
    }
    end_s = t + 0.5;
  }
};

// Virtual time for a sampler without a thread: ticks every 100 ms and,
// where its windows are anchored, the anchors polled every 0.5 ms (as their
// thread would). advance_to moves the time (set_time_s: every clock that
// follows it) to t, doing each on the way.
struct VirtualTicks {
  bool poll_anchors = false;
  double next_tick_s = 0.1;
  double next_poll_s = 0.0005;

  template <typename SetTime>
  void advance_to(double t, Sampler& sampler, SetTime&& set_time_s) {
    for (;;) {
      const double next_s = std::min(next_tick_s, poll_anchors ? next_poll_s : next_tick_s);
      if (next_s > t) break;
      set_time_s(next_s);
      if (poll_anchors && next_s == next_poll_s) {
        sampler.poll_counter_anchors();
        next_poll_s += 0.0005;
      }
      if (next_s == next_tick_s) {
        sampler.sample_now();
        next_tick_s += 0.1;
      }
    }
    set_time_s(t);
  }
};

struct Rig {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  Run run;
  std::shared_ptr<ScriptedGpu> gpu;
  std::unique_ptr<Sampler> sampler;
  RegionRecorder recorder{clock};
  VirtualTicks ticks;

  // lag_s: the GPU senses its power that late (samples and counter alike,
  // as an H200's); anchored: its counter steps every 100 ms, and the steps
  // are found and read.
  Rig(int steps, uint64_t seed, double lag_s = 0.0, bool anchored = false) : run(steps, seed), ticks{anchored} {
    gpu = std::make_shared<ScriptedGpu>(
        0, clock, [this, lag_s](double t) { return run.script.power_at(t - lag_s); },
        [this, lag_s](double t0, double t1) { return run.script.energy_to(t1 - lag_s) - run.script.energy_to(t0 - lag_s); });
    gpu->sample_period_s = 0.02;
    if (anchored) {
      gpu->counter_update_s = 0.1;
      gpu->counter_phase_s = 0.0371;
    }
    SamplerOptions options;
    options.background_thread = false;
    options.counter_anchors.enabled = anchored;
    options.counter_anchors.history_s = 1e6;
    options.history_s = 1e6;
    sampler = std::make_unique<Sampler>(std::vector<std::shared_ptr<Gpu>>{gpu},
                                        std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock, options);
    sampler->start();
  }
  void advance_to(double t) {
    ticks.advance_to(t, *sampler, [this](double s) { clock->set_s(s); });
  }
  void play() {
    for (const auto& [t, edge] : run.edges) {
      advance_to(t);
      edge[0] == '+' ? recorder.begin(edge.substr(1)) : recorder.end(edge.substr(1));
    }
    advance_to(run.end_s + 0.3);  // samples past the window's end
  }
  const RegionEnergy& region(const Attribution& a, const std::string& name) const {
    const auto at = std::find(recorder.names().begin(), recorder.names().end(), name) - recorder.names().begin();
    return a.regions.at(static_cast<std::size_t>(at));
  }
};

TEST(AttributionWindowTest, RecoversEachRegionsEnergyFromTwentyMillisecondSamples) {
  constexpr int kSteps = 3000;  // 48 s
  Rig rig(kSteps, 7);
  rig.play();
  const double begin_s = 0.0, end_s = rig.run.end_s;
  const double window_j = rig.run.script.energy_to(end_s);
  const Attribution a = attribute_gpu(*rig.sampler, 0, rig.recorder, begin_s, end_s, window_j);

  // What the sampler handed over: its 20 ms samples, all inside the window.
  const auto observed = rig.sampler->observed_power(0, begin_s, end_s);
  EXPECT_NEAR(static_cast<double>(observed.size()), end_s / 0.02, 2.0);
  EXPECT_NEAR(static_cast<double>(a.observations), end_s / 0.02, 2.0);

  double parts_j = a.idle_energy_j;
  for (const RegionEnergy& r : a.regions) parts_j += r.energy_j;
  EXPECT_NEAR(parts_j, window_j, 1e-9 * window_j);
  EXPECT_NEAR(a.scale, 1.0, 0.01);
  ASSERT_TRUE(a.baseline_separated && a.baseline_estimated);
  EXPECT_NEAR(a.baseline_w, kIdleW, 2.0);

  for (const std::string name : {"matmul", "elementwise", "step"}) {
    const RegionEnergy& r = rig.region(a, name);
    SCOPED_TRACE(name);
    ASSERT_TRUE(r.resolved);
    // "step" is split around the two regions inside it: one call per step.
    EXPECT_EQ(r.calls, static_cast<std::size_t>(kSteps));
    EXPECT_NEAR(r.gpu_time_s, rig.run.true_time_s[name], 1e-6 * rig.run.true_time_s[name]);
    const double truth_j = rig.run.true_energy_j[name];
    EXPECT_NEAR(r.energy_j, truth_j, (name == "step" ? 0.05 : 0.02) * truth_j);
    EXPECT_LE(r.energy_low_j, truth_j);
    EXPECT_GE(r.energy_high_j, truth_j);
    EXPECT_NEAR(r.power_w, truth_j / rig.run.true_time_s[name], (name == "step" ? 0.05 : 0.02) * r.power_w);
    std::printf("[ figures  ] %s: %zu calls, %.1f W, energy %+.2f%% of the truth, interval [%+.2f%%, %+.2f%%]\n",
                name.c_str(), r.calls, r.power_w, 100.0 * (r.energy_j / truth_j - 1.0),
                100.0 * (r.energy_low_j / truth_j - 1.0), 100.0 * (r.energy_high_j / truth_j - 1.0));
  }
  std::printf("[ figures  ] baseline %.2f W from %zu observations\n", a.baseline_w, a.observations);
  // The reordering attribution exists for: elementwise runs 3x as long as
  // step's own work but its power is lower; shares follow energy, not time.
  EXPECT_GT(rig.region(a, "matmul").share, 0.5);
}

TEST(AttributionWindowTest, AWindowInsideTheRunCutsTheRegionsAtItsEdges) {
  Rig rig(800, 11);
  rig.play();
  const double begin_s = 3.0001, end_s = 9.0003;  // edges inside regions
  const double window_j = rig.run.script.energy_to(end_s) - rig.run.script.energy_to(begin_s);
  const Attribution a = attribute_gpu(*rig.sampler, 0, rig.recorder, begin_s, end_s, window_j);
  double busy_s = 0.0, parts_j = a.idle_energy_j;
  for (const RegionEnergy& r : a.regions) {
    busy_s += r.gpu_time_s;
    parts_j += r.energy_j;
  }
  EXPECT_NEAR(busy_s + a.idle_time_s, end_s - begin_s, 1e-9);
  EXPECT_NEAR(parts_j, window_j, 1e-9 * window_j);
  EXPECT_NEAR(rig.region(a, "matmul").power_w, 650.0, 0.03 * 650.0);
}

// A fake driver's GPU in virtual time, playing a power profile ("ms W"
// lines), and a sampler ticking every 100 ms. On the fake NVML an H100:
// samples every 20 ms, each the mean of its last 10 ms, stamped 4.5 ms early,
// as an H100's seem to be. On the fake ROCm SMI an MI300X: no samples, the
// current socket power read at each tick (a point), a 1 ms energy counter.
struct FakeGpuRig {
  // anchored: the sampler pins windows to the fake's 100 ms counter steps,
  // its anchors polled every 0.5 ms of virtual time (as its thread would).
  FakeGpuRig(const testing::FakeDriver& driver, const std::string& profile, bool anchored = false)
      : ticks{anchored} {
    testing::write_file(tmp.file("profile.txt"), profile);
    const std::string h100_sources =
        " energy_update_ms=100 energy_call_ms=4 power_update_ms=100 usage_window_ms=1000 sample_ms=20"
        " sample_cover_ms=10 sample_buffer=120 sample_latency_ms=1 sample_stamp_lead_ms=4.5";
    fake = driver.use(tmp, "clock virtual\ndevice profile_file=" + tmp.file("profile.txt") +
                               " min_limit_w=200 max_limit_w=700" +
                               (driver.backend == GpuBackend::kNvml ? h100_sources : "") + "\n");
    auto gpus = driver.open(fake);  // loads the fake: its time setter is found after
    set_fake_time = driver.helper<void (*)(double)>(fake, "set_time_s");
    SamplerOptions options;
    options.background_thread = false;
    options.counter_anchors.enabled = anchored;
    options.history_s = 1e6;
    options.counter_anchors.history_s = 1e6;
    options.power_samples_drain_s = 0.1;
    sampler = std::make_unique<Sampler>(std::move(gpus), std::vector<std::shared_ptr<CpuEnergyZone>>{}, clock,
                                        options);
    sampler->start();
  }
  // Both clocks, the rig's and the fake's.
  void advance_to(double t) {
    ticks.advance_to(t, *sampler, [this](double s) {
      clock->set_s(s);
      set_fake_time(s);
    });
  }
  // kStep's regions, steps times from t; returns the time after them.
  double play_steps(double t, int steps) {
    for (int i = 0; i < steps; ++i, t += kPeriodS) {
      advance_to(t);
      recorder.begin("step");
      recorder.begin("matmul");
      advance_to(t + 0.008);
      recorder.end("matmul");
      recorder.begin("elementwise");
      advance_to(t + 0.011);
      recorder.end("elementwise");
      advance_to(t + 0.012);
      recorder.end("step");
    }
    return t;
  }
  const RegionEnergy& region(const Attribution& a, const std::string& name) const {
    const auto at = std::find(recorder.names().begin(), recorder.names().end(), name) - recorder.names().begin();
    return a.regions.at(static_cast<std::size_t>(at));
  }

  // A 16.9 ms step: matmul 650 W 8 ms, elementwise 300 W 3 ms, the step's
  // own work 420 W 1 ms, 4.9 ms idle at 90 W.
  static constexpr const char* kStep = "8 650\n3 300\n1 420\n4.9 90\n";
  static constexpr double kPeriodS = 0.0169;
  static constexpr double kStepJ = 0.008 * 650 + 0.003 * 300 + 0.001 * 420 + 0.0049 * 90;

  testing::TempDir tmp;
  testing::FakeLibrary fake;
  void (*set_fake_time)(double) = nullptr;
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  std::unique_ptr<Sampler> sampler;
  RegionRecorder recorder{clock};
  VirtualTicks ticks;
};

// The same through the NVML backend, on the fake H100 in virtual time: a
// 16.9 ms step repeating (matmul 650 W 8 ms, elementwise 300 W 3 ms, the
// step's own work 420 W 1 ms, 4.9 ms idle at 90 W), samples every 20 ms that
// each average only their last 10 ms and are stamped 4.5 ms early, as an
// H100's seem to be. Told the right cover, the fit recovers every region;
// told that samples average their whole interval, it is biased and its
// residual says so, which is how the cover of a real driver is found.
SampleModel boxcar(double cover_s, double delay_s) {
  SampleModel model;
  model.cover_s = cover_s;
  model.delay_s = delay_s;
  return model;
}

// NVML only: the cover is that of NVML's power samples (ROCm SMI keeps none;
// AttributionOnFakeDriverTest below attributes on both drivers).
TEST(AttributionWindowTest, TheFakeH100sSampleCoverIsTheOneWithTheLeastResidual) {
  FakeGpuRig h100(testing::fake_nvml_driver(), FakeGpuRig::kStep);
  ASSERT_NE(h100.set_fake_time, nullptr);
  constexpr int kSteps = 1800;  // 30 s
  const double begin_s = 0.0;
  const double end_s = h100.play_steps(begin_s, kSteps);
  h100.advance_to(end_s + 0.5);
  const double window_j = kSteps * FakeGpuRig::kStepJ;  // the profile's, step by step
  const Sampler& sampler = *h100.sampler;
  const RegionRecorder& recorder = h100.recorder;

  const Attribution right = attribute_gpu(sampler, 0, recorder, begin_s, end_s, window_j, {}, boxcar(0.010, 0.0));
  const Attribution whole = attribute_gpu(sampler, 0, recorder, begin_s, end_s, window_j, {}, boxcar(0.0, 0.0));
  const auto region = [&](const Attribution& a, const std::string& name) { return h100.region(a, name); };
  const std::map<std::string, double> truth_w = {{"matmul", 650.0}, {"elementwise", 300.0}, {"step", 420.0}};
  double worst_right = 0, worst_whole = 0;
  for (const auto& [name, power_w] : truth_w) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(region(right, name).resolved);
    const double error_right = region(right, name).power_w / power_w - 1.0;
    const double error_whole = region(whole, name).power_w / power_w - 1.0;
    worst_right = std::max(worst_right, std::abs(error_right));
    worst_whole = std::max(worst_whole, std::abs(error_whole));
    std::printf("[ figures  ] %s: cover 10 ms %+.2f%%, cover 20 ms %+.2f%%\n", name.c_str(), 100 * error_right,
                100 * error_whole);
  }
  std::printf("[ figures  ] residual rms: cover 10 ms %.2f W, 20 ms %.2f W; baseline %.1f W, %.1f W\n",
              right.residual_rms_w, whole.residual_rms_w, right.baseline_w, whole.baseline_w);
  EXPECT_LT(worst_right, 0.02);
  EXPECT_GT(worst_whole, 2 * worst_right);
  EXPECT_LT(right.residual_rms_w, 0.5 * whole.residual_rms_w);
  EXPECT_NEAR(right.baseline_w, 90.0, 3.0);

  // Left to find the cover, it finds the fake's 10 ms and says so.
  const Attribution found = attribute_gpu(sampler, 0, recorder, begin_s, end_s, window_j);
  EXPECT_NEAR(region(found, "matmul").power_w, 650.0, 0.02 * 650.0);
  EXPECT_NE(std::find_if(found.notes.begin(), found.notes.end(),
                         [](const std::string& n) { return n.find("average their last 10 ms (of 20 ms") != n.npos; }),
            found.notes.end())
      << ::testing::PrintToString(found.notes);
}

// A response measured instead of assumed: the fake H100 first alternates
// 650 W and 90 W for random lengths (1-40 ms), which fit_sample_response
// turns into the samples' response, lag by lag (the fake's: the 10 ms before
// each sample's stamp, as the sampler places it); then a periodic
// three-region step, attributed with that response, comes out as well as
// with the right boxcar.
// NVML only, as the cover above: the response is that of NVML's power samples.
// 40 s of random 1-40 ms segments at 650 W ("high") and 90 W ("low"),
// what measure_sample_response plays: the fake's profile for them, and
// played() marks them on a rig whose profile begins with it.
struct ResponseSegments {
  std::vector<std::pair<double, bool>> segments;  // (ms, high?)
  std::string profile;

  explicit ResponseSegments(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> tenths(10, 400);  // 1-40 ms in 0.1 ms
    double random_s = 0.0;
    while (random_s < 40.0) {
      for (bool high : {true, false}) {
        const double ms = tenths(rng) / 10.0;
        segments.emplace_back(ms, high);
        profile += fmt::format("{:.1f} {}\n", ms, high ? 650 : 90);
        random_s += ms / 1000.0;
      }
    }
  }
  // Marks them from 0; returns when they end.
  double played(FakeGpuRig& rig) const {
    double t = 0.0;
    for (const auto& [ms, high] : segments) {
      rig.advance_to(t);
      rig.recorder.begin(high ? "high" : "low");
      t += ms / 1000.0;
      rig.advance_to(t);
      rig.recorder.end(high ? "high" : "low");
    }
    return t;
  }
};

TEST(AttributionWindowTest, AMeasuredSampleResponseRecoversTheRegions) {
  const ResponseSegments random(5);
  std::string profile = random.profile;
  constexpr int kSteps = 1800;  // then the step of the test above, 30 s
  for (int i = 0; i < kSteps; ++i) profile += FakeGpuRig::kStep;
  FakeGpuRig h100(testing::fake_nvml_driver(), profile);
  ASSERT_NE(h100.set_fake_time, nullptr);
  RegionRecorder& recorder = h100.recorder;
  const Sampler& sampler = *h100.sampler;
  double t = random.played(h100);
  const SampleResponse response = fit_sample_response(sampler, 0, recorder, "high", 0.0, t);
  std::printf("[ figures  ] response: 10/50/90%% by %.0f/%.0f/%.0f ms before the stamp, low %.1f W, high %.1f W, "
              "residual %.2f W over %zu samples\n",
              response.lag10_ms, response.lag50_ms, response.lag90_ms, response.low_w, response.high_w,
              response.residual_rms_w, response.samples);
  EXPECT_NEAR(response.low_w, 90.0, 2.0);
  EXPECT_NEAR(response.high_w, 650.0, 5.0);
  EXPECT_NEAR(response.lag10_ms, 0.0, 1.0);  // the 10 ms before the stamp, evenly
  EXPECT_NEAR(response.lag50_ms, 4.5, 1.0);
  EXPECT_NEAR(response.lag90_ms, 9.0, 1.0);
  EXPECT_EQ(response.response_ms.size(), 10u);
  EXPECT_EQ(response.rounds.size(), 20u);  // refits on resampled samples, for the intervals

  const double steps_begin_s = t;
  t = h100.play_steps(t, kSteps);
  h100.advance_to(t + 0.5);
  const double window_j = kSteps * FakeGpuRig::kStepJ;
  SampleModel measured;
  measured.response = response;
  const Attribution a = attribute_gpu(sampler, 0, recorder, steps_begin_s, t, window_j, {}, measured);
  const auto power_of = [&](const std::string& name) { return h100.region(a, name).power_w; };
  for (const auto& [name, power_w] : std::map<std::string, double>{{"matmul", 650.0}, {"elementwise", 300.0}}) {
    std::printf("[ figures  ] %s with the measured response: %+.2f%%\n", name.c_str(),
                100 * (power_of(name) / power_w - 1));
    EXPECT_NEAR(power_of(name), power_w, 0.03 * power_w) << name;
  }
  EXPECT_NE(std::find_if(a.notes.begin(), a.notes.end(),
                         [](const std::string& n) { return n.find("the response's uncertainty (20 refits") != n.npos; }),
            a.notes.end())
      << ::testing::PrintToString(a.notes);
  const auto has_note = [](const Attribution& of, const std::string& text) {
    return std::find_if(of.notes.begin(), of.notes.end(),
                        [&](const std::string& n) { return n.find(text) != n.npos; }) != of.notes.end();
  };
  EXPECT_TRUE(has_note(a, "the model's own bias, 7.5% of each region's energy")) << ::testing::PrintToString(a.notes);
  // The model's bias widens each interval in quadrature, by z(90%) x 7.5% of
  // the region's energy, from the statistical one a bias of 0 leaves.
  measured.model_bias = 0.0;
  const Attribution statistical = attribute_gpu(sampler, 0, recorder, steps_begin_s, t, window_j, {}, measured);
  EXPECT_TRUE(has_note(statistical, "statistical error only")) << ::testing::PrintToString(statistical.notes);
  for (const std::string name : {"matmul", "elementwise"}) {
    const RegionEnergy& wide = h100.region(a, name);
    const RegionEnergy& bare = h100.region(statistical, name);
    ASSERT_TRUE(wide.resolved && std::isfinite(bare.energy_low_j)) << wide.name;
    ASSERT_EQ(wide.energy_j, bare.energy_j) << wide.name;
    const double more_j = 1.6448536269514722 * kProofModelBias * wide.energy_j;
    EXPECT_NEAR(wide.energy_j - wide.energy_low_j, joule::root_sum_square(bare.energy_j - bare.energy_low_j, more_j),
                1e-9 * wide.energy_j) << wide.name;
    EXPECT_NEAR(wide.energy_high_j - wide.energy_j, joule::root_sum_square(bare.energy_high_j - bare.energy_j, more_j),
                1e-9 * wide.energy_j) << wide.name;
    EXPECT_NEAR(wide.energy_std_j, joule::root_sum_square(bare.energy_std_j, kProofModelBias * wide.energy_j),
                1e-9 * wide.energy_j) << wide.name;
  }
  for (double refused : {-0.01, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    measured.model_bias = refused;
    EXPECT_THROW(attribute_gpu(sampler, 0, recorder, steps_begin_s, t, window_j, {}, measured), UsageError) << refused;
  }
  measured.model_bias.reset();
  measured.cover_s = 0.01;  // a boxcar and a response at once
  EXPECT_THROW(attribute_gpu(sampler, 0, recorder, steps_begin_s, t, window_j, {}, measured), UsageError);
  EXPECT_THROW(fit_sample_response(sampler, 0, recorder, "nope", 0.0, 40.0), UsageError);
}

// The fake H100 running kStep with matmul's power ramping through its 8 ms,
// from 650 - ramp_w to 650 + ramp_w in 1 ms pieces (the same mean and
// energy), attributed with a response measured on it: the regions by name.
std::map<std::string, RegionEnergy> attribute_ramping_step(double ramp_w, std::optional<double> model_bias) {
  const ResponseSegments random(7);
  std::string profile = random.profile;
  std::string ramping_step;
  for (int ms = 0; ms < 8; ++ms) ramping_step += fmt::format("1 {:.1f}\n", 650.0 + ramp_w * (ms - 3.5) / 3.5);
  ramping_step += "3 300\n1 420\n4.9 90\n";
  constexpr int kSteps = 1800;
  for (int i = 0; i < kSteps; ++i) profile += ramping_step;
  FakeGpuRig h100(testing::fake_nvml_driver(), profile);
  double t = random.played(h100);
  SampleModel measured;
  measured.response = fit_sample_response(*h100.sampler, 0, h100.recorder, "high", 0.0, t);
  measured.model_bias = model_bias;
  const double steps_begin_s = t;
  t = h100.play_steps(t, kSteps);
  h100.advance_to(t + 0.5);
  const Attribution a =
      attribute_gpu(*h100.sampler, 0, h100.recorder, steps_begin_s, t, kSteps * FakeGpuRig::kStepJ, {}, measured);
  std::map<std::string, RegionEnergy> by_name;
  for (const RegionEnergy& r : a.regions) by_name[r.name] = r;
  return by_name;
}

// The model's bias term where the model is wrong (issue 53): one power per
// region, while matmul's ramps. matmul itself comes out right; its
// neighbour, elementwise, takes what the samples see of the ramp's high end
// past the boundary. A ramp of +-50 W (+-8%) leaves that within the
// default bias, which holds the truth where the statistical interval alone
// does not; at +-100 W it is beyond the default, and only a bias given to
// match holds it.
TEST(AttributionWindowTest, ARegionWhosePowerRampsIsHeldByTheModelsBiasWhereItIsLargeEnough) {
  constexpr int kSteps = 1800;
  const double matmul_j = kSteps * 0.008 * 650.0, elementwise_j = kSteps * 0.003 * 300.0;
  const auto holds = [](const RegionEnergy& r, double truth_j) {
    return r.resolved && r.energy_low_j <= truth_j && truth_j <= r.energy_high_j;
  };
  const auto figures = [](const char* what, const RegionEnergy& r, double truth_j) {
    std::printf("[ figures  ] %s: %+.2f%% of its truth, interval %+.1f%% .. %+.1f%%\n", what,
                100 * (r.energy_j / truth_j - 1), 100 * (r.energy_low_j / truth_j - 1),
                100 * (r.energy_high_j / truth_j - 1));
  };
  const auto gentle = attribute_ramping_step(50.0, std::nullopt);
  const auto gentle_bare = attribute_ramping_step(50.0, 0.0);
  figures("+-50 W ramp, matmul", gentle.at("matmul"), matmul_j);
  figures("+-50 W ramp, elementwise", gentle.at("elementwise"), elementwise_j);
  figures("+-50 W ramp, elementwise, statistical only", gentle_bare.at("elementwise"), elementwise_j);
  EXPECT_NEAR(gentle.at("matmul").energy_j, matmul_j, 0.02 * matmul_j);
  EXPECT_TRUE(holds(gentle.at("matmul"), matmul_j));
  EXPECT_GT(gentle.at("elementwise").energy_j, 1.05 * elementwise_j) << "the ramp's end leaks into its neighbour";
  EXPECT_TRUE(holds(gentle.at("elementwise"), elementwise_j));
  EXPECT_FALSE(holds(gentle_bare.at("elementwise"), elementwise_j)) << "the statistical interval alone misses it";

  const auto steep = attribute_ramping_step(100.0, std::nullopt);
  const auto steep_matched = attribute_ramping_step(100.0, 0.15);
  figures("+-100 W ramp, elementwise", steep.at("elementwise"), elementwise_j);
  figures("+-100 W ramp, elementwise, bias 15%", steep_matched.at("elementwise"), elementwise_j);
  EXPECT_FALSE(holds(steep.at("elementwise"), elementwise_j)) << "beyond the default bias";
  EXPECT_TRUE(holds(steep_matched.at("elementwise"), elementwise_j));
  EXPECT_TRUE(holds(steep_matched.at("matmul"), matmul_j));
}

// Counter increments as observations (issue 53 item 4), on the fake H100
// with windows pinned to its 100 ms counter steps and the counter read once
// a step (Sampler::read_counter_every_step). Its counter counts the work
// when it runs, so the lag found is ~0. With the samples' model right, the
// increments keep the regions where they were; with it wrong (samples taken
// to average their whole 20 ms), the exact integrals take most of its bias
// out. Without the every-step reads the window has no increments to fit.
TEST(AttributionWindowTest, CounterIncrementsAreFittedWithTheSamplesAndTakeOutAWrongSampleModelsBias) {
  constexpr int kSteps = 1800;  // 30 s
  std::string profile;
  for (int i = 0; i < kSteps + 200; ++i) profile += FakeGpuRig::kStep;
  FakeGpuRig h100(testing::fake_nvml_driver(), profile, /*anchored=*/true);
  ASSERT_NE(h100.set_fake_time, nullptr);
  Sampler& sampler = *h100.sampler;
  sampler.note_window_edge(0.0);  // brings the counter's grid up
  const double begin_s = h100.play_steps(0.0, 100);  // ~1.7 s
  sampler.read_counter_every_step(true);
  const double end_s = h100.play_steps(begin_s, kSteps);
  sampler.read_counter_every_step(false);
  const double after_s = h100.play_steps(end_s, 150);  // ~2.5 s without the every-step reads
  h100.advance_to(after_s + 0.5);
  EXPECT_THROW(sampler.read_counter_every_step(false), UsageError);  // one off per on
  const std::vector<CounterAnchor> values = sampler.counter_values(0, begin_s, end_s);
  ASSERT_GE(values.size(), 280u) << sampler.gpu_method_description(0);  // ~10 a second
  for (std::size_t i = 1; i < values.size(); ++i) {
    EXPECT_NEAR(values[i].step_s - values[i - 1].step_s, 0.1, 1e-3) << i;  // every step, none missed
  }
  const double window_j = kSteps * FakeGpuRig::kStepJ;
  const std::map<std::string, double> truth_w = {{"matmul", 650.0}, {"elementwise", 300.0}, {"step", 420.0}};
  const auto worst_error = [&](const Attribution& a) {
    double worst = 0.0;
    for (const auto& [name, power_w] : truth_w) {
      EXPECT_TRUE(h100.region(a, name).resolved) << name;
      worst = std::max(worst, std::abs(h100.region(a, name).power_w / power_w - 1.0));
    }
    return worst;
  };
  const auto has_counter_note = [](const Attribution& a, const std::string& text) {
    return std::any_of(a.notes.begin(), a.notes.end(), [&](const std::string& n) {
      return n.find("energy-counter increments fitted with the samples") != n.npos && n.find(text) != n.npos;
    });
  };
  SampleModel right = boxcar(0.010, 0.0), wrong = boxcar(0.0, 0.0);
  const Attribution right_with = attribute_gpu(sampler, 0, h100.recorder, begin_s, end_s, window_j, {}, right);
  const Attribution wrong_with = attribute_gpu(sampler, 0, h100.recorder, begin_s, end_s, window_j, {}, wrong);
  right.counter_increments = wrong.counter_increments = false;
  const Attribution right_alone = attribute_gpu(sampler, 0, h100.recorder, begin_s, end_s, window_j, {}, right);
  const Attribution wrong_alone = attribute_gpu(sampler, 0, h100.recorder, begin_s, end_s, window_j, {}, wrong);
  std::printf("[ figures  ] largest region power error: right model %.2f%% alone, %.2f%% with the counter; wrong "
              "model %.1f%% alone, %.2f%% with the counter\n",
              100 * worst_error(right_alone), 100 * worst_error(right_with), 100 * worst_error(wrong_alone),
              100 * worst_error(wrong_with));
  std::printf("[ figures  ] %s\n", wrong_with.notes.back().c_str());
  EXPECT_LT(worst_error(right_with), 0.02);
  EXPECT_GT(worst_error(wrong_alone), 0.2);
  EXPECT_LT(worst_error(wrong_with), 0.25 * worst_error(wrong_alone));
  EXPECT_TRUE(has_counter_note(right_with, "the counter taken 0 ms behind the work")) << ::testing::PrintToString(right_with.notes);
  EXPECT_FALSE(has_counter_note(right_alone, ""));
  EXPECT_GT(right_with.observations, right_alone.observations + 250);
  // A lag given is used as given.
  SampleModel lagged = boxcar(0.010, 0.0);
  lagged.counter_lag_s = 0.02;
  EXPECT_TRUE(has_counter_note(attribute_gpu(sampler, 0, h100.recorder, begin_s, end_s, window_j, {}, lagged),
                               "20 ms behind the work (given)"));
  lagged.counter_lag_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(attribute_gpu(sampler, 0, h100.recorder, begin_s, end_s, window_j, {}, lagged), UsageError);
  // Before the every-step reads: the grid's search and the first edge's
  // reads only.
  EXPECT_LE(sampler.counter_values(0, 0.0, begin_s).size(), 4u);
  EXPECT_LE(sampler.counter_values(0, end_s + 0.2, after_s).size(), 2u);  // and none once turned off
  // A window holding only a few values (as other windows' edges leave in a
  // longer one, without the every-step reads): three increments cannot fit
  // three regions and the baseline alone, so the samples are fitted alone.
  const std::vector<CounterAnchor> few(values.begin(), values.begin() + 4);
  const Attribution sparse =
      attribute_observed(sampler.observed_power(0, begin_s, end_s), few, h100.recorder.intervals_within(begin_s, end_s),
                         h100.recorder.names(), begin_s, end_s, window_j, {}, boxcar(0.010, 0.0));
  EXPECT_LT(worst_error(sparse), 0.02);
  EXPECT_EQ(sparse.observations, right_alone.observations);
  EXPECT_TRUE(std::any_of(sparse.notes.begin(), sparse.notes.end(), [](const std::string& n) {
    return n.find("3 energy-counter increments in the window, too few to fit alone (4 unknowns)") != n.npos;
  })) << ::testing::PrintToString(sparse.notes);
}

// A GPU that senses its power 15 ms after the work, samples and counter
// alike (as an H200 does): the samples' boxcar is found 15 ms late, and the
// counter's increments are placed where the samples read as stamped put the
// work, 15 ms behind it; the regions come out right with them.
TEST(AttributionWindowTest, CounterIncrementsOfAGpuThatSensesItsPowerLateLagLikeItsSamples) {
  constexpr int kSteps = 2000;  // ~34 s, steps jittering 5%
  Rig rig(kSteps, 11, /*lag_s=*/0.015, /*anchored=*/true);
  rig.sampler->note_window_edge(0.0);  // brings the counter's grid up in the idle half second
  rig.sampler->read_counter_every_step(true);
  rig.play();
  const double begin_s = 0.5, end_s = rig.run.end_s;
  const double window_j = rig.run.script.energy_to(end_s - 0.015) - rig.run.script.energy_to(begin_s - 0.015);
  const Attribution a = attribute_gpu(*rig.sampler, 0, rig.recorder, begin_s, end_s, window_j);
  const auto note = std::find_if(a.notes.begin(), a.notes.end(), [](const std::string& n) {
    return n.find("energy-counter increments fitted with the samples") != n.npos;
  });
  ASSERT_NE(note, a.notes.end()) << ::testing::PrintToString(a.notes);
  std::printf("[ figures  ] %s\n", note->c_str());
  const auto taken = note->find("the counter taken ");
  ASSERT_NE(taken, std::string::npos);
  EXPECT_NEAR(std::stod(note->substr(taken + 18)), 15.0, 1.0) << *note;
  for (const std::string name : {"matmul", "elementwise"}) {
    const double truth_j = rig.run.true_energy_j.at(name);
    std::printf("[ figures  ] %s: %+.2f%% of its energy\n", name.c_str(),
                100 * (rig.region(a, name).energy_j / truth_j - 1));
    EXPECT_NEAR(rig.region(a, name).energy_j, truth_j, 0.02 * truth_j) << name;
  }
}

// On each driver, the samples joule has (NVML's 20 ms samples; ROCm SMI's
// socket power read at each 100 ms tick, points drifting against the
// 16.9 ms step) recover each region's power, left to choose the model.
class AttributionOnFakeDriverTest : public ::testing::TestWithParam<testing::FakeDriver> {};

TEST_P(AttributionOnFakeDriverTest, TheDriversSamplesRecoverEachRegionsPower) {
  FakeGpuRig rig(GetParam(), FakeGpuRig::kStep);
  ASSERT_NE(rig.set_fake_time, nullptr);
  // Ticks 10 us off the 100 ms grid: a point read exactly on a region's edge
  // (8.8 s is 520 steps and 12 ms) falls on either side of it as the fake's
  // profile and the recorder round, an outlier of hundreds of watts.
  rig.ticks.next_tick_s += 1e-5;
  constexpr int kSteps = 1800;  // 30 s
  const double end_s = rig.play_steps(0.0, kSteps);
  rig.advance_to(end_s + 0.5);
  const double window_j = kSteps * FakeGpuRig::kStepJ;
  const Attribution a = attribute_gpu(*rig.sampler, 0, rig.recorder, 0.0, end_s, window_j);
  for (const auto& [name, power_w] : std::map<std::string, double>{{"matmul", 650.0}, {"elementwise", 300.0}}) {
    SCOPED_TRACE(name);
    const RegionEnergy& r = rig.region(a, name);
    ASSERT_TRUE(r.resolved);
    std::printf("[ figures  ] %s on %s: %+.2f%% from %zu observations\n", name.c_str(), GetParam().name.c_str(),
                100 * (r.power_w / power_w - 1), a.observations);
    EXPECT_NEAR(r.power_w, power_w, 0.02 * power_w);
  }
  EXPECT_NEAR(a.baseline_w, 90.0, 3.0);
  EXPECT_LT(a.residual_rms_w, 5.0);
}

INSTANTIATE_TEST_SUITE_P(FakeDrivers, AttributionOnFakeDriverTest, ::testing::ValuesIn(testing::fake_drivers()),
                         testing::FakeDriverName());

TEST(RegionRecorderTest, NestedRegionsPauseTheOuterOneAndErrorsNameTheRegions) {
  auto clock = std::make_shared<VirtualClock>();
  RegionRecorder recorder(clock);
  recorder.begin("phase");
  clock->set_s(1.0);
  recorder.begin("layer");
  clock->set_s(3.0);
  EXPECT_THROW(
      {
        try {
          recorder.end("phase");
        } catch (const UsageError& e) {
          EXPECT_STREQ(e.what(), "region 'phase' ended while 'layer' inside it is open");
          throw;
        }
      },
      UsageError);
  EXPECT_THROW(recorder.begin("phase"), UsageError);  // already open
  recorder.end("layer");
  clock->set_s(4.0);
  recorder.end("phase");
  EXPECT_THROW(recorder.end("phase"), UsageError);
  EXPECT_EQ(recorder.open_regions(), 0u);

  const auto all = recorder.intervals_within(0.0, 10.0);
  ASSERT_EQ(all.size(), 3u);  // phase [0,1), layer [1,3), phase resumed [3,4)
  EXPECT_EQ(recorder.names()[all[0].region], "phase");
  EXPECT_FALSE(all[0].resumed);
  EXPECT_DOUBLE_EQ(all[1].end_s, 3.0);
  EXPECT_TRUE(all[2].resumed);
  EXPECT_DOUBLE_EQ(all[2].end_s - all[2].begin_s, 1.0);

  const auto cut = recorder.intervals_within(1.5, 3.5);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_DOUBLE_EQ(cut[0].begin_s, 1.5);
  EXPECT_TRUE(cut[0].resumed);  // its call began before the window
  EXPECT_DOUBLE_EQ(cut[1].end_s, 3.5);

  recorder.forget_before(3.0);
  EXPECT_EQ(recorder.intervals_within(0.0, 10.0).size(), 1u);
}

// Edges with their own instants (CUDA events mapped to the monitor's clock)
// nest like live ones, and may not go back in time.
TEST(RegionRecorderTest, EdgesAtGivenInstantsNestAndMayNotGoBack) {
  RegionRecorder recorder(std::make_shared<VirtualClock>());
  recorder.begin_at("backward", 10.0);
  recorder.begin_at("layer1.backward", 10.5);
  recorder.end_at("layer1.backward", 10.75);
  EXPECT_THROW(recorder.end_at("backward", 10.7), UsageError);  // before the last edge
  EXPECT_THROW(recorder.begin_at("x", std::numeric_limits<double>::infinity()), UsageError);
  EXPECT_EQ(recorder.names().size(), 2u);  // refused edges name nothing new
  recorder.end_at("backward", 11.0);
  const auto all = recorder.intervals_within(0.0, 20.0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_DOUBLE_EQ(all[0].end_s - all[0].begin_s, 0.5);
  EXPECT_DOUBLE_EQ(all[1].end_s - all[1].begin_s, 0.25);
  EXPECT_TRUE(all[2].resumed);
  EXPECT_DOUBLE_EQ(all[2].begin_s, 10.75);
}

}  // namespace
}  // namespace joule::attribution
