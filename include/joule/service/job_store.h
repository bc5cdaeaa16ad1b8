// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Where the batch-size service keeps its jobs: each job's spec and its
// optimizer's state, every recurrence handed out and its result, and the
// power-limit profiles measured per GPU model. A store hands out write
// transactions; the service does all the logic inside one, so concurrent
// recurrences (threads, processes, replicas sharing a database) never lose
// an update. SQLite by default; PostgreSQL for replicas.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/error.h"

namespace joule::service {

// A transaction gave up waiting for rows another holds (PostgreSQL's lock
// timeout or a deadlock it broke): nothing was changed, and the same request
// may succeed when retried. The service answers 503.
class StoreBusyError : public Error {
 public:
  using Error::Error;
};

// The store cannot be reached or written at all (the database server is
// down or the connection lost, the disk is full, the database stayed locked
// past its deadline): nothing was changed. The service answers 503 with
// Retry-After, like StoreBusyError, and its /healthz says the store is down.
class StoreUnavailableError : public StoreBusyError {
 public:
  using StoreBusyError::StoreBusyError;
};

// Whether the store answers now (JobStore::health()).
struct StoreHealth {
  bool available = true;
  std::string problem;  // why not, when unavailable
};

struct StoredJob {
  std::string name;
  std::string spec_json;   // as registered (the canonical form)
  std::string state_json;  // BatchSizeOptimizer::to_json()
  int64_t revision = 0;    // bumped by every change of the state
  double created_at_s = 0.0;  // Unix time
};

struct RecurrenceRow {
  int64_t id = 0;
  std::string job;
  int batch_size = 0;
  std::optional<double> power_limit_w;
  // The early-stop threshold handed out with it: a run stopped there costs
  // exactly that (+inf is stored as NULL).
  std::optional<double> threshold_cost;
  std::string node;
  double started_at_s = 0.0;  // Unix time
  // Set when its result comes in.
  std::optional<double> finished_at_s, energy_j, time_s, cost;
  std::optional<bool> reached_target;
  bool stopped_early = false;
  // The last progress report while in flight: epochs done, cost so far, when.
  std::optional<int> progress_epochs;
  std::optional<double> progress_cost, progress_at_s;

  bool finished() const { return finished_at_s.has_value(); }
};

struct RecurrenceCounts {
  int64_t total = 0;
  int64_t in_flight = 0;  // asked for, not yet reported
};

// One transaction: everything done through it is committed together by
// commit(), or rolled back when it is destroyed first.
class StoreTransaction {
 public:
  virtual ~StoreTransaction() = default;
  // The job, its row locked for this transaction.
  virtual std::optional<StoredJob> job(const std::string& name) = 0;
  // Only its revision (the row locked likewise): what a writer that holds
  // the state of that revision in memory needs, without the state's bytes.
  virtual std::optional<int64_t> job_revision(const std::string& name) = 0;
  // False when a job of that name exists (nothing written).
  virtual bool insert_job(const StoredJob& job) = 0;
  // Writes the state and its revision: the one read, plus the changes made.
  virtual void save_state(const std::string& name, const std::string& state_json, int64_t revision) = 0;
  // Recurrences go in sets, each set in as few round trips to the database
  // as it allows (one statement on PostgreSQL), so that a transaction
  // carrying many requests costs little more than one carrying a single.
  // Inserts the rows in order and sets each one's id.
  virtual void insert_recurrences(std::vector<RecurrenceRow>& rows) = 0;
  // Those of ids that exist, their rows locked (in no particular order).
  virtual std::vector<RecurrenceRow> lock_recurrences(const std::vector<int64_t>& ids) = 0;
  // Writes the results of rows that are all still open; throws Error (and
  // the transaction must be rolled back) if one is not.
  virtual void finish_recurrences(const std::vector<RecurrenceRow>& rows) = 0;
  // A recurrence's progress (row.progress_*), while it is still open;
  // throws Error (roll back) if it is not.
  virtual void record_progress(const RecurrenceRow& row) = 0;
  // A GPU model's power profile for one job and batch size (JSON), if any.
  virtual std::optional<std::string> power_profile(const std::string& gpu_model, const std::string& job,
                                                   int batch_size) = 0;
  virtual void put_power_profile(const std::string& gpu_model, const std::string& job, int batch_size,
                                 const std::string& profile_json) = 0;
  virtual void commit() = 0;
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  // A write transaction. Blocks while another holds the job rows it needs
  // (SQLite: the whole database, up to its busy timeout; PostgreSQL: the
  // rows the other read to change, until it ends).
  virtual std::unique_ptr<StoreTransaction> begin() = 0;
  // Reads outside a transaction (listings, exports).
  virtual std::optional<StoredJob> job(const std::string& name) = 0;
  virtual std::vector<StoredJob> jobs() = 0;
  virtual std::vector<RecurrenceRow> recurrences(const std::string& job) = 0;
  // Counted by the database: a summary costs the same whatever the job's age.
  virtual RecurrenceCounts recurrence_counts(const std::string& job) = 0;
  // E.g. "SQLite /var/lib/joule/jobs.db, schema 1" or
  // "PostgreSQL host=db port=5432 dbname=joule, schema 1" (never a password).
  virtual std::string describe() const = 0;
  // A cheap round trip to the store (PostgreSQL: a trivial query on a
  // connection of its own, reconnecting when lost; SQLite: the file is still
  // readable and writable), bounded in time. Never throws.
  virtual StoreHealth health() { return {}; }
};

// The schema version this build writes; older databases are migrated when
// opened, newer ones refused.
inline constexpr int kJobStoreSchemaVersion = 2;

// url: "sqlite:PATH" or a plain path (SQLite; created when missing), or
// "postgresql://..." / "postgres://..." (a libpq URI; the database must exist).
// Throws Error naming the URL when it cannot be opened or migrated.
std::unique_ptr<JobStore> open_job_store(const std::string& url);

}  // namespace joule::service
