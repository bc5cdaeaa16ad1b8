// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Window-energy accuracy of joule::Monitor on a real GPU, against a reference
// that does not depend on joule. Read-only: it changes no GPU setting.
//
// Reference: a thread with its own Gpu object reads the energy counter back to
// back for the whole run (~3.8 ms a call on an H100) and logs every read
// (time before, time after, value). A step is the first read that saw a new
// value; its time is the midpoint between the previous read's midpoint and
// this read's. E_ref(t) interpolates the steps linearly, and the reference
// energy of [a, b] is E_ref(b) - E_ref(a), evaluated after the run. A window
// with an edge outside the log, or in a gap between steps over 250 ms, is
// skipped (and counted). Inside a step (100 ms) the reference assumes constant
// power, so an edge near a load change can be off by up to a quarter of the
// step's energy; a second table keeps only windows whose edges lie where the
// counter's mean power over the edge's step and both neighbours agree within
// 10% (steady edges), where the reference is exact up to the step timing.
//
// Methods, on the same windows of one run, each with its own Gpu object:
//   default       joule's default (the driver's power samples, windows
//                 anchored to energy-counter steps near their edges): the
//                 value end_window returns, and the value settle() returns
//   samples       the power samples alone (anchoring off), settled
//   usage         power usage integrated per tick (joule 0.1's default)
//   instant       the instantaneous power field
//   sync-counter  the counter read synchronously at both edges (as Zeus's
//                 monitor does); the window spans the two reads' midpoints
// Each method's error is its energy over its own interval divided by the
// reference's over that interval, minus 1.
//
// --align: each edge right after the reference sees a counter step, so the
// reference needs no interpolation and is exact to one read (~3 ms), whatever
// the load does inside the 100 ms steps.
//
// Schedule: after --warmup-s (the counter calibration forms), for --seconds:
// a random gap in [0, 0.3] s, then a window of the next length of --lengths,
// in turn. --short-windows N adds N back-to-back 0.1 s windows at the end.
// Run a load beside it, e.g.:
//   python3 bench/gpu_load.py --mode random --seconds 200 &
//   build/bin/joule_bench_accuracy --backend nvml --csv accuracy.csv
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "bench_support.h"
#include "joule/clock.h"
#include "joule/error.h"
#include "joule/measure/monitor.h"

namespace {

using joule::Gpu;
using joule::Measurement;
using joule::Monitor;

constexpr double kMaxStepGapS = 0.25;      // a longer gap around an edge: no reference
constexpr double kSteadyTolerance = 0.1;   // steady edge: the steps' mean powers around it within 10%
constexpr double kMaxWindowGapS = 0.3;     // random gap before each window: [0, this]
constexpr double kShortWindowS = 0.1;
constexpr double kSettleTimeoutS = 1.0;
constexpr double kLogMarginS = 0.3;        // the reference log reaches this far past the last window

const char* const kUsageText =
    "usage: joule_bench_accuracy [--backend nvml|fake|sim] [--gpu N] [--warmup-s S] [--seconds S] "
    "[--seed N] [--lengths S,S,...] [--short-windows N] [--align] [--csv PATH]";

const joule::Clock& steady_clock() { return *joule::SteadyClock::instance(); }

void sleep_s(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// ---------------------------------------------------------------- options

struct Options {
  std::string backend = "nvml";
  unsigned gpu_index = 0;
  double warmup_s = 35;
  double seconds = 120;
  std::uint64_t seed = 1;
  std::vector<double> lengths_s = {0.5, 1, 2, 5};
  int short_windows = 0;
  bool align = false;  // edges right after observed counter steps
  std::string csv_path;
};

double parse_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0) {
    throw joule::UsageError(fmt::format("{} needs a number >= 0, got '{}'", flag, text));
  }
  return value;
}

std::uint64_t parse_count(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0) {
    throw joule::UsageError(fmt::format("{} needs a whole number >= 0, got '{}'", flag, text));
  }
  return value;
}

std::vector<double> parse_lengths(const std::string& text) {
  std::vector<double> lengths_s;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) lengths_s.push_back(parse_number("--lengths", item));
  if (lengths_s.empty() || *std::min_element(lengths_s.begin(), lengths_s.end()) <= 0) {
    throw joule::UsageError("--lengths needs positive seconds, e.g. 0.5,1,2,5");
  }
  return lengths_s;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}\n", kUsageText);
      std::exit(0);
    }
    if (arg == "--align") {
      o.align = true;
      continue;
    }
    if (i + 1 >= argc) throw joule::UsageError(fmt::format("'{}' needs a value, or is unknown; {}", arg, kUsageText));
    const std::string value = argv[++i];
    if (arg == "--backend") o.backend = value;
    else if (arg == "--gpu") o.gpu_index = static_cast<unsigned>(parse_count(arg, value));
    else if (arg == "--warmup-s") o.warmup_s = parse_number(arg, value);
    else if (arg == "--seconds") o.seconds = parse_number(arg, value);
    else if (arg == "--seed") o.seed = parse_count(arg, value);
    else if (arg == "--lengths") o.lengths_s = parse_lengths(value);
    else if (arg == "--short-windows") o.short_windows = static_cast<int>(parse_count(arg, value));
    else if (arg == "--csv") o.csv_path = value;
    else throw joule::UsageError(fmt::format("unknown argument '{}'; {}", arg, kUsageText));
  }
  return o;
}

// ---------------------------------------------------------------- reference

struct CounterRead {
  double before_s;
  double after_s;
  std::uint64_t energy_mj;
  double mid_s() const { return 0.5 * (before_s + after_s); }
};

CounterRead read_counter(Gpu& gpu) {
  const double before_s = steady_clock().now_s();
  const std::uint64_t energy_mj = gpu.total_energy_mj();
  return {before_s, steady_clock().now_s(), energy_mj};
}

// Reads the counter back to back on its own thread until stopped.
class CounterPoller {
 public:
  explicit CounterPoller(std::shared_ptr<Gpu> gpu) : gpu_(std::move(gpu)), thread_([this] { run(); }) {}
  ~CounterPoller() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  CounterPoller(const CounterPoller&) = delete;
  CounterPoller& operator=(const CounterPoller&) = delete;

  // Waits until a read has begun at or after time_s.
  void wait_past(double time_s) const {
    const double give_up_s = steady_clock().now_s() + 10.0;
    while (last_before_s_.load() < time_s && !done_.load()) {
      if (steady_clock().now_s() > give_up_s) throw joule::Error("the reference counter reads stalled");
      sleep_s(0.01);
    }
  }
  // Waits until a read sees the counter step: the moment after which the
  // reference is exact (up to one read's duration) without interpolation.
  void wait_next_step() const {
    const std::uint64_t seen = steps_.load();
    const double give_up_s = steady_clock().now_s() + 10.0;
    while (steps_.load() == seen && !done_.load()) {
      if (steady_clock().now_s() > give_up_s) throw joule::Error("the reference counter stopped stepping");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Joins the thread; throws the device error it met, if any.
  const std::vector<CounterRead>& stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (!error_.empty()) throw joule::Error("reference counter read failed: " + error_);
    return log_;
  }

 private:
  void run() {
    try {
      while (!stop_.load()) {
        log_.push_back(read_counter(*gpu_));
        last_before_s_ = log_.back().before_s;
        if (log_.size() > 1 && log_.back().energy_mj != log_[log_.size() - 2].energy_mj) steps_.fetch_add(1);
      }
    } catch (const std::exception& e) {
      error_ = e.what();
    }
    done_ = true;
  }

  std::shared_ptr<Gpu> gpu_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<double> last_before_s_{-std::numeric_limits<double>::infinity()};
  std::atomic<std::uint64_t> steps_{0};
  std::vector<CounterRead> log_;  // the thread's until it is joined
  std::string error_;
  std::thread thread_;  // last: starts once the members above exist
};

struct CounterStep {
  double time_s;
  double energy_j;
};

// E_ref(t): the counter's steps, interpolated linearly.
class CounterReference {
 public:
  explicit CounterReference(const std::vector<CounterRead>& log) {
    for (std::size_t i = 1; i < log.size(); ++i) {
      if (log[i].energy_mj == log[i - 1].energy_mj) continue;
      steps_.push_back({0.5 * (log[i - 1].mid_s() + log[i].mid_s()), static_cast<double>(log[i].energy_mj) / 1000.0});
    }
  }
  // E_ref(end_s) - E_ref(begin_s); none where an edge is not covered.
  std::optional<double> energy_j(double begin_s, double end_s) const {
    const auto begin_j = at(begin_s), end_j = at(end_s);
    if (!begin_j || !end_j) return std::nullopt;
    return *end_j - *begin_j;
  }
  // Whether the counter's mean powers over the step interval holding time_s
  // and its two neighbours agree within kSteadyTolerance.
  bool steady_at(double time_s) const {
    const std::size_t k = next_step(time_s);  // time_s in [step k-1, step k)
    if (k < 2 || k + 1 >= steps_.size()) return false;
    double low_w = std::numeric_limits<double>::infinity(), high_w = 0.0;
    for (std::size_t j = k - 2; j <= k; ++j) {
      const double power_w = (steps_[j + 1].energy_j - steps_[j].energy_j) / (steps_[j + 1].time_s - steps_[j].time_s);
      low_w = std::min(low_w, power_w);
      high_w = std::max(high_w, power_w);
    }
    return high_w <= low_w * (1.0 + kSteadyTolerance);
  }
  // How far the reference interpolates at time_s: the distance to the
  // nearer of the steps around it (its error is at most that times the
  // power's swing inside the step).
  std::optional<double> interpolation_s(double time_s) const {
    const std::size_t k = next_step(time_s);
    if (k == 0 || k == steps_.size()) return std::nullopt;
    return std::min(time_s - steps_[k - 1].time_s, steps_[k].time_s - time_s);
  }
  std::vector<double> step_spacings_s() const {
    std::vector<double> spacings_s;
    for (std::size_t k = 1; k < steps_.size(); ++k) spacings_s.push_back(steps_[k].time_s - steps_[k - 1].time_s);
    return spacings_s;
  }

 private:
  // The index of the first step after time_s (steps_.size() if none).
  std::size_t next_step(double time_s) const {
    const auto next = std::upper_bound(steps_.begin(), steps_.end(), time_s,
                                       [](double t, const CounterStep& s) { return t < s.time_s; });
    return static_cast<std::size_t>(next - steps_.begin());
  }
  std::optional<double> at(double time_s) const {
    const std::size_t k = next_step(time_s);
    if (k == 0 || k == steps_.size()) return std::nullopt;
    const CounterStep &previous = steps_[k - 1], &next = steps_[k];
    const double gap_s = next.time_s - previous.time_s;
    if (gap_s > kMaxStepGapS) return std::nullopt;
    return previous.energy_j + (next.energy_j - previous.energy_j) * (time_s - previous.time_s) / gap_s;
  }

  std::vector<CounterStep> steps_;
};

// ---------------------------------------------------------------- methods

enum Source { kSamples, kSamplesAlone, kUsage, kInstant, kSourceCount };
// $JOULE_NVML_POWER_SOURCE for each monitor's Gpu object.
constexpr std::array<const char*, kSourceCount> kSourceEnv = {"samples", "samples", "usage", "instant"};
constexpr std::array<const char*, kSourceCount> kSourceNames = {"default", "samples-alone", "usage", "instant"};

enum Method {
  kSamplesImmediate,
  kSamplesSettled,
  kSamplesAloneSettled,
  kUsageImmediate,
  kUsageSettled,
  kInstantSettled,
  kSyncCounter,
  kMethodCount
};
constexpr std::array<const char*, kMethodCount> kMethodIds = {
    "default-immediate", "default-settled", "samples-settled", "usage-immediate", "usage-settled", "instant-settled",
    "sync-counter"};
constexpr std::array<const char*, kMethodCount> kMethodLabels = {
    "joule default, immediate", "joule default (counter-anchored), settled", "power samples alone, settled",
    "power usage (first default), immediate",
    "power usage (old default), settled", "instantaneous field, settled", "sync counter reads at the edges"};

// Opens the GPU under test anew, with $JOULE_NVML_POWER_SOURCE = source while
// the Gpu object is made (it reads the variable then; restored after). Every
// GPU opened stays in keep_alive until the end: a driver library shut down
// under a running sampler would break it (the fake's shutdown is global).
std::shared_ptr<Gpu> open_gpu(const Options& o, const char* source, std::vector<std::shared_ptr<Gpu>>& keep_alive) {
  const char* old = std::getenv("JOULE_NVML_POWER_SOURCE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("JOULE_NVML_POWER_SOURCE", source, 1);
  auto gpus = joule::bench::open_bench_gpus(o.backend, 1);
  saved ? setenv("JOULE_NVML_POWER_SOURCE", saved->c_str(), 1) : unsetenv("JOULE_NVML_POWER_SOURCE");
  if (o.gpu_index >= gpus.size()) {
    throw joule::UsageError(fmt::format("no GPU {} (backend {} has {})", o.gpu_index, o.backend, gpus.size()));
  }
  keep_alive.insert(keep_alive.end(), gpus.begin(), gpus.end());
  return gpus[o.gpu_index];
}

struct Rig {
  std::array<std::unique_ptr<Monitor>, kSourceCount> monitors;  // all on SteadyClock
  std::array<joule::GpuEnergySource, kSourceCount> sources;     // from the latest window
  std::shared_ptr<Gpu> sync_gpu;                                // the sync-counter method's own
  std::vector<double> sync_read_s;                              // its reads' durations
};

Rig open_rig(const Options& o, std::vector<std::shared_ptr<Gpu>>& keep_alive) {
  Rig rig;
  for (int s = 0; s < kSourceCount; ++s) {
    std::vector<std::shared_ptr<Gpu>> gpus = {open_gpu(o, kSourceEnv[s], keep_alive)};
    joule::MonitorOptions options;
    options.sampler.counter_anchors.enabled = s != kSamplesAlone;
    rig.monitors[s] = std::make_unique<Monitor>(std::move(gpus), std::vector<std::shared_ptr<joule::CpuEnergyZone>>{},
                                                joule::SteadyClock::instance(), options);
  }
  rig.sync_gpu = open_gpu(o, "usage", keep_alive);
  return rig;
}

// The default monitor falls back to power readings where the driver keeps no
// power samples; its rows would then be mislabelled.
void warn_if_not_samples(Monitor& monitor) {
  if (monitor.sampler().gpu_method(0) == joule::GpuEnergyMethod::kPowerSamples) return;
  fmt::print(stderr, "warning: the default monitor does not use power samples here ({}); its rows show that method\n",
             monitor.sampler().gpu_method_description(0));
}

// ---------------------------------------------------------------- windows

struct Interval {
  double begin_s = 0.0;
  double end_s = 0.0;
  double energy_j = 0.0;
};

struct Window {
  double length_s = 0.0;
  bool back_to_back = false;
  std::array<std::optional<Interval>, kMethodCount> by_method;  // absent: not measured that way
  bool counter_anchored = false;                                // the default method's settled value
};

struct SettleStats {  // the default method's
  std::vector<double> call_s;          // wall time settle() took
  std::vector<double> end_to_value_s;  // window end to settle()'s return
  int already_settled = 0;             // end_window's value was final
  int settled = 0;                     // settle()'s value was final
  int anchored = 0;                    // ... and counter-anchored
};

Interval interval_of(const Measurement& m) {
  if (!m.warnings.empty()) throw joule::Error("measurement warning: " + m.warnings.front());
  return {m.begin_s, m.end_s(), m.gpu_energy_j.at(0)};
}

using Ended = std::array<Measurement, kSourceCount>;

void begin_all(Rig& rig) {
  for (auto& monitor : rig.monitors) monitor->begin_window("w");
}

Ended end_all(Rig& rig) {
  Ended ended;
  for (int s = 0; s < kSourceCount; ++s) ended[s] = rig.monitors[s]->end_window("w");
  return ended;
}

// Fills the joule methods of w from the ended windows, settling each.
void settle_into(Rig& rig, const Ended& ended, Window& w, SettleStats* stats) {
  w.by_method[kSamplesImmediate] = interval_of(ended[kSamples]);
  w.by_method[kUsageImmediate] = interval_of(ended[kUsage]);
  const double call_s = steady_clock().now_s();
  const Measurement samples = rig.monitors[kSamples]->settle(ended[kSamples], kSettleTimeoutS);
  const double return_s = steady_clock().now_s();
  if (stats != nullptr) {
    stats->call_s.push_back(return_s - call_s);
    stats->end_to_value_s.push_back(return_s - samples.end_s());
    stats->already_settled += ended[kSamples].settled;
    stats->settled += samples.settled;
    stats->anchored += samples.gpu_sources.at(0).counter_anchored;
  }
  w.by_method[kSamplesAloneSettled] =
      interval_of(rig.monitors[kSamplesAlone]->settle(ended[kSamplesAlone], kSettleTimeoutS));
  w.by_method[kSamplesSettled] = interval_of(samples);
  w.counter_anchored = samples.gpu_sources.at(0).counter_anchored;
  w.by_method[kUsageSettled] = interval_of(rig.monitors[kUsage]->settle(ended[kUsage], kSettleTimeoutS));
  const Measurement instant = rig.monitors[kInstant]->settle(ended[kInstant], kSettleTimeoutS);
  w.by_method[kInstantSettled] = interval_of(instant);
  rig.sources = {samples.gpu_sources.at(0), ended[kSamplesAlone].gpu_sources.at(0), ended[kUsage].gpu_sources.at(0),
                 instant.gpu_sources.at(0)};
}

// With a poller (--align), each edge comes right after the reference sees
// the counter step, where the reference needs no interpolation: what remains
// is the error of the method, whatever the load does inside the steps.
//
// The sync-counter method reads after the others at both edges: its read
// takes ~3-40 ms (the driver serialises counter calls), and taken first it
// would move the other methods' begin edges that far from the step.
Window measure_window(Rig& rig, double length_s, SettleStats& stats, const CounterPoller* align) {
  if (align != nullptr) align->wait_next_step();
  begin_all(rig);
  const CounterRead begin = read_counter(*rig.sync_gpu);
  if (align != nullptr) {
    sleep_s(length_s - 0.05);
    align->wait_next_step();
  } else {
    sleep_s(length_s);
  }
  const Ended ended = end_all(rig);
  const CounterRead end = read_counter(*rig.sync_gpu);
  rig.sync_read_s.push_back(begin.after_s - begin.before_s);
  rig.sync_read_s.push_back(end.after_s - end.before_s);
  Window w{length_s, false, {}};
  w.by_method[kSyncCounter] =
      Interval{begin.mid_s(), end.mid_s(), static_cast<double>(end.energy_mj - begin.energy_mj) / 1000.0};
  settle_into(rig, ended, w, &stats);
  return w;
}

// Uniform in [0, 1) from the top 53 bits: the same schedule on every
// platform (std::uniform_real_distribution is implementation-defined).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::vector<Window> run_schedule(Rig& rig, const Options& o, SettleStats& stats, const CounterPoller* align) {
  std::mt19937_64 rng(o.seed);
  std::vector<Window> windows;
  const double stop_s = steady_clock().now_s() + o.seconds;
  for (std::size_t i = 0; steady_clock().now_s() < stop_s; ++i) {
    sleep_s(kMaxWindowGapS * uniform01(rng));
    windows.push_back(measure_window(rig, o.lengths_s[i % o.lengths_s.size()], stats, align));
  }
  return windows;
}

// count windows of 0.1 s back to back; each is settled while the next runs.
std::vector<Window> run_short_windows(Rig& rig, int count) {
  std::vector<Window> windows;
  std::optional<Ended> previous;
  for (int i = 0; i <= count; ++i) {
    const double begin_s = steady_clock().now_s();
    if (i < count) begin_all(rig);
    if (previous) {
      windows.push_back({kShortWindowS, true, {}});
      settle_into(rig, *previous, windows.back(), nullptr);
    }
    if (i == count) break;
    sleep_s(begin_s + kShortWindowS - steady_clock().now_s());
    previous = end_all(rig);
  }
  return windows;
}

// ---------------------------------------------------------------- report

struct Result {
  const Window* window;
  Method method;
  Interval interval;
  std::optional<double> reference_j;  // none: the window was skipped
  bool steady_edges = false;          // every method's edges lie in steady steps
  double interpolation_s = 0.0;       // the reference's, at the farther-interpolated edge
  double error() const { return interval.energy_j / *reference_j - 1.0; }
};

// One result per window and method; a window is skipped (every method) when
// the reference does not cover one of its methods' intervals.
std::vector<Result> compare(const std::vector<Window>& windows, const CounterReference& reference, int& skipped) {
  std::vector<Result> results;
  skipped = 0;
  for (const Window& w : windows) {
    const std::size_t first = results.size();
    bool covered = true, steady = true;
    for (int m = 0; m < kMethodCount; ++m) {
      if (!w.by_method[m]) continue;
      const Interval& iv = *w.by_method[m];
      results.push_back({&w, static_cast<Method>(m), iv, reference.energy_j(iv.begin_s, iv.end_s)});
      results.back().interpolation_s = std::max(reference.interpolation_s(iv.begin_s).value_or(0.0),
                                                reference.interpolation_s(iv.end_s).value_or(0.0));
      covered = covered && results.back().reference_j.has_value();
      steady = steady && reference.steady_at(iv.begin_s) && reference.steady_at(iv.end_s);
    }
    skipped += covered ? 0 : 1;
    for (std::size_t k = first; k < results.size(); ++k) {
      if (!covered) results[k].reference_j.reset();
      results[k].steady_edges = covered && steady;
    }
  }
  return results;
}

std::string window_label(const Window& w) {
  return w.back_to_back ? fmt::format("{:g} s back to back", w.length_s) : fmt::format("{:g} s", w.length_s);
}

void print_row(const std::string& method, const std::string& window, const std::vector<double>& errors) {
  double sum = 0, sum_abs = 0, max_abs = 0;
  for (double e : errors) {
    sum += e;
    sum_abs += std::fabs(e);
    max_abs = std::max(max_abs, std::fabs(e));
  }
  const double n = static_cast<double>(errors.size());
  fmt::print("| {} | {} | {} | {:+.3f} | {:.3f} | {:.3f} |\n", method, window, errors.size(), 100 * sum / n,
             100 * sum_abs / n, 100 * max_abs);
}

// steady_only: only the windows with steady edges.
void print_table(const std::vector<Result>& results, bool steady_only) {
  std::vector<std::string> windows;  // labels in order of first appearance
  for (const Result& r : results) {
    const std::string label = window_label(*r.window);
    if (std::find(windows.begin(), windows.end(), label) == windows.end()) windows.push_back(label);
  }
  fmt::print("| method | window | n | mean error % | mean abs error % | max abs error % |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  for (int m = 0; m < kMethodCount; ++m) {
    for (const std::string& label : windows) {
      std::vector<double> errors;
      for (const Result& r : results) {
        const bool wanted = r.reference_j && (r.steady_edges || !steady_only);
        if (wanted && r.method == m && window_label(*r.window) == label) errors.push_back(r.error());
      }
      if (!errors.empty()) print_row(kMethodLabels[m], label, errors);
    }
  }
}

double max_of(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

void print_reference(const std::vector<CounterRead>& log, const CounterReference& reference,
                     const std::vector<Result>& results, int skipped, std::size_t windows) {
  const auto steady = std::count_if(results.begin(), results.end(),
                                    [](const Result& r) { return r.method == kSamplesSettled && r.steady_edges; });
  std::vector<double> read_s;
  for (const CounterRead& r : log) read_s.push_back(r.after_s - r.before_s);
  const auto spacings_s = reference.step_spacings_s();
  fmt::print("reference: {} counter reads, read duration median {:.2f} ms (max {:.2f} ms); {} steps, spacing median "
             "{:.1f} ms, max {:.1f} ms\n",
             log.size(), 1e3 * joule::bench::median(read_s), 1e3 * max_of(read_s), spacings_s.size() + 1,
             1e3 * joule::bench::median(spacings_s), 1e3 * max_of(spacings_s));
  std::vector<double> interpolation_s;  // the default method's edges
  for (const Result& r : results) {
    if (r.method == kSamplesSettled && r.reference_j) interpolation_s.push_back(r.interpolation_s);
  }
  fmt::print("reference at the default method's edges: interpolated over median {:.1f} ms, max {:.1f} ms from the "
             "nearer step\n",
             1e3 * joule::bench::median(interpolation_s), 1e3 * max_of(interpolation_s));
  fmt::print("windows: {} measured, {} skipped (an edge outside the log or in a step gap over {:.0f} ms), {} with "
             "steady edges\n",
             windows, skipped, 1e3 * kMaxStepGapS, steady);
}

void print_settle(const SettleStats& stats) {
  const std::size_t n = stats.call_s.size();
  if (n == 0) return;
  fmt::print("default method, settle(): took median {:.1f} ms, max {:.1f} ms (window end to settled value: median "
             "{:.1f} ms, max {:.1f} ms); end_window's value already settled in {}/{} windows ({:.1f}%); settled "
             "after settle() in {}/{}, counter-anchored in {}/{}\n",
             1e3 * joule::bench::median(stats.call_s), 1e3 * max_of(stats.call_s),
             1e3 * joule::bench::median(stats.end_to_value_s), 1e3 * max_of(stats.end_to_value_s),
             stats.already_settled, n, 100.0 * stats.already_settled / static_cast<double>(n), stats.settled, n,
             stats.anchored, n);
}

void print_sources(const Rig& rig) {
  for (int s = 0; s < kSourceCount; ++s) {
    const auto& source = rig.sources[s];
    fmt::print("monitor {}: {} [{}], calibration scale {:.4f}\n", kSourceNames[s],
               rig.monitors[s]->sampler().gpu_method_description(0), joule::to_string(source.method),
               source.calibration_scale);
  }
  const joule::CounterAnchors::Stats anchors = rig.monitors[kSamples]->sampler().stats().anchors;
  fmt::print("default monitor's anchors: {} counter reads, {} anchors, {} edge sides over the ration, {} reads "
             "held up past their step, {} grid searches repeated, reader thread CPU {:.3f} s\n",
             anchors.reads, anchors.anchors, anchors.rationed, anchors.held_up, anchors.relocks,
             anchors.thread_cpu_s);
  fmt::print("monitor sync-counter: total_energy_mj() at both edges on its own Gpu object; a read took median "
             "{:.2f} ms, max {:.2f} ms\n",
             1e3 * joule::bench::median(rig.sync_read_s), 1e3 * max_of(rig.sync_read_s));
}

void write_csv(const std::string& path, const std::vector<Result>& results) {
  std::ofstream out(path);
  if (!out) throw joule::Error(fmt::format("cannot write {}", path));
  out << "length_s,method,begin_s,end_s,value_j,reference_j,error,back_to_back,steady_edges,"
         "reference_interpolation_ms,counter_anchored\n";
  for (const Result& r : results) {
    const bool anchored = r.method == kSamplesSettled && r.window->counter_anchored;
    out << fmt::format("{:g},{},{:.6f},{:.6f},{:.6f},{},{},{},{},{:.2f},{}\n", r.window->length_s,
                       kMethodIds[r.method], r.interval.begin_s, r.interval.end_s, r.interval.energy_j,
                       r.reference_j ? fmt::format("{:.6f}", *r.reference_j) : "",
                       r.reference_j ? fmt::format("{:.6f}", r.error()) : "", r.window->back_to_back ? 1 : 0,
                       r.steady_edges ? 1 : 0, 1e3 * r.interpolation_s, anchored ? 1 : 0);
  }
  if (!out.flush()) throw joule::Error(fmt::format("cannot write {}", path));
}

// ---------------------------------------------------------------- run

int run(const Options& o) {
  std::vector<std::shared_ptr<Gpu>> keep_alive;  // outlives everything below
  const auto reference_gpu = open_gpu(o, "usage", keep_alive);
  Rig rig = open_rig(o, keep_alive);
  warn_if_not_samples(*rig.monitors[kSamples]);
  fmt::print("GPU: {} ({}), backend {}\n", reference_gpu->name(), reference_gpu->architecture(), o.backend);
  fmt::print("schedule: warm-up {:g} s, then {:g} s of windows of {} s (seed {}), {} back-to-back {:g} s windows\n",
             o.warmup_s, o.seconds, fmt::join(o.lengths_s, ", "), o.seed, o.short_windows, kShortWindowS);
  std::fflush(stdout);
  CounterPoller poller(reference_gpu);
  sleep_s(o.warmup_s);  // the samplers gather counter history for their calibration
  SettleStats settle_stats;
  std::vector<Window> windows = run_schedule(rig, o, settle_stats, o.align ? &poller : nullptr);
  for (Window& w : run_short_windows(rig, o.short_windows)) windows.push_back(w);
  poller.wait_past(steady_clock().now_s() + kLogMarginS);
  const std::vector<CounterRead>& log = poller.stop();
  for (auto& monitor : rig.monitors) monitor->stop();

  const CounterReference reference(log);
  int skipped = 0;
  const std::vector<Result> results = compare(windows, reference, skipped);
  print_sources(rig);
  print_reference(log, reference, results, skipped, windows.size());
  print_settle(settle_stats);
  fmt::print("\nAll windows:\n\n");
  print_table(results, false);
  fmt::print("\nWindows with steady edges (the reference exact up to the step timing):\n\n");
  print_table(results, true);
  if (!o.csv_path.empty()) write_csv(o.csv_path, results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const std::exception& e) {
    fmt::print(stderr, "joule_bench_accuracy: {}\n", e.what());
    return 1;
  }
}
