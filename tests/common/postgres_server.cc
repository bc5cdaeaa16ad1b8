// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/postgres_server.h"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <pqxx/pqxx>
#include <stdexcept>
#include <vector>

#include "common/test_support.h"

namespace joule::testing {
namespace {

constexpr int kStartTimeoutS = 20;

// The newest installed server's binaries (Debian: /usr/lib/postgresql/N/bin).
std::string find_bin_dir() {
  std::string best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = entry.path().string() + "/bin";
    if (std::filesystem::exists(bin + "/initdb") && std::filesystem::exists(bin + "/pg_ctl") && bin > best) best = bin;
  }
  return best;
}

}  // namespace

PostgresServer::PostgresServer() {
  try {
    skip_reason_ = start();
  } catch (const std::exception& e) {
    skip_reason_ = e.what();
  }
  if (!skip_reason_.empty()) skip_reason_ = "no PostgreSQL server for the tests: " + skip_reason_;
}

PostgresServer::~PostgresServer() {
  if (port_ != 0) pg_ctl("stop -m immediate");
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

// "" once the server answers, else why it could not be started.
std::string PostgresServer::start() {
  bin_dir_ = find_bin_dir();
  if (bin_dir_.empty()) return "no initdb/pg_ctl under /usr/lib/postgresql/*/bin (install postgresql)";
  // Under /tmp, not $TMPDIR: the server's user must be able to reach it.
  std::string pattern = "/tmp/joule-pg-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed";
  dir_ = pattern;
  data_dir_ = dir_ + "/data";
  if (geteuid() == 0) {
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr || chown(dir_.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) {
      return "running as root and cannot hand a directory to user nobody";
    }
    as_nobody_ = true;
  }
  const auto init = run_process({"sh", "-c",
                                 fmt::format("{}env -C {} {}/initdb -D {} -A trust -U joule --no-sync -E UTF8",
                                             as_nobody_ ? "runuser -u nobody -- " : "", dir_, bin_dir_, data_dir_)},
                                {}, 60.0);
  if (init.exit_code != 0) return fmt::format("initdb failed ({}): {}", init.exit_code, init.err);
  port_ = free_loopback_port();
  const std::string started = launch();
  if (!started.empty()) {
    pg_ctl("stop -m immediate");
    port_ = 0;
    return started;
  }
  return "";
}

// pg_ctl start on port_; "" once the server answers.
std::string PostgresServer::launch() {
  const std::string started = pg_ctl(fmt::format(
      "start -w -t {} -l {}/log -o \"-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off\"", kStartTimeoutS, dir_,
      port_, dir_));
  if (started.empty()) return "";
  return started + "; server log: " + read_file(dir_ + "/log");
}

std::string PostgresServer::stop() { return pg_ctl("stop -w -m fast"); }

std::string PostgresServer::restart() { return launch(); }

// "" when pg_ctl succeeded, else its exit code and output.
std::string PostgresServer::pg_ctl(const std::string& action) {
  const auto r = run_process(
      {"sh", "-c",
       fmt::format("{}env -C {} {}/pg_ctl -D {} {}", as_nobody_ ? "runuser -u nobody -- " : "", dir_, bin_dir_,
                   data_dir_, action)},
      {}, kStartTimeoutS + 10.0);
  return r.exit_code == 0 ? "" : fmt::format("pg_ctl {} failed ({}): {}{}", action, r.exit_code, r.out, r.err);
}

std::string PostgresServer::url(const std::string& database) const {
  return fmt::format("postgresql://joule@127.0.0.1:{}/{}", port_, database);
}

std::string PostgresServer::create_database(const std::string& name) {
  pqxx::connection conn(url("postgres"));
  pqxx::nontransaction t(conn);
  t.exec("CREATE DATABASE " + t.quote_name(name));
  return url(name);
}

void PostgresServer::exec(const std::string& database, const std::string& sql) {
  pqxx::connection conn(url(database));
  pqxx::nontransaction t(conn);
  t.exec(sql);
}

PostgresServer& shared_postgres() {
  static PostgresServer server;
  return server;
}

}  // namespace joule::testing
