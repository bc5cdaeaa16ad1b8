#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "joule/error.h"
#include "joule/simulate/simulator.h"

namespace joule::cli {

namespace {

std::vector<uint64_t> parse_seeds(const std::string& text) {
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || s[0] == '-') {
      throw UsageError(fmt::format("--seeds: '{}' is not a seed (expected e.g. 1..10 or 1,4,9)", s));
    }
    return static_cast<uint64_t>(value);
  };
  std::vector<uint64_t> seeds;
  if (const auto dots = text.find(".."); dots != std::string::npos) {
    const uint64_t first = number(text.substr(0, dots)), last = number(text.substr(dots + 2));
    if (first > last || last - first > 100000) throw UsageError(fmt::format("--seeds: bad range '{}'", text));
    for (uint64_t s = first; s <= last; ++s) seeds.push_back(s);
  } else {
    std::stringstream items(text);
    for (std::string item; std::getline(items, item, ',');) seeds.push_back(number(item));
  }
  if (seeds.empty()) throw UsageError("--seeds: no seed given");
  return seeds;
}

// A workload of the run that could not be loaded, and why.
struct WorkloadFailure {
  std::string workload;
  std::string reason;
};

std::vector<WorkloadTrace> load_traces(const SimulateOptions& o, std::vector<WorkloadFailure>& failures) {
  if (o.train_trace.empty() != o.power_trace.empty()) {
    throw UsageError("--train-trace and --power-trace go together");
  }
  if (o.train_trace.empty()) {
    if (!o.workloads.empty() || !o.dataset.empty()) {
      throw UsageError("--workload/--dataset need --train-trace and --power-trace (without them the built-in "
                       "synthetic workloads run)");
    }
    return synthetic_workloads();
  }
  std::vector<WorkloadSpec> specs;
  if (!o.dataset.empty()) {
    if (o.network.empty() || o.optimizer.empty() || !o.target || !o.default_batch_size) {
      throw UsageError("--dataset needs --network, --optimizer, --target and --default-batch-size");
    }
    specs.push_back({o.dataset, o.dataset, o.network, o.optimizer, *o.target, fmt::format("metric {}", *o.target),
                     *o.default_batch_size});
  } else if (o.workloads.empty() || (o.workloads.size() == 1 && o.workloads[0] == "all")) {
    specs = zeus_workloads();
  } else {
    for (const auto& name : o.workloads) specs.push_back(find_workload(name));
  }
  // One workload that cannot be simulated does not stop the others: it is
  // named with the reason, and the run exits non-zero at the end.
  std::vector<WorkloadTrace> traces;
  for (const auto& spec : specs) {
    try {
      traces.push_back(load_workload(o.train_trace, o.power_trace, spec, {o.strict}));
    } catch (const Error& e) {
      failures.push_back({spec.name, e.what()});
    }
  }
  // The same reason for every workload is the files' (unreadable, a column
  // missing): said once.
  if (traces.empty() && std::all_of(failures.begin(), failures.end(),
                                     [&](const WorkloadFailure& f) { return f.reason == failures.front().reason; })) {
    throw Error(failures.front().reason);
  }
  return traces;
}

}  // namespace

int run_simulate(const SimulateOptions& o) {
  if (!o.cluster_trace.empty()) return run_simulate_cluster(o);
  check_eta(o.eta);
  if (!(o.beta > 1.0)) throw UsageError(fmt::format("--beta {} must be greater than 1", o.beta));
  std::vector<Policy> policies;
  if (o.policy == "all") {
    policies = {Policy::kZeus, Policy::kGridSearch, Policy::kDefault};
  } else {
    policies = {parse_policy(o.policy)};
    if (policies[0] != Policy::kDefault) policies.push_back(Policy::kDefault);  // the reference for ratios
  }
  const std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{o.seed} : parse_seeds(o.seeds);
  std::ofstream out;
  if (!o.out_path.empty()) {
    out.open(o.out_path, std::ios::out | std::ios::trunc);
    if (!out) throw UsageError(fmt::format("cannot write '{}': {}", o.out_path, std::strerror(errno)));
    out << "workload,policy,seed,recurrence,batch_size,power_limit_w,converged,stopped_early,epochs,time_s,energy_j,"
           "cost,regret,default_batch_size\n";
  }
  std::vector<WorkloadFailure> failures;
  const std::vector<WorkloadTrace> traces = load_traces(o, failures);
  for (const auto& trace : traces) {
    for (const auto& note : trace.notes) std::cerr << "joule: note: " << note << '\n';
  }
  for (const auto& f : failures) {
    std::cerr << fmt::format("joule: error: workload '{}' cannot be simulated: {}\n", f.workload, f.reason);
  }
  if (traces.empty()) throw Error("no workload could be simulated (see above)");

  std::cout << fmt::format("joule simulate: eta {}, beta {}, seeds {}{}{}\n", o.eta, o.beta,
                           seeds.size() == 1 ? std::to_string(seeds[0]) : o.seeds,
                           o.window ? fmt::format(", window {}", *o.window) : "",
                           traces.front().synthetic ? ", SYNTHETIC workloads (no trace files given)" : "");
  std::cout << fmt::format("{:<14} {:<20} {:<8} {:>9} {:>9} {:>12} {:>16} {:>9}   {}\n", "workload", "target", "policy",
                           "ETA/dflt", "TTA/dflt", "regret/opt", "converged to", "at", "optimal");
  for (const auto& trace : traces) {
    std::map<Policy, std::vector<SimulationResult>> results;
    for (uint64_t seed : seeds) {
      SimulationOptions options{o.eta, o.beta, seed, o.window, o.recurrences};
      for (Policy policy : policies) results[policy].push_back(simulate(trace, policy, options));
    }
    for (Policy policy : policies) {
      double eta_ratio = 0, tta_ratio = 0, regret = 0;
      std::map<std::pair<int, double>, int> finals;
      std::vector<int> converged_at;
      const auto& list = results[policy];
      for (std::size_t s = 0; s < list.size(); ++s) {
        const auto& r = list[s];
        const auto& d = results[Policy::kDefault][s];
        eta_ratio += r.mean_energy_last_j(5) / d.mean_energy_last_j(5);
        tta_ratio += r.mean_time_last_s(5) / d.mean_time_last_s(5);
        regret += r.cumulative_regret() / r.optimal.expected_cost;
        ++finals[{r.final_batch_size(), r.final_power_limit_w()}];
        converged_at.push_back(r.converged_at());
        if (out.is_open()) {
          for (const auto& x : r.recurrences) {
            out << fmt::format("{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{}\n", trace.spec.name,
                               to_string(policy), r.seed, x.index, x.batch_size, x.power_limit_w, x.converged ? 1 : 0,
                               x.stopped_early ? 1 : 0, x.epochs, x.time_s, x.energy_j, x.cost, x.regret,
                               trace.default_batch_size);
          }
        }
      }
      const double n = static_cast<double>(list.size());
      const auto mode = std::max_element(finals.begin(), finals.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; })
                            ->first;
      std::sort(converged_at.begin(), converged_at.end());
      const auto& opt = list.front().optimal;
      std::cout << fmt::format("{:<14} {:<20} {:<8} {:>9.3f} {:>9.3f} {:>12.1f} {:>16} {:>9}   b={} {:.0f} W\n",
                               trace.spec.name, trace.spec.target_text, to_string(policy), eta_ratio / n,
                               tta_ratio / n, regret / n,
                               fmt::format("b={} {:.0f} W", mode.first, mode.second),
                               fmt::format("{}/{}", converged_at[converged_at.size() / 2], list.front().recurrences.size()),
                               opt.batch_size, opt.power_limit_w);
    }
  }
  std::cout << "ETA/dflt, TTA/dflt: energy and time to accuracy of the last five recurrences relative to Default "
               "(mean over seeds); regret/opt: cumulative regret in units of the optimal recurrence's expected cost; "
               "converged to: most common final configuration; at: median recurrence from which it stayed.\n";
  if (out.is_open()) {
    out.flush();
    if (!out) throw Error(fmt::format("error writing '{}'", o.out_path));
  }
  if (!failures.empty()) {
    std::cerr << fmt::format("joule: {} of {} workloads could not be simulated\n", failures.size(),
                             failures.size() + traces.size());
    return 1;
  }
  return 0;
}

}  // namespace joule::cli
