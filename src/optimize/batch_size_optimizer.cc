// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/batch_size_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "joule/error.h"

namespace joule {

BatchSizeOptimizer::BatchSizeOptimizer(BatchSizeOptimizerOptions options)
    : options_(std::move(options)),
      sampler_(options_.window, options_.prior, options_.keep_observations),
      rng_(options_.seed) {
  auto& sizes = options_.batch_sizes;
  if (sizes.empty()) throw UsageError("batch-size optimizer: no batch sizes");
  if (!std::is_sorted(sizes.begin(), sizes.end()) || std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end()) {
    throw UsageError("batch-size optimizer: batch sizes must be strictly increasing");
  }
  if (!std::binary_search(sizes.begin(), sizes.end(), options_.default_batch_size)) {
    throw UsageError(fmt::format("batch-size optimizer: the default batch size {} is not among the choices",
                                 options_.default_batch_size));
  }
  if (!(options_.beta > 1.0)) throw UsageError(fmt::format("early-stopping beta {} must be > 1", options_.beta));
  for (int b : sizes) sampler_.add_arm(b);
  b0_ = options_.default_batch_size;
  start_round(sizes);
}

void BatchSizeOptimizer::start_round(std::vector<int> set) {
  ++round_;
  walk_ = PruningRound(std::move(set), b0_);
  survivors_.clear();
  round_costs_.clear();
}

void BatchSizeOptimizer::finish_round() {
  if (!round_costs_.empty()) {
    b0_ = std::min_element(round_costs_.begin(), round_costs_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; })
              ->first;
  }
  std::vector<int> survivors = survivors_;
  std::sort(survivors.begin(), survivors.end());
  if (survivors.empty()) survivors = {b0_};  // nothing converged: keep trying the default
  if (round_ < 2) {
    start_round(survivors);
  } else {
    phase_ = Phase::kThompson;
    arms_ = survivors;
  }
}

bool BatchSizeOptimizer::warm_start(const WarmStart& start) {
  const auto& sizes = options_.batch_sizes;
  const auto check_size = [&](int b, const char* what) {
    if (!std::binary_search(sizes.begin(), sizes.end(), b)) {
      throw UsageError(fmt::format("warm start: {} batch size {} is not one of the optimizer's choices", what, b));
    }
  };
  bool started = phase_ != Phase::kPruning || round_ != 1 || pending_ || has_min_cost_;
  for (int b : sizes) started = started || sampler_.count(b) > 0;
  if (started) throw UsageError("warm start: the optimizer has already started");
  if (!(start.max_prior_observations > 0) || !(start.min_relative_spread > 0)) {
    throw UsageError("warm start: max_prior_observations and min_relative_spread must be > 0");
  }
  std::map<int, std::vector<double>> costs;
  std::set<int> converged;
  for (const auto& x : start.observations) {
    check_size(x.batch_size, "prior");
    if (!(x.cost > 0) || !std::isfinite(x.cost)) {
      throw UsageError(fmt::format("warm start: batch size {} has a prior cost {} (must be positive)", x.batch_size,
                                   x.cost));
    }
    costs[x.batch_size].push_back(x.cost);
    if (x.converged) converged.insert(x.batch_size);
  }
  for (int b : start.unexplored) check_size(b, "unexplored");
  if (converged.empty()) return false;

  std::set<int> arms(start.unexplored.begin(), start.unexplored.end());
  double best_mean = std::numeric_limits<double>::infinity();
  for (int b : converged) {
    const auto& x = costs[b];
    const double n = static_cast<double>(x.size());
    double mean = 0;
    for (double v : x) mean += v;
    mean /= n;
    double spread = 0;
    for (double v : x) spread += (v - mean) * (v - mean);
    spread = x.size() > 1 ? spread / n : mean * mean;  // one observation: as wide as the sampler assumes
    spread = std::max(spread, start.min_relative_spread * start.min_relative_spread * mean * mean);
    sampler_.set_arm_prior(b, {mean, std::min(n, start.max_prior_observations) / spread});
    arms.insert(b);
    if (mean < best_mean) {
      best_mean = mean;
      b0_ = b;
    }
  }
  arms_.assign(arms.begin(), arms.end());
  phase_ = Phase::kThompson;
  round_ = 2;
  walk_ = PruningRound(sizes, b0_);
  return true;
}

int BatchSizeOptimizer::best_known() const {
  int best = b0_;
  double best_mean = std::numeric_limits<double>::infinity();
  for (int b : candidates()) {
    const std::optional<double> mean = sampler_.mean(b);
    if (mean && *mean < best_mean) {
      best_mean = *mean;
      best = b;
    }
  }
  return best;
}

std::optional<int> BatchSizeOptimizer::nearest_untried() const {
  std::optional<int> nearest;
  double nearest_distance = std::numeric_limits<double>::infinity();
  for (int b : arms_) {
    if (sampler_.count(b) > 0 || sampler_.arm_priors().count(b) || options_.prior.precision > 0) continue;
    const double distance = std::fabs(std::log(static_cast<double>(b) / b0_));
    if (distance < nearest_distance) {
      nearest_distance = distance;
      nearest = b;
    }
  }
  return nearest;
}

int BatchSizeOptimizer::predict() {
  if (phase_ == Phase::kThompson) {
    // Only a warm start leaves arms without evidence: they are tried first,
    // nearest the best prior size first, so that the first run most likely
    // converges and sets the early-stop threshold for the farther ones.
    if (const auto untried = nearest_untried()) return *untried;
    return sampler_.predict(arms_, rng_);
  }
  if (pending_) return best_known();
  const auto next = walk_.next();
  if (!next) return best_known();
  pending_ = *next;
  return *next;
}

void BatchSizeOptimizer::observe(int batch_size, double cost, bool converged) {
  if (!std::binary_search(options_.batch_sizes.begin(), options_.batch_sizes.end(), batch_size)) {
    throw UsageError(fmt::format("batch size {} is not one of the optimizer's choices", batch_size));
  }
  // Refused before anything changes: an infinite cost would become the
  // threshold or a running sum, and a saved state cannot hold it.
  if (!std::isfinite(cost)) {
    throw UsageError(fmt::format("batch size {}: the cost {} is not a finite number", batch_size, cost));
  }
  if (converged && (!has_min_cost_ || cost < min_cost_)) {
    min_cost_ = cost;
    has_min_cost_ = true;
  }
  // Converged runs are evidence for the arm; a failed run in the Thompson
  // phase is too (its cost, at least beta times the best, pushes the arm away).
  if (converged || phase_ == Phase::kThompson) sampler_.observe(batch_size, cost);
  if (phase_ == Phase::kPruning && pending_ && *pending_ == batch_size) {
    pending_.reset();
    if (converged) {
      survivors_.push_back(batch_size);
      round_costs_.emplace_back(batch_size, cost);
    }
    walk_.report(converged);
    if (walk_.done()) finish_round();
  }
}

void BatchSizeOptimizer::replay(int batch_size, double cost, bool converged) {
  // In pruning, the size the walk waits for is what an ask would have handed
  // out as the exploration (predict() uses no randomness there); any other
  // size was a concurrent ask's best known size.
  if (phase_ == Phase::kPruning && !pending_) {
    const std::optional<int> next = walk_.next();
    if (next && *next == batch_size) pending_ = next;
  }
  observe(batch_size, cost, converged);
}

double BatchSizeOptimizer::early_stop_threshold_cost() const {
  return has_min_cost_ ? options_.beta * min_cost_ : std::numeric_limits<double>::infinity();
}

namespace {

// Version 1 lists every observation of each batch size. Version 2, for an
// optimizer that keeps none, has each size's running sums instead: its size
// stays the same however often the job recurs, for a service that loads and
// saves the state on every request.
constexpr int kStateWithObservations = 1;
constexpr int kStateWithRunningSums = 2;

nlohmann::json observations_json(const GaussianThompsonSampler& sampler, const std::vector<int>& sizes) {
  nlohmann::json observations = nlohmann::json::object();
  for (int b : sizes) {
    const auto& x = sampler.observations(b);
    observations[std::to_string(b)] = std::vector<double>(x.begin(), x.end());
  }
  return observations;
}

// nlohmann::json writes each double in the fewest digits that parse back to
// the same bits, so the sums, and every belief drawn from them, survive.
nlohmann::json running_sums_json(const GaussianThompsonSampler& sampler, const std::vector<int>& sizes) {
  nlohmann::json all = nlohmann::json::object();
  for (int b : sizes) {
    const RunningSums r = sampler.running(b);
    all[std::to_string(b)] = {{"n", r.n}, {"sum", r.sum}, {"welford_mean", r.welford_mean}, {"m2", r.m2}};
  }
  return all;
}

// A batch size written as a JSON key; it must be one of the choices.
int batch_size_key(const std::string& key, const std::vector<int>& sizes, const char* what) {
  int b = 0;
  const char* end = key.data() + key.size();
  const auto parsed = std::from_chars(key.data(), end, b);
  if (parsed.ec != std::errc() || parsed.ptr != end || !std::binary_search(sizes.begin(), sizes.end(), b)) {
    throw UsageError(fmt::format("optimizer state: {} for batch size {}, not one of the choices", what, key));
  }
  return b;
}

BatchSizeOptimizerOptions options_from_json(const nlohmann::json& o, int version) {
  BatchSizeOptimizerOptions options;
  options.batch_sizes = o.at("batch_sizes").get<std::vector<int>>();
  options.default_batch_size = o.at("default_batch_size").get<int>();
  options.beta = o.at("beta").get<double>();
  if (!o.at("window").is_null()) options.window = o.at("window").get<std::size_t>();
  options.prior = {o.at("prior").at("mean").get<double>(), o.at("prior").at("precision").get<double>()};
  options.seed = o.at("seed").get<uint64_t>();
  if (version == kStateWithRunningSums) {
    // A window needs its observations, so a windowed state is version 1.
    if (options.window) throw UsageError("optimizer state: version 2 (running sums) cannot have a window");
    if (o.at("keep_observations").get<bool>()) {
      throw UsageError("optimizer state: version 2 (running sums) must have keep_observations false");
    }
    options.keep_observations = false;
  }
  return options;
}

void restore_observations(const nlohmann::json& all, const std::vector<int>& sizes, GaussianThompsonSampler& sampler) {
  for (const auto& [key, costs] : all.items()) {
    const int b = batch_size_key(key, sizes, "observations");
    for (double cost : costs.get<std::vector<double>>()) sampler.observe(b, cost);
  }
}

RunningSums running_sums_from_json(int b, const nlohmann::json& j) {
  const auto& n = j.at("n");
  if (!n.is_number_unsigned() && !(n.is_number_integer() && n.get<std::int64_t>() >= 0)) {
    throw UsageError(fmt::format("optimizer state: batch size {} has n {} (must be a whole number >= 0)", b, n.dump()));
  }
  // NaN and infinity are saved as null; in a caller's own object, as numbers,
  // the sampler refuses them.
  const auto number = [&](const char* name) {
    const auto& v = j.at(name);
    if (!v.is_number()) {
      throw UsageError(fmt::format("optimizer state: batch size {} has {} {} (must be a finite number)", b, name,
                                   v.dump()));
    }
    return v.get<double>();
  };
  return {n.get<std::size_t>(), number("sum"), number("welford_mean"), number("m2")};
}

// Every choice has its sums in a saved state: one missing is a broken state,
// not a size never observed.
void restore_running_sums(const nlohmann::json& all, const std::vector<int>& sizes, GaussianThompsonSampler& sampler) {
  if (!all.is_object()) throw UsageError("optimizer state: running_sums must be an object keyed by batch size");
  for (int b : sizes) {
    if (!all.contains(std::to_string(b))) {
      throw UsageError(fmt::format("optimizer state: no running sums for batch size {}", b));
    }
  }
  for (const auto& [key, sums] : all.items()) {
    const int b = batch_size_key(key, sizes, "running sums");
    sampler.restore_running(b, running_sums_from_json(b, sums));
  }
}

// The generator's state as to_json() writes it (PCG's three numbers, ~60
// bytes), or as earlier builds wrote it: std::mt19937_64's 313 (~6 KB, most
// of a stored job's bytes). Such a state goes on with a PCG generator seeded
// from the old one, so a restored optimizer stays deterministic.
pcg32 rng_from_json(const std::string& text) {
  pcg32 rng;
  std::istringstream in(text);
  if (in >> rng && (in >> std::ws).eof()) return rng;
  std::mt19937_64 older;
  std::istringstream again(text);
  if (!(again >> older) || !(again >> std::ws).eof()) throw UsageError("optimizer state: bad random-generator state");
  const uint64_t state = older(), stream = older();
  return pcg32(state, stream);
}

}  // namespace

// What the fields of a saved state must agree on, so that no later predict()
// reads outside the choices or samples no arm: a state from a store that
// something else wrote is refused here rather than failing later.
void BatchSizeOptimizer::check_restored() const {
  const auto& sizes = options_.batch_sizes;
  const auto check_sizes = [&](const std::vector<int>& list, const char* what) {
    for (int b : list) {
      if (!std::binary_search(sizes.begin(), sizes.end(), b)) {
        throw UsageError(fmt::format("optimizer state: {} has batch size {}, not one of the choices", what, b));
      }
    }
  };
  if (round_ < 1) throw UsageError(fmt::format("optimizer state: round {} (must be >= 1)", round_));
  check_sizes({b0_}, "b0");
  check_sizes(walk_.sizes(), "round_sizes");
  check_sizes(arms_, "arms");
  check_sizes(survivors_, "survivors");
  if (pending_) check_sizes({*pending_}, "pending");
  if (phase_ == Phase::kThompson && arms_.empty()) throw UsageError("optimizer state: the Thompson phase has no arms");
  for (const auto& [b, cost] : round_costs_) {
    check_sizes({b}, "round_costs");
    if (!std::isfinite(cost)) throw UsageError(fmt::format("optimizer state: round cost {} is not finite", cost));
  }
  if (has_min_cost_ && !std::isfinite(min_cost_)) {
    throw UsageError(fmt::format("optimizer state: min_cost {} is not finite", min_cost_));
  }
}

nlohmann::json BatchSizeOptimizer::to_json() const {
  std::ostringstream rng;
  rng << rng_;
  nlohmann::json j = {
      {"options",
       {{"batch_sizes", options_.batch_sizes},
        {"default_batch_size", options_.default_batch_size},
        {"beta", options_.beta},
        {"window", options_.window ? nlohmann::json(*options_.window) : nlohmann::json()},
        {"prior", {{"mean", options_.prior.mean}, {"precision", options_.prior.precision}}},
        {"seed", options_.seed}}},
      {"phase", phase_ == Phase::kPruning ? "pruning" : "thompson"},
      {"round", round_},
      {"b0", b0_},
      {"round_sizes", walk_.sizes()},
      {"direction", walk_.direction()},
      {"cursor", walk_.cursor()},
      {"arms", arms_},
      {"pending", pending_ ? nlohmann::json(*pending_) : nlohmann::json()},
      {"survivors", survivors_},
      {"round_costs", round_costs_},
      {"min_cost", has_min_cost_ ? nlohmann::json(min_cost_) : nlohmann::json()},
      {"rng", rng.str()},
  };
  // With a window the sampler keeps the window's observations whatever
  // keep_observations says, and they are its state: version 1.
  if (sampler_.keeps_history()) {
    j["version"] = kStateWithObservations;
    j["observations"] = observations_json(sampler_, options_.batch_sizes);
  } else {
    j["version"] = kStateWithRunningSums;
    j["options"]["keep_observations"] = false;
    j["running_sums"] = running_sums_json(sampler_, options_.batch_sizes);
  }
  // Only a warm-started optimizer has per-size priors; states without them
  // stay as they were.
  if (!sampler_.arm_priors().empty()) {
    nlohmann::json priors = nlohmann::json::object();
    for (const auto& [b, prior] : sampler_.arm_priors()) {
      priors[std::to_string(b)] = {{"mean", prior.mean}, {"precision", prior.precision}};
    }
    j["arm_priors"] = priors;
  }
  return j;
}

BatchSizeOptimizer BatchSizeOptimizer::from_json(const nlohmann::json& j) {
  try {
    const int version = j.at("version").get<int>();
    if (version != kStateWithObservations && version != kStateWithRunningSums) {
      throw UsageError(fmt::format("optimizer state: unsupported version {} (this joule reads 1 and 2)", version));
    }
    const BatchSizeOptimizerOptions options = options_from_json(j.at("options"), version);
    const auto& sizes = options.batch_sizes;
    BatchSizeOptimizer optimizer(options);
    const std::string phase = j.at("phase").get<std::string>();
    if (phase != "pruning" && phase != "thompson") throw UsageError("optimizer state: unknown phase '" + phase + "'");
    optimizer.phase_ = phase == "pruning" ? Phase::kPruning : Phase::kThompson;
    optimizer.round_ = j.at("round").get<int>();
    optimizer.b0_ = j.at("b0").get<int>();
    optimizer.walk_ = PruningRound::restore(j.at("round_sizes").get<std::vector<int>>(), optimizer.b0_,
                                            j.at("direction").get<int>(), j.at("cursor").get<int>());
    optimizer.arms_ = j.at("arms").get<std::vector<int>>();
    if (!j.at("pending").is_null()) optimizer.pending_ = j.at("pending").get<int>();
    optimizer.survivors_ = j.at("survivors").get<std::vector<int>>();
    optimizer.round_costs_ = j.at("round_costs").get<std::vector<std::pair<int, double>>>();
    if (!j.at("min_cost").is_null()) {
      optimizer.min_cost_ = j.at("min_cost").get<double>();
      optimizer.has_min_cost_ = true;
    }
    if (version == kStateWithObservations) {
      restore_observations(j.at("observations"), sizes, optimizer.sampler_);
    } else {
      restore_running_sums(j.at("running_sums"), sizes, optimizer.sampler_);
    }
    if (j.contains("arm_priors")) {
      for (const auto& [key, prior] : j.at("arm_priors").items()) {
        optimizer.sampler_.set_arm_prior(batch_size_key(key, sizes, "a prior"),
                                         {prior.at("mean").get<double>(), prior.at("precision").get<double>()});
      }
    }
    optimizer.rng_ = rng_from_json(j.at("rng").get<std::string>());
    optimizer.check_restored();
    return optimizer;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("optimizer state: {}", e.what()));
  }
}

}  // namespace joule
