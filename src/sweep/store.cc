// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "sweep/store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>

#include "joule/clock.h"
#include "joule/common/output_file.h"
#include "joule/error.h"

namespace joule::sweep {

namespace {

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql, const std::string& path) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      throw Error(fmt::format("results store '{}': {}", path, sqlite3_errmsg(db)));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  void bind(int i, const std::string& v) { sqlite3_bind_text(stmt_, i, v.c_str(), -1, SQLITE_TRANSIENT); }
  void bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void bind(int i, long long v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, const std::optional<double>& v) {
    v ? sqlite3_bind_double(stmt_, i, *v) : sqlite3_bind_null(stmt_, i);
  }
  int step() { return sqlite3_step(stmt_); }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

double wall_time_s() {
  // Timestamps for people reading the store; durations come from the Clock.
  return static_cast<double>(time(nullptr));
}

}  // namespace

Store::Store(const std::string& path, ReadOnly) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(fmt::format("cannot open results store '{}': {}", path, why));
  }
  sqlite3_busy_timeout(db_, 5000);
}

Store::Store(const std::string& path) : path_(path) {
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(fmt::format("cannot open results store '{}': {}", path, why));
  }
  sqlite3_busy_timeout(db_, 5000);
  exec(
      "CREATE TABLE IF NOT EXISTS runs ("
      " id INTEGER PRIMARY KEY, sweep TEXT NOT NULL, config TEXT NOT NULL, repeat INTEGER NOT NULL,"
      " command TEXT NOT NULL, status TEXT NOT NULL, exit_code INTEGER, started_at REAL, finished_at REAL,"
      " elapsed_s REAL, gpu_energy_j REAL, cpu_energy_j REAL, dram_energy_j REAL, avg_power_w REAL,"
      " samples REAL, steps REAL, epochs REAL, gpu_util_mean REAL, gpu_util_cv REAL, mem_util_mean REAL,"
      " mem_util_cv REAL, error TEXT)");
  exec("CREATE TABLE IF NOT EXISTS timelines (run_id INTEGER NOT NULL, time_s REAL NOT NULL, device TEXT NOT NULL,"
       " power_w REAL NOT NULL)");
  // Since sweeps across nodes: the nodes a run was launched on (NULL in
  // stores of earlier joule versions: one, this machine), and each node's
  // part of the run.
  if (!has_column("runs", "nodes")) exec("ALTER TABLE runs ADD COLUMN nodes INTEGER");
  // Since simulated GPUs are said per run: what measured it (NULL in stores
  // of earlier joule versions: unknown).
  if (!has_column("runs", "backend")) exec("ALTER TABLE runs ADD COLUMN backend TEXT");
  if (!has_column("runs", "devices")) exec("ALTER TABLE runs ADD COLUMN devices TEXT");
  exec("CREATE TABLE IF NOT EXISTS run_nodes (run_id INTEGER NOT NULL, node TEXT NOT NULL, ranks TEXT NOT NULL,"
       " gpus INTEGER NOT NULL, elapsed_s REAL, gpu_energy_j REAL, cpu_energy_j REAL, dram_energy_j REAL,"
       " warnings TEXT NOT NULL DEFAULT '', PRIMARY KEY (run_id, node))");
}

bool Store::has_column(const std::string& table, const std::string& column) {
  Statement s(db_, fmt::format("PRAGMA table_info({})", table).c_str(), path_);
  while (s.step() == SQLITE_ROW) {
    const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 1));
    if (name && column == name) return true;
  }
  return false;
}

Store::~Store() {
  sqlite3_close(db_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // the lock goes with it
}

void Store::exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error ? error : "unknown error";
    sqlite3_free(error);
    throw Error(fmt::format("results store '{}': {}", path_, why));
  }
}

void Store::claim_for_sweep() {
  if (lock_fd_ >= 0) return;
  // flock, not fcntl: SQLite's own locks on the file are fcntl locks, which
  // flock locks do not touch on Linux.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("results store '{}': cannot open it to lock it: {}", path_, std::strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      throw Error(fmt::format("results store '{}' is in use by another joule sweep (wait for it to end, or give this "
                              "sweep another store with --store)",
                              path_));
    }
    throw Error(fmt::format("results store '{}': cannot lock it: {}", path_, std::strerror(error)));
  }
  lock_fd_ = fd;
}

std::vector<long long> Store::mark_interrupted() {
  std::vector<long long> ids;
  {
    Statement s(db_, "SELECT id FROM runs WHERE status = 'running' ORDER BY id", path_);
    while (s.step() == SQLITE_ROW) ids.push_back(sqlite3_column_int64(s.get(), 0));
  }
  exec("UPDATE runs SET status = 'interrupted', error = 'the sweep stopped while this run was going (killed, or the "
       "machine went down): found running when the store was next opened' WHERE status = 'running'");
  return ids;
}

bool Store::finished(const std::string& config_key, int repeat, bool retry_failed) {
  Statement s(db_,
              retry_failed ? "SELECT 1 FROM runs WHERE config = ? AND repeat = ? AND status = 'ok'"
                           : "SELECT 1 FROM runs WHERE config = ? AND repeat = ? AND status IN ('ok', 'failed')",
              path_);
  s.bind(1, config_key);
  s.bind(2, static_cast<long long>(repeat));
  return s.step() == SQLITE_ROW;
}

bool Store::failed(const std::string& config_key, int repeat) {
  Statement s(db_,
              "SELECT status FROM runs WHERE config = ? AND repeat = ? AND status IN ('ok', 'failed') "
              "ORDER BY status = 'ok' DESC, id DESC LIMIT 1",
              path_);
  s.bind(1, config_key);
  s.bind(2, static_cast<long long>(repeat));
  if (s.step() != SQLITE_ROW) return false;
  const auto* status = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0));
  return status != nullptr && std::string(status) == "failed";
}

double Store::mean_finished_elapsed_s() {
  Statement s(db_, "SELECT AVG(elapsed_s) FROM runs WHERE status IN ('ok', 'failed') AND elapsed_s IS NOT NULL", path_);
  return s.step() == SQLITE_ROW ? sqlite3_column_double(s.get(), 0) : 0.0;
}

std::vector<std::string> Store::finished_backends() {
  Statement s(db_, "SELECT DISTINCT backend FROM runs WHERE status IN ('ok', 'partial', 'failed') AND backend IS NOT NULL",
              path_);
  std::vector<std::string> backends;
  while (s.step() == SQLITE_ROW) backends.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 0)));
  return backends;
}

long long Store::begin(const std::string& sweep, const std::string& config_key, int repeat, const std::string& command) {
  Statement s(db_,
              "INSERT INTO runs (sweep, config, repeat, command, status, started_at) VALUES (?, ?, ?, ?, 'running', ?)",
              path_);
  s.bind(1, sweep);
  s.bind(2, config_key);
  s.bind(3, static_cast<long long>(repeat));
  s.bind(4, command);
  s.bind(5, wall_time_s());
  if (s.step() != SQLITE_DONE) throw Error(fmt::format("results store '{}': {}", path_, sqlite3_errmsg(db_)));
  return sqlite3_last_insert_rowid(db_);
}

void Store::finish(long long id, const RunRecord& r) {
  exec("BEGIN IMMEDIATE");
  try {
    write_outcome(id, r);
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  exec("COMMIT");
}

void Store::write_outcome(long long id, const RunRecord& r) {
  const auto fail = [&] { return Error(fmt::format("results store '{}': run {}: {}", path_, id, sqlite3_errmsg(db_))); };
  Statement s(db_,
              "UPDATE runs SET status = ?, exit_code = ?, finished_at = ?, elapsed_s = ?, gpu_energy_j = ?,"
              " cpu_energy_j = ?, dram_energy_j = ?, avg_power_w = ?, samples = ?, steps = ?, epochs = ?,"
              " gpu_util_mean = ?, gpu_util_cv = ?, mem_util_mean = ?, mem_util_cv = ?, error = ?, nodes = ?,"
              " command = COALESCE(NULLIF(?, ''), command), backend = NULLIF(?, ''), devices = NULLIF(?, '')"
              " WHERE id = ?",
              path_);
  s.bind(1, r.status);
  r.exit_code ? s.bind(2, static_cast<long long>(*r.exit_code)) : (void)sqlite3_bind_null(s.get(), 2);
  s.bind(3, wall_time_s());
  s.bind(4, r.elapsed_s);
  s.bind(5, r.gpu_energy_j);
  s.bind(6, r.cpu_energy_j);
  s.bind(7, r.dram_energy_j);
  s.bind(8, r.avg_power_w);
  s.bind(9, r.samples);
  s.bind(10, r.steps);
  s.bind(11, r.epochs);
  s.bind(12, r.gpu_util_mean);
  s.bind(13, r.gpu_util_cv);
  s.bind(14, r.mem_util_mean);
  s.bind(15, r.mem_util_cv);
  s.bind(16, r.error);
  s.bind(17, static_cast<long long>(r.nodes));
  s.bind(18, r.command);
  s.bind(19, r.backend);
  s.bind(20, r.devices);
  s.bind(21, id);
  if (s.step() != SQLITE_DONE) throw fail();
  Statement n(db_,
              "INSERT OR REPLACE INTO run_nodes (run_id, node, ranks, gpus, elapsed_s, gpu_energy_j, cpu_energy_j,"
              " dram_energy_j, warnings) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
              path_);
  for (const NodeRecord& node : r.node_rows) {
    sqlite3_reset(n.get());
    n.bind(1, id);
    n.bind(2, node.node);
    n.bind(3, node.ranks);
    n.bind(4, static_cast<long long>(node.gpus));
    n.bind(5, node.elapsed_s);
    n.bind(6, node.gpu_energy_j);
    n.bind(7, node.cpu_energy_j);
    n.bind(8, node.dram_energy_j);
    n.bind(9, node.warnings);
    if (n.step() != SQLITE_DONE) throw fail();
  }
  Statement t(db_, "INSERT INTO timelines (run_id, time_s, device, power_w) VALUES (?, ?, ?, ?)", path_);
  for (const auto& p : r.timeline) {
    sqlite3_reset(t.get());
    t.bind(1, id);
    t.bind(2, p.time_s);
    t.bind(3, p.device);
    t.bind(4, p.power_w);
    if (t.step() != SQLITE_DONE) throw fail();
  }
}

void Store::export_csv(const std::string& csv_path) {
  write_csv("SELECT id, sweep, config, repeat, command, status, exit_code, started_at, finished_at, elapsed_s,"
            " gpu_energy_j, cpu_energy_j, dram_energy_j, avg_power_w, samples, steps, epochs, gpu_util_mean,"
            " gpu_util_cv, mem_util_mean, mem_util_cv, error, COALESCE(nodes, 1) AS nodes FROM runs ORDER BY id",
            csv_path, nullptr);
}

int Store::export_nodes_csv(const std::string& csv_path) {
  int rows = 0;
  write_csv("SELECT run_id, node, ranks, gpus, elapsed_s, gpu_energy_j, cpu_energy_j, dram_energy_j, warnings"
            " FROM run_nodes ORDER BY run_id, node",
            csv_path, &rows);
  return rows;
}

void Store::write_csv(const char* sql, const std::string& csv_path, int* rows) {
  OutputFile file(csv_path);
  std::ostream& out = file.stream();
  Statement s(db_, sql, path_);
  const int columns = sqlite3_column_count(s.get());
  for (int c = 0; c < columns; ++c) out << (c ? "," : "") << sqlite3_column_name(s.get(), c);
  out << '\n';
  while (s.step() == SQLITE_ROW) {
    for (int c = 0; c < columns; ++c) {
      const unsigned char* text = sqlite3_column_text(s.get(), c);
      std::string value = text ? reinterpret_cast<const char*>(text) : "";
      if (value.find_first_of(",\"\n") != std::string::npos) {
        std::string quoted = "\"";
        for (char ch : value) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        value = quoted + "\"";
      }
      out << (c ? "," : "") << value;
    }
    out << '\n';
    if (rows) ++*rows;
  }
  file.commit();
}

}  // namespace joule::sweep
