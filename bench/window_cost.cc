// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Does a window cost the same after a million others as after the first?
// Times begin_window + end_window over a long run and prints the cost at
// its start and at its end side by side, for 8 simulated and 8 fake-NVML
// GPUs, in two shapes:
//   back-to-back: N windows in a tight loop (default 1,000,000);
//   paced:        one window per step at R Hz for S seconds (default 1 kHz,
//                 60 s), as a training loop with a window per step does,
//                 once sleeping between steps (the thread wakes with cold
//                 caches, as one that waits on a blocking sync does) and once
//                 spinning (as one that launches work or spin-waits does).
// Each pacing also times, for 5 s, the least a window could do (a clock
// read and an uncontended mutex): the floor this machine charges.
// Run:
//   build/bin/joule_bench_window_cost                       # both shapes
//   build/bin/joule_bench_window_cost --windows 200000 --paced-s 10
// Costs are medians over slices (the first and last 1% of the back-to-back
// run, the first and last second of the paced one, and each tenth), in
// nanoseconds: medians, because on a shared machine a window now and then
// pays for the thread being preempted, which says nothing about the window.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "joule/measure/monitor.h"

namespace {

using SteadyTime = std::chrono::steady_clock;

struct Options {
  long windows = 1'000'000;
  double paced_hz = 1000.0;
  double paced_s = 60.0;
  std::vector<std::string> pacings = {"sleep", "spin"};
  std::vector<std::string> backends = {"sim", "fake"};
};

double window_ns(joule::Monitor& monitor) {
  const auto start = SteadyTime::now();
  monitor.begin_window("step");
  const joule::Measurement m = monitor.end_window("step");
  const auto stop = SteadyTime::now();
  if (m.gpu_energy_j.empty()) std::abort();  // keeps the result alive
  return std::chrono::duration<double, std::nano>(stop - start).count();
}

double median_of(const std::vector<double>& values, std::size_t from, std::size_t to) {
  return joule::bench::median(std::vector<double>(values.begin() + static_cast<std::ptrdiff_t>(from),
                                                  values.begin() + static_cast<std::ptrdiff_t>(to)));
}

// The median cost of each tenth of the run, so that a slope shows wherever it starts.
std::string tenths(const std::vector<double>& ns) {
  std::string out;
  for (int t = 0; t < 10; ++t) {
    out += fmt::format(" {:.0f}", median_of(ns, ns.size() * t / 10, ns.size() * (t + 1) / 10));
  }
  return out;
}

void back_to_back(const std::string& backend, const Options& options) {
  joule::Monitor monitor(joule::bench::open_bench_gpus(backend, 8), {}, joule::SteadyClock::instance());
  std::vector<double> ns(static_cast<std::size_t>(options.windows));
  const auto start = SteadyTime::now();
  for (double& cost : ns) cost = window_ns(monitor);
  const double run_s = std::chrono::duration<double>(SteadyTime::now() - start).count();
  const std::size_t slice = std::max<std::size_t>(ns.size() / 100, 1);
  fmt::print("back-to-back {:>4} x8  {} windows in {:.1f} s  first 1%: {:.0f} ns  last 1%: {:.0f} ns  "
             "all: {:.0f} ns  per tenth:{}\n",
             backend, ns.size(), run_s, median_of(ns, 0, slice), median_of(ns, ns.size() - slice, ns.size()),
             joule::bench::median(ns), tenths(ns));
}

// Times `timed` once per step at hz for seconds, sleeping or spinning in between.
template <typename Timed>
std::vector<double> paced_ns(double hz, double seconds, const std::string& pacing, Timed&& timed) {
  const auto period = std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(1.0 / hz));
  const auto steps = static_cast<std::size_t>(hz * seconds);
  std::vector<double> ns;
  ns.reserve(steps);
  auto next = SteadyTime::now();
  for (std::size_t i = 0; i < steps; ++i) {
    next += period;
    ns.push_back(timed());
    if (pacing == "sleep") {
      std::this_thread::sleep_until(next);
    } else {
      while (SteadyTime::now() < next) {
      }
    }
  }
  return ns;
}

void paced(const std::string& backend, const std::string& pacing, const Options& options) {
  joule::Monitor monitor(joule::bench::open_bench_gpus(backend, 8), {}, joule::SteadyClock::instance());
  const std::vector<double> ns =
      paced_ns(options.paced_hz, options.paced_s, pacing, [&] { return window_ns(monitor); });
  const auto per_second = static_cast<std::size_t>(options.paced_hz);
  fmt::print("paced {:>5}  {:>4} x8  {:.0f} Hz for {:.0f} s  first second: {:.0f} ns  last second: {:.0f} ns  "
             "all: {:.0f} ns  per tenth:{}\n",
             pacing, backend, options.paced_hz, options.paced_s, median_of(ns, 0, per_second),
             median_of(ns, ns.size() - per_second, ns.size()), joule::bench::median(ns), tenths(ns));
}

// What the machine charges any paced call: a clock read and an uncontended mutex.
void machine_floor(const std::string& pacing, const Options& options) {
  std::mutex mutex;
  double sink = 0;
  const std::vector<double> ns = paced_ns(options.paced_hz, 5.0, pacing, [&] {
    const auto start = SteadyTime::now();
    {
      std::lock_guard lock(mutex);
      sink += static_cast<double>(SteadyTime::now().time_since_epoch().count());
    }
    return std::chrono::duration<double, std::nano>(SteadyTime::now() - start).count();
  });
  if (sink == 0) std::abort();
  fmt::print("paced {:>5}  floor: a clock read and an uncontended mutex  {:.0f} Hz for 5 s  all: {:.0f} ns\n", pacing,
             options.paced_hz, joule::bench::median(ns));
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (flag == "--windows" && value) {
      options.windows = std::atol(value), ++i;
    } else if (flag == "--paced-s" && value) {
      options.paced_s = std::atof(value), ++i;
    } else if (flag == "--paced-hz" && value) {
      options.paced_hz = std::atof(value), ++i;
    } else if (flag == "--backend" && value) {
      options.backends = {value}, ++i;
    } else if (flag == "--pacing" && value) {
      options.pacings = {value}, ++i;
      if (options.pacings[0] != "sleep" && options.pacings[0] != "spin") options.pacings.clear(), i = argc;
    } else {
      fmt::print(stderr,
                 "usage: joule_bench_window_cost [--windows N] [--paced-hz R] [--paced-s S] [--backend sim|fake|fake-rocm]\n"
                 "                               [--pacing sleep|spin]\n"
                 "  (N = 0 or S = 0 skips that shape)\n");
      std::exit(2);
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  if (options.pacings.empty()) {
    fmt::print(stderr, "joule_bench_window_cost: --pacing is sleep or spin\n");
    return 2;
  }
  for (const std::string& backend : options.backends) {
    if (options.windows > 0) back_to_back(backend, options);
    for (const std::string& pacing : options.pacings) {
      if (options.paced_s > 0) paced(backend, pacing, options);
    }
  }
  if (options.paced_s > 0) {
    for (const std::string& pacing : options.pacings) machine_floor(pacing, options);
  }
  return 0;
}
