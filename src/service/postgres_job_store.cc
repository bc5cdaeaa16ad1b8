// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL job store, for replicas of the service sharing one database.
// Transactions are READ COMMITTED with row locks: every row a transaction
// reads in order to change it is read FOR UPDATE, so two replicas updating
// one job queue up instead of one overwriting the other. Connections are
// pooled per store; a broken one is dropped, never pooled again.
//
// When the server cannot be reached (stopped, restarting, out of disk, the
// connection lost) every step fails with StoreUnavailableError (503): the
// pool is emptied, since a server that went away took every connection
// with it, and the next request connects afresh, within a connect timeout.
// A transaction whose COMMIT lost its connection is reported unavailable
// too: its request was not answered as done.
#include "service/postgres_job_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <stack>
#include <vector>

#include "joule/common/text.h"
#include "joule/error.h"
#include "service/job_store_sql.h"
#include "service/store_health.h"

namespace joule::service {
namespace {

// Any 64-bit key, the same in every joule: serializes the migrations of
// servers starting at once against one database.
constexpr int64_t kMigrationLockKey = 0x6a6f756c65;  // "joule"

// The URL as errors may show it: without the password, whether in the
// userinfo (postgresql://user:secret@host) or a parameter (?password=...).
std::string redact(const std::string& url) {
  static const std::regex userinfo_password(R"(^([a-z]+://[^:/@]*):[^@/]*@)");
  static const std::regex password_param(R"(([?&]password=)[^&]*)");
  return std::regex_replace(std::regex_replace(url, userinfo_password, "$1:***@"), password_param, "$1***");
}

// A transaction waits at most this long for a row another one holds (a
// replica stuck mid-transaction, a person's open psql session); then its
// request fails with 503 and changes nothing, instead of hanging.
constexpr int kLockTimeoutMs = 10000;

// libpq's defaults for the connections of the pool, where the URL sets none:
// a connection attempt gives up after connect_timeout (libpq waits forever
// by default: a server host that is off the network would hang every
// request), keepalives find a server host that vanished while a connection
// idled, and tcp_user_timeout one that vanished while data was unacknowledged
// (a COMMIT sent to it), instead of after the kernel's ~15 minutes.
constexpr std::pair<const char*, const char*> kConnectionDefaults[] = {
    {"connect_timeout", "5"},   {"keepalives", "1"},           {"keepalives_idle", "10"},
    {"keepalives_interval", "5"}, {"keepalives_count", "3"}, {"tcp_user_timeout", "30000"},
};
// The health check's own connection: shorter, since a health check must
// answer within kHealthDeadline (BoundedProbe bounds it in any case).
constexpr std::pair<const char*, const char*> kHealthConnectionDefaults[] = {
    {"connect_timeout", "2"}, {"tcp_user_timeout", "2000"}};
constexpr const char* kHealthStatementTimeoutMs = "2000";
constexpr std::chrono::milliseconds kHealthDeadline{3000};

// The URL with each parameter it does not set already added to its query.
template <std::size_t N>
std::string with_defaults(std::string url, const std::pair<const char*, const char*> (&defaults)[N]) {
  for (const auto& [key, value] : defaults) {
    const std::size_t query = url.find('?');
    if (query != std::string::npos && url.find(std::string(key) + "=", query) != std::string::npos) continue;
    url += fmt::format("{}{}={}", query == std::string::npos ? '?' : '&', key, value);
  }
  return url;
}

// What a failure says of the database: a step that may succeed when retried
// (a lock wait over kLockTimeoutMs, a deadlock PostgreSQL broke, a
// serialization failure, a statement cancelled), a database that cannot be reached or written now,
// or anything else (a constraint, a bug: 500).
enum class Fault { kOther, kBusy, kUnavailable };

Fault classify(const std::exception& e, const pqxx::connection* conn) {
  // Before broken_connection: the COMMIT's outcome is unknown, the request
  // is not answered as done.
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e)) return Fault::kUnavailable;
  if (dynamic_cast<const pqxx::broken_connection*>(&e)) return Fault::kUnavailable;
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const std::string& state = sql->sqlstate();
    // 57014: a statement cancelled, by a statement_timeout the URL set
    // (options=-c statement_timeout=...) or by an operator: nothing changed.
    if (state == "55P03" || state == "40P01" || state == "40001" || state == "57014") return Fault::kBusy;
    // 08: connection exceptions; 53: insufficient resources (disk full, out
    // of memory, too many connections); 58: system errors (I/O); 57P01-03:
    // the server shutting down or starting; 25006: a read-only database (a
    // standby, default_transaction_read_only).
    if (state.rfind("08", 0) == 0 || state.rfind("53", 0) == 0 || state.rfind("58", 0) == 0 || state == "57P01" ||
        state == "57P02" || state == "57P03" || state == "25006") {
      return Fault::kUnavailable;
    }
  }
  // However libpqxx named it: the connection is gone.
  if (conn != nullptr && !conn->is_open()) return Fault::kUnavailable;
  return Fault::kOther;
}

// A connection of the pool and the pool's generation when it was made:
// connections made before the last outage are not pooled again.
struct Lease {
  std::unique_ptr<pqxx::connection> conn;
  uint64_t generation = 0;
  bool pooled = false;  // taken from the pool, not made for this use
};

// The statements of write transactions, prepared once per connection. Rows
// read in order to be changed are read FOR UPDATE.
struct PreparedStatement {
  const char* name;
  std::string sql;
};

const std::vector<PreparedStatement>& prepared_statements() {
  static const std::vector<PreparedStatement> statements = {
      {"lock_job", std::string(kSelectJob) + " WHERE name = $1 FOR UPDATE"},
      {"lock_revision", "SELECT revision FROM jobs WHERE name = $1 FOR UPDATE"},
      {"insert_job",
       "INSERT INTO jobs (name, spec, state, revision, created_at) VALUES ($1, $2, $3, 1, $4)"
       " ON CONFLICT (name) DO NOTHING"},
      {"save_state", "UPDATE jobs SET state = $1, revision = $2 WHERE name = $3"},
      // A set of rows travels as one JSON array: one statement, one round trip.
      {"insert_recurrences",
       "INSERT INTO recurrences (job, batch_size, power_limit_w, threshold_cost, node, started_at)"
       " SELECT job, batch_size, power_limit_w, threshold_cost, node, started_at FROM json_to_recordset($1::json)"
       " AS r(ord int, job text, batch_size int, power_limit_w float8, threshold_cost float8, node text,"
       " started_at float8) ORDER BY ord RETURNING id"},
      {"lock_recurrences", std::string(kSelectRecurrence) + " WHERE id = ANY($1::bigint[]) FOR UPDATE"},
      {"finish_recurrences",
       "UPDATE recurrences AS r SET finished_at = v.finished_at, energy_j = v.energy_j, time_s = v.time_s,"
       " cost = v.cost, reached_target = v.reached_target, stopped_early = v.stopped_early"
       " FROM json_to_recordset($1::json) AS v(id bigint, finished_at float8, energy_j float8, time_s float8,"
       " cost float8, reached_target int, stopped_early int) WHERE r.id = v.id AND r.finished_at IS NULL"},
      {"record_progress", kRecordProgress},
      {"power_profile", "SELECT profile FROM power_profiles WHERE gpu_model = $1 AND job = $2 AND batch_size = $3"},
      {"put_power_profile",
       "INSERT INTO power_profiles (gpu_model, job, batch_size, profile, updated_at)"
       " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (gpu_model, job, batch_size)"
       " DO UPDATE SET profile = excluded.profile, updated_at = excluded.updated_at"},
  };
  return statements;
}

// Doubles travel as text: fmt's shortest form reads back to the same bits,
// which keeps the service's decisions identical to the in-process ones.
std::optional<std::string> number(const std::optional<double>& v) {
  if (!v) return std::nullopt;
  if (*v == std::numeric_limits<double>::infinity()) return std::nullopt;  // +inf is stored as NULL
  return fmt::format("{}", *v);
}

// For sets sent as JSON: nlohmann::json writes a double in the fewest digits
// that read back to the same bits, as number() does; +inf is NULL.
nlohmann::json json_number(const std::optional<double>& v) {
  if (!v || *v == std::numeric_limits<double>::infinity()) return nullptr;
  return *v;
}

std::optional<double> optional_double(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<double>();
}

RecurrenceRow read_recurrence(const pqxx::row& row) {
  RecurrenceRow r;
  r.id = row[0].as<int64_t>();
  r.job = row[1].as<std::string>();
  r.batch_size = row[2].as<int>();
  r.power_limit_w = optional_double(row[3]);
  r.threshold_cost = optional_double(row[4]);
  r.node = row[5].as<std::string>();
  r.started_at_s = row[6].as<double>();
  r.finished_at_s = optional_double(row[7]);
  r.energy_j = optional_double(row[8]);
  r.time_s = optional_double(row[9]);
  r.cost = optional_double(row[10]);
  if (!row[11].is_null()) r.reached_target = row[11].as<int>() != 0;
  r.stopped_early = row[12].as<int>() != 0;
  if (!row[13].is_null()) r.progress_epochs = row[13].as<int>();
  r.progress_cost = optional_double(row[14]);
  r.progress_at_s = optional_double(row[15]);
  return r;
}

StoredJob read_job(const pqxx::row& row) {
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(), row[3].as<int64_t>(),
          row[4].as<double>()};
}

class PostgresJobStore;

class PostgresTransaction final : public StoreTransaction {
 public:
  PostgresTransaction(PostgresJobStore& store, Lease lease, std::unique_ptr<pqxx::work> work)
      : store_(store), lease_(std::move(lease)), work_(std::move(work)) {}
  ~PostgresTransaction() override;

  std::optional<StoredJob> job(const std::string& name) override {
    const auto rows = run("reading a job", [&] { return work_->exec_prepared("lock_job", name); });
    if (rows.empty()) return std::nullopt;
    return read_job(rows[0]);
  }
  std::optional<int64_t> job_revision(const std::string& name) override {
    const auto rows = run("reading a job's revision", [&] { return work_->exec_prepared("lock_revision", name); });
    if (rows.empty()) return std::nullopt;
    return rows[0][0].as<int64_t>();
  }
  bool insert_job(const StoredJob& job) override {
    const auto rows = run("inserting a job", [&] {
      return work_->exec_prepared("insert_job", job.name, job.spec_json, job.state_json, number(job.created_at_s));
    });
    return rows.affected_rows() == 1;
  }
  void save_state(const std::string& name, const std::string& state_json, int64_t revision) override {
    const auto rows =
        run("saving a job's state", [&] { return work_->exec_prepared("save_state", state_json, revision, name); });
    if (rows.affected_rows() != 1) throw Error(fmt::format("job store: no job '{}' to update", name));
  }
  void insert_recurrences(std::vector<RecurrenceRow>& rows) override {
    if (rows.empty()) return;
    nlohmann::json set = nlohmann::json::array();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const RecurrenceRow& r = rows[i];
      set.push_back({{"ord", i},
                     {"job", r.job},
                     {"batch_size", r.batch_size},
                     {"power_limit_w", json_number(r.power_limit_w)},
                     {"threshold_cost", json_number(r.threshold_cost)},
                     {"node", r.node},
                     {"started_at", r.started_at_s}});
    }
    const auto result =
        run("inserting recurrences", [&] { return work_->exec_prepared("insert_recurrences", set.dump()); });
    // The identity column numbers rows in the order they are inserted (ORDER
    // BY ord): the ids, sorted, are the rows' in order.
    std::vector<int64_t> ids;
    for (const auto& row : result) ids.push_back(row[0].as<int64_t>());
    if (ids.size() != rows.size()) throw Error("job store: inserting recurrences returned the wrong number of ids");
    std::sort(ids.begin(), ids.end());
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i].id = ids[i];
  }
  std::vector<RecurrenceRow> lock_recurrences(const std::vector<int64_t>& ids) override {
    std::vector<RecurrenceRow> out;
    if (ids.empty()) return out;
    std::string array = "{";
    for (const int64_t id : ids) array += (array.size() > 1 ? "," : "") + std::to_string(id);
    array += "}";
    for (const auto& row :
         run("reading recurrences", [&] { return work_->exec_prepared("lock_recurrences", array); })) {
      out.push_back(read_recurrence(row));
    }
    return out;
  }
  void record_progress(const RecurrenceRow& r) override {
    const auto result = run("recording progress", [&] {
      return work_->exec_prepared("record_progress", r.progress_epochs.value_or(0), number(r.progress_cost),
                                  number(r.progress_at_s), r.id);
    });
    if (result.affected_rows() != 1) throw Error(fmt::format("job store: recurrence {} is not open", r.id));
  }
  void finish_recurrences(const std::vector<RecurrenceRow>& rows) override {
    if (rows.empty()) return;
    nlohmann::json set = nlohmann::json::array();
    for (const RecurrenceRow& r : rows) {
      set.push_back({{"id", r.id},
                     {"finished_at", json_number(r.finished_at_s)},
                     {"energy_j", json_number(r.energy_j)},
                     {"time_s", json_number(r.time_s)},
                     {"cost", json_number(r.cost)},
                     {"reached_target", r.reached_target ? nlohmann::json(*r.reached_target ? 1 : 0) : nlohmann::json()},
                     {"stopped_early", r.stopped_early ? 1 : 0}});
    }
    const auto result =
        run("finishing recurrences", [&] { return work_->exec_prepared("finish_recurrences", set.dump()); });
    if (result.affected_rows() != rows.size()) {
      throw Error(fmt::format("job store: {} of {} recurrences were not open", rows.size() - result.affected_rows(),
                              rows.size()));
    }
  }
  std::optional<std::string> power_profile(const std::string& gpu_model, const std::string& job,
                                           int batch_size) override {
    const auto rows = run("reading a power profile",
                          [&] { return work_->exec_prepared("power_profile", gpu_model, job, batch_size); });
    if (rows.empty()) return std::nullopt;
    return rows[0][0].as<std::string>();
  }
  void put_power_profile(const std::string& gpu_model, const std::string& job, int batch_size,
                         const std::string& profile_json) override {
    run("storing a power profile", [&] {
      return work_->exec_prepared("put_power_profile", gpu_model, job, batch_size, profile_json,
                                  number(unix_time_s()));
    });
  }
  void commit() override;

 private:
  template <typename F>
  pqxx::result run(const char* what, F&& f);

  PostgresJobStore& store_;
  Lease lease_;
  std::unique_ptr<pqxx::work> work_;  // after lease_: ends before its connection
};

// The health check's connection and what it runs: `SELECT` whether the
// database takes writes, on a connection of its own (not the pool's, which
// may all be busy), under a short statement timeout, reconnecting when lost.
// Owned by the probe alone (BoundedProbe may outlive the store).
class HealthConnection {
 public:
  HealthConnection(std::string conninfo, std::string shown_url)
      : conninfo_(std::move(conninfo)), shown_url_(std::move(shown_url)) {}

  StoreHealth probe() {
    // A connection kept from an earlier check may have died since (the
    // server restarted): one more try on a fresh connection.
    for (int attempt = 0;; ++attempt) {
      const bool fresh = conn_ == nullptr;
      try {
        return ask();
      } catch (const std::exception& e) {
        conn_.reset();
        if (fresh || attempt > 0) {
          return {false, fmt::format("job store '{}' is unavailable: the health check failed: {}", shown_url_,
                                     without_trailing_space(e.what()))};
        }
      }
    }
  }

 private:
  StoreHealth ask() {
    if (!conn_) {
      conn_ = std::make_unique<pqxx::connection>(conninfo_);
      conn_->set_variable("statement_timeout", kHealthStatementTimeoutMs);
    }
    pqxx::nontransaction t(*conn_);
    const auto rows = t.exec("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')");
    if (rows[0][0].as<bool>() || rows[0][1].as<std::string>() == "on") {
      return {false, fmt::format("job store '{}' is read only (a standby in recovery, or default_transaction_read_only"
                                 " on): writes would fail",
                                 shown_url_)};
    }
    return {};
  }

  std::string conninfo_, shown_url_;
  std::unique_ptr<pqxx::connection> conn_;
};

class PostgresJobStore final : public JobStore {
 public:
  explicit PostgresJobStore(std::string url)
      : url_(std::move(url)),
        shown_url_(redact(url_)),
        conninfo_(with_defaults(url_, kConnectionDefaults)),
        health_(make_health_probe(with_defaults(url_, kHealthConnectionDefaults), shown_url_)) {
    Lease lease = connect();
    describe_ = fmt::format("PostgreSQL host={} port={} dbname={}, schema {}", lease.conn->hostname(),
                            lease.conn->port(), lease.conn->dbname(), kJobStoreSchemaVersion);
    migrate(*lease.conn);
    give_back(std::move(lease));
  }

  // A pooled connection may have died while it idled (the server restarted):
  // BEGIN fails on it before anything is done, so one more try on a fresh
  // connection is safe, and the first request after an outage succeeds.
  std::unique_ptr<StoreTransaction> begin() override {
    for (int attempt = 0;; ++attempt) {
      Lease lease = take();
      try {
        auto work = std::make_unique<pqxx::work>(*lease.conn);
        return std::make_unique<PostgresTransaction>(*this, std::move(lease), std::move(work));
      } catch (const std::exception& e) {
        const Fault fault = classify(e, lease.conn.get());
        if (!(fault == Fault::kUnavailable && lease.pooled && attempt == 0)) raise("beginning a transaction", e, fault);
      }
      forget_connections();
    }
  }

  std::optional<StoredJob> job(const std::string& name) override {
    const auto rows = read("reading a job", [&](pqxx::read_transaction& t) {
      return t.exec_params(std::string(kSelectJob) + " WHERE name = $1", name);
    });
    if (rows.empty()) return std::nullopt;
    return read_job(rows[0]);
  }

  std::vector<StoredJob> jobs() override {
    std::vector<StoredJob> out;
    for (const auto& row : read("listing jobs", [&](pqxx::read_transaction& t) {
           return t.exec(std::string(kSelectJob) + " ORDER BY name");
         })) {
      out.push_back(read_job(row));
    }
    return out;
  }

  std::vector<RecurrenceRow> recurrences(const std::string& job) override {
    std::vector<RecurrenceRow> out;
    for (const auto& row : read("listing recurrences", [&](pqxx::read_transaction& t) {
           return t.exec_params(std::string(kSelectRecurrence) + " WHERE job = $1 ORDER BY id", job);
         })) {
      out.push_back(read_recurrence(row));
    }
    return out;
  }

  RecurrenceCounts recurrence_counts(const std::string& job) override {
    const auto rows = read("counting recurrences", [&](pqxx::read_transaction& t) {
      return t.exec_params(kCountRecurrences, job);
    });
    return {rows[0][0].as<int64_t>(), rows[0][1].as<int64_t>()};
  }

  std::string describe() const override { return describe_; }

  // The probe (bounded by kHealthDeadline), then a write that failed lately
  // for want of the database (a full disk fails writes, not the probe).
  StoreHealth health() override {
    StoreHealth health = health_.check();
    if (!health.available) return health;
    if (auto why = outages_.recent(kOutageMemory)) return {false, *why};
    return health;
  }

  // Throws what a failure of `what` is: StoreBusyError (retry),
  // StoreUnavailableError (the database cannot be reached or written: the
  // pool is emptied, the next request connects afresh), or an Error; each
  // names the database (its URL without the password), the step and why.
  [[noreturn]] void raise(const char* what, const std::exception& e, Fault fault) {
    const std::string why = without_trailing_space(e.what());
    switch (fault) {
      case Fault::kBusy:
        throw StoreBusyError(fmt::format("job store '{}': {} failed: {}", shown_url_, what, why));
      case Fault::kUnavailable: {
        forget_connections();
        StoreUnavailableError error(fmt::format("job store '{}' is unavailable: {} failed: {}", shown_url_, what, why));
        outages_.failed(error.what());
        throw error;
      }
      case Fault::kOther:
        break;
    }
    throw Error(fmt::format("job store '{}': {} failed: {}", shown_url_, what, why));
  }

  void committed() { outages_.succeeded(); }

  // A connection whose transaction ended goes back to the pool, unless it
  // broke or was made before the last outage: the next transaction gets a
  // fresh one instead.
  void give_back(Lease lease) {
    if (!lease.conn->is_open()) return;
    std::lock_guard lock(mutex_);
    if (lease.generation != generation_) return;
    pool_.push(std::move(lease.conn));
  }

 private:
  static BoundedProbe make_health_probe(std::string conninfo, std::string shown_url) {
    auto connection = std::make_shared<HealthConnection>(std::move(conninfo), std::move(shown_url));
    return BoundedProbe([connection] { return connection->probe(); }, kHealthDeadline);
  }

  // The server went away (or cannot be written): every pooled connection
  // went with it. Those in use are dropped when given back.
  void forget_connections() {
    std::lock_guard lock(mutex_);
    pool_ = {};
    ++generation_;
  }

  Lease take() {
    {
      std::lock_guard lock(mutex_);
      if (!pool_.empty()) {
        Lease lease{std::move(pool_.top()), generation_, true};
        pool_.pop();
        return lease;
      }
    }
    return connect();
  }

  Lease connect() {
    uint64_t generation;
    {
      std::lock_guard lock(mutex_);
      generation = generation_;
    }
    std::unique_ptr<pqxx::connection> conn;
    try {
      conn = std::make_unique<pqxx::connection>(conninfo_);
      // set_variable, not SET: libpqxx sets them again should it ever
      // reconnect this connection by itself. extra_float_digits > 0: doubles
      // come back in the fewest digits that read back to the same bits,
      // whatever the server's default.
      conn->set_variable("lock_timeout", std::to_string(kLockTimeoutMs));
      conn->set_variable("extra_float_digits", "3");
      for (const auto& [name, sql] : prepared_statements()) conn->prepare(name, sql);
    } catch (const std::exception& e) {
      raise("connecting", e, classify(e, conn.get()));
    }
    return {std::move(conn), generation, false};
  }

  // Reads are one statement outside a write transaction: safe to run again
  // on a fresh connection when a pooled one turns out dead.
  template <typename F>
  pqxx::result read(const char* what, F&& f) {
    for (int attempt = 0;; ++attempt) {
      Lease lease = take();
      try {
        pqxx::result rows;
        {
          pqxx::read_transaction t(*lease.conn);
          rows = f(t);
        }
        give_back(std::move(lease));
        return rows;
      } catch (const std::exception& e) {
        const Fault fault = classify(e, lease.conn.get());
        const bool retry = fault == Fault::kUnavailable && lease.pooled && attempt == 0;
        give_back(std::move(lease));
        if (!retry) raise(what, e, fault);
      }
      forget_connections();
    }
  }

  // Like SQLite's: the versions applied are in schema_version, the missing
  // migrations go in one transaction. The advisory lock makes a second
  // server starting at once wait, then find the tables made.
  void migrate(pqxx::connection& conn) {
    int version = 0;
    try {
      pqxx::work t(conn);
      t.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLockKey);
      t.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
      const auto rows = t.exec("SELECT MAX(version) FROM schema_version");
      if (!rows[0][0].is_null()) version = rows[0][0].as<int>();
      if (version > kJobStoreSchemaVersion) {
        throw Error(fmt::format("job store '{}' has schema {}, newer than this joule's {}: upgrade joule", shown_url_,
                                version, kJobStoreSchemaVersion));
      }
      for (const Migration& m : kMigrations) {
        if (m.version <= version) continue;
        for (const char* sql : m.statements) t.exec(postgres_dialect(sql));
        t.exec_params("INSERT INTO schema_version (version) VALUES ($1)", m.version);
      }
      t.commit();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      raise("migrating the schema", e, classify(e, &conn));
    }
  }

  std::string url_, shown_url_, conninfo_, describe_;
  std::mutex mutex_;  // the pool and its generation
  std::stack<std::unique_ptr<pqxx::connection>> pool_;
  uint64_t generation_ = 0;
  OutageMemory outages_;
  BoundedProbe health_;
};

// Rolls back what was not committed (pqxx::work's destructor aborts, and
// says nothing when the connection is gone: the server rolled it back).
PostgresTransaction::~PostgresTransaction() {
  work_.reset();
  store_.give_back(std::move(lease_));
}

void PostgresTransaction::commit() {
  run("committing", [&] {
    work_->commit();
    return pqxx::result();
  });
  store_.committed();
}

// Every libpqxx failure (a lost connection, a deadlock, a constraint) becomes
// an Error naming the store and the step; the transaction is then dead, and
// destroying it rolls it back.
template <typename F>
pqxx::result PostgresTransaction::run(const char* what, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    store_.raise(what, e, classify(e, lease_.conn.get()));
  }
}

}  // namespace

std::unique_ptr<JobStore> open_postgres_job_store(const std::string& url) {
  return std::make_unique<PostgresJobStore>(url);
}

}  // namespace joule::service
