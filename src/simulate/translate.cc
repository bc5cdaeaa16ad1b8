// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/translate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "joule/error.h"
#include "simulate/policy_driver.h"

namespace joule {

namespace {

bool contains(const std::vector<int>& sorted, int b) { return std::binary_search(sorted.begin(), sorted.end(), b); }

// The cost of one epoch of batch size b at the GPU's best limit for eta.
double epoch_cost(const WorkloadTrace& trace, int b, double eta) {
  return optimal_power_limit(trace.power.at(b), eta, trace.max_power_w).epoch_cost;
}

// The size with the least mean observed cost among those that converged at
// least once (the source's default when none did).
int best_observed(const std::vector<PriorObservation>& history, const WorkloadTrace& source) {
  std::map<int, std::pair<double, int>> sums;
  std::set<int> converged;
  for (const auto& x : history) {
    sums[x.batch_size].first += x.cost;
    ++sums[x.batch_size].second;
    if (x.converged) converged.insert(x.batch_size);
  }
  int best = source.default_batch_size;
  double best_mean = std::numeric_limits<double>::infinity();
  for (int b : converged) {
    const double mean = sums[b].first / sums[b].second;
    if (mean < best_mean) {
      best_mean = mean;
      best = b;
    }
  }
  return best;
}

// The ratio at b from the profiled ratios: linear in log batch size between
// the profiled sizes around b, the nearest one's beyond them.
double estimate_ratio(const std::map<int, double>& profiled, int b) {
  const auto above = profiled.lower_bound(b);
  if (above != profiled.end() && above->first == b) return above->second;
  if (above == profiled.begin()) return above->second;
  const auto below = std::prev(above);
  if (above == profiled.end()) return below->second;
  const double t = std::log(static_cast<double>(b) / below->first) / std::log(static_cast<double>(above->first) / below->first);
  return std::exp((1 - t) * std::log(below->second) + t * std::log(above->second));
}

// The sizes both GPUs run whose target epoch cost is taken as known.
std::vector<int> profiled_sizes(const std::vector<int>& both, int best, std::optional<int> points) {
  if (!points || *points >= static_cast<int>(both.size())) return both;
  std::vector<int> nearest = both;
  const auto distance = [&](int b) { return std::fabs(std::log2(static_cast<double>(b) / best)); };
  std::stable_sort(nearest.begin(), nearest.end(), [&](int a, int b) { return distance(a) < distance(b); });
  nearest.resize(static_cast<std::size_t>(*points));
  std::sort(nearest.begin(), nearest.end());
  return nearest;
}

}  // namespace

Translation translate_observations(const std::vector<PriorObservation>& history, const std::vector<int>& in_play,
                                   const WorkloadTrace& source, const WorkloadTrace& target,
                                   const TranslationOptions& options) {
  const auto& s = source.spec;
  const auto& t = target.spec;
  if (s.dataset != t.dataset || s.network != t.network || s.optimizer != t.optimizer) {
    throw UsageError(fmt::format("cannot translate between workloads '{}' and '{}'", s.name, t.name));
  }
  if (options.profiled_points && *options.profiled_points < 1) {
    throw UsageError(fmt::format("profiled points: {} (at least 1)", *options.profiled_points));
  }
  std::vector<int> both;
  std::set_intersection(source.batch_sizes.begin(), source.batch_sizes.end(), target.batch_sizes.begin(),
                        target.batch_sizes.end(), std::back_inserter(both));

  Translation out;
  out.profiled = profiled_sizes(both, best_observed(history, source), options.profiled_points);
  if (!options.profiled_sizes.empty()) {
    out.profiled = options.profiled_sizes;
    std::sort(out.profiled.begin(), out.profiled.end());
    out.profiled.erase(std::unique(out.profiled.begin(), out.profiled.end()), out.profiled.end());
    for (int b : out.profiled) {
      if (!contains(both, b)) {
        throw UsageError(fmt::format("profiled batch size {} of '{}' is not run on both GPUs (both run: {})", b, t.name,
                                     fmt::join(both, ",")));
      }
    }
  }
  std::map<int, double> known;
  for (int b : out.profiled) known[b] = epoch_cost(target, b, options.eta) / epoch_cost(source, b, options.eta);
  for (int b : both) out.ratio[b] = known.empty() ? 1.0 : estimate_ratio(known, b);

  // What the source ruled out stays ruled out: sizes it pruned (no longer in
  // play) are left out, and sizes that never converged there carry their
  // failures over.
  std::set<int> observed, converged, dropped, pruned;
  for (const auto& x : history) {
    observed.insert(x.batch_size);
    if (!contains(target.batch_sizes, x.batch_size)) {
      dropped.insert(x.batch_size);
      ++out.dropped_observations;
    } else if (!contains(in_play, x.batch_size)) {
      pruned.insert(x.batch_size);
    } else {
      out.start.observations.push_back({x.batch_size, x.cost * out.ratio.at(x.batch_size), x.converged});
      if (x.converged) converged.insert(x.batch_size);
    }
  }
  out.dropped.assign(dropped.begin(), dropped.end());
  out.pruned.assign(pruned.begin(), pruned.end());

  const auto ruled_out = [&](int b) {
    if (!contains(source.batch_sizes, b)) return false;
    return !contains(in_play, b) || (observed.count(b) && !converged.count(b));
  };
  // A size the source never ran (too big for it, or not reached before
  // learning stopped) is worth a try unless a size the source ruled out lies
  // between it and the sizes that converged there.
  const auto reachable = [&](int b) {
    if (converged.empty()) return true;
    const int lo = *converged.begin(), hi = *converged.rbegin();
    for (int x : target.batch_sizes) {
      if (((x > hi && x < b) || (x < lo && x > b)) && ruled_out(x)) return false;
    }
    return true;
  };
  for (int b : target.batch_sizes) {
    const bool never_run_on_source = !contains(source.batch_sizes, b) || (!observed.count(b) && !ruled_out(b));
    if (never_run_on_source && reachable(b)) out.start.unexplored.push_back(b);
  }
  return out;
}

namespace {

// The zeus policy's recurrences on one trace, with the optimizer given:
// the same loop, run sampling and costing as simulate(trace, Policy::kZeus).
SimulationResult replay_zeus(const WorkloadTrace& trace, BatchSizeOptimizer& optimizer, const SimulationOptions& o,
                             int count) {
  SimulationResult result;
  result.workload = trace.spec.name;
  result.policy = Policy::kZeus;
  result.seed = o.seed;
  result.optimal = optimal_config(trace, o.eta);
  std::map<int, double> limit_w;
  for (int b : trace.batch_sizes) limit_w[b] = optimal_power_limit(trace.power.at(b), o.eta, trace.max_power_w).power_limit_w;
  std::mt19937_64 runs_rng(o.seed * 0x9E3779B97F4A7C15ull + 1);  // as simulate(): same seed, same luck
  for (int i = 0; i < count; ++i) {
    const int b = optimizer.predict();
    const std::size_t run = std::uniform_int_distribution<std::size_t>(0, trace.epochs.at(b).size() - 1)(runs_rng);
    Recurrence r = simulate_internal::run_recurrence(trace, b, limit_w.at(b), run,
                                                     optimizer.early_stop_threshold_cost(), o.eta);
    r.index = i;
    r.regret = r.cost - result.optimal.expected_cost;
    optimizer.observe(b, r.cost, r.converged);
    result.recurrences.push_back(r);
  }
  return result;
}

BatchSizeOptimizer fresh_optimizer(const WorkloadTrace& trace, const SimulationOptions& o) {
  return BatchSizeOptimizer({trace.batch_sizes, trace.default_batch_size, o.beta, o.window, {}, o.seed});
}

}  // namespace

TransferResult simulate_transfer(const WorkloadTrace& source, const WorkloadTrace& target,
                                 const TransferOptions& options) {
  const SimulationOptions& o = options.simulation;
  check_eta(o.eta);
  if (options.learn_recurrences < 0 || options.deploy_recurrences < 1) {
    throw UsageError(fmt::format("recurrences: {} to learn (>= 0), {} to deploy (>= 1)", options.learn_recurrences,
                                 options.deploy_recurrences));
  }
  TransferResult result;
  BatchSizeOptimizer learner = fresh_optimizer(source, o);
  result.learned = replay_zeus(source, learner, o, options.learn_recurrences);
  std::vector<PriorObservation> history;
  for (const auto& r : result.learned.recurrences) history.push_back({r.batch_size, r.cost, r.converged});
  result.translation =
      translate_observations(history, learner.candidates(), source, target,
                             {o.eta, options.profiled_points, options.profiled_sizes});
  result.translation.start.max_prior_observations = options.max_prior_observations;

  BatchSizeOptimizer seeded = fresh_optimizer(target, o);
  result.warm_started = seeded.warm_start(result.translation.start);
  result.translated = replay_zeus(target, seeded, o, options.deploy_recurrences);
  BatchSizeOptimizer fresh = fresh_optimizer(target, o);
  result.scratch = replay_zeus(target, fresh, o, options.deploy_recurrences);
  return result;
}

}  // namespace joule
