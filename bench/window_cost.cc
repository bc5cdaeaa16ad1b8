// Does a window cost the same after a million others as after the first?
// Times begin_window + end_window over a long run and prints the cost at
// its start and at its end side by side, for 8 simulated and 8 fake-NVML
// GPUs, in two shapes:
//   back-to-back: N windows in a tight loop (default 1,000,000);
//   paced:        one window per step at R Hz for S seconds (default 1 kHz,
//                 60 s), as a training loop with a window per step does.
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

void paced(const std::string& backend, const Options& options) {
  joule::Monitor monitor(joule::bench::open_bench_gpus(backend, 8), {}, joule::SteadyClock::instance());
  const auto period = std::chrono::duration<double>(1.0 / options.paced_hz);
  const auto steps = static_cast<std::size_t>(options.paced_hz * options.paced_s);
  std::vector<double> ns;
  ns.reserve(steps);
  auto next = SteadyTime::now();
  for (std::size_t i = 0; i < steps; ++i) {
    next += std::chrono::duration_cast<SteadyTime::duration>(period);
    ns.push_back(window_ns(monitor));
    std::this_thread::sleep_until(next);
  }
  const auto per_second = static_cast<std::size_t>(options.paced_hz);
  fmt::print("paced        {:>4} x8  {:.0f} Hz for {:.0f} s  first second: {:.0f} ns  last second: {:.0f} ns  "
             "all: {:.0f} ns  per tenth:{}\n",
             backend, options.paced_hz, options.paced_s, median_of(ns, 0, per_second),
             median_of(ns, ns.size() - per_second, ns.size()), joule::bench::median(ns), tenths(ns));
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
    } else {
      fmt::print(stderr,
                 "usage: joule_bench_window_cost [--windows N] [--paced-hz R] [--paced-s S] [--backend sim|fake]\n"
                 "  (N = 0 or S = 0 skips that shape)\n");
      std::exit(2);
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  for (const std::string& backend : options.backends) {
    if (options.windows > 0) back_to_back(backend, options);
    if (options.paced_s > 0) paced(backend, options);
  }
  return 0;
}
