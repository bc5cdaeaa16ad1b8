// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The SQLite job store: one file, nothing to install. Write transactions are
// BEGIN IMMEDIATE (one writer at a time, others wait up to the busy timeout),
// the journal is a write-ahead log (readers do not block the writer), and
// connections are pooled per store so the server's threads each get their own.
//
// A database that cannot be written now (its filesystem full, an I/O error,
// the file read only, or locked by another process past the busy timeout)
// fails the step with StoreUnavailableError (503): SQLite has rolled the
// transaction back or it is rolled back here, so nothing is half written,
// and the next request simply tries again.
#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <mutex>
#include <stack>
#include <thread>

#include "common/sqlite.h"
#include "joule/error.h"
#include "joule/service/job_store.h"
#include "service/job_store_sql.h"
#include "service/postgres_job_store.h"
#include "service/store_health.h"

namespace joule::service {
namespace {

// A write waits this long for another process's write lock (as PostgreSQL's
// lock_timeout), then its request is answered 503.
constexpr int kBusyTimeoutMs = 10000;

// The health check: its own connection, which waits at most this long for
// the write lock, and the whole check at most kHealthDeadline.
constexpr int kHealthBusyTimeoutMs = 1000;
constexpr std::chrono::milliseconds kHealthDeadline{3000};
// Less free space than this on the database's filesystem: the store is
// reported down (a commit appends a few pages to the log; the log and the
// database file grow).
constexpr uint64_t kMinFreeBytes = 1 << 20;

// Checkpoints (copying the write-ahead log back into the database file, with
// fsyncs) run on a thread of their own, not in a commit. SQLite's automatic
// one runs inside the commit that takes the log past N pages, with the
// writer lock held: every writer then waited for it, 60-90 ms every ~0.8 s
// at 5,000 round trips/s (p99 61-71 ms on an open loop). Here a passive
// checkpoint, which never blocks writers, runs every kCheckpointInterval;
// once the log is past kRestartLogPages, a restart checkpoint (the few pages
// the passive one left, then the log starts over, so it stays small) runs
// between two of this process's transactions.
constexpr auto kCheckpointInterval = std::chrono::milliseconds(50);
constexpr int64_t kRestartLogPages = 4000;

// Whether SQLite failed because the database cannot be reached or written
// now, which a later try may not meet: another process held the lock past
// the busy timeout, the filesystem is full, an I/O error, the file (or its
// directory) read only or gone. Anything else (a constraint, a corrupt
// file) is not an outage.
bool unavailable(const SqliteError& e) {
  switch (e.primary_code()) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_NOMEM:
    case SQLITE_PERM:
      return true;
    default:
      return false;
  }
}

// Turns SQLite's errors into the store's: the database unavailable becomes
// StoreUnavailableError naming the file, the step and why (remembered for
// health()); other errors pass unchanged.
class SqliteFaults {
 public:
  explicit SqliteFaults(std::string path) : path_(std::move(path)) {}

  template <typename F>
  auto guard(const char* what, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const SqliteError& e) {
      raise(what, e);
    }
  }

  [[noreturn]] void raise(const char* what, const SqliteError& e) {
    if (!unavailable(e)) throw e;
    const bool locked = e.primary_code() == SQLITE_BUSY || e.primary_code() == SQLITE_LOCKED;
    StoreUnavailableError error(fmt::format("job store 'SQLite {}' is unavailable: {} failed: {}{}", path_, what,
                                            e.what(),
                                            locked ? fmt::format(" (another connection held the database past the "
                                                                 "{} s busy timeout)",
                                                                 kBusyTimeoutMs / 1000)
                                                   : ""));
    outages_.failed(error.what());
    throw error;
  }

  OutageMemory& outages() { return outages_; }

 private:
  std::string path_;
  OutageMemory outages_;
};

std::optional<double> finite_or_null(const std::optional<double>& v) {
  if (v && *v == std::numeric_limits<double>::infinity()) return std::nullopt;
  return v;
}

RecurrenceRow read_recurrence(const SqliteStatement& s) {
  RecurrenceRow r;
  r.id = s.column_int(0);
  r.job = s.column_text(1);
  r.batch_size = static_cast<int>(s.column_int(2));
  r.power_limit_w = s.column_optional_double(3);
  r.threshold_cost = s.column_optional_double(4);
  r.node = s.column_text(5);
  r.started_at_s = s.column_double(6);
  r.finished_at_s = s.column_optional_double(7);
  r.energy_j = s.column_optional_double(8);
  r.time_s = s.column_optional_double(9);
  r.cost = s.column_optional_double(10);
  if (!s.is_null(11)) r.reached_target = s.column_int(11) != 0;
  r.stopped_early = s.column_int(12) != 0;
  if (!s.is_null(13)) r.progress_epochs = static_cast<int>(s.column_int(13));
  r.progress_cost = s.column_optional_double(14);
  r.progress_at_s = s.column_optional_double(15);
  return r;
}

StoredJob read_job(const SqliteStatement& s) {
  return {s.column_text(0), s.column_text(1), s.column_text(2), s.column_int(3), s.column_double(4)};
}

class SqliteJobStore;

class SqliteTransaction final : public StoreTransaction {
 public:
  SqliteTransaction(SqliteJobStore& store, SqliteFaults& faults, std::unique_ptr<SqliteDatabase> db,
                    std::unique_lock<std::timed_mutex> writer);
  ~SqliteTransaction() override;

  std::optional<StoredJob> job(const std::string& name) override {
    return faults_.guard("reading a job", [&]() -> std::optional<StoredJob> {
      auto s = db_->cached(std::string(kSelectJob).append(" WHERE name = ?"));
      s->bind(1, name);
      if (!s->step()) return std::nullopt;
      return read_job(*s);
    });
  }
  std::optional<int64_t> job_revision(const std::string& name) override {
    return faults_.guard("reading a job's revision", [&]() -> std::optional<int64_t> {
      auto s = db_->cached("SELECT revision FROM jobs WHERE name = ?");
      s->bind(1, name);
      if (!s->step()) return std::nullopt;
      return s->column_int(0);
    });
  }
  bool insert_job(const StoredJob& job) override {
    return faults_.guard("inserting a job", [&] {
      auto s = db_->cached(
          "INSERT INTO jobs (name, spec, state, revision, created_at) VALUES (?, ?, ?, 1, ?)"
          " ON CONFLICT (name) DO NOTHING");
      s->bind(1, job.name).bind(2, job.spec_json).bind(3, job.state_json).bind(4, job.created_at_s).run();
      return db_->changes() == 1;
    });
  }
  void save_state(const std::string& name, const std::string& state_json, int64_t revision) override {
    faults_.guard("saving a job's state", [&] {
      auto s = db_->cached("UPDATE jobs SET state = ?, revision = ? WHERE name = ?");
      s->bind(1, state_json).bind(2, revision).bind(3, name).run();
    });
    if (db_->changes() != 1) throw Error(fmt::format("job store: no job '{}' to update", name));
  }
  // In process, a statement costs microseconds: one cached statement per row.
  void insert_recurrences(std::vector<RecurrenceRow>& rows) override {
    faults_.guard("inserting recurrences", [&] {
      auto s = db_->cached(
          "INSERT INTO recurrences (job, batch_size, power_limit_w, threshold_cost, node, started_at)"
          " VALUES (?, ?, ?, ?, ?, ?)");
      for (RecurrenceRow& r : rows) {
        s->bind(1, r.job).bind(2, r.batch_size).bind(3, r.power_limit_w).bind(4, finite_or_null(r.threshold_cost));
        s->bind(5, r.node).bind(6, r.started_at_s).run();
        r.id = db_->last_insert_rowid();
        s->reset();
      }
    });
  }
  std::vector<RecurrenceRow> lock_recurrences(const std::vector<int64_t>& ids) override {
    // The write lock (BEGIN IMMEDIATE) already covers every row.
    return faults_.guard("reading recurrences", [&] {
      auto s = db_->cached(std::string(kSelectRecurrence).append(" WHERE id = ?"));
      std::vector<RecurrenceRow> out;
      for (const int64_t id : ids) {
        s->bind(1, id);
        if (s->step()) out.push_back(read_recurrence(*s));
        s->reset();
      }
      return out;
    });
  }
  void finish_recurrences(const std::vector<RecurrenceRow>& rows) override {
    faults_.guard("finishing recurrences", [&] {
      auto s = db_->cached(
          "UPDATE recurrences SET finished_at = ?, energy_j = ?, time_s = ?, cost = ?, reached_target = ?,"
          " stopped_early = ? WHERE id = ? AND finished_at IS NULL");
      for (const RecurrenceRow& r : rows) {
        s->bind(1, r.finished_at_s).bind(2, r.energy_j).bind(3, r.time_s).bind(4, r.cost);
        r.reached_target ? s->bind(5, *r.reached_target ? 1 : 0) : s->bind_null(5);
        s->bind(6, r.stopped_early ? 1 : 0).bind(7, r.id).run();
        if (db_->changes() != 1) throw Error(fmt::format("job store: recurrence {} is not open", r.id));
        s->reset();
      }
    });
  }
  void record_progress(const RecurrenceRow& r) override {
    faults_.guard("recording progress", [&] {
      auto s = db_->cached(kRecordProgress);
      s->bind(1, r.progress_epochs.value_or(0)).bind(2, r.progress_cost).bind(3, r.progress_at_s).bind(4, r.id).run();
      if (db_->changes() != 1) throw Error(fmt::format("job store: recurrence {} is not open", r.id));
      s->reset();
    });
  }
  std::optional<std::string> power_profile(const std::string& gpu_model, const std::string& job,
                                           int batch_size) override {
    return faults_.guard("reading a power profile", [&]() -> std::optional<std::string> {
      auto s = db_->cached("SELECT profile FROM power_profiles WHERE gpu_model = ? AND job = ? AND batch_size = ?");
      s->bind(1, gpu_model).bind(2, job).bind(3, batch_size);
      if (!s->step()) return std::nullopt;
      return s->column_text(0);
    });
  }
  void put_power_profile(const std::string& gpu_model, const std::string& job, int batch_size,
                         const std::string& profile_json) override {
    faults_.guard("storing a power profile", [&] {
      auto s = db_->cached(
          "INSERT INTO power_profiles (gpu_model, job, batch_size, profile, updated_at)"
          " VALUES (?, ?, ?, ?, ?) ON CONFLICT (gpu_model, job, batch_size)"
          " DO UPDATE SET profile = excluded.profile, updated_at = excluded.updated_at");
      s->bind(1, gpu_model).bind(2, job).bind(3, batch_size).bind(4, profile_json).bind(5, unix_time_s()).run();
    });
  }
  // A COMMIT that fails (the log cannot grow on a full disk) throws: its
  // requests are not answered as done, and the destructor rolls back
  // whatever SQLite has not.
  void commit() override {
    faults_.guard("committing", [&] { db_->cached("COMMIT")->run(); });
    committed_ = true;
    faults_.outages().succeeded();
  }

 private:
  SqliteJobStore& store_;
  SqliteFaults& faults_;
  std::unique_ptr<SqliteDatabase> db_;
  std::unique_lock<std::timed_mutex> writer_;  // released last, after the commit or rollback
  bool committed_ = false;
};

// The health check's connection and what it runs: the schema version read,
// the write lock taken and given back (another process holding it past
// kHealthBusyTimeoutMs is an outage), and the filesystem's free space.
// Owned by the probe alone (BoundedProbe may outlive the store). The write
// lock is asked for in the queue of this process's writers: in SQLite's busy
// handler, which polls, a probe could miss every gap between the
// transactions of a busy service and call a healthy store down.
class HealthConnection {
 public:
  HealthConnection(std::string path, std::shared_ptr<std::timed_mutex> writers)
      : path_(std::move(path)), writers_(std::move(writers)) {}

  StoreHealth probe() {
    const char* step = "opening the database";
    try {
      if (!db_) db_ = std::make_unique<SqliteDatabase>(path_, /*create=*/false, kHealthBusyTimeoutMs);
      step = "reading the schema version";
      {
        SqliteStatement s(*db_, "SELECT MAX(version) FROM schema_version");
        s.step();
      }
      if (sqlite3_db_readonly(db_->get(), "main") == 1) return down("the database file is read only");
      std::unique_lock writers(*writers_, std::chrono::milliseconds(kHealthBusyTimeoutMs));
      if (!writers.owns_lock()) {
        return down(fmt::format("a write of this service has held the database for over {} ms (waiting for another "
                                "connection's lock?)",
                                kHealthBusyTimeoutMs));
      }
      step = "taking the write lock";
      db_->exec("BEGIN IMMEDIATE");
      step = "giving the write lock back";
      db_->exec("ROLLBACK");
    } catch (const SqliteError& e) {
      db_.reset();  // opened again by the next check
      const bool locked = e.primary_code() == SQLITE_BUSY || e.primary_code() == SQLITE_LOCKED;
      return down(fmt::format("{} failed: {}{}", step, e.what(),
                              locked ? fmt::format(" (another connection held it over {} ms)", kHealthBusyTimeoutMs)
                                     : ""));
    }
    return free_space();
  }

 private:
  StoreHealth down(const std::string& why) const {
    return {false, fmt::format("job store 'SQLite {}' is unavailable: {}", path_, why)};
  }

  // statvfs of the database's directory: what this process may still
  // write there (root may use the blocks reserved for it).
  StoreHealth free_space() const {
    std::filesystem::path dir = std::filesystem::path(path_).parent_path();
    if (dir.empty()) dir = ".";
    struct statvfs fs {};
    if (statvfs(dir.c_str(), &fs) != 0) return {};  // the writes will tell
    const uint64_t blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
    const uint64_t free_bytes = blocks * fs.f_frsize;
    if (free_bytes >= kMinFreeBytes) return {};
    return down(fmt::format("the filesystem holding it has {} KiB free (less than {} KiB): writes would fail",
                            free_bytes / 1024, kMinFreeBytes / 1024));
  }

  std::string path_;
  std::shared_ptr<std::timed_mutex> writers_;
  std::unique_ptr<SqliteDatabase> db_;
};

class SqliteJobStore final : public JobStore {
 public:
  explicit SqliteJobStore(std::string path)
      : path_(std::move(path)), faults_(path_), health_(make_health_probe(path_, writer_mutex_)) {
    auto db = connect(/*create=*/true);
    migrate(*db);
    give_back(std::move(db));
    checkpointer_ = std::thread([this] { checkpoint_until_stopped(); });
  }

  ~SqliteJobStore() override {
    {
      std::lock_guard lock(checkpoint_mutex_);
      stopping_ = true;
    }
    checkpoint_wake_.notify_one();
    checkpointer_.join();
  }

  std::unique_ptr<StoreTransaction> begin() override {
    // SQLite has one writer at a time; writers of this process queue on a
    // mutex (fair, no delay) rather than in SQLite's busy handler, which
    // sleeps up to 100 ms between tries. Other processes still meet the
    // busy handler.
    std::unique_lock writer(*writer_mutex_);
    auto db = faults_.guard("opening a connection", [&] { return take(); });
    try {
      db->cached("BEGIN IMMEDIATE")->run();
    } catch (const SqliteError& e) {
      give_back(std::move(db));  // no transaction began: the connection is as it was
      faults_.raise("beginning a transaction", e);
    }
    return std::make_unique<SqliteTransaction>(*this, faults_, std::move(db), std::move(writer));
  }

  std::optional<StoredJob> job(const std::string& name) override {
    std::optional<StoredJob> out;
    read(std::string(kSelectJob).append(" WHERE name = ?"), [&](SqliteStatement& s) {
      s.bind(1, name);
      if (s.step()) out = read_job(s);
    });
    return out;
  }

  std::vector<StoredJob> jobs() override {
    std::vector<StoredJob> out;
    read(std::string(kSelectJob).append(" ORDER BY name"), [&](SqliteStatement& s) {
      while (s.step()) out.push_back(read_job(s));
    });
    return out;
  }

  std::vector<RecurrenceRow> recurrences(const std::string& job) override {
    std::vector<RecurrenceRow> out;
    read(std::string(kSelectRecurrence).append(" WHERE job = ? ORDER BY id"), [&](SqliteStatement& s) {
      s.bind(1, job);
      while (s.step()) out.push_back(read_recurrence(s));
    });
    return out;
  }

  RecurrenceCounts recurrence_counts(const std::string& job) override {
    RecurrenceCounts counts;
    read(kCountRecurrences, [&](SqliteStatement& s) {  // SQLite binds $1 by position too
      s.bind(1, job);
      if (s.step()) counts = {s.column_int(0), s.column_int(1)};
    });
    return counts;
  }

  std::string describe() const override { return fmt::format("SQLite {}, schema {}", path_, kJobStoreSchemaVersion); }

  // The probe (bounded by kHealthDeadline), then a write that failed lately
  // for want of the database (a write may fail where the probe does not:
  // an I/O error, or a full disk with a few pages left).
  StoreHealth health() override {
    StoreHealth health = health_.check();
    if (!health.available) return health;
    if (auto why = faults_.outages().recent(kOutageMemory)) return {false, *why};
    return health;
  }

  void give_back(std::unique_ptr<SqliteDatabase> db) {
    std::lock_guard lock(mutex_);
    pool_.push(std::move(db));
  }

 private:
  // One statement outside a transaction on a pooled connection; the
  // connection goes back to the pool however use() ends.
  template <typename Use>
  void read(const std::string& sql, Use&& use) {
    auto db = faults_.guard("opening a connection", [&] { return take(); });
    try {
      auto s = db->cached(sql);
      use(*s);
    } catch (const SqliteError& e) {
      give_back(std::move(db));
      faults_.raise("reading", e);
    } catch (...) {
      give_back(std::move(db));
      throw;
    }
    give_back(std::move(db));
  }

  static BoundedProbe make_health_probe(const std::string& path, std::shared_ptr<std::timed_mutex> writers) {
    auto connection = std::make_shared<HealthConnection>(path, std::move(writers));
    return BoundedProbe([connection] { return connection->probe(); }, kHealthDeadline);
  }

  std::unique_ptr<SqliteDatabase> take() {
    {
      std::lock_guard lock(mutex_);
      if (!pool_.empty()) {
        auto db = std::move(pool_.top());
        pool_.pop();
        return db;
      }
    }
    return connect(/*create=*/false);
  }

  // Write-ahead log: readers never wait for the writer. Synchronous NORMAL:
  // a commit is durable once in the log, which survives the service's crash
  // (a power cut may lose the last commits, never corrupt the file), and
  // costs no fsync per transaction.
  std::unique_ptr<SqliteDatabase> connect(bool create) const {
    auto db = std::make_unique<SqliteDatabase>(path_, create, kBusyTimeoutMs);
    db->exec("PRAGMA journal_mode = WAL");
    db->exec("PRAGMA synchronous = NORMAL");
    db->exec("PRAGMA foreign_keys = ON");
    db->exec("PRAGMA wal_autocheckpoint = 0");  // checkpoint_until_stopped() does it
    return db;
  }

  // The checkpointer's loop. Its connection never waits (busy timeout 0): a
  // restart checkpoint that meets a reader still on the old log checkpoints
  // what it can and leaves the restart for a later turn.
  void checkpoint_until_stopped() {
    std::unique_ptr<SqliteDatabase> db;
    std::unique_lock lock(checkpoint_mutex_);
    while (!checkpoint_wake_.wait_for(lock, kCheckpointInterval, [&] { return stopping_; })) {
      try {
        if (!db) db = std::make_unique<SqliteDatabase>(path_, /*create=*/false, /*busy_timeout_ms=*/0);
        if (checkpoint(*db, "PASSIVE") >= kRestartLogPages) {
          std::lock_guard writer(*writer_mutex_);
          checkpoint(*db, "RESTART");
        }
      } catch (const Error&) {
        db.reset();  // reopened next turn; commits go on meanwhile, the log grows
      }
    }
  }

  // Runs a checkpoint; returns the log's size in pages.
  static int64_t checkpoint(SqliteDatabase& db, const char* mode) {
    SqliteStatement s(db, fmt::format("PRAGMA wal_checkpoint({})", mode).c_str());
    return s.step() ? s.column_int(1) : 0;
  }

  static void migrate(SqliteDatabase& db) {
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
      int version = 0;
      {
        SqliteStatement s(db, "SELECT MAX(version) FROM schema_version");
        if (s.step() && !s.is_null(0)) version = static_cast<int>(s.column_int(0));
      }
      if (version > kJobStoreSchemaVersion) {
        throw Error(fmt::format("job store '{}' has schema {}, newer than this joule's {}: upgrade joule",
                                db.path(), version, kJobStoreSchemaVersion));
      }
      for (const Migration& m : kMigrations) {
        if (m.version <= version) continue;
        for (const char* sql : m.statements) db.exec(sql);
        SqliteStatement s(db, "INSERT INTO schema_version (version) VALUES (?)");
        s.bind(1, m.version).run();
      }
      db.exec("COMMIT");
    } catch (...) {
      db.exec("ROLLBACK");
      throw;
    }
  }

  std::string path_;
  SqliteFaults faults_;
  // The writers of this process, queued (shared with the health probe).
  std::shared_ptr<std::timed_mutex> writer_mutex_ = std::make_shared<std::timed_mutex>();
  BoundedProbe health_;
  std::mutex mutex_;  // the pool
  std::stack<std::unique_ptr<SqliteDatabase>> pool_;
  std::mutex checkpoint_mutex_;
  std::condition_variable checkpoint_wake_;
  bool stopping_ = false;
  std::thread checkpointer_;  // last: started once the rest is made
};

SqliteTransaction::SqliteTransaction(SqliteJobStore& store, SqliteFaults& faults, std::unique_ptr<SqliteDatabase> db,
                                     std::unique_lock<std::timed_mutex> writer)
    : store_(store), faults_(faults), db_(std::move(db)), writer_(std::move(writer)) {}

// After a full disk or an I/O error SQLite may have rolled the transaction
// back itself (the connection is then back in autocommit mode, and usable).
SqliteTransaction::~SqliteTransaction() {
  if (!committed_ && !db_->autocommit()) {
    try {
      db_->exec("ROLLBACK");
    } catch (const Error&) {
      return;  // the connection is in an unknown state: drop it, not pool it
    }
  }
  store_.give_back(std::move(db_));
}

}  // namespace

std::unique_ptr<JobStore> open_job_store(const std::string& url) {
  constexpr std::string_view kSqlite = "sqlite:";
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
    return open_postgres_job_store(url);
  }
  const std::string path = url.rfind(kSqlite, 0) == 0 ? url.substr(kSqlite.size()) : url;
  if (path.empty()) throw UsageError("job store: empty path (use sqlite:PATH)");
  return std::make_unique<SqliteJobStore>(path);
}

}  // namespace joule::service
