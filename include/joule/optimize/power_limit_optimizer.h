// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Just-in-time power-limit optimisation inside a live training loop.
//
// During the first epoch the optimizer tries the GPUs' power limits, largest
// first, stepping down to the smallest: at each, a few warm-up steps, then a
// measured stretch of steps (Monitor windows). Time and energy per step give
// the profile; the objective picks the limit and training continues there.
// The profiling steps are real training, so it costs almost nothing.
//
// Real step times are noisy and drift, often by more than the differences
// between limits, so by default the choice is made in two stages
// (noisy_choice.h): screening rounds visit every limit (screening_rounds,
// default 3) and name a few contenders (the best after smoothing over
// neighbouring limits, its neighbours, the best as measured); confirming
// rounds (confirming_rounds, default 20) visit only those and the limit in
// force before profiling, and the best of them on the fresh data is chosen
// only if it is cheaper than that limit at `confidence`. A clear winner
// decides at screening, and so does a profile where nothing can be
// `tolerance` cheaper. The budget is bounded: at most screening_rounds x
// candidates + confirming_rounds x 6 visits (2 to 5 per confirming round,
// up to 6 for max-slowdown, which also confirms the fastest limit), each
// max(warmup_steps, min_warmup_s) + max(measure_steps, min_measure_s) long
// (plus a new warm-up where an epoch's end cuts a visit).
//
// All GPUs of the job get the same limit (no stragglers in data parallel);
// energy sums over them. The original limit of every GPU it touched is put
// back by restore(), the destructor (also when an exception unwinds), and on
// SIGINT/SIGTERM. A permission error switches to observer mode: profiling
// continues at the current limit and the report says what would be chosen.
//
// A profile measured before skips profiling: one saved in profile_path, or one
// the caller hands in (known_profile, or only its best limit, known_limit_w:
// what the batch-size service advises). on_profiled hands a profile measured
// here to the caller (to publish it, e.g. to the service), so the next run
// anywhere can start decided.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "joule/measure/monitor.h"
#include "joule/optimize/noisy_choice.h"
#include "joule/optimize/objective.h"

namespace joule {

class KnobControl;  // src/optimize/knob_control.h

// What the optimizer turns, the same on every GPU of the job: the power
// limit (the default), or the SM or memory clock cap (one knob per run; a cap
// is a clock lock from the lowest supported clock up to it).
enum class OptimizerKnob { kPowerLimit, kSmClock, kMemoryClock };
const char* to_string(OptimizerKnob knob);  // "power_limit", "sm_clock", "memory_clock"
// Throws UsageError naming the known knobs.
OptimizerKnob parse_optimizer_knob(const std::string& text);

struct PowerLimitProfileRow {
  double power_limit_w = 0.0;      // the limit the row ran at
  int steps = 0;
  double time_per_step_s = 0.0;
  double energy_per_step_j = 0.0;  // all GPUs
  double avg_power_w = 0.0;        // all GPUs
  double clock_mhz = 0.0;          // the row's clock cap when the knob is a clock; 0 otherwise
};

struct PowerLimitOptimizerOptions {
  std::string job_name = "job";
  int batch_size = 0;  // part of the saved profile's key
  Objective objective = Objective::cost(0.5);
  OptimizerKnob knob = OptimizerKnob::kPowerLimit;
  double step_w = 25.0;     // spacing of the candidate limits
  // Clock knobs: candidate caps from the highest supported clock down to
  // min_clock_fraction of it, SM caps one every step_mhz (snapped to a
  // supported clock), memory caps each supported clock.
  double step_mhz = 90.0;
  double min_clock_fraction = 0.5;
  int warmup_steps = 5;     // after each limit change, not measured
  int measure_steps = 20;   // measured per limit
  // Time floors on real GPUs: NVML power usage averages over the last second,
  // so a limit change needs ~1 s to show; and windows under a second vary by
  // several percent (bench/README.md, section 6).
  double min_warmup_s = 1.0;   // and at least this long after each change
  double min_measure_s = 2.0;  // and measure at least this long
  bool observer = false;       // never change a limit; profile and report only
  // Noise (see above). A visit measures stretches_per_visit stretches of
  // measure_steps / stretches_per_visit steps (and min_measure_s /
  // stretches_per_visit seconds) each. confirming_rounds = 0: one stage,
  // the choice made on the screening rounds with Bonferroni's correction over
  // all candidates (choose_with_noise). noise_aware = false: one round, and
  // the profile's argmin, however small the difference.
  bool noise_aware = true;
  int screening_rounds = 3;   // >= 2: a visit's spread needs two of each
  int confirming_rounds = 20;
  int stretches_per_visit = 2;
  double confidence = 0.95;  // of a move away from the limit in force
  double tolerance = 0.01;   // differences below this share of the cost are not measured for
  std::string profile_path;    // JSON file of saved profiles; empty: none
  bool reprofile = false;      // ignore a saved profile
  // From the caller (power-limit knob only; at most one of the two; either
  // wins over profile_path, and contradicts reprofile): rows measured before on these GPUs (the
  // objective chooses among them), or the limit to train at. The optimizer
  // starts decided and applies the limit at the first step (observer mode:
  // only reports it).
  std::vector<PowerLimitProfileRow> known_profile;
  std::optional<double> known_limit_w;  // inside the GPUs' shared limit range
  // Called once, when profiling here ends and the choice is applied, with the
  // measured rows (not when starting from a saved or known profile; in
  // observer mode every row was measured at the current limit: see
  // observer()). Runs on the training thread outside the optimizer's lock;
  // what it throws reaches the caller of on_step_end().
  std::function<void(const std::vector<PowerLimitProfileRow>&)> on_profiled;
  bool restore_on_signals = true;
  // Receives the report and notices; default: standard error.
  std::function<void(const std::string&)> log;
};

class PowerLimitOptimizer {
 public:
  enum class State { kProfiling, kDecided };

  // Optimises every GPU of the monitor. Throws UsageError for bad options or
  // an unreadable profile file, DeviceError when a GPU's limits cannot be read.
  PowerLimitOptimizer(Monitor& monitor, PowerLimitOptimizerOptions options);
  ~PowerLimitOptimizer();
  PowerLimitOptimizer(const PowerLimitOptimizer&) = delete;
  PowerLimitOptimizer& operator=(const PowerLimitOptimizer&) = delete;

  void on_epoch_begin();
  void on_step_begin();
  void on_step_end();
  void on_epoch_end();

  // Puts back the original limit of every GPU it changed. Idempotent.
  void restore();
  // Whether any GPU's setting is changed now (what restore() would put back).
  bool changed_settings() const;

  State state() const;
  bool observer() const;
  bool from_saved_profile() const { return from_saved_profile_; }
  // Started decided from known_profile or known_limit_w.
  bool from_caller() const { return from_caller_; }
  OptimizerKnob knob() const { return options_.knob; }
  // The candidates and the choice in the knob's unit (W or MHz).
  std::vector<double> candidates() const { return candidates_; }
  std::optional<double> chosen_setting() const;
  // The power-limit knob's (empty for a clock knob).
  std::vector<double> candidate_limits_w() const;
  std::optional<double> chosen_limit_w() const;
  std::vector<PowerLimitProfileRow> profile() const;
  // The noise-aware comparison behind the choice (after profiling here with
  // noise_aware; after screening while confirming), and the profiling's
  // length: rounds (screening and confirming) and seconds.
  std::optional<NoiseAwareChoice> noise_choice() const;
  // Every stretch measured so far, per candidate (the evidence behind the choice).
  std::vector<CandidateSamples> samples() const;
  int rounds() const;
  double profiling_s() const;
  // The profile table and the decision, as text.
  std::string report() const;

 private:
  enum class Phase { kApply, kWarmup, kMeasure };
  void apply_locked(double setting);
  double setting_of(const PowerLimitProfileRow& row) const;
  void next_visit_locked();
  void start_visit_locked(std::size_t candidate);
  void finish_profiling_locked();
  void record_stretch_locked(int steps, double elapsed_s, double energy_j, double fast_step_s);
  void decide_locked();
  void decide_with_noise_locked(const NoiseAwareChoice& choice);
  void start_from_caller();
  void start_from_saved_profile();
  void save_profile_locked() const;
  bool step_end_locked();
  void log(const std::string& text) const;
  std::string report_locked() const;
  double profiling_s_locked() const;
  std::string window_name() const;

  Monitor& monitor_;
  PowerLimitOptimizerOptions options_;
  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::unique_ptr<KnobControl> knob_;
  double original_limit_w_ = 0.0;
  std::vector<bool> touched_;
  std::vector<double> candidates_;
  double max_limit_w_ = 0.0;  // prices time in the cost objective

  mutable std::mutex mutex_;
  State state_ = State::kProfiling;
  Phase phase_ = Phase::kApply;
  std::size_t candidate_ = 0;
  int steps_ = 0;
  double phase_started_s_ = 0.0;
  bool observer_ = false;
  bool from_saved_profile_ = false;
  bool from_caller_ = false;
  bool applied_choice_ = false;
  std::vector<PowerLimitProfileRow> rows_;
  std::optional<double> chosen_;
  // Rounds of visits (noise-aware profiling).
  std::size_t baseline_ = 0;  // the candidate nearest the limit in force before
  std::vector<std::size_t> round_order_;
  bool confirming_ = false;
  int first_confirming_visit_ = 0;
  std::size_t visit_pos_ = 0;
  int round_ = 0;
  int visit_id_ = 0;
  int stretch_in_visit_ = 0;
  double profiling_started_s_ = -1.0;
  double profiling_ended_s_ = -1.0;
  std::vector<CandidateSamples> samples_;
  double step_begun_s_ = 0.0;
  std::vector<double> stretch_step_s_;  // each step's duration in the stretch being measured
  std::optional<NoiseAwareChoice> noise_choice_;
};

}  // namespace joule
