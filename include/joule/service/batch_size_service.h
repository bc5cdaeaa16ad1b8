// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
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

// What the service accepts: every number a request carries is checked
// against these before anything is stored, and one outside is a
// RequestError(400) naming the field and its range. They are wide enough for
// any real training job and narrow enough that no sum the optimizer keeps can
// overflow (docs/service.md, "Input ranges", argues each).
namespace input_limits {
inline constexpr double kMaxEnergyJ = 1e15;   // 278 GWh: a recurrence's energy
inline constexpr double kMaxTimeS = 1e9;      // 31.7 years: a recurrence's time
inline constexpr double kMaxPowerW = 1e5;     // 100 kW: one GPU's limit or power
inline constexpr int64_t kMaxEpochs = 1'000'000;
inline constexpr int64_t kMaxBatchSize = 1'000'000'000;
inline constexpr double kMaxBeta = 100.0;
inline constexpr int64_t kMaxWindow = 1'000;  // observations per size kept in the state
inline constexpr int64_t kMaxGpuCount = 1'000'000;
inline constexpr std::size_t kMaxProfileEntries = 1'000;
// GPU model and node names: bytes of UTF-8 (docs/service.md, "Names").
inline constexpr std::size_t kMaxLabelBytes = 256;
// The largest cost an accepted report can have: a measured cost is a mix
// (eta) of energy <= kMaxEnergyJ and max_power * time <= kMaxPowerW *
// kMaxTimeS = 1e14; a run stopped early costs its threshold, beta times such
// a cost. Sums of 2^64 of them stay below 1e37 (squares 1e53): finite.
inline constexpr double kMaxCost = kMaxBeta * kMaxEnergyJ;
}  // namespace input_limits

// A request's body as JSON (empty: {}). Bytes that are not UTF-8 (named by
// offset), not JSON, or a number no double holds (1e400, which the parser
// refuses as out of range), are a RequestError(400); for such a number the
// message names its field and the field's range. No message echoes bytes
// that are not printable UTF-8.
nlohmann::json parse_request_body(const std::string& body);

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
  // RequestError(400) naming the first number outside input_limits.
  void check() const;
};

// How far a recurrence in flight has got: epochs done, energy and time so far.
struct RecurrenceProgress {
  int epochs = 0;
  double energy_j = 0.0;
  double time_s = 0.0;

  static RecurrenceProgress from_json(const nlohmann::json& j);  // RequestError(400)
  void check() const;  // likewise
};

// The service's answer to a progress report: the cost so far (the job's
// objective), the recurrence's threshold, and whether it is past it.
struct ProgressAdvice {
  double cost = 0.0;
  double threshold_cost = 0.0;  // +inf: none
  bool stop = false;
};

struct JobSummary {
  JobSpec spec;  // with a damaged spec, only its name
  std::string phase;  // pruning | thompson | damaged
  int best_batch_size = 0;
  int64_t revision = 0;
  int64_t recurrences = 0;
  int64_t in_flight = 0;
  // Why the job's stored spec or optimizer state cannot be used ("": they
  // can), e.g. a non-finite cost an older joule let in. Such a job is
  // listed with phase "damaged", refuses asks (409), still records reports,
  // and `joule jobs reset NAME` (reset_job) repairs it.
  std::string damaged;

  // As GET /v1/jobs lists it: spec, phase, best_batch_size, revision,
  // recurrences, in_flight, and "damaged" (the reason) for a damaged job.
  nlohmann::json to_json() const;
};

// What reset_job did.
struct ResetOutcome {
  std::string was_damaged;       // the damage it repaired ("": the state was sound)
  int64_t replayed = 0;          // finished recurrences the new state learned from
  std::vector<int64_t> skipped;  // finished recurrences whose stored results are out of range
  int64_t revision = 0;          // the job's revision after the reset
};

namespace detail {
class DamageLog;  // batch_size_service.cc
}

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

  // Jobs whose stored spec or state cannot be used (JobSummary::damaged),
  // for /metrics (joule_service_damaged_jobs). Reads every job's state.
  std::size_t damaged_jobs();
  // Where the service reports what goes wrong beside a request's answer: a
  // damaged job's state (once per job and revision), a reset. Default: nowhere.
  void set_log(std::function<void(const std::string&)> log);

  // Rebuilds a job's optimizer state, damaged or not, keeping its spec,
  // recurrences and profiles: from the results of its finished recurrences
  // whose stored results are within input_limits, in the order they were
  // asked for (fresh: from none, as if just registered). Bumps the revision,
  // so every process and replica reloads it. 404: no such job; 409: its spec
  // itself is damaged (register it again under another name).
  ResetOutcome reset_job(const std::string& name, bool fresh = false);

  std::vector<JobSummary> jobs();
  JobSummary job(const std::string& name);
  // Spec, state and every recurrence, as JSON (joule jobs export).
  nlohmann::json export_job(const std::string& name);

 private:
  JobSummary summarize(const StoredJob& stored);

  std::shared_ptr<JobStore> store_;
  std::shared_ptr<detail::DamageLog> damage_log_;
  // Asks and reports, group-committed (service/group_commit.h), with the
  // optimizers of the revisions this process wrote last.
  class Writes;
  std::unique_ptr<Writes> writes_;
};

}  // namespace joule::service
