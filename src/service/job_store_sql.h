// The job store's schema, as numbered migrations shared by every SQL store.
// A database records the versions applied (schema_version); opening applies
// the missing ones in one transaction. Never edit a released migration: add
// the next. Internal to the service module.
#pragma once

#include <ctime>
#include <initializer_list>

namespace joule::service {

struct Migration {
  int version;
  std::initializer_list<const char*> statements;
};

inline constexpr Migration kMigrations[] = {
    {1,
     {"CREATE TABLE jobs (name TEXT PRIMARY KEY, spec TEXT NOT NULL, state TEXT NOT NULL,"
      " revision INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL)",
      "CREATE TABLE recurrences (id INTEGER PRIMARY KEY, job TEXT NOT NULL REFERENCES jobs (name),"
      " batch_size INTEGER NOT NULL, power_limit_w DOUBLE PRECISION, threshold_cost DOUBLE PRECISION,"
      " node TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL, finished_at DOUBLE PRECISION,"
      " energy_j DOUBLE PRECISION, time_s DOUBLE PRECISION, cost DOUBLE PRECISION, reached_target INTEGER,"
      " stopped_early INTEGER NOT NULL DEFAULT 0)",
      "CREATE INDEX recurrences_by_job ON recurrences (job, id)",
      "CREATE TABLE power_profiles (gpu_model TEXT NOT NULL, job TEXT NOT NULL, batch_size INTEGER NOT NULL,"
      " profile TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (gpu_model, job, batch_size))"}},
};

inline constexpr const char* kSelectRecurrence =
    "SELECT id, job, batch_size, power_limit_w, threshold_cost, node, started_at, finished_at, energy_j, time_s,"
    " cost, reached_target, stopped_early FROM recurrences";

// Timestamps for people reading the store; durations come from a Clock.
inline double unix_time_s() { return static_cast<double>(std::time(nullptr)); }

}  // namespace joule::service
