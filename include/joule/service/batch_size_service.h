// The batch-size service's logic, independent of HTTP: one BatchSizeOptimizer
// per registered job, kept in a JobStore and changed only inside one of its
// transactions (load the state, act, save it), so recurrences asking and
// reporting at once from threads, processes or replicas never lose an update.
// Asks and reports arriving together share a transaction (group commit): each
// returns once its change is committed, and one failing request never fails
// the others.
// `joule serve` puts it behind HTTP (service/http_server.h).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/error.h"
#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/cost.h"
#include "joule/service/job_store.h"

namespace joule::service {

// A request the service refuses; status is the HTTP status that says why
// (400 bad input, 404 unknown job or recurrence, 409 conflict).
class RequestError : public UsageError {
 public:
  RequestError(int status, const std::string& what) : UsageError(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// A power profile as the service takes it (PUT .../profiles/...: "entries").
nlohmann::json power_profile_json(const std::vector<PowerProfileEntry>& entries);

struct JobSpec {
  std::string name;
  std::vector<int> batch_sizes;  // sorted, distinct, positive
  int default_batch_size = 0;
  double eta = 0.5;   // energy (1) against time (0)
  double beta = 2.0;  // early stop at beta x the cheapest converged cost
  std::string target_metric;  // what "reached the target" means, for people
  int max_epochs = 0;
  std::optional<std::size_t> window;  // recurrences per size that count (drift)
  std::string gpu_model;
  int gpu_count = 1;
  double max_power_w = 0.0;  // the GPU's largest limit: the time term's price
  uint64_t seed = 1;

  // Throws RequestError(400) naming the first field that is missing or wrong.
  static JobSpec from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

// What a recurrence is told to do.
struct Assignment {
  int64_t recurrence_id = 0;
  int batch_size = 0;
  std::optional<double> power_limit_w;  // known for this size on this GPU model
  double early_stop_threshold_cost = 0.0;  // +inf: none yet
};

struct RecurrenceResult {
  double energy_j = 0.0;
  double time_s = 0.0;
  bool reached_target = false;
  // Stopped at the threshold it was given: it costs exactly that.
  bool stopped_early = false;

  static RecurrenceResult from_json(const nlohmann::json& j);  // RequestError(400)
};

// How far a recurrence in flight has got: epochs done, energy and time so far.
struct RecurrenceProgress {
  int epochs = 0;
  double energy_j = 0.0;
  double time_s = 0.0;

  static RecurrenceProgress from_json(const nlohmann::json& j);  // RequestError(400)
};

// The service's answer to a progress report: the cost so far (the job's
// objective), the recurrence's threshold, and whether it is past it.
struct ProgressAdvice {
  double cost = 0.0;
  double threshold_cost = 0.0;  // +inf: none
  bool stop = false;
};

struct JobSummary {
  JobSpec spec;
  std::string phase;  // pruning | thompson
  int best_batch_size = 0;
  int64_t revision = 0;
  int64_t recurrences = 0;
  int64_t in_flight = 0;
};

class BatchSizeService {
 public:
  explicit BatchSizeService(std::shared_ptr<JobStore> store);
  ~BatchSizeService();
  BatchSizeService(const BatchSizeService&) = delete;
  BatchSizeService& operator=(const BatchSizeService&) = delete;

  // true: created; false: already there with the same spec. A different
  // spec under the name is a RequestError(409).
  bool register_job(const JobSpec& spec);
  // gpu_model: the asker's GPU model, whose published profile gives the
  // power limit ("" : the job spec's gpu_model).
  Assignment ask(const std::string& job, const std::string& node, const std::string& gpu_model = "");
  // Returns the cost the optimizer learned from. A recurrence reports once.
  // check_job, when given, sees the recurrence's job first and may refuse
  // it by throwing RequestError (an access check: nothing is changed).
  double report(int64_t recurrence_id, const RecurrenceResult& result,
                const std::function<void(const std::string& job)>& check_job = nullptr);
  // Records the progress of a recurrence in flight (the last one is kept,
  // and shown by export_job) and says whether it has passed its early-stop
  // threshold. 404: no such recurrence; 409: it has reported already.
  ProgressAdvice progress(int64_t recurrence_id, const RecurrenceProgress& progress,
                          const std::function<void(const std::string& job)>& check_job = nullptr);
  // A measured power profile (entries of power_limit_w, time_per_epoch_s,
  // avg_power_w) for one batch size of a job on a GPU model: later
  // recurrences on that model get its best limit without profiling.
  void put_power_profile(const std::string& job, const std::string& gpu_model, int batch_size,
                         const nlohmann::json& entries);

  // Asks and reports run, and the store transactions that ran them (with
  // many clients at once, far fewer than the writes: group commit, above).
  struct WriteCounts {
    uint64_t writes = 0;
    uint64_t transactions = 0;
  };
  WriteCounts write_counts() const;
  // Whether the store answers now (/healthz).
  StoreHealth store_health();

  std::vector<JobSummary> jobs();
  JobSummary job(const std::string& name);
  // Spec, state and every recurrence, as JSON (joule jobs export).
  nlohmann::json export_job(const std::string& name);

 private:
  JobSummary summarize(const StoredJob& stored);

  std::shared_ptr<JobStore> store_;
  // Asks and reports, group-committed (service/group_commit.h), with the
  // optimizers of the revisions this process wrote last.
  class Writes;
  std::unique_ptr<Writes> writes_;
};

}  // namespace joule::service
