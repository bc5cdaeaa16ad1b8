// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A throwaway PostgreSQL server for tests: initdb into a temporary directory,
// started with pg_ctl on a free loopback port (and a Unix socket in that
// directory), stopped with `pg_ctl stop -m immediate` when destroyed. initdb
// refuses root, so as root the server runs as `nobody`. When it cannot run
// (no server binaries, no way to drop privileges), running() is false and
// skip_reason() says why: the tests GTEST_SKIP() with it.
#pragma once

#include <string>

namespace joule::testing {

class PostgresServer {
 public:
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  bool running() const { return skip_reason_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  // Creates an empty database and returns its postgresql:// URL.
  std::string create_database(const std::string& name);
  std::string url(const std::string& database) const;
  // Runs one statement in a database (e.g. to tamper with a store).
  void exec(const std::string& database, const std::string& sql);
  // Stops the server as an operator would (`pg_ctl stop -m fast`: sessions
  // are ended, connections closed), and starts it again on the same port
  // with the same data. Each returns "" or why it failed.
  std::string stop();
  std::string restart();

 private:
  std::string start();
  std::string launch();
  std::string pg_ctl(const std::string& action);

  std::string bin_dir_, dir_, data_dir_;
  bool as_nobody_ = false;
  int port_ = 0;
  std::string skip_reason_;
};

// One server per test process, started on first use (a few seconds), each
// test making its own database in it.
PostgresServer& shared_postgres();

}  // namespace joule::testing
