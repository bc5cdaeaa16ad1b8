// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Training and power traces in the Zeus NSDI'23 format:
//   train: dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch
//          (the epoch at which each seeded run first reached each metric level; nan: never)
//   power: dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power
// and the workloads the Zeus paper evaluates on them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "joule/optimize/cost.h"

namespace joule {

struct WorkloadSpec {
  std::string name;  // short name used on the command line
  std::string dataset, network, optimizer;
  double target_metric = 0.0;  // the metric level to reach, as in the trace's target_metric column
  std::string target_text;     // for reports: "WER <= 40"
  int default_batch_size = 0;
};

// The six workloads of the Zeus paper: librispeech, squad, sentiment140,
// imagenet, cifar100, movielens.
const std::vector<WorkloadSpec>& zeus_workloads();
// Throws UsageError listing the known names.
const WorkloadSpec& find_workload(const std::string& name);

// Why a note was written while loading real traces.
enum class TraceNoteKind {
  kNoPowerData,         // a batch size with training runs but no power rows: left out
  kNoTrainingRuns,      // a batch size with power rows but no training runs: left out
  kMissingPowerLimits,  // a batch size simulated over the limits it has
  kDefaultReplaced,     // the default batch size is not in both traces: another stands in
};
// "left out, no power data", ... (a batch size's fate, for a summary's counts).
const char* to_string(TraceNoteKind kind);

// One workload's data, ready to simulate.
struct WorkloadTrace {
  WorkloadSpec spec;
  std::vector<int> batch_sizes;                           // in both traces, ascending
  std::map<int, std::vector<std::optional<int>>> epochs;  // per batch size, per run: epochs to target
  std::map<int, std::vector<PowerProfileEntry>> power;    // per batch size, ascending power limit
  std::vector<double> power_limits_w;                     // ascending
  double max_power_w = 0.0;                               // the largest limit
  int max_epochs = 0;  // a run that misses the target trains this long
  // The default configuration's batch size: spec.default_batch_size, or
  // where the traces lack it, the largest batch size below it (a note says so).
  int default_batch_size = 0;
  std::vector<std::string> notes;  // batch sizes left out, with file and line
  std::vector<TraceNoteKind> note_kinds;  // per note: why (for a one-line summary)
  bool synthetic = false;
};

struct TraceLoadOptions {
  // What real traces have is an error when strict, otherwise a note: a batch
  // size present in one trace and not the other is left out (the published
  // V100 traces have sizes that ran out of memory, which have no power rows);
  // a batch size missing some power limits is simulated over those it has;
  // a default batch size not in both traces is replaced by the largest one
  // below it (as Zeus's simulator does).
  bool strict = false;
};

// The largest power limit a batch size has (its grid may lack some).
double max_power_limit_w(const WorkloadTrace& trace, int batch_size);

// Loads and validates one workload. Throws Error naming file, line and column
// for missing columns, malformed values and empty groups, and (when strict)
// for what TraceLoadOptions lists.
WorkloadTrace load_workload(const std::string& train_path, const std::string& power_path, const WorkloadSpec& spec,
                            const TraceLoadOptions& options = {});

// Built-in synthetic workloads (our own models of epochs vs batch size with
// seed noise, and power/throughput vs power limit), for machines with no
// trace data. Labelled synthetic.
std::vector<WorkloadTrace> synthetic_workloads();

}  // namespace joule
