// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule sweep`: run a training command over a grid (batch size, GPU count,
// power limit, ...) with repeats, measure each run, and keep every result in
// a SQLite store that a later invocation resumes from.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joule/common/child_process.h"
#include "joule/device/discovery.h"

namespace joule {

// From a TOML file:
//   command = "python3 train.py --batch-size {batch_size}"
//   repeats = 3
//   launcher = "local"        # local | torchrun | mpirun | srun
//   store = "sweep.sqlite"    # default: next to the config, <name>.sqlite
//   kill_grace_s = 10         # a stopped sweep's run has this long to end before SIGKILL
//   [grid]
//   batch_size = [32, 64]
//   gpus = [1, 2]             # GPUs per run: the first N are used and measured
//   power_limit = [300, 250]  # watts, applied to those GPUs and restored after
//   sm_clock_mhz = [1980, 1410]  # SM clock caps (and memory_clock_mhz), the same way
//
// Runs across nodes (launcher mpirun or srun):
//   gpus_per_node = 8         # a run of G GPUs spans ceil(G / 8) nodes, one rank per GPU
//   launcher_options = "--partition gpu"   # or an array of arguments; after joule's own
// Then every run is launched as `joule measure --mpi` on its nodes (each node
// measured by its lowest rank); the sweep process measures nothing itself.
// Where a value was written in the sweep file (1-based, as toml++ counts).
struct SourcePosition {
  uint32_t line = 1;
  uint32_t column = 1;
};

struct SweepConfig {
  std::string path;
  std::string command;
  std::string launcher = "local";
  int repeats = 1;
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;  // in file order
  std::string store_path;
  int gpus_per_node = 0;                      // 0: runs on this machine
  std::vector<std::string> launcher_options;  // extra arguments for mpirun/srun
  // When the sweep is stopped (SIGINT, SIGTERM, SIGHUP), the run's process
  // group gets the signal, then SIGKILL after this long if any of it is left.
  double kill_grace_s = kDefaultKillGraceS;
  // Per grid key, where each of its values was written (same order as grid),
  // so a value refused later (by the devices) is named where it stands.
  std::map<std::string, std::vector<SourcePosition>> grid_positions;

  bool across_nodes() const { return gpus_per_node > 0; }
  // "s.toml:4:16": where value value_index of grid key was written.
  std::string where(const std::string& key, std::size_t value_index) const;

  // Throws UsageError naming the file, line and column of what is wrong.
  static SweepConfig load(const std::string& path);
};

// Runs (grid points x repeats) above which `joule sweep` wants --yes: it
// says how many and how long first, so a grid mistyped into 100,000 runs
// does not start unseen.
inline constexpr long long kConfirmRunsAbove = 1000;
// Runs no sweep may have, --yes or not (a grid this size cannot be listed
// in memory, let alone run).
inline constexpr long long kMaxGridRuns = 1'000'000;
// Grid points x repeats without expanding the grid; saturates at
// kMaxGridRuns + 1.
long long grid_run_count(const SweepConfig& config);

struct SweepPoint {
  std::map<std::string, std::string> values;
  int repeat = 0;
  // Canonical text of the values, identifying the configuration in the store.
  std::string config_key() const;
};

// Every grid point times every repeat, in a stable order.
std::vector<SweepPoint> expand_grid(const SweepConfig& config);
// The command a run's processes execute: placeholders filled. Throws
// UsageError naming an unknown placeholder.
std::string fill_command(const SweepConfig& config, const SweepPoint& point);
// The shell command of one run on this machine: fill_command() wrapped by the
// launcher. (Runs across nodes are launched by cluster_run_argv().)
std::string run_command(const SweepConfig& config, const SweepPoint& point);

// How a run of a sweep across nodes is laid out: gpus = the point's "gpus"
// (1 without), nodes = ceil(gpus / gpus_per_node), ranks (one per GPU) and
// GPUs per node = min(gpus, gpus_per_node).
struct NodeLayout {
  int gpus = 1;
  int nodes = 1;
  int ranks_per_node = 1;
};
NodeLayout node_layout(const SweepConfig& config, const SweepPoint& point);

// The grid against the GPUs a sweep on this machine would use (the first N,
// N the largest grid.gpus, else all): more GPUs than there are, a power
// limit outside a GPU's range (Gpu::power_limit_range_mw) or a clock cap
// outside its supported clocks (Gpu::supported_clocks_mhz) is refused with
// a UsageError naming the value, where it stands in the file, the GPU and
// its range. Nothing is changed on any GPU. Not for sweeps across nodes
// (their GPUs are not this machine's).
void check_grid_on_gpus(const SweepConfig& config, const std::vector<std::shared_ptr<Gpu>>& gpus);

// What a run across nodes needs besides its grid point.
struct ClusterLaunch {
  std::string joule_binary;                  // the joule every rank runs (same path on every node)
  std::string report_path;                   // rank 0 writes the job's JSON report here (shared filesystem)
  std::string timeline_path;                 // each node's leader its timeline beside it (node_file_path)
  std::vector<std::string> measure_options;  // device options for `joule measure` (--backend, --sim)
  std::vector<std::string> forwarded_env;    // names mpirun passes on with -x (srun passes everything)
  bool as_root = false;                      // mpirun needs --allow-run-as-root
};
// The launcher's argv of one run across nodes:
//   srun --nodes N --ntasks G --ntasks-per-node K [launcher_options] JOULE measure --mpi --json
//        --output REPORT --timeline TIMELINE --sample util [device options] -- /bin/sh -c CMD
//   mpirun -np G --map-by ppr:K:node [--allow-run-as-root] [-x NAME ...] [launcher_options] JOULE
//        measure --mpi --json --output REPORT --timeline TIMELINE --sample util --gpus 0,..,K-1
//        [device options] -- /bin/sh -c CMD
// (under mpirun the sweep picks each node's GPUs: the first K, as on one
// machine; under srun Slurm does, and each node measures those its ranks'
// CUDA_VISIBLE_DEVICES, or on AMD ROCR_/HIP_VISIBLE_DEVICES, name).
std::vector<std::string> cluster_run_argv(const SweepConfig& config, const SweepPoint& point,
                                          const ClusterLaunch& launch);
// argv as one line a POSIX shell reads back to the same words.
std::string shell_join(const std::vector<std::string>& argv);

// What a sweep would do, from its grid and its store (read only: a store that
// does not exist yet is not created).
struct SweepPlan {
  std::vector<SweepPoint> to_run;  // not finished in the store, in run order
  int total = 0;                   // grid points x repeats
  int configurations = 0;
  int finished = 0;                // already in the store (failed ones included unless retried)
  int failed_kept = 0;             // failed runs in the store that will not run again (no --retry-failed)
  int failed_retried = 0;          // failed runs in the store that will run again (--retry-failed)
  double mean_run_s = 0.0;         // of the runs in the store; 0: none yet
  // E.g. "120 runs (40 configurations x 3 repeats), 20 already in s.sqlite, 100 to
  // run: about 1.7 h at the 60 s per run so far".
  std::string describe(const std::string& store_path) const;
};
// retry_failed: failed runs count as not finished (run again).
SweepPlan plan_sweep(const SweepConfig& config, const std::string& store_path, bool retry_failed = false);

// "45 s", "12 min", "3.4 h", "2.1 days".
std::string rough_duration(double seconds);

struct SweepOptions {
  bool no_control = false;       // refuse grids that need GPU control
  bool progress = false;         // a progress line on stderr
  bool retry_failed = false;     // run failed runs of the store again (a new row each; the old one is kept)
  // Stop on SIGINT, SIGTERM and SIGHUP: the run going is passed the signal
  // (its whole process group: ChildProcess), given kill_grace_s to end and
  // then killed; once every process of it is gone, it is recorded as
  // interrupted (error: the signal), its GPU settings restored, and no
  // further run starts. Off: the process's handlers are left alone between
  // runs (during a run ChildProcess forwards signals all the same).
  bool handle_signals = true;
  std::optional<double> kill_grace_s;  // overrides the config's kill_grace_s
  std::string store_override;
  DiscoveryOptions discovery;    // across nodes: backend and sim spec passed on to `joule measure`
  std::function<void(const std::string&)> log;  // default: stderr
  // Across nodes: the joule the ranks run. Empty: this program
  // (/proc/self/exe), right for the joule CLI; other programs set it.
  std::string joule_binary;
};

// The launch of one run across nodes as the sweep makes it: joule binary,
// device options and environment from options and this process, report
// beside the store (<store>.run<id>.json, absolute).
ClusterLaunch cluster_launch_of(const SweepOptions& options, const std::string& store_path, const std::string& run_id);
// The command a run executes, as the store records it and --dry-run shows it
// (across nodes: the launcher line; run_id names its report file).
std::string described_command(const SweepConfig& config, const SweepPoint& point, const SweepOptions& options,
                              const std::string& store_path, const std::string& run_id);

struct SweepSummary {
  int total = 0, skipped = 0, ran = 0, failed = 0;  // failed: every run not "ok" (partial included)
  int failed_kept = 0;      // failed runs of the store not run again (no retry_failed)
  int stopped_by_signal = 0;  // the signal that stopped the sweep (its run recorded interrupted); 0: none
  bool simulated = false;     // its GPUs were simulated: the figures are a model's, not measurements
};

// Runs what the store does not hold yet. Throws UsageError for a grid that
// needs control where control is off or unavailable, and for a store whose
// runs were measured on real GPUs when this sweep's are simulated (or the
// other way round): one store never mixes the two.
//
// A run's status: ok; failed (non-zero exit, or not measured; run again
// only with retry_failed); partial (it exited 0, but some device's or
// node's measurement is missing: a GPU lost inside the run, a node's report
// missing; the run's error names it; not used by the analysis, and run
// again when the sweep is resumed, like interrupted); interrupted (the
// sweep was stopped by a signal during it, or died: found 'running' when a
// sweep next opens the store).
SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options);

// One row per run of the store, as CSV (its "nodes" column: the nodes the
// run was launched on). Throws Error naming the path.
void export_sweep_csv(const std::string& store_path, const std::string& csv_path);
// One row per node of each run (run_id, node, ranks, gpus, elapsed_s,
// gpu/cpu/dram energy, warnings). Returns the rows written.
int export_sweep_nodes_csv(const std::string& store_path, const std::string& csv_path);

}  // namespace joule
