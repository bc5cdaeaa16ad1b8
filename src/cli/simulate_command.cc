// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "cli/number_options.h"
#include "joule/error.h"
#include "joule/analyze/simulation_report.h"
#include "joule/common/output_file.h"
#include "joule/simulate/comparison.h"
#include "joule/simulate/bundled_traces.h"
#include "joule/simulate/simulator.h"

namespace joule::cli {

namespace {

// A workload of the run that could not be loaded, and why.
struct WorkloadFailure {
  std::string workload;
  std::string reason;
};

// origin: what the report header says about where the traces came from.
std::vector<WorkloadTrace> load_traces(const SimulateOptions& o, std::vector<WorkloadFailure>& failures,
                                       std::string& origin) {
  if (o.synthetic) {
    if (!o.train_trace.empty() || !o.power_trace.empty() || !o.gpu.empty() || !o.workloads.empty() ||
        !o.dataset.empty()) {
      throw UsageError("--synthetic runs the built-in synthetic workloads: it takes no --train-trace, --power-trace, "
                       "--gpu, --workload or --dataset");
    }
    origin = "SYNTHETIC workloads (--synthetic)";
    return synthetic_workloads();
  }
  const TracePaths paths = resolve_trace_paths(o);
  origin = paths.origin;
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
      traces.push_back(load_workload(paths.train, paths.power, spec, {o.strict}));
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

std::map<int, double> drift_scale_for(const DriftScale& scale, const WorkloadTrace& trace, double eta) {
  if (scale.optimal_factor) return {{optimal_config(trace, eta).batch_size, *scale.optimal_factor}};
  return scale.by_batch_size;
}

// What runs, Default last (the reference for ratios). With a drift, zeus runs
// with and without a window, to show what the window changes.
std::vector<PolicyVariant> variants_of(const SimulateOptions& o) {
  std::vector<PolicyVariant> variants;
  const std::vector<Policy> policies =
      o.policy == "all" ? std::vector<Policy>{Policy::kZeus, Policy::kGridSearch} : std::vector<Policy>{parse_policy(o.policy)};
  for (Policy policy : policies) {
    if (policy == Policy::kDefault) continue;
    if (policy == Policy::kZeus && o.drift_after) {
      variants.push_back({policy, std::nullopt});
      variants.push_back({policy, o.window.value_or(10)});
    } else {
      variants.push_back({policy, policy == Policy::kZeus ? o.window : std::nullopt});  // only zeus keeps a window
    }
  }
  variants.push_back({Policy::kDefault, std::nullopt});
  return variants;
}

SimulationSet simulate_workload(const SimulateOptions& o, const WorkloadTrace& trace,
                                const std::vector<uint64_t>& seeds, const std::optional<DriftScale>& drift_scale) {
  SimulationSet set{trace.spec.name, trace.spec.target_text, variants_of(o), {}, 0, o.drift_after};
  set.reference = set.variants.size() - 1;
  std::optional<DriftScenario> drift;
  if (o.drift_after) drift = DriftScenario{*o.drift_after, drift_scale_for(*drift_scale, trace, o.eta)};
  for (const PolicyVariant& variant : set.variants) {
    std::vector<SimulationResult>& runs = set.results.emplace_back();
    for (uint64_t seed : seeds) {
      SimulationOptions options{o.eta, o.beta, seed, variant.window, o.recurrences, drift, {}};
      if (!o.service_url.empty()) options.remote_zeus = service_zeus_factory(o.service_url);
      runs.push_back(simulate(trace, variant.policy, options));
    }
  }
  return set;
}

void write_recurrences(std::ostream& out, const SimulationSet& set, const WorkloadTrace& trace) {
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    const std::string window = set.variants[v].window ? std::to_string(*set.variants[v].window) : "";
    for (const SimulationResult& r : set.results[v]) {
      for (const Recurrence& x : r.recurrences) {
        const bool drifted = set.drift_after && x.index >= *set.drift_after;
        out << fmt::format("{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{},{},{}\n", set.workload,
                           to_string(set.variants[v].policy), r.seed, x.index, x.batch_size, x.power_limit_w,
                           x.converged ? 1 : 0, x.stopped_early ? 1 : 0, x.epochs, x.time_s, x.energy_j, x.cost,
                           x.regret, trace.default_batch_size, window, drifted ? 1 : 0);
      }
    }
  }
}

void print_set(const SimulationSet& set) {
  const std::string optimal = optimal_text(set);
  for (std::size_t v = 0; v < set.variants.size(); ++v) {
    const VariantSummary s = summarize(set, v);
    std::cout << fmt::format("{:<14} {:<20} {:<15} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>10.1f} {:>15} {:>9}{}   {}\n",
                             set.workload, set.target_text, set.variants[v].label(), s.energy_last_ratio,
                             s.time_last_ratio, s.energy_all_ratio, s.time_all_ratio, s.regret_per_optimal,
                             fmt::format("b={} {:.0f} W", s.final_config.first, s.final_config.second),
                             fmt::format("{}/{}", s.converged_at, s.recurrences),
                             set.drift_after ? fmt::format(" {:>6.1f}", s.stale_after_drift) : "", optimal);
  }
}

// Where the traces came from, for a page others read: file names, never the
// directories of this machine.
std::string page_origin(const SimulateOptions& o) {
  if (o.synthetic) return "SYNTHETIC workloads (--synthetic)";
  auto name = [](const std::string& path) { return std::filesystem::path(path).filename().string(); };
  const std::string gpu = o.gpu.empty() ? "v100" : o.gpu;
  const std::string train = o.train_trace.empty() ? "bundled train trace" : "train trace " + name(o.train_trace);
  const std::string power = o.power_trace.empty() ? fmt::format("bundled power trace, GPU {}", gpu)
                                                  : "power trace " + name(o.power_trace);
  if (o.train_trace.empty() && o.power_trace.empty()) {
    return fmt::format("bundled Zeus NSDI'23 traces (zeus-nsdi23), GPU {}", gpu);
  }
  return train + ", " + power;
}

}  // namespace

void print_trace_notes(const std::vector<WorkloadTrace>& traces, bool verbose) {
  if (verbose) {
    for (const auto& trace : traces) {
      for (const auto& note : trace.notes) std::cerr << "joule: note: " << note << '\n';
    }
    return;
  }
  std::map<TraceNoteKind, std::size_t> by_kind;
  std::vector<std::string> workloads;
  std::size_t total = 0;
  for (const auto& trace : traces) {
    for (TraceNoteKind kind : trace.note_kinds) ++by_kind[kind];
    if (!trace.notes.empty()) workloads.push_back(fmt::format("{} {}", trace.spec.name, trace.notes.size()));
    total += trace.notes.size();
  }
  if (total == 0) return;
  std::vector<std::string> counts;
  for (const auto& [kind, n] : by_kind) counts.push_back(fmt::format("{}: {}", to_string(kind), n));
  std::cerr << fmt::format("joule: note: the traces lack some rows, {} batch size{} ({}; by workload: {}); --verbose "
                           "lists each with file and line, --strict makes them errors\n",
                           total, total == 1 ? "" : "s", fmt::join(counts, "; "), fmt::join(workloads, ", "));
}

TracePaths resolve_trace_paths(const SimulateOptions& o) {
  if (!o.power_trace.empty() && !o.gpu.empty()) {
    throw UsageError("--gpu and --power-trace both choose the power trace: give one of them");
  }
  TracePaths paths{o.train_trace, o.power_trace, ""};
  if (!paths.train.empty() && !paths.power.empty()) return paths;
  const BundledTraces bundled = find_bundled_traces();
  const std::string gpu = o.gpu.empty() ? "v100" : o.gpu;
  if (paths.power.empty()) paths.power = bundled.power_path(gpu);
  if (paths.train.empty()) paths.train = bundled.train_path();
  const char* which = o.train_trace.empty() ? (o.power_trace.empty() ? "traces" : "train trace") : "power trace";
  paths.origin = fmt::format("bundled {}{} in {}", which, o.power_trace.empty() ? ", GPU " + gpu : "", bundled.dir);
  return paths;
}

int run_simulate(const SimulateOptions& o) {
  if (!o.cluster_trace.empty()) return run_simulate_cluster(o);
  check_eta(o.eta);
  if (!(o.beta > 1.0)) throw UsageError(fmt::format("--beta {} must be greater than 1", o.beta));
  if (o.policy != "all") parse_policy(o.policy);
  if (o.drift_after && *o.drift_after < 1) throw UsageError("--drift-after must be at least 1");
  if (o.window && *o.window == 0) throw UsageError("--window must be at least 1");
  std::optional<DriftScale> drift_scale;
  if (o.drift_after) drift_scale = parse_drift_scale(o.drift_scale);
  const std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{o.seed} : parse_seeds(o.seeds);
  // Both outputs are opened before the work, so a bad path fails at once.
  std::optional<OutputFile> out, html;
  if (!o.out_path.empty()) {
    out.emplace(o.out_path);
    out->stream() << "workload,policy,seed,recurrence,batch_size,power_limit_w,converged,stopped_early,epochs,time_s,"
                     "energy_j,cost,regret,default_batch_size,window,drifted\n";
  }
  if (!o.html_path.empty()) html.emplace(o.html_path);
  std::vector<WorkloadFailure> failures;
  std::string origin;
  const std::vector<WorkloadTrace> traces = load_traces(o, failures, origin);
  for (const auto& f : failures) {
    std::cerr << fmt::format("joule: error: workload '{}' cannot be simulated: {}\n", f.workload, f.reason);
  }
  print_trace_notes(traces, o.verbose);
  if (traces.empty()) throw Error("no workload could be simulated (see above)");

  const std::string heading = fmt::format(
      "joule simulate: eta {}, beta {}, seeds {}{}{}{}", o.eta, o.beta,
      seeds.size() == 1 ? std::to_string(seeds[0]) : o.seeds, o.window ? fmt::format(", window {}", *o.window) : "",
      o.drift_after ? fmt::format(", drift after {} recurrences (epochs x {})", *o.drift_after, o.drift_scale) : "",
      origin.empty() ? "" : ", " + origin);
  std::cout << heading << '\n';
  std::cout << fmt::format("{:<14} {:<20} {:<15} {:>8} {:>8} {:>8} {:>8} {:>10} {:>15} {:>9}{}   {}\n", "workload",
                           "target", "policy", "ETA/dflt", "TTA/dflt", "ETA all", "TTA all", "regret/opt",
                           "converged to", "at", o.drift_after ? fmt::format(" {:>6}", "stale") : "", "optimal");
  std::vector<SimulationSet> sets;
  for (const auto& trace : traces) {
    SimulationSet set = simulate_workload(o, trace, seeds, drift_scale);
    print_set(set);
    if (out) write_recurrences(out->stream(), set, trace);
    if (html) sets.push_back(std::move(set));
  }
  std::cout << fmt::format("ETA/dflt, TTA/dflt: energy and time to accuracy of the last five recurrences relative to Default "
               "(mean over seeds); ETA all, TTA all: the same over every recurrence, exploration included; "
               "regret/opt: cumulative regret in units of the optimal recurrence's expected cost; converged to: most "
               "common final configuration; at: median recurrence from which it stayed{}.\n",
                           o.drift_after ? "; stale: recurrences after the drift still at the batch size optimal "
                                           "before it (mean over seeds)"
                                         : "");
  if (out) out->commit();
  if (html) {
    // The page is shared: it names the traces, not where they lie on this machine.
    const std::string subtitle = fmt::format(
        "eta {}, beta {}, seeds {}{}{}, {}", o.eta, o.beta, seeds.size() == 1 ? std::to_string(seeds[0]) : o.seeds,
        o.window ? fmt::format(", window {}", *o.window) : "",
        o.drift_after ? fmt::format(", drift after {} recurrences (epochs x {})", *o.drift_after, o.drift_scale) : "",
        page_origin(o));
    const std::string warning =
        o.synthetic ? "SYNTHETIC workloads: joule made these traces up (--synthetic); no GPU ran them." : "";
    html->stream() << render_simulation_report("joule simulate", subtitle, sets, warning);
    html->commit();
  }
  if (!failures.empty()) {
    std::cerr << fmt::format("joule: {} of {} workloads could not be simulated\n", failures.size(),
                             failures.size() + traces.size());
    return 1;
  }
  return 0;
}

}  // namespace joule::cli
