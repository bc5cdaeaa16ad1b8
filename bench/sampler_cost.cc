// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// CPU cost of the sampler thread: N GPUs sampled at a fixed rate for a while,
// reported as a percentage of one core. Run:
//   build/bin/joule_bench_sampler_cost --backend fake --gpus 8 --hz 100 --seconds 10
// --windows-per-s F notes window edges as a Monitor does (a window of half a
// period every 1/F s, so 2F edges a second that share no counter step): the
// counter anchors are then read, and their thread's CPU is reported too,
// over the whole run and over the steady state after --warmup-s (default 5 s:
// past the one-time search for each GPU's counter steps at the first edge).
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "bench_support.h"
#include "joule/measure/sampler.h"

int main(int argc, char** argv) {
  std::string backend = "fake";
  unsigned count = 8;
  double hz = 100, seconds = 10;
  bool all_fields = false;
  bool window_open = false;  // a measurement window open throughout (drains power samples every tick)
  double counter_interval_s = joule::SamplerOptions{}.counter_interval_s;
  double windows_per_s = 0;
  double warmup_s = 5.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "joule_bench_sampler_cost: {} needs a value\n", arg);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--backend") backend = next();
    else if (arg == "--gpus") count = static_cast<unsigned>(std::stoul(next()));
    else if (arg == "--hz") hz = std::stod(next());
    else if (arg == "--seconds") seconds = std::stod(next());
    else if (arg == "--all-fields") all_fields = true;
    else if (arg == "--window") window_open = true;
    else if (arg == "--counter-interval-s") counter_interval_s = std::stod(next());
    else if (arg == "--windows-per-s") windows_per_s = std::stod(next());
    else if (arg == "--warmup-s") warmup_s = std::stod(next());
    else {
      fmt::print(stderr, "usage: joule_bench_sampler_cost [--backend sim|fake|nvml] [--gpus N] [--hz F] "
                         "[--seconds S] [--all-fields] [--window] [--windows-per-s F] [--warmup-s S] [--counter-interval-s S]\n");
      return 2;
    }
  }
  const auto gpus = joule::bench::open_bench_gpus(backend, count);
  joule::SamplerOptions options;
  options.interval_s = 1.0 / hz;
  options.counter_interval_s = counter_interval_s;
  if (all_fields) options.fields = {true, true, true, true};
  const double cpu_before_s = joule::bench::process_cpu_s();
  joule::Sampler sampler(gpus, {}, joule::SteadyClock::instance(), options);
  sampler.start();
  const auto clock = joule::SteadyClock::instance();
  if (window_open || windows_per_s > 0) sampler.pin_history(clock->now_s());
  std::optional<joule::SamplerStats> after_warmup;
  if (windows_per_s > 0) {
    const double period_s = 1.0 / windows_per_s;
    const double start_s = clock->now_s();
    for (double t = start_s, stop_s = t + seconds; t < stop_s; t += period_s) {
      if (!after_warmup && t - start_s >= warmup_s) after_warmup = sampler.stats();
      std::this_thread::sleep_for(std::chrono::duration<double>(t - clock->now_s()));
      sampler.note_window_edge(clock->now_s());
      std::this_thread::sleep_for(std::chrono::duration<double>(t + 0.5 * period_s - clock->now_s()));
      sampler.note_window_edge(clock->now_s());
    }
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
  const auto stats = sampler.stats();
  sampler.stop();
  const double process_cpu_s = joule::bench::process_cpu_s() - cpu_before_s;
  fmt::print("backend={} gpus={} rate={:.0f} Hz fields={} window={} windows/s={:g} duration={:.2f} s\n", backend,
             gpus.size(), hz, all_fields ? "all" : "power", window_open ? "open" : "none", windows_per_s,
             stats.running_s);
  if (!gpus.empty()) fmt::print("gpu0 energy: {}\n", sampler.gpu_method_description(0));
  fmt::print("ticks={} ({:.1f} Hz achieved) counter_reads={} sample_drains={} sample_gaps={}\n", stats.ticks,
             stats.ticks / stats.running_s, stats.counter_reads, stats.sample_drains, stats.sample_gaps);
  fmt::print("sampler thread CPU: {:.4f} s = {:.3f}% of one core\n", stats.thread_cpu_s,
             100.0 * stats.thread_cpu_s / stats.running_s);
  fmt::print("anchor reader CPU:  {:.4f} s = {:.3f}% of one core ({} counter reads, {} anchors, {} rationed)\n",
             stats.anchors.thread_cpu_s, 100.0 * stats.anchors.thread_cpu_s / stats.running_s, stats.anchors.reads,
             stats.anchors.anchors, stats.anchors.rationed);
  fmt::print("whole process CPU:  {:.4f} s = {:.3f}% of one core\n", process_cpu_s,
             100.0 * process_cpu_s / stats.running_s);
  if (after_warmup) {
    // The steady state: what a long run with windows at this rate costs.
    const double span_s = stats.running_s - after_warmup->running_s;
    const double sampler_cpu_s = stats.thread_cpu_s - after_warmup->thread_cpu_s;
    const double reader_cpu_s = stats.anchors.thread_cpu_s - after_warmup->anchors.thread_cpu_s;
    const uint64_t reads = stats.anchors.reads - after_warmup->anchors.reads;
    fmt::print("after {:g} s ({:.1f} s): sampler thread {:.3f}%, anchor reader {:.3f}% ({:.2f} counter reads/s, "
               "{} rationed), both {:.3f}% of one core\n",
               warmup_s, span_s, 100.0 * sampler_cpu_s / span_s, 100.0 * reader_cpu_s / span_s, reads / span_s,
               stats.anchors.rationed - after_warmup->anchors.rationed,
               100.0 * (sampler_cpu_s + reader_cpu_s) / span_s);
  }
  return 0;
}
