// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The SQLite results store of `joule sweep`. Private to the sweep module.
#pragma once

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

namespace joule::sweep {

// One node's part of a run (a run on this machine has one).
struct NodeRecord {
  std::string node;
  std::string ranks;  // "0,1": the job's ranks on the node; empty for a run on this machine
  int gpus = 0;       // GPUs measured there
  double elapsed_s = 0, gpu_energy_j = 0, cpu_energy_j = 0, dram_energy_j = 0;
  std::string warnings;  // "; "-separated
};

struct RunRecord {
  std::string status;  // ok | failed | partial | interrupted
  int nodes = 1;       // the nodes the run was launched on
  std::optional<int> exit_code;
  double elapsed_s = 0, gpu_energy_j = 0, cpu_energy_j = 0, dram_energy_j = 0, avg_power_w = 0;
  std::optional<double> samples, steps, epochs;
  std::optional<double> gpu_util_mean, gpu_util_cv, mem_util_mean, mem_util_cv;  // percent; CV as a fraction
  std::string error;
  struct PowerPoint {
    double time_s;  // since the run started
    std::string device;
    double power_w;
  };
  std::vector<PowerPoint> timeline;  // decimated power samples, for plots
  std::vector<NodeRecord> node_rows;
  std::string command;  // when not empty: replaces the command recorded by begin()
  // What measured it: the GPU backend ("nvml", "rocm", "nvml+rocm", "sim";
  // across nodes "nodes", each node's own) and its GPUs, simulated ones said
  // so ("gpu0 (NVIDIA A40), gpu1 (...)"), so that no figure from simulated
  // GPUs passes for a measurement.
  std::string backend;
  std::string devices;
};

class Store {
 public:
  // Creates the schema, or brings a store of an earlier joule up to it (adds
  // runs.nodes, runs.backend, runs.devices and the run_nodes table); throws
  // Error naming the path.
  explicit Store(const std::string& path);
  // An existing store, read only and left as it is (a dry run's plan): only
  // finished() and mean_finished_elapsed_s() may be asked.
  struct ReadOnly {};
  Store(const std::string& path, ReadOnly);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Only one sweep writes a store at a time: an exclusive lock on the store
  // file, held while this Store lives and dropped by the kernel when the
  // process dies (SIGKILL included), so a run found 'running' under it was
  // left by a sweep that is gone. Throws Error naming the store when
  // another sweep holds it. (Reading, exporting and analysing need no lock.)
  void claim_for_sweep();
  // Runs left 'running' by a sweep that died (killed, machine down): marked
  // interrupted, to be run again. Returns their ids. Call after claim_for_sweep.
  std::vector<long long> mark_interrupted();
  // The run needs no new attempt: it succeeded, or it failed and failures
  // are kept (retry_failed false). Interrupted and partial runs always run again.
  bool finished(const std::string& config_key, int repeat, bool retry_failed = false);
  // Its latest attempt failed (and no attempt succeeded).
  bool failed(const std::string& config_key, int repeat);
  // Mean wall time of the runs that finished (ok or failed); none yet: 0.
  double mean_finished_elapsed_s();
  // The backends its finished runs were measured with ("sim", "nvml", ...;
  // runs of stores before the column have none), each once.
  std::vector<std::string> finished_backends();
  long long begin(const std::string& sweep, const std::string& config_key, int repeat, const std::string& command);
  // The run's outcome, its node rows and timeline in one transaction: a
  // sweep killed meanwhile leaves the run 'running' with nothing half
  // written. Throws Error naming the store; nothing is written then.
  void finish(long long id, const RunRecord& record);
  void export_csv(const std::string& csv_path);
  int export_nodes_csv(const std::string& csv_path);

 private:
  void exec(const std::string& sql);
  void write_outcome(long long id, const RunRecord& record);  // inside finish()'s transaction
  bool has_column(const std::string& table, const std::string& column);
  void write_csv(const char* sql, const std::string& csv_path, int* rows);
  sqlite3* db_ = nullptr;
  std::string path_;
  int lock_fd_ = -1;  // claim_for_sweep's
};

}  // namespace joule::sweep
