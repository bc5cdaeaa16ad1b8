// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/power_limit_optimizer.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "joule/common/input_file.h"
#include "joule/common/root_sum_square.h"
#include "joule/error.h"
#include "optimize/knob_control.h"

namespace joule {

namespace {

// ---- Restoring on SIGINT/SIGTERM -------------------------------------------
// The handler only writes the signal number to a pipe: driver calls are not
// safe inside a signal handler. A thread waiting on the pipe restores every
// live optimizer, puts the previous handler back and raises the signal again,
// so the process ends (or the application's own handler runs) as it would
// have without joule.
class SignalRestorer {
 public:
  static SignalRestorer& instance() {
    static SignalRestorer* restorer = new SignalRestorer();  // never destroyed: handlers may outlive main
    return *restorer;
  }
  void add(PowerLimitOptimizer* optimizer) {
    std::lock_guard lock(mutex_);
    optimizers_.insert(optimizer);
    if (!installed_) install_locked();
  }
  void remove(PowerLimitOptimizer* optimizer) {
    std::lock_guard lock(mutex_);
    optimizers_.erase(optimizer);
  }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM};
  static int pipe_write_fd;

  static void on_signal(int signal_number) {
    const unsigned char byte = static_cast<unsigned char>(signal_number);
    (void)!write(pipe_write_fd, &byte, 1);
  }

  void install_locked() {
    int fds[2];
    if (pipe(fds) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
    pipe_write_fd = fds[1];
    for (int s : kSignals) {
      struct sigaction action {};
      action.sa_handler = on_signal;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      sigaction(s, &action, &previous_[s]);
    }
    std::thread([this, fd = fds[0]] { run(fd); }).detach();
    installed_ = true;
  }

  void run(int fd) {
    unsigned char byte = 0;
    while (true) {
      const ssize_t got = read(fd, &byte, 1);
      if (got < 0 && errno == EINTR) continue;
      if (got != 1) return;
      const int signal_number = byte;
      {
        std::lock_guard lock(mutex_);
        for (auto* optimizer : optimizers_) {
          try {
            optimizer->restore();
          } catch (const std::exception& e) {
            std::cerr << "joule: restoring power limits after signal " << signal_number << " failed: " << e.what()
                      << '\n';
          }
        }
        sigaction(signal_number, &previous_[signal_number], nullptr);
      }
      kill(getpid(), signal_number);
    }
  }

  std::mutex mutex_;
  std::set<PowerLimitOptimizer*> optimizers_;
  bool installed_ = false;
  struct sigaction previous_[NSIG] {};
};
int SignalRestorer::pipe_write_fd = -1;

// ---- Saved profiles --------------------------------------------------------
nlohmann::json profile_key(const PowerLimitOptimizerOptions& o, const std::vector<std::shared_ptr<Gpu>>& gpus) {
  nlohmann::json key = {{"job", o.job_name}, {"batch_size", o.batch_size}, {"gpu_model", gpus.front()->name()},
                        {"gpu_count", gpus.size()}};
  if (o.knob != OptimizerKnob::kPowerLimit) key["knob"] = to_string(o.knob);  // power-limit keys as before
  return key;
}

nlohmann::json read_profile_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {{"version", 1}, {"profiles", nlohmann::json::array()}};
  std::ifstream in;
  try {
    in = open_input_file(path, "profile file");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("version", 0) != 1 || !j.contains("profiles") || !j["profiles"].is_array()) {
      throw UsageError("not a joule power-limit profile file (version 1)");
    }
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("profile file '{}' is not valid JSON ({}); fix or remove it, or use another path",
                                 path, e.what()));
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("profile file '{}': {}; fix or remove it, or use another path", path, e.what()));
  }
}

// Replaces the file atomically (write aside, then rename), so a crash never
// leaves a half-written profile file.
void write_profile_file(const std::string& path, const nlohmann::json& j) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) throw Error(fmt::format("cannot write profile file '{}': {}", temporary, std::strerror(errno)));
    out << j.dump(2) << '\n';
    out.flush();
    if (!out) throw Error(fmt::format("error writing profile file '{}'", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw Error(fmt::format("cannot replace profile file '{}': {}", path, std::strerror(error)));
  }
}

nlohmann::json rows_to_json(const std::vector<PowerLimitProfileRow>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json row = {{"power_limit_w", r.power_limit_w},
                          {"steps", r.steps},
                          {"time_per_step_s", r.time_per_step_s},
                          {"energy_per_step_j", r.energy_per_step_j},
                          {"avg_power_w", r.avg_power_w}};
    if (r.clock_mhz > 0) row["clock_mhz"] = r.clock_mhz;
    list.push_back(row);
  }
  return list;
}

std::vector<PowerLimitProfileRow> rows_from_json(const nlohmann::json& list) {
  std::vector<PowerLimitProfileRow> rows;
  for (const auto& r : list) {
    rows.push_back({r.at("power_limit_w").get<double>(), r.at("steps").get<int>(), r.at("time_per_step_s").get<double>(),
                    r.at("energy_per_step_j").get<double>(), r.at("avg_power_w").get<double>(),
                    r.value("clock_mhz", 0.0)});
  }
  return rows;
}

}  // namespace

const char* to_string(OptimizerKnob knob) {
  switch (knob) {
    case OptimizerKnob::kPowerLimit: return "power_limit";
    case OptimizerKnob::kSmClock: return "sm_clock";
    case OptimizerKnob::kMemoryClock: return "memory_clock";
  }
  return "unknown";
}

OptimizerKnob parse_optimizer_knob(const std::string& text) {
  for (OptimizerKnob knob : {OptimizerKnob::kPowerLimit, OptimizerKnob::kSmClock, OptimizerKnob::kMemoryClock}) {
    if (text == to_string(knob)) return knob;
  }
  throw UsageError(fmt::format("unknown optimizer knob '{}' (known: power_limit, sm_clock, memory_clock)", text));
}

PowerLimitOptimizer::PowerLimitOptimizer(Monitor& monitor, PowerLimitOptimizerOptions options)
    : monitor_(monitor), options_(std::move(options)), gpus_(monitor.gpus()) {
  options_.objective.validate();
  if (gpus_.empty()) throw UsageError("power-limit optimizer: the monitor has no GPU");
  if (!(options_.step_w > 0)) throw UsageError(fmt::format("power-limit step {} W must be positive", options_.step_w));
  if (options_.warmup_steps < 0 || options_.measure_steps < 1) {
    throw UsageError("power-limit optimizer: warm-up steps must be >= 0 and measured steps >= 1");
  }
  if (options_.stretches_per_visit < 1 || options_.confirming_rounds < 0 ||
      (options_.noise_aware && options_.screening_rounds < 2)) {
    throw UsageError(fmt::format(
        "power-limit optimizer: stretches per visit ({}) must be >= 1, confirming rounds ({}) >= 0, and noise-aware "
        "profiling needs at least 2 screening rounds ({})",
        options_.stretches_per_visit, options_.confirming_rounds, options_.screening_rounds));
  }
  if (!(options_.confidence > 0.5 && options_.confidence < 1.0) || !(options_.tolerance >= 0)) {
    throw UsageError(fmt::format("power-limit optimizer: confidence {} must lie in (0.5, 1) and tolerance {} be >= 0",
                                 options_.confidence, options_.tolerance));
  }
  if (options_.knob != OptimizerKnob::kPowerLimit &&
      (!(options_.step_mhz > 0) || !(options_.min_clock_fraction > 0 && options_.min_clock_fraction <= 1))) {
    throw UsageError(fmt::format("clock optimizer: step {} MHz must be positive and the lowest cap's share {} lie in "
                                 "(0, 1]",
                                 options_.step_mhz, options_.min_clock_fraction));
  }
  if (options_.knob != OptimizerKnob::kPowerLimit && (!options_.known_profile.empty() || options_.known_limit_w)) {
    throw UsageError("clock optimizer: a known profile or limit from the caller is for the power-limit knob");
  }
  knob_ = KnobControl::create(options_, gpus_);
  candidates_ = knob_->candidates();
  // Time is priced at the largest limit every GPU accepts (the cost objective).
  uint32_t high_mw = UINT32_MAX;
  for (const auto& gpu : gpus_) high_mw = std::min(high_mw, gpu->power_limit_range_mw().max_mw);
  max_limit_w_ = high_mw / 1000.0;
  original_limit_w_ = gpus_.front()->power_limit_mw() / 1000.0;
  touched_.assign(gpus_.size(), false);
  observer_ = options_.observer;
  // Staying means the setting in force: the candidate nearest it.
  const double original = knob_->original();
  for (std::size_t c = 0; c < candidates_.size(); ++c) {
    if (std::fabs(candidates_[c] - original) < std::fabs(candidates_[baseline_] - original)) baseline_ = c;
    samples_.push_back({candidates_[c], {}});
    round_order_.push_back(c);
  }

  if (!options_.known_profile.empty() || options_.known_limit_w) {
    start_from_caller();
  } else if (!options_.profile_path.empty() && !options_.reprofile) {
    start_from_saved_profile();
  }
  if (options_.restore_on_signals && !observer_) SignalRestorer::instance().add(this);
}

void PowerLimitOptimizer::start_from_saved_profile() {
  const nlohmann::json file = read_profile_file(options_.profile_path);
  const nlohmann::json key = profile_key(options_, gpus_);
  for (const auto& entry : file["profiles"]) {
    if (entry.value("key", nlohmann::json()) != key) continue;
    try {
      rows_ = rows_from_json(entry.at("rows"));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(
          fmt::format("profile file '{}': bad entry for {}: {}", options_.profile_path, key.dump(), e.what()));
    }
    from_saved_profile_ = !rows_.empty();
  }
  if (!from_saved_profile_) return;
  std::lock_guard lock(mutex_);
  decide_locked();
  log(report_locked());
}

// The limits a caller hands in must be ones these GPUs accept: a profile
// measured on other GPUs (or a typo) is refused, not clamped.
void PowerLimitOptimizer::start_from_caller() {
  const auto& rows = options_.known_profile;
  if (!rows.empty() && options_.known_limit_w) {
    throw UsageError("power-limit optimizer: pass a known profile or a known limit, not both");
  }
  if (options_.reprofile) {
    throw UsageError("power-limit optimizer: reprofile contradicts a known profile or limit from the caller");
  }
  const double low_w = candidates_.back(), high_w = max_limit_w_;
  auto check_limit = [&](double limit_w, const char* what) {
    if (!std::isfinite(limit_w) || limit_w < low_w - 1e-9 || limit_w > high_w + 1e-9) {
      throw UsageError(fmt::format("power-limit optimizer: {} {} W is outside the GPUs' limit range {:g}-{:g} W",
                                   what, limit_w, low_w, high_w));
    }
  };
  for (const auto& r : rows) {
    check_limit(r.power_limit_w, "the known profile's limit");
    if (!(r.time_per_step_s > 0) || !std::isfinite(r.time_per_step_s) || !(r.energy_per_step_j >= 0) ||
        !std::isfinite(r.energy_per_step_j)) {
      throw UsageError(fmt::format("power-limit optimizer: the known profile's row for {} W needs a positive time "
                                   "and a non-negative energy per step",
                                   r.power_limit_w));
    }
  }
  if (options_.known_limit_w) check_limit(*options_.known_limit_w, "the known limit");
  std::lock_guard lock(mutex_);
  from_caller_ = true;
  if (rows.empty()) {
    chosen_ = *options_.known_limit_w;
    state_ = State::kDecided;
  } else {
    rows_ = rows;
    decide_locked();
  }
  log(report_locked());
}

PowerLimitOptimizer::~PowerLimitOptimizer() {
  SignalRestorer::instance().remove(this);
  try {
    restore();
  } catch (const std::exception& e) {
    log(fmt::format("joule: restoring the GPUs' {} failed: {}", to_string(options_.knob), e.what()));
  }
}

void PowerLimitOptimizer::log(const std::string& text) const {
  if (options_.log) {
    options_.log(text);
  } else {
    std::cerr << text << (text.empty() || text.back() != '\n' ? "\n" : "");
  }
}

std::string PowerLimitOptimizer::window_name() const {
  return fmt::format("__joule_power_limit_{}", candidates_[candidate_]);
}

void PowerLimitOptimizer::apply_locked(double setting) {
  if (observer_) return;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    try {
      knob_->apply(i, setting);  // skips a driver call that changes nothing
      touched_[i] = true;
    } catch (const DeviceError& e) {
      if (e.code() != DeviceErrc::kNoPermission) throw;
      // Keep training: put back what was changed and only observe.
      for (std::size_t j = 0; j < i; ++j) {
        if (touched_[j]) knob_->restore(j);
        touched_[j] = false;
      }
      observer_ = true;
      log(fmt::format("joule: cannot change the GPUs' {} ({}); changing it needs root or the joule daemon "
                      "(jouled). Continuing in observer mode at the current setting.",
                      options_.knob == OptimizerKnob::kPowerLimit ? "power limits" : "clocks", e.what()));
      return;
    }
  }
}

bool PowerLimitOptimizer::changed_settings() const {
  std::lock_guard lock(mutex_);
  return std::any_of(touched_.begin(), touched_.end(), [](bool touched) { return touched; });
}

void PowerLimitOptimizer::restore() {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    if (!touched_[i]) continue;
    knob_->restore(i);
    touched_[i] = false;
  }
}

double PowerLimitOptimizer::setting_of(const PowerLimitProfileRow& row) const {
  return options_.knob == OptimizerKnob::kPowerLimit ? row.power_limit_w : row.clock_mhz;
}

void PowerLimitOptimizer::on_epoch_begin() {}

void PowerLimitOptimizer::on_step_begin() {
  std::lock_guard lock(mutex_);
  if (state_ == State::kDecided) {
    if (!applied_choice_) {
      apply_locked(*chosen_);
      applied_choice_ = true;
    }
    return;
  }
  if (phase_ == Phase::kApply) {
    profiling_started_s_ = monitor_.sampler().clock().now_s();
    start_visit_locked(round_order_.front());
  }
  step_begun_s_ = monitor_.sampler().clock().now_s();
}

void PowerLimitOptimizer::start_visit_locked(std::size_t candidate) {
  candidate_ = candidate;
  apply_locked(candidates_[candidate_]);
  phase_ = Phase::kWarmup;
  steps_ = 0;
  stretch_in_visit_ = 0;
  phase_started_s_ = monitor_.sampler().clock().now_s();
}

void PowerLimitOptimizer::on_step_end() {
  std::vector<PowerLimitProfileRow> measured;
  {
    std::lock_guard lock(mutex_);
    if (!step_end_locked()) return;
    measured = rows_;
  }
  // Outside the lock: the callback may ask this optimizer anything.
  if (options_.on_profiled) options_.on_profiled(measured);
}

// true when this step ended profiling.
bool PowerLimitOptimizer::step_end_locked() {
  if (state_ != State::kProfiling || phase_ == Phase::kApply) return false;
  ++steps_;
  const double now_s = monitor_.sampler().clock().now_s();
  if (phase_ == Phase::kWarmup) {
    if (steps_ >= options_.warmup_steps && now_s - phase_started_s_ >= options_.min_warmup_s) {
      monitor_.begin_window(window_name());
      phase_ = Phase::kMeasure;
      steps_ = 0;
      stretch_step_s_.clear();
      phase_started_s_ = now_s;
    }
    return false;
  }
  stretch_step_s_.push_back(now_s - step_begun_s_);
  const int stretches = options_.stretches_per_visit;
  const int stretch_steps = (options_.measure_steps + stretches - 1) / stretches;
  if (steps_ < stretch_steps || now_s - phase_started_s_ < options_.min_measure_s / stretches) return false;
  const Measurement m = monitor_.end_window(window_name());
  // The fast steps: the 10th percentile of the stretch's steps (known from 5 steps on).
  double fast_step_s = 0.0;
  if (stretch_step_s_.size() >= 5) {
    const auto nth = stretch_step_s_.begin() + static_cast<std::ptrdiff_t>(stretch_step_s_.size() / 10);
    std::nth_element(stretch_step_s_.begin(), nth, stretch_step_s_.end());
    fast_step_s = *nth;
  }
  stretch_step_s_.clear();
  record_stretch_locked(steps_, m.elapsed_s, m.gpu_total_energy_j(), fast_step_s);
  if (++stretch_in_visit_ < stretches) {
    monitor_.begin_window(window_name());
    steps_ = 0;
    phase_started_s_ = now_s;
    return false;
  }
  next_visit_locked();
  return state_ == State::kDecided;
}

// One stretch into the candidate's samples and its profile row (all of its
// stretches together; rows in the candidates' order).
void PowerLimitOptimizer::record_stretch_locked(int steps, double elapsed_s, double energy_j, double fast_step_s) {
  samples_[candidate_].stretches.push_back({elapsed_s / steps, energy_j / steps, visit_id_, fast_step_s});
  const double setting = candidates_[candidate_];
  auto row = std::find_if(rows_.begin(), rows_.end(), [&](const auto& r) { return setting_of(r) == setting; });
  if (row == rows_.end()) {
    const bool power = options_.knob == OptimizerKnob::kPowerLimit;
    row = rows_.insert(std::find_if(rows_.begin(), rows_.end(), [&](const auto& r) { return setting_of(r) < setting; }),
                       PowerLimitProfileRow{power ? setting : original_limit_w_, 0, 0.0, 0.0, 0.0, power ? 0.0 : setting});
  }
  const double total_s = row->time_per_step_s * row->steps + elapsed_s;
  const double total_j = row->energy_per_step_j * row->steps + energy_j;
  row->steps += steps;
  row->time_per_step_s = total_s / row->steps;
  row->energy_per_step_j = total_j / row->steps;
  row->avg_power_w = total_s > 0 ? total_j / total_s : 0.0;
}

void PowerLimitOptimizer::on_epoch_end() {
  std::lock_guard lock(mutex_);
  if (state_ != State::kProfiling) return;
  // The epoch's end (evaluation, checkpoints) is not training: drop a
  // stretch in progress and warm this limit up again next epoch.
  if (phase_ == Phase::kMeasure) monitor_.end_window(window_name());
  if (phase_ != Phase::kApply) phase_ = Phase::kWarmup;
  steps_ = 0;
  stretch_step_s_.clear();
  phase_started_s_ = monitor_.sampler().clock().now_s();
}

// After a visit: the next in this round, else the next round (every
// candidate while screening, then the confirming set), else the choice.
void PowerLimitOptimizer::next_visit_locked() {
  ++visit_id_;
  if (++visit_pos_ < round_order_.size()) {
    start_visit_locked(round_order_[visit_pos_]);
    return;
  }
  ++round_;
  if (!options_.noise_aware) {
    decide_locked();
    finish_profiling_locked();
    return;
  }
  const double price_w = max_limit_w_ * static_cast<double>(gpus_.size());
  const NoiseAwareOptions noise{options_.confidence, options_.tolerance};
  if (!confirming_ && round_ < options_.screening_rounds) {
    visit_pos_ = 0;
    start_visit_locked(round_order_.front());
    return;
  }
  if (!confirming_ && options_.confirming_rounds == 0) {
    decide_with_noise_locked(choose_with_noise(samples_, baseline_, options_.objective, price_w, noise));
    return;
  }
  if (!confirming_) {
    noise_choice_ = screen_with_noise(samples_, baseline_, options_.objective, price_w, noise);
    if (noise_choice_->decided) {
      decide_with_noise_locked(*noise_choice_);
      return;
    }
    confirming_ = true;
    first_confirming_visit_ = visit_id_;
    round_order_ = noise_choice_->confirm;  // ascending index: the largest setting first
  } else if (round_ >= options_.screening_rounds + options_.confirming_rounds) {
    std::vector<CandidateSamples> confirming = samples_;
    for (auto& candidate : confirming) {
      std::erase_if(candidate.stretches, [&](const StretchSample& s) { return s.visit < first_confirming_visit_; });
    }
    decide_with_noise_locked(
        confirm_with_noise(confirming, baseline_, *noise_choice_, options_.objective, price_w, noise));
    return;
  }
  visit_pos_ = 0;
  start_visit_locked(round_order_.front());
}

void PowerLimitOptimizer::decide_with_noise_locked(const NoiseAwareChoice& choice) {
  noise_choice_ = choice;
  chosen_ = candidates_[choice.chosen];
  state_ = State::kDecided;
  finish_profiling_locked();
}

void PowerLimitOptimizer::finish_profiling_locked() {
  profiling_ended_s_ = monitor_.sampler().clock().now_s();
  apply_locked(*chosen_);
  applied_choice_ = true;
  log(report_locked());
  save_profile_locked();
}

void PowerLimitOptimizer::save_profile_locked() const {
  if (options_.profile_path.empty()) return;
  nlohmann::json file = read_profile_file(options_.profile_path);
  const nlohmann::json key = profile_key(options_, gpus_);
  auto& list = file["profiles"];
  list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& e) { return e.value("key", nlohmann::json()) == key; }),
             list.end());
  list.push_back({{"key", key}, {"rows", rows_to_json(rows_)}, {"observer", observer_}});
  write_profile_file(options_.profile_path, file);
}

// Chooses from rows_; the caller applies the choice (now, or at the next step).
void PowerLimitOptimizer::decide_locked() {
  std::vector<LimitMeasurement> units;
  for (const auto& r : rows_) units.push_back({setting_of(r), r.time_per_step_s, r.energy_per_step_j});
  const double price_w = max_limit_w_ * static_cast<double>(gpus_.size());
  chosen_ = setting_of(rows_[choose_power_limit(units, options_.objective, price_w)]);
  state_ = State::kDecided;
}

PowerLimitOptimizer::State PowerLimitOptimizer::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

bool PowerLimitOptimizer::observer() const {
  std::lock_guard lock(mutex_);
  return observer_;
}

std::optional<double> PowerLimitOptimizer::chosen_setting() const {
  std::lock_guard lock(mutex_);
  return chosen_;
}

std::optional<double> PowerLimitOptimizer::chosen_limit_w() const {
  if (options_.knob != OptimizerKnob::kPowerLimit) return std::nullopt;
  return chosen_setting();
}

std::vector<double> PowerLimitOptimizer::candidate_limits_w() const {
  return options_.knob == OptimizerKnob::kPowerLimit ? candidates_ : std::vector<double>{};
}

std::vector<PowerLimitProfileRow> PowerLimitOptimizer::profile() const {
  std::lock_guard lock(mutex_);
  return rows_;
}

std::optional<NoiseAwareChoice> PowerLimitOptimizer::noise_choice() const {
  std::lock_guard lock(mutex_);
  return noise_choice_;
}

std::vector<CandidateSamples> PowerLimitOptimizer::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

int PowerLimitOptimizer::rounds() const {
  std::lock_guard lock(mutex_);
  return round_;
}

double PowerLimitOptimizer::profiling_s() const {
  std::lock_guard lock(mutex_);
  return profiling_s_locked();
}

double PowerLimitOptimizer::profiling_s_locked() const {
  if (profiling_started_s_ < 0) return 0.0;
  const double end_s = profiling_ended_s_ >= 0 ? profiling_ended_s_ : monitor_.sampler().clock().now_s();
  return end_s - profiling_started_s_;
}

std::string PowerLimitOptimizer::report() const {
  std::lock_guard lock(mutex_);
  return report_locked();
}

std::string PowerLimitOptimizer::report_locked() const {
  const char* source = from_saved_profile_                  ? " (saved profile)"
                       : from_caller_ && rows_.empty()     ? " (limit from the caller)"
                       : from_caller_                      ? " (profile from the caller)"
                                                           : "";
  const char* title = options_.knob == OptimizerKnob::kPowerLimit ? "power-limit"
                      : options_.knob == OptimizerKnob::kSmClock  ? "SM clock"
                                                                  : "memory clock";
  // Batch size 0 is "not given" (the profile key's default): left out, not shown as 0.
  const std::string batch =
      options_.batch_size > 0 ? fmt::format(", batch size {}", options_.batch_size) : std::string();
  std::string out = fmt::format("joule {} profile: job '{}'{}, {} x {}, objective {}{}\n", title, options_.job_name,
                                batch, gpus_.size(), gpus_.front()->name(), options_.objective.describe(), source);
  if (observer_) {
    out += fmt::format("  OBSERVER MODE: nothing was changed; {} at the current setting ({})\n",
                       from_saved_profile_ || from_caller_ ? "training stays" : "every row was measured",
                       knob_->describe(knob_->original()));
  }
  if (rows_.empty()) {
    if (chosen_) {
      out += fmt::format("  {} {}, not profiled here\n", observer_ ? "would use" : "uses", knob_->describe(*chosen_));
    }
    return out;
  }
  // With the noise-aware comparison: each limit's cost per step relative to
  // the baseline's, and its confidence interval.
  const auto estimate_of = [&](double setting) -> const CandidateEstimate* {
    if (!noise_choice_) return nullptr;
    for (const auto& e : noise_choice_->estimates) {
      if (e.setting == setting && e.visits > 0) return &e;
    }
    return nullptr;
  };
  const std::string ci_header =
      noise_choice_ ? fmt::format("  {:>7}  {:>16}", "visits", fmt::format("cost vs {}", knob_->with_unit(candidates_[baseline_])))
                    : "";
  out += fmt::format("  {:>11}  {:>7}  {:>13}  {:>15}  {:>12}{}\n", knob_->column_header(), "steps", "time/step ms",
                     "energy/step J", "avg power W", ci_header);
  const CandidateEstimate* base = noise_choice_ ? &noise_choice_->estimates[baseline_] : nullptr;
  for (const auto& r : rows_) {
    std::string ci;
    if (const CandidateEstimate* e = estimate_of(setting_of(r)); e && base && base->cost > 0) {
      const auto& confirmed = noise_choice_->confirmed;
      const auto again = std::find_if(confirmed.begin(), confirmed.end(), [&](const auto& c) { return c.setting == e->setting; });
      const std::string visits = again == confirmed.end() ? fmt::format("{}", e->visits)
                                                          : fmt::format("{}+{}", e->visits, again->visits);
      ci = fmt::format("  {:>7}  {:>+7.1f}% +-{:>4.1f}%", visits, 100.0 * (e->cost / base->cost - 1.0),
                       100.0 * noise_choice_->estimates_t_critical * root_sum_square(e->cost_se, base->cost_se) / base->cost);
    }
    out += fmt::format("  {:>11.0f}  {:>7}  {:>13.3f}  {:>15.3f}  {:>12.1f}{}{}\n", setting_of(r), r.steps,
                       r.time_per_step_s * 1e3, r.energy_per_step_j, r.avg_power_w, ci,
                       chosen_ && setting_of(r) == *chosen_ ? "  <- chosen" : "");
  }
  if (noise_choice_) {
    const int screening = std::min(round_, options_.screening_rounds);
    out += fmt::format("  {} screening round{} of {} candidates (intervals simultaneous at {:g}%)", screening,
                       screening == 1 ? "" : "s", candidates_.size(),
                       100.0 * (1.0 - (1.0 - options_.confidence) * (options_.confirming_rounds > 0 ? NoiseAwareOptions{}.screening_share : 1.0)));
    if (round_ > screening) {
      out += fmt::format(", then {} confirming round{} of", round_ - screening, round_ - screening == 1 ? "" : "s");
      const auto& confirm = noise_choice_->confirm;
      for (std::size_t i = 0; i < confirm.size(); ++i) {
        out += fmt::format("{}{}", i == 0 ? " " : i + 1 == confirm.size() ? " and " : ", ",
                           knob_->with_unit(candidates_[confirm[i]]));
      }
    }
    out += fmt::format("; {:.1f} s of profiling; a visit's cost spreads {:.1f}%\n  {}\n", profiling_s_locked(),
                       100.0 * noise_choice_->relative_sd, noise_choice_->summary);
  }
  if (chosen_) {
    const auto& top = rows_.front();
    const auto& pick = *std::find_if(rows_.begin(), rows_.end(), [&](const auto& r) { return setting_of(r) == *chosen_; });
    out += fmt::format("  {} {}: time per step {:+.1f}%, energy per step {:+.1f}% against {}\n",
                       observer_ ? "would choose" : "chose", knob_->describe(*chosen_),
                       100.0 * (pick.time_per_step_s / top.time_per_step_s - 1.0),
                       100.0 * (pick.energy_per_step_j / top.energy_per_step_j - 1.0), knob_->describe(setting_of(top)));
  }
  return out;
}

}  // namespace joule
