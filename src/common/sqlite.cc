// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/sqlite.h"

#include <fmt/format.h>

namespace joule {

SqliteDatabase::SqliteDatabase(const std::string& path, bool create, int busy_timeout_ms) : path_(path) {
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  if (const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr); rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    const int code = db_ ? sqlite3_extended_errcode(db_) : rc;
    sqlite3_close(db_);
    throw SqliteError(fmt::format("cannot open SQLite database '{}': {}", path, why), code);
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

SqliteDatabase::~SqliteDatabase() {
  statements_.clear();  // finalized before the connection closes
  sqlite3_close(db_);
}

SqliteStatementUse SqliteDatabase::cached(const std::string& sql) {
  auto& statement = statements_[sql];
  if (!statement) statement = std::make_unique<SqliteStatement>(*this, sql.c_str());
  return SqliteStatementUse(*statement);
}

SqliteStatementUse::~SqliteStatementUse() { statement_.reset(); }

void SqliteDatabase::exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    throw SqliteError(fmt::format("SQLite database '{}': {}", path_, why), sqlite3_extended_errcode(db_));
  }
}

std::string SqliteDatabase::describe_error(std::string_view what) const {
  return fmt::format("{} '{}': {}", what, path_, sqlite3_errmsg(db_));
}

SqliteError SqliteDatabase::last_error(std::string_view what) const {
  return SqliteError(describe_error(what), sqlite3_extended_errcode(db_));
}

SqliteStatement::SqliteStatement(SqliteDatabase& db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db.get(), sql, -1, &stmt_, nullptr) != SQLITE_OK) {
    throw db.last_error("SQLite database");
  }
}

SqliteStatement& SqliteStatement::bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, const std::optional<double>& v) {
  return v ? bind(i, *v) : bind_null(i);
}

SqliteStatement& SqliteStatement::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

bool SqliteStatement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw db_.last_error("SQLite database");
}

void SqliteStatement::run() {
  while (step()) {
  }
}

void SqliteStatement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::optional<double> SqliteStatement::column_optional_double(int c) const {
  if (is_null(c)) return std::nullopt;
  return column_double(c);
}

std::string SqliteStatement::column_text(int c) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
  return text ? std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c))) : std::string();
}

}  // namespace joule
