// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule simulate --learned-on A --gpu B`: what the batch-size optimizer
// learned on GPU model A seeds it on model B; the first recurrences on B are
// compared with an optimizer that starts from scratch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/number_options.h"
#include "joule/error.h"
#include "joule/simulate/bundled_traces.h"
#include "joule/simulate/translate.h"

namespace joule::cli {

namespace {

// A bundled GPU name, or a path to a power trace.
std::string source_power_path(const std::string& learned_on) {
  if (learned_on.find('/') != std::string::npos || learned_on.ends_with(".csv")) return learned_on;
  return find_bundled_traces().power_path(learned_on);
}

std::string gpu_label(const std::string& name_or_path) {
  const auto slash = name_or_path.find_last_of('/');
  return slash == std::string::npos ? name_or_path : name_or_path.substr(slash + 1);
}

std::string sizes_text(const std::vector<int>& sizes) {
  return sizes.empty() ? "none" : fmt::format("{}", fmt::join(sizes, ","));
}

void reject_single_gpu_options(const SimulateOptions& o) {
  const std::vector<std::pair<bool, const char*>> conflicts = {
      {o.synthetic, "--synthetic"},         {!o.dataset.empty(), "--dataset"},
      {!o.out_path.empty(), "--out"},       {o.policy != "all", "--policy"},
      {o.recurrences != 0, "--recurrences"}, {!o.html_path.empty(), "--html"},
      {o.drift_after.has_value(), "--drift-after"}, {!o.cluster_trace.empty(), "--cluster"},
  };
  for (const auto& [given, name] : conflicts) {
    if (given) throw UsageError(fmt::format("{} does not apply with --learned-on (the zeus policy runs)", name));
  }
  if (o.learn_recurrences < 0) throw UsageError(fmt::format("--learn-recurrences {} must be >= 0", o.learn_recurrences));
  if (o.deploy_recurrences < 1) {
    throw UsageError(fmt::format("--deploy-recurrences {} must be >= 1", o.deploy_recurrences));
  }
  if (!(o.prior_observations > 0)) {
    throw UsageError(fmt::format("--prior-observations {} must be > 0", o.prior_observations));
  }
}

// Sums over the first m recurrences of one replay.
struct Totals {
  double regret = 0, energy_j = 0, time_s = 0;
  void add(const Totals& other, double weight) {
    regret += weight * other.regret;
    energy_j += weight * other.energy_j;
    time_s += weight * other.time_s;
  }
};
Totals first(const SimulationResult& r, int m) {
  Totals t;
  for (int i = 0; i < m && i < static_cast<int>(r.recurrences.size()); ++i) {
    t.regret += r.recurrences[i].regret;
    t.energy_j += r.recurrences[i].energy_j;
    t.time_s += r.recurrences[i].time_s;
  }
  t.regret /= r.optimal.expected_cost;
  return t;
}

void print_workload(const WorkloadTrace& target, const std::vector<TransferResult>& runs, const std::vector<int>& ms,
                    const std::string& target_gpu, const std::string& source_gpu) {
  const double n = static_cast<double>(runs.size());
  for (int m : ms) {
    Totals scratch, translated;
    for (const auto& r : runs) {  // means over seeds
      scratch.add(first(r.scratch, m), 1.0 / n);
      translated.add(first(r.translated, m), 1.0 / n);
    }
    std::cout << fmt::format("{:<14} {:>3} {:>10.2f} {:>10.2f} {:>7.2f} {:>11.3g} {:>10.3g} {:>7.2f} {:>7.2f}\n",
                             m == ms.front() ? target.spec.name : "", m, scratch.regret, translated.regret,
                             translated.regret / scratch.regret, scratch.energy_j / 1e6, translated.energy_j / 1e6,
                             translated.energy_j / scratch.energy_j, translated.time_s / scratch.time_s);
  }
  // What the translation started from, and where it sent the first recurrence.
  const auto& t = runs.front().translation;
  std::map<int, int> first_choice;
  int cold = 0;
  for (const auto& r : runs) {
    ++first_choice[r.translated.recurrences.front().batch_size];
    cold += !r.warm_started;
  }
  std::vector<std::string> firsts;
  for (const auto& [b, count] : first_choice) firsts.push_back(fmt::format("b={} x{}", b, count));
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& [b, ratio] : t.ratio) {
    lo = std::min(lo, ratio);
    hi = std::max(hi, ratio);
  }
  const auto& opt = runs.front().scratch.optimal;
  std::cout << fmt::format("{:<14}     optimal on {} b={} {:.0f} W; first choice {}; {}/{} epoch cost x{:.2f}-{:.2f}; "
                           "dropped b={}; unexplored b={}{}\n",
                           "", target_gpu, opt.batch_size, opt.power_limit_w, fmt::join(firsts, ", "), target_gpu,
                           source_gpu, lo, hi, sizes_text(t.dropped), sizes_text(t.start.unexplored),
                           cold ? fmt::format("; {} seeds without converged evidence started from scratch", cold) : "");
}

}  // namespace

int run_simulate_translate(const SimulateOptions& o) {
  check_eta(o.eta);
  if (!(o.beta > 1.0)) throw UsageError(fmt::format("--beta {} must be greater than 1", o.beta));
  reject_single_gpu_options(o);
  const KnownOfTarget known = parse_translate_with(o.translate_with);
  const std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{o.seed} : parse_seeds(o.seeds);
  const TracePaths target_paths = resolve_trace_paths(o);
  const std::string source_power = source_power_path(o.learned_on);
  const std::string target_gpu = o.power_trace.empty() ? (o.gpu.empty() ? "v100" : o.gpu) : gpu_label(o.power_trace);
  const std::string source_gpu = gpu_label(o.learned_on);

  std::vector<WorkloadSpec> specs;
  if (o.workloads.empty() || (o.workloads.size() == 1 && o.workloads[0] == "all")) {
    specs = zeus_workloads();
  } else {
    for (const auto& name : o.workloads) specs.push_back(find_workload(name));
  }
  std::cout << fmt::format(
      "joule simulate: learned on {} ({} recurrences, zeus), deployed on {} ({}), costs translated with {}; eta {}, "
      "beta {}, seeds {}{}\n",
      source_gpu, o.learn_recurrences, target_gpu, o.deploy_recurrences,
      known.text.empty() ? fmt::format("the {} power trace", target_gpu) : known.text,
      o.eta, o.beta, seeds.size() == 1 ? std::to_string(seeds[0]) : o.seeds,
      target_paths.origin.empty() ? "" : ", " + target_paths.origin);
  std::cout << fmt::format("{:<14} {:>3} {:>10} {:>10} {:>7} {:>11} {:>10} {:>7} {:>7}\n", "workload", "M",
                           "regret", "", "", "energy MJ", "", "", "time");
  std::cout << fmt::format("{:<14} {:>3} {:>10} {:>10} {:>7} {:>11} {:>10} {:>7} {:>7}\n", "", "", "scratch",
                           "translated", "ratio", "scratch", "translated", "ratio", "ratio");
  std::vector<int> ms;
  for (int m : {5, 10, 20}) {
    if (m < o.deploy_recurrences) ms.push_back(m);
  }
  ms.push_back(o.deploy_recurrences);

  int failures = 0;
  for (const auto& spec : specs) {
    try {
      const WorkloadTrace source = load_workload(target_paths.train, source_power, spec, {o.strict});
      const WorkloadTrace target = load_workload(target_paths.train, target_paths.power, spec, {o.strict});
      std::vector<TransferResult> runs;
      for (uint64_t seed : seeds) {
        TransferOptions options;
        options.simulation = {o.eta, o.beta, seed, o.window, 0, std::nullopt, {}};
        options.learn_recurrences = o.learn_recurrences;
        options.deploy_recurrences = o.deploy_recurrences;
        options.profiled_points = known.profiled_points;
        options.profiled_sizes = known.profiled_sizes;
        options.max_prior_observations = o.prior_observations;
        runs.push_back(simulate_transfer(source, target, options));
      }
      print_workload(target, runs, ms, target_gpu, source_gpu);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      std::cerr << fmt::format("joule: error: workload '{}' cannot be simulated: {}\n", spec.name, e.what());
      ++failures;
    }
  }
  std::cout << fmt::format(
      "M: first recurrences on {}; regret: cumulative regret over them in units of the optimal recurrence's expected "
      "cost; energy: their total energy; ratio: translated / scratch (mean over seeds; < 1: translation helped). "
      "Notes on batch sizes missing from the traces are not repeated here (see joule simulate --gpu).\n",
      target_gpu);
  return failures ? 1 : 0;
}

}  // namespace joule::cli
