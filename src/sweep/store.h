// The SQLite results store of `joule sweep`. Private to the sweep module.
#pragma once

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

namespace joule::sweep {

struct RunRecord {
  std::string status;  // ok | failed | interrupted
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
};

class Store {
 public:
  explicit Store(const std::string& path);  // creates the schema; throws Error naming the path
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Runs left 'running' by a sweep that died: marked interrupted (to be rerun).
  int mark_interrupted();
  bool finished(const std::string& config_key, int repeat);
  // Mean wall time of the runs that finished (ok or failed); none yet: 0.
  double mean_finished_elapsed_s();
  long long begin(const std::string& sweep, const std::string& config_key, int repeat, const std::string& command);
  void finish(long long id, const RunRecord& record);
  void export_csv(const std::string& csv_path);

 private:
  void exec(const std::string& sql);
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace joule::sweep
