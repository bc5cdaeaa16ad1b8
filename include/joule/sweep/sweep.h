// `joule sweep`: run a training command over a grid (batch size, GPU count,
// power limit, ...) with repeats, measure each run, and keep every result in
// a SQLite store that a later invocation resumes from.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joule/device/discovery.h"

namespace joule {

// From a TOML file:
//   command = "python3 train.py --batch-size {batch_size}"
//   repeats = 3
//   launcher = "local"        # local | torchrun | mpirun | srun
//   store = "sweep.sqlite"    # default: next to the config, <name>.sqlite
//   [grid]
//   batch_size = [32, 64]
//   gpus = [1, 2]             # GPUs per run: the first N are used and measured
//   power_limit = [300, 250]  # watts, applied to those GPUs and restored after
//   sm_clock_mhz = [1980, 1410]  # SM clock caps (and memory_clock_mhz), the same way
struct SweepConfig {
  std::string path;
  std::string command;
  std::string launcher = "local";
  int repeats = 1;
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;  // in file order
  std::string store_path;

  // Throws UsageError naming the file, and the line where TOML says it.
  static SweepConfig load(const std::string& path);
};

struct SweepPoint {
  std::map<std::string, std::string> values;
  int repeat = 0;
  // Canonical text of the values, identifying the configuration in the store.
  std::string config_key() const;
};

// Every grid point times every repeat, in a stable order.
std::vector<SweepPoint> expand_grid(const SweepConfig& config);
// The shell command of one run: placeholders filled, wrapped by the launcher.
// Throws UsageError naming an unknown placeholder.
std::string run_command(const SweepConfig& config, const SweepPoint& point);

// What a sweep would do, from its grid and its store (read only: a store that
// does not exist yet is not created).
struct SweepPlan {
  std::vector<SweepPoint> to_run;  // not finished in the store, in run order
  int total = 0;                   // grid points x repeats
  int configurations = 0;
  int finished = 0;                // already in the store
  double mean_run_s = 0.0;         // of the runs in the store; 0: none yet
  // E.g. "120 runs (40 configurations x 3 repeats), 20 already in s.sqlite, 100 to
  // run: about 1.7 h at the 60 s per run so far".
  std::string describe(const std::string& store_path) const;
};
SweepPlan plan_sweep(const SweepConfig& config, const std::string& store_path);

// "45 s", "12 min", "3.4 h", "2.1 days".
std::string rough_duration(double seconds);

struct SweepOptions {
  bool no_control = false;       // refuse grids that need GPU control
  bool progress = false;         // a progress line on stderr
  std::string store_override;
  DiscoveryOptions discovery;
  std::function<void(const std::string&)> log;  // default: stderr
};

struct SweepSummary {
  int total = 0, skipped = 0, ran = 0, failed = 0;
};

// Runs what the store does not hold yet. Throws UsageError for a grid that
// needs control where control is off or unavailable.
SweepSummary run_sweep(const SweepConfig& config, const SweepOptions& options);

// One row per run of the store, as CSV. Throws Error naming the path.
void export_sweep_csv(const std::string& store_path, const std::string& csv_path);

}  // namespace joule
