#include "joule/service/batch_size_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>

#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/cost.h"
#include "service/group_commit.h"
#include "service/job_store_sql.h"

namespace joule::service {
namespace {

constexpr std::size_t kMaxNameLength = 200;
constexpr std::size_t kMaxBatchSizes = 256;

[[noreturn]] void bad_request(const std::string& what) { throw RequestError(400, what); }

template <typename T>
T field(const nlohmann::json& j, const char* name, const char* what) {
  if (!j.contains(name)) bad_request(fmt::format("{}: '{}' is missing", what, name));
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    bad_request(fmt::format("{}: '{}' has the wrong type ({})", what, name, j.at(name).type_name()));
  }
}

template <typename T>
T field_or(const nlohmann::json& j, const char* name, const char* what, T fallback) {
  return j.contains(name) && !j.at(name).is_null() ? field<T>(j, name, what) : fallback;
}

double finite_non_negative(const nlohmann::json& j, const char* name, const char* what) {
  const auto v = field<double>(j, name, what);
  if (!std::isfinite(v) || v < 0) bad_request(fmt::format("{}: '{}' must be a finite number >= 0", what, name));
  return v;
}

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

BatchSizeOptimizer stored_optimizer(const StoredJob& job) {
  return BatchSizeOptimizer::from_json(parse_stored(job.state_json, "state of " + job.name));
}

StoredJob job_or_404(StoreTransaction& txn, const std::string& name) {
  auto job = txn.job(name);
  if (!job) throw RequestError(404, fmt::format("no job '{}'", name));
  return *job;
}

std::vector<PowerProfileEntry> profile_entries(const nlohmann::json& entries) {
  if (!entries.is_array() || entries.empty()) bad_request("power profile: 'entries' must be a non-empty array");
  std::vector<PowerProfileEntry> out;
  for (const auto& e : entries) {
    if (!e.is_object()) bad_request("power profile: every entry must be an object");
    PowerProfileEntry p{finite_non_negative(e, "power_limit_w", "power profile entry"),
                        finite_non_negative(e, "time_per_epoch_s", "power profile entry"),
                        finite_non_negative(e, "avg_power_w", "power profile entry")};
    if (p.power_limit_w <= 0 || p.time_per_epoch_s <= 0) {
      bad_request("power profile entry: power_limit_w and time_per_epoch_s must be > 0");
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

nlohmann::json power_profile_json(const std::vector<PowerProfileEntry>& entries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : entries) {
    out.push_back({{"power_limit_w", e.power_limit_w},
                   {"time_per_epoch_s", e.time_per_epoch_s},
                   {"avg_power_w", e.avg_power_w}});
  }
  return out;
}

JobSpec JobSpec::from_json(const nlohmann::json& j) {
  constexpr const char* kWhat = "job spec";
  if (!j.is_object()) bad_request("job spec: expected a JSON object");
  JobSpec s;
  s.name = field<std::string>(j, "name", kWhat);
  if (s.name.empty() || s.name.size() > kMaxNameLength ||
      !std::all_of(s.name.begin(), s.name.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; })) {
    bad_request(fmt::format("job spec: name must be 1-{} letters, digits, '-', '_' or '.'", kMaxNameLength));
  }
  s.batch_sizes = field<std::vector<int>>(j, "batch_sizes", kWhat);
  if (s.batch_sizes.empty() || s.batch_sizes.size() > kMaxBatchSizes) {
    bad_request(fmt::format("job spec: batch_sizes must list 1-{} sizes", kMaxBatchSizes));
  }
  if (!std::is_sorted(s.batch_sizes.begin(), s.batch_sizes.end()) ||
      std::adjacent_find(s.batch_sizes.begin(), s.batch_sizes.end()) != s.batch_sizes.end() ||
      s.batch_sizes.front() <= 0) {
    bad_request("job spec: batch_sizes must be positive, distinct and increasing");
  }
  s.default_batch_size = field<int>(j, "default_batch_size", kWhat);
  if (!std::binary_search(s.batch_sizes.begin(), s.batch_sizes.end(), s.default_batch_size)) {
    bad_request(fmt::format("job spec: default_batch_size {} is not among batch_sizes", s.default_batch_size));
  }
  s.eta = field_or<double>(j, "eta", kWhat, 0.5);
  if (!(s.eta >= 0 && s.eta <= 1)) bad_request("job spec: eta must be in [0, 1]");
  s.beta = field_or<double>(j, "beta", kWhat, 2.0);
  if (!(s.beta > 1 && std::isfinite(s.beta))) bad_request("job spec: beta must be > 1");
  s.target_metric = field_or<std::string>(j, "target_metric", kWhat, "");
  s.max_epochs = field_or<int>(j, "max_epochs", kWhat, 0);
  if (s.max_epochs < 0) bad_request("job spec: max_epochs must be >= 0");
  if (j.contains("window") && !j.at("window").is_null()) {
    const auto window = field<int64_t>(j, "window", kWhat);
    if (window < 1) bad_request("job spec: window must be >= 1");
    s.window = static_cast<std::size_t>(window);
  }
  s.gpu_model = field_or<std::string>(j, "gpu_model", kWhat, "");
  s.gpu_count = field_or<int>(j, "gpu_count", kWhat, 1);
  if (s.gpu_count < 1) bad_request("job spec: gpu_count must be >= 1");
  s.max_power_w = field<double>(j, "max_power_w", kWhat);
  if (!(s.max_power_w > 0 && std::isfinite(s.max_power_w))) bad_request("job spec: max_power_w must be > 0");
  s.seed = field_or<uint64_t>(j, "seed", kWhat, 1);
  return s;
}

nlohmann::json JobSpec::to_json() const {
  return {{"name", name},
          {"batch_sizes", batch_sizes},
          {"default_batch_size", default_batch_size},
          {"eta", eta},
          {"beta", beta},
          {"target_metric", target_metric},
          {"max_epochs", max_epochs},
          {"window", window ? nlohmann::json(*window) : nlohmann::json()},
          {"gpu_model", gpu_model},
          {"gpu_count", gpu_count},
          {"max_power_w", max_power_w},
          {"seed", seed}};
}

RecurrenceResult RecurrenceResult::from_json(const nlohmann::json& j) {
  constexpr const char* kWhat = "result";
  if (!j.is_object()) bad_request("result: expected a JSON object");
  RecurrenceResult r;
  r.energy_j = finite_non_negative(j, "energy_j", kWhat);
  r.time_s = finite_non_negative(j, "time_s", kWhat);
  r.reached_target = field<bool>(j, "reached_target", kWhat);
  r.stopped_early = field_or<bool>(j, "stopped_early", kWhat, false);
  if (r.stopped_early && r.reached_target) bad_request("result: a run stopped early did not reach the target");
  return r;
}

RecurrenceProgress RecurrenceProgress::from_json(const nlohmann::json& j) {
  constexpr const char* kWhat = "progress";
  if (!j.is_object()) bad_request("progress: expected a JSON object");
  RecurrenceProgress p;
  p.epochs = field<int>(j, "epochs", kWhat);
  if (p.epochs < 0) bad_request(fmt::format("progress: epochs {} is negative", p.epochs));
  p.energy_j = finite_non_negative(j, "energy_j", kWhat);
  p.time_s = finite_non_negative(j, "time_s", kWhat);
  return p;
}

// A job as a batch of writes works on it: loaded once, changed in memory by
// every write of the batch, saved once.
struct WorkingJob {
  JobSpec spec;
  BatchSizeOptimizer optimizer;
  int64_t revision = 0;  // as read
  int64_t changes = 0;   // writes of this batch that changed it
  std::map<std::pair<std::string, int>, std::optional<double>> power_limit_w;  // by GPU model and batch size
};

// One store transaction shared by a batch of asks and reports. The rule that
// lets a failed write leave the others be: a write throws RequestError only
// before it changes anything; any other failure rolls the whole batch back.
class WriteBatch {
 public:
  using Cache = std::map<std::string, WorkingJob>;

  WriteBatch(std::unique_ptr<StoreTransaction> txn, Cache& cache) : txn_(std::move(txn)), cache_(cache) {}

  // The job, its row locked. The optimizer comes from the cache when the
  // stored revision is the one this process wrote last (no state read or
  // parsed), else from the store.
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
    return jobs_.emplace(name, WorkingJob{stored_spec(*stored), stored_optimizer(*stored), stored->revision, 0, {}})
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
      txn_->save_state(name, job.optimizer.to_json().dump(), job.revision);
    }
    txn_->commit();
    cache_.merge(jobs_);
  }

 private:
  std::unique_ptr<StoreTransaction> txn_;
  Cache& cache_;
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

  explicit Writes(std::shared_ptr<JobStore> store)
      : store_(std::move(store)), commits_([this](const auto& batch) { run(batch); }, kMaxBatch) {}

  void submit(std::function<void(WriteBatch&)> write, std::function<void(WriteBatch&)> prepare = nullptr) {
    commits_.submit(std::move(write), std::move(prepare));
  }

  WriteCounts counts() const { return {writes_.load(), transactions_.load()}; }

 private:
  using Request = GroupCommit<WriteBatch>::Request;

  // The group commit's runner, called by one leader at a time: the cache is
  // the leaders' alone. When the shared transaction fails, each request is
  // run again alone, so that only a request that fails by itself fails.
  void run(const std::vector<Request*>& batch) {
    writes_ += batch.size();
    ++transactions_;
    try {
      WriteBatch writes(store_->begin(), cache_);
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
  WriteBatch::Cache cache_;
  std::atomic<uint64_t> writes_{0}, transactions_{0};
  GroupCommit<WriteBatch> commits_;
};

BatchSizeService::BatchSizeService(std::shared_ptr<JobStore> store)
    : store_(std::move(store)), writes_(std::make_unique<Writes>(store_)) {}

BatchSizeService::~BatchSizeService() = default;

BatchSizeService::WriteCounts BatchSizeService::write_counts() const { return writes_->counts(); }

StoreHealth BatchSizeService::store_health() { return store_->health(); }

bool BatchSizeService::register_job(const JobSpec& spec) {
  const std::string spec_json = spec.to_json().dump();
  auto txn = store_->begin();
  if (auto existing = txn->job(spec.name)) {
    if (existing->spec_json == spec_json) return false;
    throw RequestError(409, fmt::format("job '{}' exists with a different spec (its spec: {})", spec.name,
                                        existing->spec_json));
  }
  txn->insert_job({spec.name, spec_json, optimizer_for(spec).to_json().dump(), 1, unix_time_s()});
  txn->commit();
  return true;
}

Assignment BatchSizeService::ask(const std::string& job_name, const std::string& node, const std::string& gpu_model) {
  Assignment a;
  writes_->submit([&](WriteBatch& batch) {
    WorkingJob& job = batch.job(job_name);
    a.batch_size = job.optimizer.predict();
    ++job.changes;
    a.early_stop_threshold_cost = job.optimizer.early_stop_threshold_cost();
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
    cost = result.stopped_early && row->threshold_cost
               ? *row->threshold_cost
               : zeus_cost(result.energy_j, result.time_s, job.spec.eta, job.spec.max_power_w);
    job.optimizer.observe(row->batch_size, cost, result.reached_target);
    ++job.changes;
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
  auto txn = store_->begin();
  std::vector<RecurrenceRow> rows = txn->lock_recurrences({recurrence_id});
  if (rows.empty()) throw RequestError(404, fmt::format("no recurrence {}", recurrence_id));
  RecurrenceRow& row = rows.front();
  if (check_job) check_job(row.job);
  if (row.finished()) throw RequestError(409, fmt::format("recurrence {} has already reported", recurrence_id));
  const JobSpec spec = stored_spec(job_or_404(*txn, row.job));
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
  const auto parsed = profile_entries(entries);
  auto txn = store_->begin();
  const JobSpec spec = stored_spec(job_or_404(*txn, job_name));
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

JobSummary BatchSizeService::summarize(const StoredJob& stored) {
  const BatchSizeOptimizer optimizer = stored_optimizer(stored);
  const RecurrenceCounts counts = store_->recurrence_counts(stored.name);
  return {stored_spec(stored), optimizer.phase() == BatchSizeOptimizer::Phase::kPruning ? "pruning" : "thompson",
          optimizer.best_known(), stored.revision, counts.total, counts.in_flight};
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
                           {"node", r.node},
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
  return {{"spec", summary.spec.to_json()},
          {"phase", summary.phase},
          {"best_batch_size", summary.best_batch_size},
          {"revision", summary.revision},
          {"state", parse_stored(stored->state_json, "state of " + name)},
          {"recurrences", recurrences}};
}

}  // namespace joule::service
