// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Analysis of a sweep's results store: statistics per configuration, trade-
// offs against a baseline, the best configuration per metric, scaling fits,
// energy per GPU-hour, the Pareto front and what each eta would pick.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "joule/analyze/analysis.h"

namespace joule {

// One node's part of a run (the store's run_nodes rows).
struct SweepRunNode {
  std::string node;
  std::string ranks;  // "0,1"; empty for a run on the sweep's own machine
  int gpus = 0;
  double elapsed_s = 0, gpu_energy_j = 0, cpu_energy_j = 0, dram_energy_j = 0;
  std::string warnings;
  double total_energy_j() const { return gpu_energy_j + cpu_energy_j + dram_energy_j; }
};

struct SweepRun {
  long long id = 0;
  std::map<std::string, std::string> config;
  int repeat = 0;
  std::string status;  // ok | failed | partial (a device's or node's measurement missing) | interrupted | running
  std::optional<int> exit_code;  // of the command (none: it did not run, or the store has none)
  double elapsed_s = 0, gpu_energy_j = 0, cpu_energy_j = 0, dram_energy_j = 0;
  std::optional<double> samples, steps, epochs;
  std::optional<double> gpu_util_mean, gpu_util_cv, mem_util_mean, mem_util_cv;
  int nodes = 1;                           // the nodes it was launched on (stores before this: 1)
  std::vector<SweepRunNode> node_parts;    // as measured; none in stores before per-node rows
  std::string error;
  bool damaged = false;  // stored ok or partial with a number that is none or out of range (error says which)
  std::string backend;   // what measured it: "nvml", "sim", ... (empty: a store from before the column)
  std::string devices;   // its GPUs, simulated ones said so
  bool simulated() const { return backend == "sim"; }
  double total_energy_j() const { return gpu_energy_j + cpu_energy_j + dram_energy_j; }
};

// Throws UsageError (exit 2) naming the path when there is no results store
// there to read: nothing at the path, or a directory. Whether the file is a
// readable store is for whoever opens it (a data error when it is not).
void require_results_store_file(const std::string& store_path);

// Reads every run of a results store, with its nodes where the store has
// them (stores of earlier joule versions read as runs on one node). A run
// stored as ok or partial with a number that is not a number at all (SQLite
// keeps 'abc' in a REAL column), not finite, or out of range (time <= 0,
// energy or a statistic < 0), its own or a node's, is damaged: read as
// failed, the column and the stored value named in its error; not used, but
// listed. Stored text that is not valid UTF-8 is read escaped (printable).
// Throws UsageError when there is no store file at the path (nothing, or a
// directory), Error (a data error) when it is not a readable results store.
std::vector<SweepRun> load_sweep_runs(const std::string& store_path);

struct PowerPoint {
  long long run_id;
  double time_s;
  std::string device;
  double power_w;
};
std::vector<PowerPoint> load_power_timelines(const std::string& store_path);

// The grid keys that set a knob of every GPU of a run. A configuration's
// baseline has each knob of the grid at its largest value: the least
// constrained run. One table for the sweep, the analysis and the report.
struct GpuKnob {
  const char* key;    // "sm_clock_mhz"
  const char* words;  // "SM clock cap per GPU"
  const char* unit;   // "MHz"
};
inline constexpr GpuKnob kGpuKnobs[] = {
    {"power_limit", "power limit per GPU", "W"},
    {"sm_clock_mhz", "SM clock cap per GPU", "MHz"},
    {"memory_clock_mhz", "memory clock cap per GPU", "MHz"},
};
// The knob a grid key sets, or none.
const GpuKnob* find_gpu_knob(const std::string& key);

// "batch_size=64 power_limit=250"; empty_text for a configuration without
// settings. Shared by configuration labels and the names of groups.
std::string config_label(const std::map<std::string, std::string>& config, const std::string& empty_text);

struct ConfigResult {
  std::map<std::string, std::string> config;
  Summary time_s, energy_j;  // over successful repeats
  // Per repeat its latest attempt (an attempt run again is superseded):
  int failed = 0;   // runs failed, interrupted, or running (a sweep under way or killed)
  int partial = 0;  // runs with a device's or node's measurement missing (not used)
  int nodes = 1;    // nodes per run (the most of its successful runs)
  std::optional<double> gpu_util_mean, gpu_util_cv, mem_util_mean, mem_util_cv;  // mean over repeats
  // Throughput per GPU-hour, when runs report samples and steps.
  std::optional<double> samples_per_gpu_hour, updates_per_gpu_hour;
  std::optional<std::size_t> baseline;  // index of its baseline configuration
  std::optional<TradeOff> trade_off;
  std::string label() const;  // "batch_size=64 power_limit=250"
};

// One GPU count of a scaling group: the configuration's successful runs.
// Energy per GPU-hour = energy / (GPUs x hours), in Wh per GPU-hour: the
// mean power per GPU in W, its node's CPU and DRAM included; flat when runs
// scale perfectly at constant power, rising when GPUs wait.
struct ScalingPoint {
  double gpus = 0;
  int nodes = 1;
  Summary time_s, energy_j;   // per run
  double wh_per_gpu_hour = 0; // mean over the runs
  double speedup = 1;         // mean time at the group's fewest GPUs / mean time here
  double efficiency = 1;      // speedup / (gpus / fewest GPUs)
};

struct ScalingFit {
  std::string group;  // config_label of the configuration without "gpus" ("all" when nothing else varies)
  PowerLawFit fit;    // time per epoch (or per run) against GPU count: t = a N^-b
  // Energy per epoch (or per run) against GPU count, in the same form
  // E = a N^-b: energy grows as N^c with c = -b. None where a run measured
  // no energy.
  std::optional<PowerLawFit> energy;
  std::vector<ScalingPoint> points;  // by GPU count, ascending
};

// A run whose latest attempt did not succeed: listed with its error so that
// no configuration vanishes from the analysis.
struct FailedRun {
  long long id = 0;
  std::map<std::string, std::string> config;
  int repeat = 0;
  std::string status;  // failed | interrupted | running
  std::optional<int> exit_code;
  std::string error;
};

// What the store holds, every configuration and repeat counted once (by its
// latest attempt), so the numbers add up to the grid that ran.
struct SweepCounts {
  int configurations = 0;          // every configuration with a run in the store
  int configurations_failed = 0;   // of them, without a successful run
  int configurations_with_failures = 0;  // with a successful run and some failed, partial or interrupted
  int runs = 0;                    // configuration x repeat
  int ok = 0, failed = 0, partial = 0, interrupted = 0;  // interrupted: 'running' included
  int earlier_attempts = 0;        // attempts run again since (kept in the store, not counted above)
  int simulated = 0;               // of the ok runs, those on simulated GPUs (their figures a model's)
};

// Where the store's runs came from simulated GPUs, the sentence every output
// of them leads with; empty when none did.
std::string simulated_warning(const SweepCounts& counts);

struct SweepAnalysis {
  // Configurations with at least one successful run (the statistics below
  // are over them); those without are in without_success.
  std::vector<ConfigResult> configs;
  std::vector<ConfigResult> without_success;  // time_s.n == 0; failed and partial counted
  std::vector<FailedRun> failed_runs;          // failed, interrupted or running, in the store's order
  SweepCounts counts;
  std::map<std::string, std::size_t> best;  // metric -> config index
  std::vector<ScalingFit> scaling;
  std::optional<LinearFit> kwh_per_gpu_hour;
  std::vector<std::size_t> pareto;
  std::vector<std::pair<double, std::size_t>> eta_picks;  // eta -> config index
  double max_power_w = 0.0;
  // Per configuration label, its partial runs (also of configurations with
  // no successful run, which configs leaves out).
  std::vector<std::pair<std::string, int>> partial_runs;
};

// Baseline of a configuration: the one equal in every other setting with
// every knob of the grid at its largest value (or the first configuration
// when the grid sets no knob). max_power_w prices time in eta picks (default: the
// largest power_limit, else 300 W per GPU). Each configuration and repeat
// counts once, by its latest attempt (a successful one if any): a run that
// failed or was interrupted and then succeeded on resume is a success, its
// earlier attempts counted in counts.earlier_attempts. Throws Error (a data
// error) when no run succeeded, its message counting and naming the failures.
SweepAnalysis analyze_sweep(const std::vector<SweepRun>& runs, std::optional<double> max_power_w = std::nullopt);

// "12 configurations, 3 failed (no successful run), 1 with failed runs; 36 runs:
// 27 ok, 9 failed": the counts in words, for the text, the report and errors.
std::string describe_counts(const SweepCounts& counts);

std::string to_text(const SweepAnalysis& analysis);
nlohmann::json to_json(const SweepAnalysis& analysis);

}  // namespace joule
