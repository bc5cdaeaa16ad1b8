// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A thin owner of SQLite handles whose errors name the database: a
// connection (`SqliteDatabase`) and prepared statements (`SqliteStatement`)
// that finalize themselves. What the sweep store and the batch-size service's
// store share; neither sees the C API's resource handling.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "joule/error.h"

namespace joule {

// An error SQLite reported, with its (extended) result code, so that a
// caller can tell a database it cannot reach or write now (SQLITE_BUSY,
// SQLITE_FULL, SQLITE_IOERR_*, ...) from a statement that is wrong.
class SqliteError : public Error {
 public:
  SqliteError(const std::string& what, int code) : Error(what), code_(code) {}
  // The extended result code (sqlite3_extended_errcode); code() & 0xff is the primary one.
  int code() const { return code_; }
  int primary_code() const { return code_ & 0xff; }

 private:
  int code_;
};

class SqliteStatement;

// A use of a statement its connection keeps prepared (SqliteDatabase::cached):
// when the use ends, the statement is reset and its parameters unbound, so it
// holds no lock and no stale value into the next use.
class SqliteStatementUse {
 public:
  explicit SqliteStatementUse(SqliteStatement& s) : statement_(s) {}
  ~SqliteStatementUse();
  SqliteStatementUse(const SqliteStatementUse&) = delete;
  SqliteStatementUse& operator=(const SqliteStatementUse&) = delete;
  SqliteStatement* operator->() const { return &statement_; }
  SqliteStatement& operator*() const { return statement_; }

 private:
  SqliteStatement& statement_;
};

class SqliteDatabase {
 public:
  // Opens (creating if asked) the file at path; waits up to busy_timeout_ms
  // for another connection's lock. Every error below is a SqliteError naming
  // what and path.
  SqliteDatabase(const std::string& path, bool create, int busy_timeout_ms = 5000);
  ~SqliteDatabase();
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  // Runs statements without results (schema, BEGIN/COMMIT, pragmas).
  void exec(const std::string& sql);
  // The statement for sql, prepared on its first use on this connection and
  // kept until the connection closes: a hot path pays SQLite's parser once.
  SqliteStatementUse cached(const std::string& sql);
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  int changes() const { return sqlite3_changes(db_); }
  // "<what> '<path>': <SQLite's message>", for errors raised by callers.
  std::string describe_error(std::string_view what) const;
  // That message with the connection's last (extended) result code.
  SqliteError last_error(std::string_view what) const;
  // False while a transaction is open (BEGIN without its COMMIT or ROLLBACK,
  // and not rolled back by SQLite itself after an I/O error or a full disk).
  bool autocommit() const { return sqlite3_get_autocommit(db_) != 0; }
  const std::string& path() const { return path_; }
  sqlite3* get() { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  std::unordered_map<std::string, std::unique_ptr<SqliteStatement>> statements_;
};

class SqliteStatement {
 public:
  SqliteStatement(SqliteDatabase& db, const char* sql);
  ~SqliteStatement() { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Parameters count from 1, as in SQL.
  SqliteStatement& bind(int i, std::string_view v);
  SqliteStatement& bind(int i, double v);
  SqliteStatement& bind(int i, int64_t v);
  SqliteStatement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  SqliteStatement& bind(int i, const std::optional<double>& v);
  SqliteStatement& bind_null(int i);
  // True while a row is there; false when done. Throws SqliteError
  // otherwise (SQLITE_BUSY past the timeout included).
  bool step();
  // Steps a statement that returns no rows.
  void run();
  void reset();

  // Columns count from 0.
  bool is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  int64_t column_int(int c) const { return sqlite3_column_int64(stmt_, c); }
  double column_double(int c) const { return sqlite3_column_double(stmt_, c); }
  std::optional<double> column_optional_double(int c) const;
  std::string column_text(int c) const;

 private:
  SqliteDatabase& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace joule
