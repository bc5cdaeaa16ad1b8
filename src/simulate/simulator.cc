// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>

#include "joule/error.h"
#include "simulate/policy_driver.h"

namespace joule {

const char* to_string(Policy policy) {
  switch (policy) {
    case Policy::kZeus: return "zeus";
    case Policy::kGridSearch: return "grid";
    case Policy::kDefault: return "default";
  }
  return "?";
}

Policy parse_policy(const std::string& text) {
  if (text == "zeus") return Policy::kZeus;
  if (text == "grid") return Policy::kGridSearch;
  if (text == "default") return Policy::kDefault;
  throw UsageError(fmt::format("unknown policy '{}' (expected zeus, grid or default)", text));
}

OptimalConfig optimal_config(const WorkloadTrace& trace, double eta) {
  OptimalConfig best{0, 0.0, std::numeric_limits<double>::infinity()};
  for (int b : trace.batch_sizes) {
    const auto& runs = trace.epochs.at(b);
    if (runs.empty() || std::any_of(runs.begin(), runs.end(), [](const auto& e) { return !e.has_value(); })) continue;
    double mean_epochs = 0;
    for (const auto& e : runs) mean_epochs += *e;
    mean_epochs /= static_cast<double>(runs.size());
    const PowerChoice choice = optimal_power_limit(trace.power.at(b), eta, trace.max_power_w);
    const double cost = mean_epochs * choice.epoch_cost;
    if (cost < best.expected_cost) best = {b, choice.power_limit_w, cost};
  }
  if (best.batch_size == 0) {
    throw Error(fmt::format("workload '{}': no batch size reaches the target in every run", trace.spec.name));
  }
  return best;
}

namespace {

double sum_of(const std::vector<Recurrence>& recurrences, double Recurrence::*field) {
  double sum = 0;
  for (const auto& r : recurrences) sum += r.*field;
  return sum;
}

double mean_of_last(const std::vector<Recurrence>& recurrences, std::size_t n, double Recurrence::*field) {
  n = std::min(n, recurrences.size());
  double sum = 0;
  for (std::size_t i = recurrences.size() - n; i < recurrences.size(); ++i) sum += recurrences[i].*field;
  return n ? sum / static_cast<double>(n) : 0.0;
}

}  // namespace

double SimulationResult::cumulative_regret() const { return sum_of(recurrences, &Recurrence::regret); }

double SimulationResult::mean_energy_last_j(std::size_t n) const {
  return mean_of_last(recurrences, n, &Recurrence::energy_j);
}

double SimulationResult::mean_time_last_s(std::size_t n) const { return mean_of_last(recurrences, n, &Recurrence::time_s); }

double SimulationResult::total_energy_j() const { return sum_of(recurrences, &Recurrence::energy_j); }

double SimulationResult::total_time_s() const { return sum_of(recurrences, &Recurrence::time_s); }

int SimulationResult::final_batch_size() const { return recurrences.empty() ? 0 : recurrences.back().batch_size; }

double SimulationResult::final_power_limit_w() const {
  return recurrences.empty() ? 0.0 : recurrences.back().power_limit_w;
}

int SimulationResult::converged_at() const {
  int at = static_cast<int>(recurrences.size());
  for (int i = static_cast<int>(recurrences.size()) - 1; i >= 0; --i) {
    if (recurrences[i].batch_size != final_batch_size() || recurrences[i].power_limit_w != final_power_limit_w()) break;
    at = i;
  }
  return at;
}

namespace simulate_internal {
namespace {

class DefaultDriver final : public PolicyDriver {
 public:
  explicit DefaultDriver(const WorkloadTrace& t) : trace_(t) {}
  std::pair<int, double> choose() override {
    return {trace_.default_batch_size, max_power_limit_w(trace_, trace_.default_batch_size)};
  }
  void observe(const Recurrence&) override {}
  double early_stop_threshold() const override { return std::numeric_limits<double>::infinity(); }

 private:
  const WorkloadTrace& trace_;
};

class ZeusDriver final : public PolicyDriver {
 public:
  ZeusDriver(const WorkloadTrace& t, const SimulationOptions& o)
      : optimizer_({t.batch_sizes, t.default_batch_size, o.beta, o.window, {}, o.seed, false}) {
    // keep_observations off: the simulator never saves the optimizer's state,
    // and a cluster group may recur a million times.
    // Just-in-time profiling finds the best limit of each batch size during
    // its first epoch; the simulator takes the limit the trace says is best.
    for (int b : t.batch_sizes) limit_[b] = optimal_power_limit(t.power.at(b), o.eta, t.max_power_w).power_limit_w;
  }
  std::pair<int, double> choose() override {
    const int b = optimizer_.predict();
    return {b, limit_.at(b)};
  }
  void observe(const Recurrence& r) override { optimizer_.observe(r.batch_size, r.cost, r.converged); }
  double early_stop_threshold() const override { return optimizer_.early_stop_threshold_cost(); }

 private:
  BatchSizeOptimizer optimizer_;
  std::map<int, double> limit_;
};

// The zeus policy with its optimizer elsewhere (SimulationOptions::remote_zeus,
// e.g. a joule serve): asked for every recurrence, told every outcome. A
// limit the remote side does not know is the trace's best, as in process.
class RemoteZeusDriver final : public PolicyDriver {
 public:
  RemoteZeusDriver(const WorkloadTrace& t, const SimulationOptions& o) : remote_(o.remote_zeus(t, o)) {
    for (int b : t.batch_sizes) limit_[b] = optimal_power_limit(t.power.at(b), o.eta, t.max_power_w).power_limit_w;
  }
  std::pair<int, double> choose() override {
    const RemoteZeusOptimizer::Decision d = remote_->ask();
    threshold_ = d.early_stop_threshold_cost;
    return {d.batch_size, d.power_limit_w.value_or(limit_.at(d.batch_size))};
  }
  void observe(const Recurrence& r) override { remote_->report(r); }
  double early_stop_threshold() const override { return threshold_; }

 private:
  std::unique_ptr<RemoteZeusOptimizer> remote_;
  std::map<int, double> limit_;
  double threshold_ = std::numeric_limits<double>::infinity();
};

// Tries every power limit (largest first) of each batch size the pruning walk
// reaches; a size that misses the target at its first limit is not tried at
// the others. Afterwards it stays with the cheapest configuration seen.
// Recurrences that overlap: while an exploration is out, further ones get the
// cheapest configuration seen so far (the default before any), as the zeus
// optimizer does; one job at a time never meets this.
class GridDriver final : public PolicyDriver {
 public:
  GridDriver(const WorkloadTrace& t, const SimulationOptions& o)
      : trace_(t), beta_(o.beta), walk_(t.batch_sizes, t.default_batch_size) {}
  std::pair<int, double> choose() override {
    if (walk_.done()) return best_;
    if (exploring_) return best_.first != 0 ? best_ : default_config();
    const int b = *walk_.next();
    exploring_ = std::pair<int, double>{b, nth_largest_limit_w(b, limit_index_)};
    return *exploring_;
  }
  void observe(const Recurrence& r) override {
    const int b = r.batch_size;
    const double limit_w = r.power_limit_w;
    const bool converged = r.converged;
    if (converged && r.cost < best_cost_) {
      best_cost_ = r.cost;
      best_ = {b, limit_w};
    }
    // Only the exploration's outcome moves the walk. A concurrent job of the
    // same configuration that ends first stands in for it (same knowledge);
    // the exploration's own outcome then only updates the best.
    if (walk_.done() || exploring_ != std::pair<int, double>{b, limit_w}) return;
    exploring_.reset();
    if (!converged && limit_index_ == 0) {
      walk_.report(false);
    } else if (++limit_index_ == trace_.power.at(b).size()) {
      limit_index_ = 0;
      walk_.report(true);
    }
    if (walk_.done() && best_.first == 0) best_ = default_config();
  }
  double early_stop_threshold() const override { return beta_ * best_cost_; }

 private:
  std::pair<int, double> default_config() const {
    return {trace_.default_batch_size, max_power_limit_w(trace_, trace_.default_batch_size)};
  }
  // A batch size's own limits, largest first (real traces may lack some).
  double nth_largest_limit_w(int b, std::size_t n) const {
    const auto& entries = trace_.power.at(b);  // ascending
    return entries[entries.size() - 1 - n].power_limit_w;
  }

  const WorkloadTrace& trace_;
  double beta_;
  PruningRound walk_;
  std::size_t limit_index_ = 0;
  std::optional<std::pair<int, double>> exploring_;  // handed out, not yet observed
  double best_cost_ = std::numeric_limits<double>::infinity();
  std::pair<int, double> best_{0, 0.0};
};

const PowerProfileEntry& profile_at(const WorkloadTrace& t, int b, double limit_w) {
  for (const auto& entry : t.power.at(b)) {
    if (entry.power_limit_w == limit_w) return entry;
  }
  throw Error(fmt::format("no power data for batch size {} at {} W", b, limit_w));
}

}  // namespace

std::unique_ptr<PolicyDriver> make_policy_driver(const WorkloadTrace& trace, Policy policy,
                                                 const SimulationOptions& options) {
  switch (policy) {
    case Policy::kZeus:
      if (options.remote_zeus) return std::make_unique<RemoteZeusDriver>(trace, options);
      return std::make_unique<ZeusDriver>(trace, options);
    case Policy::kGridSearch: return std::make_unique<GridDriver>(trace, options);
    case Policy::kDefault: return std::make_unique<DefaultDriver>(trace);
  }
  throw Error("unknown policy");
}

Recurrence run_recurrence(const WorkloadTrace& trace, int b, double limit_w, std::size_t run, double threshold,
                          double eta) {
  const auto& runs = trace.epochs.at(b);
  const PowerProfileEntry& p = profile_at(trace, b, limit_w);
  Recurrence r;
  r.batch_size = b;
  r.power_limit_w = limit_w;
  r.converged = runs.at(run).has_value();
  r.epochs = r.converged ? *runs[run] : trace.max_epochs;
  r.time_s = r.epochs * p.time_per_epoch_s;
  r.energy_j = r.time_s * p.avg_power_w;
  r.cost = zeus_cost(r.energy_j, r.time_s, eta, trace.max_power_w);
  if (r.cost > threshold) {
    // Stopped when the cost reached the threshold; time and energy accrue
    // at a constant rate within a run, so they scale alike.
    const double fraction = threshold / r.cost;
    r.epochs *= fraction;
    r.time_s *= fraction;
    r.energy_j *= fraction;
    r.cost = threshold;
    r.converged = false;
    r.stopped_early = true;
  }
  return r;
}

}  // namespace simulate_internal

WorkloadTrace drifted_trace(const WorkloadTrace& trace, const std::map<int, double>& epoch_scale) {
  WorkloadTrace drifted = trace;
  for (const auto& [b, factor] : epoch_scale) {
    const auto runs = drifted.epochs.find(b);
    if (runs == drifted.epochs.end()) {
      throw UsageError(fmt::format("drift: workload '{}' has no batch size {}", trace.spec.name, b));
    }
    if (!(factor > 0)) throw UsageError(fmt::format("drift: factor {} for batch size {} must be > 0", factor, b));
    for (auto& epochs : runs->second) {
      if (!epochs) continue;
      epochs = std::max(1, static_cast<int>(std::lround(*epochs * factor)));
      drifted.max_epochs = std::max(drifted.max_epochs, *epochs);
    }
  }
  return drifted;
}

SimulationResult simulate(const WorkloadTrace& trace, Policy policy, const SimulationOptions& options) {
  using namespace simulate_internal;
  check_eta(options.eta);
  const std::unique_ptr<PolicyDriver> driver = make_policy_driver(trace, policy, options);
  SimulationResult result;
  result.workload = trace.spec.name;
  result.policy = policy;
  result.seed = options.seed;
  result.window = options.window;
  result.optimal = optimal_config(trace, options.eta);
  // After a drift the runs come from the drifted trace and regret is taken
  // against its optimum; what the policy learned before stays.
  std::optional<WorkloadTrace> after;
  if (options.drift) {
    after = drifted_trace(trace, options.drift->epoch_scale);
    result.optimal_after = optimal_config(*after, options.eta);
  }
  const int count = options.recurrences > 0
                        ? options.recurrences
                        : static_cast<int>(2 * trace.batch_sizes.size() * trace.power_limits_w.size());
  // The run each recurrence samples comes from its own stream, so policies
  // compared under one seed face the same luck.
  std::mt19937_64 runs_rng(options.seed * 0x9E3779B97F4A7C15ull + 1);
  result.recurrences.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const bool drifted = after && i >= options.drift->after_recurrences;
    const WorkloadTrace& now = drifted ? *after : trace;
    const auto [b, limit_w] = driver->choose();
    const std::size_t runs = now.epochs.at(b).size();
    const std::size_t run = std::uniform_int_distribution<std::size_t>(0, runs - 1)(runs_rng);
    Recurrence r = run_recurrence(now, b, limit_w, run, driver->early_stop_threshold(), options.eta);
    r.index = i;
    r.regret = r.cost - (drifted ? *result.optimal_after : result.optimal).expected_cost;
    driver->observe(r);
    result.recurrences.push_back(r);
  }
  return result;
}

}  // namespace joule
