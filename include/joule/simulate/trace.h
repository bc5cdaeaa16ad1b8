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

// One workload's data, ready to simulate.
struct WorkloadTrace {
  WorkloadSpec spec;
  std::vector<int> batch_sizes;                           // in both traces, ascending
  std::map<int, std::vector<std::optional<int>>> epochs;  // per batch size, per run: epochs to target
  std::map<int, std::vector<PowerProfileEntry>> power;    // per batch size, ascending power limit
  std::vector<double> power_limits_w;                     // ascending
  double max_power_w = 0.0;                               // the largest limit
  int max_epochs = 0;  // a run that misses the target trains this long
  std::vector<std::string> notes;  // batch sizes left out, with file and line
  bool synthetic = false;
};

struct TraceLoadOptions {
  // A batch size present in one trace and not the other is an error when
  // strict; otherwise it is left out with a note (the published V100 traces
  // have sizes that ran out of memory, which have no power rows).
  bool strict = false;
};

// Loads and validates one workload. Throws Error naming file, line and column
// for missing columns, malformed values, empty groups, inconsistent power
// limits and (when strict) unmatched batch sizes.
WorkloadTrace load_workload(const std::string& train_path, const std::string& power_path, const WorkloadSpec& spec,
                            const TraceLoadOptions& options = {});

// Built-in synthetic workloads (our own models of epochs vs batch size with
// seed noise, and power/throughput vs power limit), for machines with no
// trace data. Labelled synthetic.
std::vector<WorkloadTrace> synthetic_workloads();

}  // namespace joule
