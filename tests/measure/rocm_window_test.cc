// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Windows on AMD's energy counter, through joule's ROCm SMI backend on the
// fake librocm_smi64.so.1: a counter that advances every millisecond (at a
// phase of its own) and costs nothing to read, an average power that is a
// trailing one-second mean (as on an MI250X), no power samples. The sampler
// reads the counter right after each window edge (counter_anchors.h,
// kEdgeReads) instead of integrating the average power. On a virtual clock
// shared with the fake: windows of 10 ms to 5 s under on/off and random
// loads are compared with the exact energy of the scripted load, side by
// side with the power integral and with plain counter reads at the edges;
// a 32-bit counter that wraps inside windows; and a counter that steps
// only every 100 ms, which is not read at the edges.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/device/rocm.h"
#include "joule/measure/sampler.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::use_fake_rocm_smi;
using testing::write_file;

// The virtual clock's step: 37.3 us, so that reads (on these steps) fall at
// every phase of the counter's 1 ms updates, as a real thread's do.
constexpr double kStepS = 37.3e-6;
constexpr double kTickS = 0.01;  // sampler ticks (power readings)

// A load of constant-power phases whose durations are whole microseconds
// (so the fake's profile file holds them exactly), with its exact energy.
class PhaseLoad {
 public:
  // Phases of min..max s at powers drawn from levels_w (in turn when
  // alternate, else at random), from a fixed seed.
  PhaseLoad(uint64_t seed, std::vector<double> levels_w, bool alternate, double min_phase_s, double max_phase_s,
            double length_s) {
    uint64_t state = seed;
    double t = 0.0;
    for (std::size_t i = 0; t < length_s; ++i) {
      const double duration_s = std::round(1e6 * (min_phase_s + (max_phase_s - min_phase_s) * unit(state))) / 1e6;
      const double power_w =
          alternate ? levels_w[i % levels_w.size()]
                    : levels_w[static_cast<std::size_t>(unit(state) * static_cast<double>(levels_w.size()))];
      starts_s_.push_back(t);
      powers_w_.push_back(power_w);
      energy_at_start_j_.push_back(energy_at_start_j_.empty() ? 0.0
                                                              : energy_at_start_j_.back() +
                                                                    powers_w_[i - 1] * (t - starts_s_[i - 1]));
      t += duration_s;
    }
    end_s_ = t;
  }

  double energy_j(double t0, double t1) const { return energy_to(t1) - energy_to(t0); }
  double power_w(double t) const { return powers_w_[phase(t)]; }
  // Whether the power changes anywhere in [t0, t1].
  bool changes_within(double t0, double t1) const { return phase(t0) != phase(t1); }
  double max_power_w() const { return *std::max_element(powers_w_.begin(), powers_w_.end()); }
  double power_range_w() const { return max_power_w() - *std::min_element(powers_w_.begin(), powers_w_.end()); }
  std::string profile_file() const {
    std::string text;
    for (std::size_t i = 0; i < starts_s_.size(); ++i) {
      const double next_s = i + 1 < starts_s_.size() ? starts_s_[i + 1] : end_s_;
      char line[64];
      std::snprintf(line, sizeof line, "%.3f %.1f\n", 1e3 * (next_s - starts_s_[i]), powers_w_[i]);
      text += line;
    }
    return text;
  }

 private:
  static double unit(uint64_t& state) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  }
  std::size_t phase(double t) const {
    const auto it = std::upper_bound(starts_s_.begin(), starts_s_.end(), t);
    return it == starts_s_.begin() ? 0 : static_cast<std::size_t>(it - starts_s_.begin()) - 1;
  }
  double energy_to(double t) const {
    const std::size_t i = phase(t);
    return energy_at_start_j_[i] + powers_w_[i] * (t - starts_s_[i]);
  }

  std::vector<double> starts_s_, powers_w_, energy_at_start_j_;
  double end_s_ = 0.0;
};

struct Window {
  double begin_s;
  double end_s;
  double nominal_s;  // the length it is reported under
};

// Windows one after another with gaps of 0-0.3 s, their lengths in turn
// from lengths_s, each 0-20% longer at random; edges at whole microseconds
// anywhere (noted at the clock's first step past them, as a thread that
// is a moment late).
std::vector<Window> windows_between(double from_s, double to_s, const std::vector<double>& lengths_s,
                                    uint64_t seed) {
  std::vector<Window> windows;
  uint64_t state = seed;
  const auto unit = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  double t = from_s;
  for (std::size_t i = 0;; ++i) {
    const double nominal_s = lengths_s[i % lengths_s.size()];
    const double begin_s = std::round((t + 0.3 * unit()) * 1e6) / 1e6;
    const double end_s = std::round((begin_s + nominal_s * (1.0 + 0.2 * unit())) * 1e6) / 1e6;
    if (end_s > to_s) break;
    windows.push_back({begin_s, end_s, nominal_s});
    t = end_s;
  }
  return windows;
}

struct Errors {
  std::vector<double> relative;
  void add(double error) { relative.push_back(std::fabs(error)); }
  double mean_abs() const { return std::accumulate(relative.begin(), relative.end(), 0.0) / relative.size(); }
  double max_abs() const { return *std::max_element(relative.begin(), relative.end()); }
};

struct Outcome {
  std::map<double, Errors> anchored, integral, counter_at_edges;
  int windows = 0;
  int anchored_windows = 0;
  int settled_soon = 0;  // settled and anchored 30 ms after their end
  // Windows whose edges lie in steady load (no change within 5 ms after
  // either edge): their largest error, in J.
  double steady_max_error_j = 0.0;
  double max_error_j = 0.0;
  std::string description;
  SamplerStats stats;
};

// Runs load on a fake ROCm GPU (device line keys in device_keys) for run_s
// of virtual time and measures every window two ways: joule's default and
// the power integral alone (anchors off). counter_at(t) is what a plain read
// of the counter gives at t (its value at the last update).
template <typename CounterAt>
Outcome run_windows(const PhaseLoad& load, const std::string& device_keys, const std::vector<Window>& windows,
                    double run_s, CounterAt counter_at, int poll_every_steps = 1, bool prepare = true) {
  TempDir tmp;
  write_file(tmp.file("load.txt"), load.profile_file());
  const auto fake = use_fake_rocm_smi(tmp, "clock virtual\ndevice name=\"AMD Instinct MI250X\" profile_file=" +
                                               tmp.file("load.txt") + " max_limit_w=750 limit_w=750 " +
                                               device_keys + "\n");
  auto for_anchors = open_rocm_smi_gpus(fake.library_path).gpus;
  auto for_integral = open_rocm_smi_gpus(fake.library_path).gpus;
  auto* set_fake_time = reinterpret_cast<void (*)(double)>(
      dlsym(dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD), "joule_fake_rocm_smi_set_time_s"));
  EXPECT_NE(set_fake_time, nullptr);
  if (set_fake_time == nullptr || for_anchors.size() != 1) return {};

  auto clock = std::make_shared<VirtualClock>();
  SamplerOptions options;
  options.background_thread = false;
  options.interval_s = kTickS;
  options.history_s = 1000.0;
  options.counter_anchors.history_s = 1000.0;
  // The short windows bring ten edges within ~1.5 s, beyond the default
  // burst of 8 reads (2.5 a second sustained): a little more room, so that
  // every edge is read (what the ration drops is counter_anchors_test's).
  options.counter_anchors.reads_per_s = 5.0;
  Sampler anchored(for_anchors, {}, clock, options);
  options.counter_anchors.enabled = false;
  Sampler integral(for_integral, {}, clock, options);
  EXPECT_EQ(anchored.gpu_method(0), GpuEnergyMethod::kPowerReadings);  // ROCm SMI keeps no samples
  anchored.start();
  integral.start();
  if (prepare) anchored.prepare_counter_anchors();  // as a Monitor does when it is made

  std::vector<std::pair<double, bool>> edges;  // time, and whether a window ends there
  for (const Window& w : windows) edges.insert(edges.end(), {{w.begin_s, false}, {w.end_s, true}});
  std::sort(edges.begin(), edges.end());
  std::map<double, double> begin_by_end_s;
  for (const Window& w : windows) begin_by_end_s[w.end_s] = w.begin_s;

  Outcome outcome;
  std::vector<std::pair<double, Window>> checks;  // (when, window): settled by then?
  auto next_edge = edges.begin();
  std::size_t next_check = 0;
  const auto steps = static_cast<int64_t>(std::llround(run_s / kStepS));
  for (int64_t step = 1; step <= steps; ++step) {
    const double now_s = static_cast<double>(step) * kStepS;
    clock->set_s(now_s);
    set_fake_time(now_s);
    for (; next_edge != edges.end() && next_edge->first <= now_s + 1e-9; ++next_edge) {
      anchored.note_window_edge(next_edge->first);
      if (next_edge->second) {
        checks.push_back({next_edge->first + 0.03, {begin_by_end_s[next_edge->first], next_edge->first, 0.0}});
      }
    }
    // The anchor thread's work: as often as the clock moves (a real thread
    // is woken at each edge and then reads a few times a millisecond).
    if (step % poll_every_steps == 0) anchored.poll_counter_anchors();
    if (step % static_cast<int64_t>(std::llround(kTickS / kStepS)) == 0) {
      anchored.sample_now();
      integral.sample_now();
    }
    for (; next_check < checks.size() && checks[next_check].first <= now_s + 1e-9; ++next_check) {
      const Window& w = checks[next_check].second;
      const EnergyEstimate e = anchored.gpu_energy(0, w.begin_s, w.end_s);
      outcome.settled_soon += e.settled && e.counter_anchored ? 1 : 0;
    }
  }
  outcome.description = anchored.gpu_method_description(0);
  outcome.stats = anchored.stats();

  for (const Window& w : windows) {
    const double length_s = w.nominal_s;
    const double truth_j = load.energy_j(w.begin_s, w.end_s);
    const EnergyEstimate estimate = anchored.gpu_energy(0, w.begin_s, w.end_s);
    EXPECT_TRUE(estimate.settled) << w.begin_s;
    EXPECT_FALSE(estimate.problem) << *estimate.problem;
    ++outcome.windows;
    outcome.anchored_windows += estimate.counter_anchored ? 1 : 0;
    const double error_j = std::fabs(estimate.energy_j - truth_j);
    outcome.max_error_j = std::max(outcome.max_error_j, error_j);
    if (!load.changes_within(w.begin_s, w.begin_s + 0.005) && !load.changes_within(w.end_s, w.end_s + 0.005)) {
      outcome.steady_max_error_j = std::max(outcome.steady_max_error_j, error_j);
    }
    outcome.anchored[length_s].add(estimate.energy_j / truth_j - 1.0);
    outcome.integral[length_s].add(integral.gpu_energy(0, w.begin_s, w.end_s).energy_j / truth_j - 1.0);
    outcome.counter_at_edges[length_s].add((counter_at(w.end_s) - counter_at(w.begin_s)) / truth_j - 1.0);
  }
  for (const auto& [length_s, errors] : outcome.anchored) {
    std::printf("%6.3f s, %3zu windows, mean / max abs %%: joule's default %.3f / %.3f, "
                "power integral %.2f / %.1f, plain counter values at the edges %.2f / %.1f\n",
                length_s, errors.relative.size(), 100 * errors.mean_abs(), 100 * errors.max_abs(),
                100 * outcome.integral.at(length_s).mean_abs(), 100 * outcome.integral.at(length_s).max_abs(),
                100 * outcome.counter_at_edges.at(length_s).mean_abs(),
                100 * outcome.counter_at_edges.at(length_s).max_abs());
  }
  return outcome;
}

// The counter's update period and phase in the fake's config below, and what
// a plain read at t returns (its value at the last update, in whole mJ as
// joule reads it; no wrap in these runs).
constexpr double kUpdateS = 0.001;
constexpr double kPhaseS = 0.00037;
const std::string kMi250xKeys = "energy_update_ms=1 energy_phase_ms=0.37 power_ave_window_ms=1000 current_socket_power=0";

// Error bounds. The edge's value comes from the first two counter updates
// read after it, each placed to within half the spacing of the reads around
// it (d = 37 us here: a read every sixteenth of a period at most, on the
// clock's steps), and the rate between them: at steady load the error per
// edge is the power times d at the first update, plus d at both scaled by
// the (up to ~1.1 periods) stretch from the edge to the first: 3.5 d in all
// (0.09 J at 700 W), plus the counter's whole-mJ reads. A load change within
// the few ms from an edge to its second update costs up to the power's range
// times ~1.5 ms more.
constexpr double kPlacementS = kStepS;
double steady_bound_j(const PhaseLoad& load) { return 2 * (load.max_power_w() * 3.5 * kPlacementS + 0.003); }
double any_bound_j(const PhaseLoad& load) { return steady_bound_j(load) + 2 * load.power_range_w() * 1.5e-3; }

void expect_tight(const Outcome& o, const PhaseLoad& load) {
  SCOPED_TRACE(o.description);
  // Edges within the ration (2.5 a second, 8 at once, by default) are all
  // read: every window is anchored, and settles within 30 ms.
  EXPECT_EQ(o.anchored_windows, o.windows);
  EXPECT_EQ(o.settled_soon, o.windows);
  EXPECT_NE(o.description.find("windows anchored on energy-counter reads right after their edges (the counter "
                               "moves every "),
            std::string::npos);
  EXPECT_EQ(o.stats.anchors.rationed, 0u);
  EXPECT_EQ(o.stats.anchors.edges_missed, 0u);
  EXPECT_EQ(o.stats.anchors.relocks, 0u);
  EXPECT_LE(o.steady_max_error_j, steady_bound_j(load));
  EXPECT_LE(o.max_error_j, any_bound_j(load));
  for (const auto& [length_s, errors] : o.anchored) {
    SCOPED_TRACE(::testing::Message() << length_s << " s windows");
    // Mean abs within 0.1 ms of the window's own power (1% of a 10 ms
    // window, 0.1% of 100 ms, 0.01% of 1 s); never above the plain reads'
    // nor the integral's.
    EXPECT_LE(errors.mean_abs(), 1e-4 / length_s);
    EXPECT_LT(errors.mean_abs(), o.counter_at_edges.at(length_s).mean_abs());
    EXPECT_LT(errors.mean_abs(), o.integral.at(length_s).mean_abs());
  }
}

const std::vector<double> kLengthsS = {0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 5.0};

TEST(RocmWindowTest, WindowsOfTenMsToFiveSecondsUnderAnOnOffLoadAreReadAtTheirEdgesAndExact) {
  const PhaseLoad load(11, {700.0, 100.0}, /*alternate=*/true, 0.15, 2.5, 200.0);
  const auto counter_at = [&](double t) {
    return std::floor(1e3 * load.energy_j(0.0, std::floor((t - kPhaseS) / kUpdateS + 1e-9) * kUpdateS + kPhaseS)) /
           1e3;
  };
  const Outcome o = run_windows(load, kMi250xKeys, windows_between(2.0, 190.0, kLengthsS, 3), 190.5, counter_at);
  ASSERT_GT(o.windows, 100);
  expect_tight(o, load);
}

TEST(RocmWindowTest, WindowsUnderARandomLoadAreReadAtTheirEdgesAndExact) {
  // Random levels 60-700 W, phases of 5 ms to 0.8 s: load changes near
  // edges are common here.
  const PhaseLoad load(29, {60.0, 150.0, 280.0, 420.0, 560.0, 700.0}, /*alternate=*/false, 0.005, 0.8, 200.0);
  const auto counter_at = [&](double t) {
    return std::floor(1e3 * load.energy_j(0.0, std::floor((t - kPhaseS) / kUpdateS + 1e-9) * kUpdateS + kPhaseS)) /
           1e3;
  };
  const Outcome o = run_windows(load, kMi250xKeys, windows_between(2.0, 190.0, kLengthsS, 5), 190.5, counter_at);
  ASSERT_GT(o.windows, 100);
  expect_tight(o, load);
}

TEST(RocmWindowTest, AReaderThatReadsOnlyEveryHalfMillisecondStillAnchorsEveryWindowLessTightly) {
  // A thread that cannot read 16 times a millisecond (a busy machine): reads
  // every 13 clock steps (0.485 ms) place each update to within ~0.24 ms,
  // so the bound grows with that, and every window is still anchored and
  // better than plain reads at the edges.
  constexpr int kEvery = 13;
  const PhaseLoad load(17, {700.0, 100.0}, /*alternate=*/true, 0.15, 2.5, 200.0);
  const auto counter_at = [&](double t) {
    return std::floor(1e3 * load.energy_j(0.0, std::floor((t - kPhaseS) / kUpdateS + 1e-9) * kUpdateS + kPhaseS)) /
           1e3;
  };
  const Outcome o =
      run_windows(load, kMi250xKeys, windows_between(2.0, 190.0, kLengthsS, 13), 190.5, counter_at, kEvery);
  ASSERT_GT(o.windows, 100);
  EXPECT_EQ(o.anchored_windows, o.windows);
  EXPECT_EQ(o.stats.anchors.edges_missed, 0u);
  const double placement_s = 0.5 * kEvery * kStepS;
  EXPECT_LE(o.max_error_j, 2 * (load.max_power_w() * 3.5 * placement_s + 0.003) + 2 * load.power_range_w() * 1.5e-3);
  for (const auto& [length_s, errors] : o.anchored) {
    SCOPED_TRACE(::testing::Message() << length_s << " s windows");
    EXPECT_LT(errors.mean_abs(), o.counter_at_edges.at(length_s).mean_abs());
  }
}

TEST(RocmWindowTest, TheFirstWindowOfASamplerNotBroughtUpIsAnchoredByTheSearchItsBeginStarts) {
  // No prepare(): the first edge starts the search for the counter's
  // updates (a few ms on a 1 ms counter), and the edges that come meanwhile,
  // that one included, are read as the search goes on.
  const PhaseLoad load(23, {700.0, 100.0}, /*alternate=*/true, 0.15, 2.5, 30.0);
  const auto counter_at = [&](double t) {
    return std::floor(1e3 * load.energy_j(0.0, std::floor((t - kPhaseS) / kUpdateS + 1e-9) * kUpdateS + kPhaseS)) /
           1e3;
  };
  const Outcome o = run_windows(load, kMi250xKeys, {{1.0003, 1.0104, 0.01}, {1.0112, 1.5113, 0.5}, {2.0, 4.0, 2.0}},
                                5.0, counter_at, 1, /*prepare=*/false);
  EXPECT_EQ(o.anchored_windows, 3);
  EXPECT_LE(o.max_error_j, any_bound_j(load));
}

TEST(RocmWindowTest, AThirtyTwoBitCounterThatWrapsInsideWindowsIsFollowed) {
  // 1 uJ ticks in 32 bits wrap every 4295 J: every 6-11 s at 400-700 W, so
  // windows of 0.5-5 s one after another contain several wraps.
  const PhaseLoad load(41, {700.0, 400.0}, /*alternate=*/true, 0.3, 1.5, 90.0);
  const double wrap_j = 4294967296.0 * 1e-6;
  const std::vector<Window> windows = windows_between(1.0, 85.0, {0.5, 5.0, 2.0, 1.0}, 9);
  int windows_with_a_wrap = 0;
  for (const Window& w : windows) {
    windows_with_a_wrap +=
        std::floor(load.energy_j(0.0, w.begin_s) / wrap_j) != std::floor(load.energy_j(0.0, w.end_s) / wrap_j) ? 1
                                                                                                               : 0;
  }
  ASSERT_GE(windows_with_a_wrap, 5);
  const auto unwrapped_counter_at = [&](double t) {
    return load.energy_j(0.0, std::floor((t - kPhaseS) / kUpdateS + 1e-9) * kUpdateS + kPhaseS);
  };
  const Outcome o =
      run_windows(load, kMi250xKeys + " counter_bits=32 energy_resolution_uj=1", windows, 85.5, unwrapped_counter_at);
  expect_tight(o, load);
}

TEST(RocmWindowTest, ACounterThatStepsEvery100MsIsNotReadAtTheEdgesAndWindowsKeepTheIntegral) {
  // The NVML-like counter: the search measures 100 ms steps, too coarse to
  // read at the edges, and bridging them needs power samples, which ROCm
  // SMI does not keep: the calibrated integral of the power readings (here
  // the point power, current socket power as on an MI300X), as before.
  const PhaseLoad load(53, {700.0, 100.0}, /*alternate=*/true, 0.15, 2.5, 120.0);
  const auto counter_at = [&](double t) {
    return std::floor(1e3 * load.energy_j(0.0, std::floor(t / 0.1 + 1e-9) * 0.1)) / 1e3;
  };
  const Outcome o = run_windows(load, "energy_update_ms=100", windows_between(40.0, 115.0, {1.0, 2.0, 5.0}, 7),
                                115.5, counter_at);
  ASSERT_GT(o.windows, 20);
  EXPECT_EQ(o.anchored_windows, 0);
  EXPECT_NE(o.description.find("windows not anchored: the energy counter steps every 100.0 ms, too coarse to read at "
                               "the edges, and bridging an edge to a step needs power samples, which this GPU lacks"),
            std::string::npos)
      << o.description;
  EXPECT_NE(o.description.find("counter-calibrated"), std::string::npos) << o.description;
  for (const auto& [length_s, errors] : o.anchored) {
    SCOPED_TRACE(::testing::Message() << length_s << " s windows");
    // The point power integrated every 10 ms: off only by the ticks that
    // straddle a load change (600 W x 5 ms at most per edge).
    EXPECT_LE(errors.max_abs(), 6.0 / (100.0 * length_s));
    EXPECT_LE(errors.mean_abs(), 0.01);
  }
}

}  // namespace
}  // namespace joule

