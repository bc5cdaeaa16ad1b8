// Window energy through joule's NVML backend on the fake libnvidia-ml.so.1
// set up as an H100 (power samples every 20 ms, power usage a trailing one-
// second mean, counter steps of 100 ms) under a random on/off load, on a
// virtual clock shared with the fake: no timing sensitivity. Every window is
// compared with the exact energy of the scripted load, side by side with the
// per-tick power usage (joule's earlier default) and with synchronous energy-
// counter reads at the window edges.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/on_off_load.h"
#include "common/test_support.h"
#include "joule/clock.h"
#include "joule/device/nvml.h"
#include "joule/measure/sampler.h"

namespace joule {
namespace {

using testing::OnOffLoad;
using testing::TempDir;
using testing::use_fake_nvml;
using testing::write_file;

// What the energy counter reads at t: its value at the last 100 ms step.
double counter_at(const OnOffLoad& load, double t) { return load.energy_j(0.0, std::floor(t * 10.0 + 1e-9) / 10.0); }

struct Errors {
  double mean_abs = 0.0;
  double max_abs = 0.0;
  void add(double error, int count) {
    mean_abs += std::fabs(error) / count;
    max_abs = std::max(max_abs, std::fabs(error));
  }
};

TEST(WindowAccuracyTest, PowerSamplesMeetTheBoundsUnderRandomOnOffLoadOnTheFakeH100) {
  for (const uint64_t seed : {1, 2}) {
    TempDir tmp;
    const OnOffLoad load(seed, 100.0, 700.0, 0.15, 2.5, 240.0);
    write_file(tmp.file("load.txt"), load.profile_file());
    const auto fake = use_fake_nvml(
        tmp, "clock virtual\ndevice name=\"NVIDIA H100 80GB HBM3\" profile_file=" + tmp.file("load.txt") +
                 " min_limit_w=200 max_limit_w=700 energy_update_ms=100 energy_call_ms=4 power_update_ms=100"
                 " usage_window_ms=1000 sample_ms=20 sample_buffer=120 sample_latency_ms=1 sample_stamp_lead_ms=4.5\n");
    auto with_samples = open_nvml_gpus(fake.library_path).gpus;
    setenv("JOULE_NVML_POWER_SOURCE", "usage", 1);
    auto with_usage = open_nvml_gpus(fake.library_path).gpus;
    unsetenv("JOULE_NVML_POWER_SOURCE");
    auto* set_fake_time = reinterpret_cast<void (*)(double)>(
        dlsym(dlopen(fake.library_path.c_str(), RTLD_NOW | RTLD_NOLOAD), "joule_fake_nvml_set_time_s"));
    ASSERT_NE(set_fake_time, nullptr);

    auto clock = std::make_shared<VirtualClock>();
    SamplerOptions options;
    options.background_thread = false;
    options.history_s = 1000.0;
    Sampler samples(with_samples, {}, clock, options);
    Sampler usage(with_usage, {}, clock, options);
    ASSERT_EQ(samples.gpu_method(0), GpuEnergyMethod::kPowerSamples);
    ASSERT_EQ(usage.gpu_method(0), GpuEnergyMethod::kPowerReadings);
    samples.start();
    usage.start();
    for (int tick = 1; tick <= 2300; ++tick) {  // 10 Hz, as by default
      clock->set_s(tick * 0.1);
      set_fake_time(clock->now_s());
      samples.sample_now();
      usage.sample_now();
    }
    EXPECT_NEAR(samples.gpu_scale(0), 1.0, 0.002);  // the samples integrate to the counter

    for (const double length_s : {0.5, 1.0, 2.0, 5.0}) {
      const int count = 400;
      Errors joule, power_usage, sync_counter;
      uint64_t state = seed * 977 + static_cast<uint64_t>(length_s * 10);
      for (int i = 0; i < count; ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        const double begin_s = 40.0 + 180.0 * static_cast<double>(state >> 11) * 0x1.0p-53;
        const double end_s = begin_s + length_s;
        const double truth_j = load.energy_j(begin_s, end_s);
        joule.add(samples.gpu_energy(0, begin_s, end_s).energy_j / truth_j - 1.0, count);
        power_usage.add(usage.gpu_energy(0, begin_s, end_s).energy_j / truth_j - 1.0, count);
        sync_counter.add((counter_at(load, end_s) - counter_at(load, begin_s)) / truth_j - 1.0, count);
      }
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", " << length_s << " s: samples " << joule.mean_abs
                                        << " / " << joule.max_abs << ", usage " << power_usage.mean_abs << " / "
                                        << power_usage.max_abs << ", counter at the edges " << sync_counter.mean_abs
                                        << " / " << sync_counter.max_abs);
      EXPECT_LE(joule.mean_abs, length_s >= 1.0 ? 0.01 : 0.02);
      if (length_s >= 1.0) EXPECT_LE(joule.max_abs, 0.03);
      EXPECT_LE(joule.mean_abs, sync_counter.mean_abs);
      EXPECT_LE(joule.max_abs, sync_counter.max_abs);
      if (length_s <= 1.0) EXPECT_GT(power_usage.mean_abs, 0.05);  // the test tells the methods apart
    }
  }
}

}  // namespace
}  // namespace joule
