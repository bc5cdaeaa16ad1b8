// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/service/batch_size_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "joule/common/utf8.h"
#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/cost.h"
#include "service/group_commit.h"
#include "service/job_store_sql.h"
#include "service/request_input.h"

namespace joule::service {
namespace {

namespace limits = input_limits;
using input::bad_request;
using input::check_label;
using input::profile_entries;

// Text read back from the store for an answer or a message: as it is when
// it is UTF-8 (an older joule, or a person with sqlite3, may have left
// bytes that are not), else written printable.
std::string stored_text(const std::string& text) { return valid_utf8_or_printable(text); }

BatchSizeOptimizer optimizer_for(const JobSpec& spec) {
  BatchSizeOptimizerOptions o;
  o.batch_sizes = spec.batch_sizes;
  o.default_batch_size = spec.default_batch_size;
  o.beta = spec.beta;
  o.window = spec.window;
  o.seed = spec.seed;
  // Running sums only: the stored state (version 2) stays the same size
  // however many recurrences the job has seen. A window needs its history.
  o.keep_observations = false;
  return BatchSizeOptimizer(o);
}

nlohmann::json parse_stored(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("job store: {} is not valid JSON ({})", what, e.what()));
  }
}

// Stored data that does not validate is the store's fault, not the
// request's: an Error (500), never a RequestError, which would also tell the
// group commit that the request failed before changing anything.
template <typename Parse>
auto from_store(const std::string& what, Parse&& parse) {
  try {
    return parse();
  } catch (const RequestError& e) {
    throw Error(fmt::format("job store: {} is malformed ({})", what, e.what()));
  }
}

JobSpec stored_spec(const StoredJob& job) {
  const std::string what = "spec of " + job.name;
  return from_store(what, [&] { return JobSpec::from_json(parse_stored(job.spec_json, what)); });
}

// Why an optimizer restored from a store cannot go on ("": it can): options
// that are not its spec's, or a cost outside what accepted reports give (an
// older joule took any number), from which the next report's sums could
// overflow.
// A stored cost may exceed kMaxCost by rounding (eta * E + (1 - eta) * P * t
// at the extremes), and a sum by its rounding: twice the bound is still
// nowhere near overflow, and no accepted report comes near it.
constexpr double kStoredCostMax = 2 * limits::kMaxCost;

bool stored_cost_in_range(double cost) { return cost >= 0 && cost <= kStoredCostMax; }

std::string state_out_of_range(const BatchSizeOptimizer& optimizer, const JobSpec& spec) {
  constexpr double kMax = kStoredCostMax;
  const BatchSizeOptimizerOptions& options = optimizer.options();
  if (options.batch_sizes != spec.batch_sizes || options.beta != spec.beta || options.window != spec.window) {
    return "its batch sizes, beta or window are not those of its spec";
  }
  if (options.prior.precision != 0 || !optimizer.sampler().arm_priors().empty()) {
    return "it has a prior, which the service never sets";
  }
  const double threshold = optimizer.early_stop_threshold_cost();
  if (std::isfinite(threshold) && !stored_cost_in_range(threshold)) {
    return fmt::format("its early-stop threshold {} is outside [0, {}]", threshold, kMax);
  }
  for (int b : spec.batch_sizes) {
    const RunningSums r = optimizer.sampler().running(b);
    const double n = static_cast<double>(r.n);
    if (!(r.sum >= 0 && r.sum <= n * kMax && r.m2 <= n * kMax * kMax && stored_cost_in_range(r.welford_mean))) {
      return fmt::format("batch size {}'s running sums (n {}, sum {}, m2 {}) hold costs outside [0, {}]", b, r.n, r.sum,
                         r.m2, kMax);
    }
    for (double cost : optimizer.sampler().observations(b)) {
      if (!stored_cost_in_range(cost)) return fmt::format("batch size {} has a cost {} outside [0, {}]", b, cost, kMax);
    }
  }
  return "";
}

// A job's stored optimizer, or why it cannot be used.
struct LoadedState {
  std::optional<BatchSizeOptimizer> optimizer;
  std::string damage;
};

LoadedState load_state(const StoredJob& job, const JobSpec& spec) {
  try {
    BatchSizeOptimizer optimizer = BatchSizeOptimizer::from_json(parse_stored(job.state_json, "state of " + job.name));
    if (std::string why = state_out_of_range(optimizer, spec); !why.empty()) {
      return {std::nullopt, "its stored optimizer state is out of range: " + why};
    }
    return {std::move(optimizer), ""};
  } catch (const std::exception& e) {
    return {std::nullopt, fmt::format("its stored optimizer state cannot be read ({})", printable(e.what()))};
  }
}

// A stored spec, or why it cannot be used.
std::optional<JobSpec> load_spec(const StoredJob& job, std::string* damage) {
  try {
    return stored_spec(job);
  } catch (const std::exception& e) {
    *damage = printable(e.what());
    return std::nullopt;
  }
}

std::string damaged_message(const std::string& job, const std::string& damage) {
  return fmt::format(
      "job '{}' is damaged: {}; `joule jobs reset {} --store STORE` rebuilds its state from its finished recurrences",
      job, damage, job);
}

// The spec of a job a request needs it for; damaged, a 409 that says so.
JobSpec usable_spec(const StoredJob& job) {
  std::string damage;
  std::optional<JobSpec> spec = load_spec(job, &damage);
  if (!spec) throw RequestError(409, damaged_message(job.name, damage));
  return std::move(*spec);
}

StoredJob job_or_404(StoreTransaction& txn, const std::string& name) {
  auto job = txn.job(name);
  if (!job) throw RequestError(404, fmt::format("no job '{}'", name));
  return *job;
}

}  // namespace

// A job as a batch of writes works on it: loaded once, changed in memory by
// every write of the batch, saved once.
struct WorkingJob {
  JobSpec spec;
  std::optional<BatchSizeOptimizer> optimizer;  // none: the stored state is damaged
  std::string damage;                           // why
  int64_t revision = 0;  // as read
  int64_t changes = 0;   // writes of this batch that changed it
  std::map<std::pair<std::string, int>, std::optional<double>> power_limit_w;  // by GPU model and batch size
};

// The service's log of damaged jobs: each damage once per job and revision,
// however often it is read.
class detail::DamageLog {
 public:
  void set(std::function<void(const std::string&)> log) {
    std::lock_guard lock(mutex_);
    log_ = std::move(log);
  }
  void damaged(const std::string& job, int64_t revision, const std::string& damage) {
    std::lock_guard lock(mutex_);
    if (log_ && logged_.insert({job, revision}).second) log_(damaged_message(job, damage));
  }
  void say(const std::string& line) {
    std::lock_guard lock(mutex_);
    if (log_) log_(line);
  }

 private:
  std::mutex mutex_;
  std::function<void(const std::string&)> log_;
  std::set<std::pair<std::string, int64_t>> logged_;
};

// One store transaction shared by a batch of asks and reports. The rule that
// lets a failed write leave the others be: a write throws RequestError only
// before it changes anything; any other failure rolls the whole batch back.
class WriteBatch {
 public:
  using Cache = std::map<std::string, WorkingJob>;

  WriteBatch(std::unique_ptr<StoreTransaction> txn, Cache& cache, detail::DamageLog& damage_log)
      : txn_(std::move(txn)), cache_(cache), damage_log_(damage_log) {}

  // The job, its row locked. The optimizer comes from the cache when the
  // stored revision is the one this process wrote last (no state read or
  // parsed), else from the store. A damaged state leaves it without an
  // optimizer (and its damage logged); a damaged spec is a 409, before
  // anything changed.
  WorkingJob& job(const std::string& name) {
    if (auto it = jobs_.find(name); it != jobs_.end()) return it->second;
    const std::optional<int64_t> revision = txn_->job_revision(name);
    if (!revision) throw RequestError(404, fmt::format("no job '{}'", name));
    if (auto cached = cache_.extract(name); !cached.empty() && cached.mapped().revision == *revision) {
      cached.mapped().power_limit_w.clear();  // profiles may have changed since
      return jobs_.insert(std::move(cached)).position->second;
    }
    const std::optional<StoredJob> stored = txn_->job(name);
    if (!stored) throw Error(fmt::format("job store: job '{}' vanished inside a transaction", name));
    std::string damage;
    std::optional<JobSpec> spec = load_spec(*stored, &damage);
    if (!spec) {
      damage_log_.damaged(name, stored->revision, damage);
      throw RequestError(409, damaged_message(name, damage));
    }
    LoadedState state = load_state(*stored, *spec);
    if (!state.damage.empty()) damage_log_.damaged(name, stored->revision, state.damage);
    return jobs_
        .emplace(name, WorkingJob{std::move(*spec), std::move(state.optimizer), std::move(state.damage), stored->revision,
                                  0, {}})
        .first->second;
  }

  // The best limit of a published power profile for this batch size on this
  // GPU model, if any.
  std::optional<double> power_limit_w(WorkingJob& job, const std::string& gpu_model, int batch_size) {
    auto [it, first] = job.power_limit_w.try_emplace({gpu_model, batch_size});
    if (first) {
      if (auto profile = txn_->power_profile(gpu_model, job.spec.name, batch_size)) {
        const std::string what = "power profile of " + job.spec.name;
        const auto entries = from_store(what, [&] { return profile_entries(parse_stored(*profile, what)); });
        it->second = optimal_power_limit(entries, job.spec.eta, job.spec.max_power_w).power_limit_w;
      }
    }
    return it->second;
  }

  // Recurrences a report of this batch will read: read together (one
  // round trip on PostgreSQL) by fetch_recurrences().
  void want_recurrence(int64_t id) { wanted_.push_back(id); }
  void fetch_recurrences() {
    for (RecurrenceRow& row : txn_->lock_recurrences(wanted_)) recurrences_[row.id] = std::move(row);
    wanted_.clear();
  }
  // The recurrence as this batch sees it (a report earlier in the batch may
  // have finished it); null when there is none.
  RecurrenceRow* recurrence(int64_t id) {
    if (auto it = recurrences_.find(id); it != recurrences_.end()) return &it->second;
    auto rows = txn_->lock_recurrences({id});  // not announced: read alone
    if (rows.empty()) return nullptr;
    return &(recurrences_[id] = std::move(rows.front()));
  }

  // Written at commit, each kind in one set: the id of an inserted row goes
  // to *id_out then (before any request of the batch is answered).
  void insert_recurrence(RecurrenceRow row, int64_t* id_out) {
    inserts_.push_back(std::move(row));
    insert_ids_.push_back(id_out);
  }
  void finish_recurrence(const RecurrenceRow& row) { finishes_.push_back(row); }

  // Saves every changed job once, commits, and keeps the jobs for the next
  // batch. A job left out of the cache (a failed batch) is read again.
  void commit() {
    txn_->insert_recurrences(inserts_);
    for (std::size_t i = 0; i < inserts_.size(); ++i) *insert_ids_[i] = inserts_[i].id;
    txn_->finish_recurrences(finishes_);
    for (auto& [name, job] : jobs_) {
      if (job.changes == 0) continue;
      job.revision += job.changes;
      job.changes = 0;
      txn_->save_state(name, job.optimizer->to_json().dump(), job.revision);
    }
    txn_->commit();
    cache_.merge(jobs_);
  }

 private:
  std::unique_ptr<StoreTransaction> txn_;
  Cache& cache_;
  detail::DamageLog& damage_log_;
  Cache jobs_;
  std::vector<int64_t> wanted_;
  std::map<int64_t, RecurrenceRow> recurrences_;
  std::vector<RecurrenceRow> inserts_;
  std::vector<int64_t*> insert_ids_;
  std::vector<RecurrenceRow> finishes_;
};

class BatchSizeService::Writes {
 public:
  // Enough to keep one transaction short (a few ms at most on a slow disk).
  static constexpr std::size_t kMaxBatch = 256;

  Writes(std::shared_ptr<JobStore> store, std::shared_ptr<detail::DamageLog> damage_log)
      : store_(std::move(store)),
        damage_log_(std::move(damage_log)),
        commits_([this](const auto& batch) { run(batch); }, kMaxBatch) {}

  void submit(std::function<void(WriteBatch&)> write, std::function<void(WriteBatch&)> prepare = nullptr) {
    commits_.submit(std::move(write), std::move(prepare));
  }

  WriteCounts counts() const { return {writes_.load(), transactions_.load()}; }

 private:
  using Request = GroupCommit<WriteBatch>::Request;

  // The group commit's runner, called by one leader at a time: the cache is
  // the leaders' alone. When the shared transaction fails for a request's
  // sake, each request is run again alone, so that only a request that fails
  // by itself fails; when the store fails, the whole batch fails with it.
  void run(const std::vector<Request*>& batch) {
    writes_ += batch.size();
    ++transactions_;
    try {
      WriteBatch writes(store_->begin(), cache_, *damage_log_);
      for (Request* r : batch) {
        if (r->prepare) r->prepare(writes);
      }
      writes.fetch_recurrences();
      for (Request* r : batch) {
        r->error = nullptr;
        try {
          r->apply(writes);
        } catch (const RequestError&) {
          r->error = std::current_exception();
        }
      }
      writes.commit();
    } catch (const StoreBusyError&) {
      // The store failed, not a request (a lock or busy timeout, the database
      // unreachable, a COMMIT in doubt): run alone, each request would wait
      // out the same deadline again and could apply twice what a COMMIT in
      // doubt committed. Every request of the batch gets the 503 and retries.
      for (Request* r : batch) r->error = std::current_exception();
    } catch (...) {
      if (batch.size() == 1) {
        batch.front()->error = std::current_exception();
        return;
      }
      writes_ -= batch.size();  // counted again, one by one
      for (Request* r : batch) run({r});
    }
  }

  std::shared_ptr<JobStore> store_;
  std::shared_ptr<detail::DamageLog> damage_log_;
  WriteBatch::Cache cache_;
  std::atomic<uint64_t> writes_{0}, transactions_{0};
  GroupCommit<WriteBatch> commits_;
};

BatchSizeService::BatchSizeService(std::shared_ptr<JobStore> store)
    : store_(std::move(store)),
      damage_log_(std::make_shared<detail::DamageLog>()),
      writes_(std::make_unique<Writes>(store_, damage_log_)) {}

BatchSizeService::~BatchSizeService() = default;

BatchSizeService::WriteCounts BatchSizeService::write_counts() const { return writes_->counts(); }

StoreHealth BatchSizeService::store_health() { return store_->health(); }

void BatchSizeService::set_log(std::function<void(const std::string&)> log) { damage_log_->set(std::move(log)); }

bool BatchSizeService::register_job(const JobSpec& given) {
  // A spec built in code gets the checks a request's gets.
  const JobSpec spec = JobSpec::from_json(given.to_json());
  const std::string spec_json = spec.to_json().dump();
  auto txn = store_->begin();
  if (auto existing = txn->job(spec.name)) {
    if (existing->spec_json == spec_json) return false;
    throw RequestError(409, fmt::format("job '{}' exists with a different spec (its spec: {})", spec.name,
                                        stored_text(existing->spec_json)));
  }
  txn->insert_job({spec.name, spec_json, optimizer_for(spec).to_json().dump(), 1, unix_time_s()});
  txn->commit();
  return true;
}

Assignment BatchSizeService::ask(const std::string& job_name, const std::string& node, const std::string& gpu_model) {
  check_label(node, "ask: 'node'");
  check_label(gpu_model, "ask: 'gpu_model'");
  Assignment a;
  writes_->submit([&](WriteBatch& batch) {
    WorkingJob& job = batch.job(job_name);
    // Nothing to advise from: refused before anything changes.
    if (!job.optimizer) throw RequestError(409, damaged_message(job_name, job.damage));
    a.batch_size = job.optimizer->predict();
    ++job.changes;
    a.early_stop_threshold_cost = job.optimizer->early_stop_threshold_cost();
    a.power_limit_w = batch.power_limit_w(job, gpu_model.empty() ? job.spec.gpu_model : gpu_model, a.batch_size);
    RecurrenceRow row;
    row.job = job_name;
    row.batch_size = a.batch_size;
    row.power_limit_w = a.power_limit_w;
    row.threshold_cost = a.early_stop_threshold_cost;
    row.node = node;
    row.started_at_s = unix_time_s();
    batch.insert_recurrence(std::move(row), &a.recurrence_id);
  });
  return a;
}

double BatchSizeService::report(int64_t recurrence_id, const RecurrenceResult& result,
                                const std::function<void(const std::string& job)>& check_job) {
  result.check();
  double cost = 0.0;
  const auto prepare = [&](WriteBatch& batch) { batch.want_recurrence(recurrence_id); };
  writes_->submit([&](WriteBatch& batch) {
    RecurrenceRow* row = batch.recurrence(recurrence_id);
    if (!row) throw RequestError(404, fmt::format("no recurrence {}", recurrence_id));
    if (check_job) check_job(row->job);
    if (row->finished()) throw RequestError(409, fmt::format("recurrence {} has already reported", recurrence_id));
    WorkingJob& job = batch.job(row->job);
    // A run stopped at its threshold costs the threshold (what the optimizer
    // would have computed had the run gone on); otherwise what it measured.
    // (A threshold an older joule handed out beyond any accepted cost is not
    // taken: it could overflow the sums.)
    cost = result.stopped_early && row->threshold_cost && stored_cost_in_range(*row->threshold_cost)
               ? *row->threshold_cost
               : zeus_cost(result.energy_j, result.time_s, job.spec.eta, job.spec.max_power_w);
    // A damaged job keeps the result in its recurrence (a reset learns from
    // it) and its state as it is.
    if (job.optimizer) {
      job.optimizer->observe(row->batch_size, cost, result.reached_target);
      ++job.changes;
    }
    row->finished_at_s = unix_time_s();
    row->energy_j = result.energy_j;
    row->time_s = result.time_s;
    row->cost = cost;
    row->reached_target = result.reached_target;
    row->stopped_early = result.stopped_early;
    batch.finish_recurrence(*row);
  }, prepare);
  return cost;
}

ProgressAdvice BatchSizeService::progress(int64_t recurrence_id, const RecurrenceProgress& progress,
                                          const std::function<void(const std::string& job)>& check_job) {
  // Its own transaction: progress comes once an epoch, far rarer than asks
  // and reports, and changes no optimizer. Rows in the order reports lock
  // them (the recurrence, then its job).
  progress.check();
  auto txn = store_->begin();
  std::vector<RecurrenceRow> rows = txn->lock_recurrences({recurrence_id});
  if (rows.empty()) throw RequestError(404, fmt::format("no recurrence {}", recurrence_id));
  RecurrenceRow& row = rows.front();
  if (check_job) check_job(row.job);
  if (row.finished()) throw RequestError(409, fmt::format("recurrence {} has already reported", recurrence_id));
  const JobSpec spec = usable_spec(job_or_404(*txn, row.job));
  ProgressAdvice advice;
  advice.cost = zeus_cost(progress.energy_j, progress.time_s, spec.eta, spec.max_power_w);
  advice.threshold_cost = row.threshold_cost.value_or(std::numeric_limits<double>::infinity());
  advice.stop = advice.cost >= advice.threshold_cost;
  row.progress_epochs = progress.epochs;
  row.progress_cost = advice.cost;
  row.progress_at_s = unix_time_s();
  txn->record_progress(row);
  txn->commit();
  return advice;
}

void BatchSizeService::put_power_profile(const std::string& job_name, const std::string& gpu_model, int batch_size,
                                         const nlohmann::json& entries) {
  if (gpu_model.empty()) bad_request("power profile: the GPU model is empty");
  check_label(gpu_model, "power profile: the GPU model");
  const auto parsed = profile_entries(entries);
  auto txn = store_->begin();
  const JobSpec spec = usable_spec(job_or_404(*txn, job_name));
  if (!std::binary_search(spec.batch_sizes.begin(), spec.batch_sizes.end(), batch_size)) {
    bad_request(fmt::format("power profile: batch size {} is not one of job '{}''s", batch_size, job_name));
  }
  txn->put_power_profile(gpu_model, job_name, batch_size, power_profile_json(parsed).dump());
  txn->commit();
}

std::vector<JobSummary> BatchSizeService::jobs() {
  std::vector<JobSummary> out;
  for (const StoredJob& job : store_->jobs()) out.push_back(summarize(job));
  return out;
}

JobSummary BatchSizeService::job(const std::string& name) {
  const std::optional<StoredJob> stored = store_->job(name);
  if (!stored) throw RequestError(404, fmt::format("no job '{}'", name));
  return summarize(*stored);
}

// One job's damage never fails the others' listing: it is its summary's.
JobSummary BatchSizeService::summarize(const StoredJob& stored) {
  const RecurrenceCounts counts = store_->recurrence_counts(stored.name);
  JobSummary summary;
  summary.revision = stored.revision;
  summary.recurrences = counts.total;
  summary.in_flight = counts.in_flight;
  std::optional<JobSpec> spec = load_spec(stored, &summary.damaged);
  LoadedState state;
  if (spec) state = load_state(stored, *spec);
  summary.spec = spec ? std::move(*spec) : JobSpec{};
  summary.spec.name = stored.name;
  if (!state.optimizer) {
    if (summary.damaged.empty()) summary.damaged = state.damage;
    damage_log_->damaged(stored.name, stored.revision, summary.damaged);
    summary.phase = "damaged";
    summary.best_batch_size = summary.spec.default_batch_size;
    return summary;
  }
  summary.phase = state.optimizer->phase() == BatchSizeOptimizer::Phase::kPruning ? "pruning" : "thompson";
  summary.best_batch_size = state.optimizer->best_known();
  return summary;
}

std::size_t BatchSizeService::damaged_jobs() {
  std::size_t damaged = 0;
  for (const StoredJob& job : store_->jobs()) {
    std::string damage;
    const std::optional<JobSpec> spec = load_spec(job, &damage);
    damaged += !spec || !load_state(job, *spec).optimizer ? 1 : 0;
  }
  return damaged;
}

nlohmann::json JobSummary::to_json() const {
  nlohmann::json j = {{"spec", spec.to_json()},          {"phase", phase},
                      {"best_batch_size", best_batch_size}, {"revision", revision},
                      {"recurrences", recurrences},         {"in_flight", in_flight}};
  if (!damaged.empty()) j["damaged"] = damaged;
  return j;
}

nlohmann::json BatchSizeService::export_job(const std::string& name) {
  const std::optional<StoredJob> stored = store_->job(name);
  if (!stored) throw RequestError(404, fmt::format("no job '{}'", name));
  const JobSummary summary = summarize(*stored);
  nlohmann::json recurrences = nlohmann::json::array();
  for (const RecurrenceRow& r : store_->recurrences(name)) {
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    recurrences.push_back({{"id", r.id},
                           {"batch_size", r.batch_size},
                           {"power_limit_w", opt(r.power_limit_w)},
                           {"threshold_cost", opt(r.threshold_cost)},
                           {"node", stored_text(r.node)},
                           {"started_at", r.started_at_s},
                           {"finished_at", opt(r.finished_at_s)},
                           {"energy_j", opt(r.energy_j)},
                           {"time_s", opt(r.time_s)},
                           {"cost", opt(r.cost)},
                           {"reached_target", r.reached_target ? nlohmann::json(*r.reached_target) : nlohmann::json()},
                           {"stopped_early", r.stopped_early},
                           {"progress_epochs", r.progress_epochs ? nlohmann::json(*r.progress_epochs) : nlohmann::json()},
                           {"progress_cost", opt(r.progress_cost)},
                           {"progress_at", opt(r.progress_at_s)}});
  }
  nlohmann::json out = {{"spec", summary.spec.to_json()},
                        {"phase", summary.phase},
                        {"best_batch_size", summary.best_batch_size},
                        {"revision", summary.revision},
                        {"recurrences", recurrences}};
  // A damaged job's export is what there is to repair it from: the state as
  // stored (as text when it is not JSON) and why it is damaged.
  const nlohmann::json state = nlohmann::json::parse(stored->state_json, nullptr, /*allow_exceptions=*/false);
  out["state"] = state.is_discarded() ? nlohmann::json(stored_text(stored->state_json)) : state;
  if (!summary.damaged.empty()) out["damaged"] = summary.damaged;
  return out;
}

namespace {

// A finished recurrence's stored cost, if a reset may learn from it: within
// what accepted reports give, with its outcome recorded.
std::optional<double> replayable_cost(const RecurrenceRow& row) {
  if (!row.finished() || !row.cost || !row.reached_target) return std::nullopt;
  const double cost = *row.cost;
  if (!stored_cost_in_range(cost)) return std::nullopt;
  if (row.energy_j && !input::result_energy_in_range(*row.energy_j)) return std::nullopt;
  if (row.time_s && !input::result_time_in_range(*row.time_s)) return std::nullopt;
  return cost;
}

}  // namespace

ResetOutcome BatchSizeService::reset_job(const std::string& name, bool fresh) {
  // Read before the transaction (a store may serve reads and writes on one
  // connection); the rows open then are locked and read again inside it, in
  // the order reports lock them (recurrences, then the job), so a report
  // that lands meanwhile is learned from, not lost.
  std::vector<RecurrenceRow> rows = store_->recurrences(name);
  std::vector<int64_t> open;
  for (const RecurrenceRow& r : rows) {
    if (!r.finished()) open.push_back(r.id);
  }
  auto txn = store_->begin();
  std::map<int64_t, RecurrenceRow> by_id;
  for (RecurrenceRow& r : rows) by_id[r.id] = std::move(r);
  for (RecurrenceRow& r : txn->lock_recurrences(open)) by_id[r.id] = std::move(r);
  const StoredJob stored = job_or_404(*txn, name);
  const JobSpec spec = usable_spec(stored);

  ResetOutcome outcome;
  outcome.was_damaged = load_state(stored, spec).damage;
  BatchSizeOptimizer optimizer = optimizer_for(spec);
  for (const auto& [id, row] : by_id) {
    if (fresh || !row.finished()) continue;
    const std::optional<double> cost = replayable_cost(row);
    if (!cost) {
      outcome.skipped.push_back(id);
      continue;
    }
    try {
      optimizer.replay(row.batch_size, *cost, *row.reached_target);
      ++outcome.replayed;
    } catch (const UsageError&) {  // a batch size no longer among the spec's
      outcome.skipped.push_back(id);
    }
  }
  outcome.revision = stored.revision + 1;
  txn->save_state(name, optimizer.to_json().dump(), outcome.revision);
  txn->commit();
  damage_log_->say(fmt::format("job '{}' reset{}: {} ({} finished recurrences learned from, {} skipped), revision {}",
                               name, outcome.was_damaged.empty() ? "" : " (it was damaged: " + outcome.was_damaged + ")",
                               fresh ? "a fresh state" : "its state rebuilt", outcome.replayed, outcome.skipped.size(),
                               outcome.revision));
  return outcome;
}

}  // namespace joule::service
