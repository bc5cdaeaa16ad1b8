// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The store goes away under a running `joule serve` (issue 31, part 3): the
// real PostgreSQL stopped and started again under load, SQLite on a
// filesystem that fills up, SQLite locked by another connection past its
// busy timeout. Requests are answered 503 with Retry-After (never 500), the
// store's health() says it is down, the service recovers by itself, and
// every ask and report it answered 2xx is in the database afterwards.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "common/postgres_server.h"
#include "common/test_support.h"
#include "joule/service/batch_size_service.h"
#include "joule/service/job_store.h"

namespace joule {
namespace {

using namespace std::chrono_literals;

// Whether `joule serve` answers /healthz 503 while its store is down (from
// BatchSizeService::store_health(), which the HTTP side of issue 31 reads).
// False would only report what /healthz said: for a server without it.
constexpr bool kHealthzReportsTheStore = true;

// One HTTP exchange with the service.
struct HttpReply {
  int status = 0;  // 0: no answer (connection refused, timed out)
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// A plain HTTP/1.1 request on a connection of its own (Connection: close),
// so that what the client library would hide (Retry-After) is seen as sent.
HttpReply http(int port, const std::string& method, const std::string& path, const std::string& body = "",
               int timeout_s = 30) {
  HttpReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return reply;
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return reply;
  }
  const std::string request = fmt::format(
      "{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\n\r\n{}",
      method, path, body.size(), body);
  std::string raw;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) raw.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return reply;
  reply.status = std::atoi(raw.c_str() + 9);
  std::size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    const std::size_t end = raw.find("\r\n", line);
    const std::size_t colon = raw.find(':', line);
    if (colon != std::string::npos && colon < end) {
      std::string name = raw.substr(line, colon - line);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      const std::size_t value = std::min(raw.find_first_not_of(' ', colon + 1), end);
      reply.headers[name] = raw.substr(value, end - value);
    }
    line = end + 2;
  }
  reply.body = raw.substr(head_end + 4);
  return reply;
}

// `joule serve` on a free loopback port, stopped with SIGTERM at the end.
// A shell line may run first (`sh -c LINE`), ending in `exec "$@"`: the
// server then keeps its pid.
class Server {
 public:
  Server(const testing::TempDir& dir, const std::string& store, const std::string& shell_line = "")
      : err_path_(dir.file("serve.err")) {
    const std::string port_file = dir.file("port");
    std::vector<std::string> argv = {JOULE_BINARY, "serve",       "--store", store, "--listen", "127.0.0.1:0",
                                     "--port-file", port_file};
    if (!shell_line.empty()) argv.insert(argv.begin(), {"/bin/sh", "-c", shell_line, "sh"});
    pid_ = testing::start_process(argv, {}, dir.file("serve.out"), err_path_);
    port_ = testing::wait_for_port_file(port_file);
  }
  pid_t pid() const { return pid_; }
  ~Server() {
    if (pid_ > 0) stop();
  }
  int stop() {
    kill(pid_, SIGTERM);
    const int code = testing::wait_process(pid_, 20.0);
    pid_ = -1;
    return code;
  }
  int port() const { return port_; }
  // The last lines of its log, for failure messages.
  std::string log_tail() const {
    const std::string log = testing::read_file(err_path_);
    return log.size() > 3000 ? "..." + log.substr(log.size() - 3000) : log;
  }

 private:
  std::string err_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

constexpr const char* kJob = "outage";

void register_job(int port) {
  const HttpReply r =
      http(port, "POST", "/v1/jobs",
           R"({"name": "outage", "batch_sizes": [32, 64, 128], "default_batch_size": 64, "max_power_w": 300})");
  ASSERT_EQ(r.status, 201) << r.body;
}

// Clients asking and reporting through HTTP, each in a loop, until stopped.
// A report answered 503 is sent again later (its recurrence stays in flight,
// as a training job would retry it). Every reply is tallied, and the ids the
// service answered 2xx are kept for the check against the database.
class Load {
 public:
  Load(int port, int clients) : port_(port), last_ok_(static_cast<std::size_t>(clients)) {
    for (int c = 0; c < clients; ++c) threads_.emplace_back([this, c] { client(static_cast<std::size_t>(c)); });
  }
  ~Load() { stop(); }

  void stop() {
    stopping_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  int64_t ok() const { return ok_.load(); }
  int64_t unavailable() const { return unavailable_.load(); }
  // Whether every client has had a 2xx since `since`.
  bool every_client_served_since(std::chrono::steady_clock::time_point since) {
    std::lock_guard lock(mutex_);
    return std::all_of(last_ok_.begin(), last_ok_.end(), [&](auto t) { return t > since; });
  }

  struct Tally {
    std::map<int, int64_t> statuses;
    std::vector<std::string> unexpected;  // replies other than 2xx and 503
    int64_t without_retry_after = 0;      // 503s without Retry-After
    std::string a_503_body;
    std::set<int64_t> asked, reported;  // recurrence ids answered 201 / 200
    std::set<int64_t> in_doubt;         // reports answered 503, then 409 (already reported)
  };
  Tally tally() {
    std::lock_guard lock(mutex_);
    return tally_;
  }

 private:
  void client(std::size_t c) {
    int64_t pending = 0;  // a recurrence to report
    bool pending_was_refused = false;
    while (!stopping_) {
      if (pending == 0) {
        const HttpReply r = http(port_, "POST", fmt::format("/v1/jobs/{}/recurrences", kJob), R"({"node": "n"})");
        int64_t id = 0;
        if (r.status == 201) id = nlohmann::json::parse(r.body).at("recurrence_id").get<int64_t>();
        record(c, r, [&](Tally& t) { t.asked.insert(id); }, false);
        pending = id;
        pending_was_refused = false;
      } else {
        const HttpReply r =
            http(port_, "POST", fmt::format("/v1/recurrences/{}/result", pending),
                 R"({"energy_j": 2500.0, "time_s": 10.0, "reached_target": true, "stopped_early": false})");
        // A report whose COMMIT lost its connection was answered 503 but may
        // have been committed: sent again, it is refused as already reported.
        const bool in_doubt = r.status == 409 && pending_was_refused;
        record(
            c, r, [&](Tally& t) { (in_doubt ? t.in_doubt : t.reported).insert(pending); }, in_doubt);
        if (r.status == 200 || in_doubt) pending = 0;
        if (r.status == 503) pending_was_refused = true;
      }
      std::this_thread::sleep_for(2ms);  // leave the shared cores some room
    }
  }

  template <typename OnOk>
  void record(std::size_t c, const HttpReply& r, OnOk&& on_ok, bool in_doubt) {
    std::lock_guard lock(mutex_);
    ++tally_.statuses[r.status];
    if (r.status == 200 || r.status == 201 || in_doubt) {
      if (r.status != 409) ++ok_;
      last_ok_[c] = std::chrono::steady_clock::now();
      on_ok(tally_);
    } else if (r.status == 503) {
      ++unavailable_;
      if (!r.headers.count("retry-after")) ++tally_.without_retry_after;
      if (tally_.a_503_body.empty()) tally_.a_503_body = r.body;
    } else if (tally_.unexpected.size() < 5) {
      tally_.unexpected.push_back(fmt::format("{} {}", r.status, r.body));
    }
  }

  int port_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> ok_{0}, unavailable_{0};
  std::mutex mutex_;
  Tally tally_;
  std::vector<std::chrono::steady_clock::time_point> last_ok_;
  std::vector<std::thread> threads_;
};

// Polls until done() or the timeout; returns done().
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  return done();
}

// /healthz's status. It may be answered from a check the server runs every
// second or so, lagging the store by that much: the callers poll it.
int healthz(int port) { return http(port, "GET", "/healthz").status; }

// A sample's value in /metrics; -1 when absent.
double metric(int port, const std::string& name) {
  const std::string text = http(port, "GET", "/metrics").body;
  const std::size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
}

// /healthz while the store is down (see kHealthzReportsTheStore).
void expect_healthz_says_down(int port) {
  const bool down = wait_until([&] { return healthz(port) == 503; }, 3s);
  if (kHealthzReportsTheStore) {
    EXPECT_TRUE(down) << "/healthz while the store is down: " << http(port, "GET", "/healthz").body;
    EXPECT_EQ(metric(port, "joule_service_store_up"), 0.0);
  } else if (!down) {
    std::cout << "[   NOTE   ] /healthz did not answer 503 while the store was down (the HTTP server does not "
              << "report store_health() yet)" << std::endl;
  }
}

// /metrics counts the answers that said the store was unavailable (each
// 503 the clients got, and /healthz's).
void expect_metrics_counted(int port, int64_t unavailable_answers) {
  if (!kHealthzReportsTheStore) return;
  EXPECT_GE(metric(port, "joule_service_store_unavailable_total"), static_cast<double>(unavailable_answers));
  EXPECT_EQ(metric(port, "joule_service_store_up"), 1.0);
}

// /healthz once the store is back.
void expect_healthz_says_up(int port) {
  EXPECT_TRUE(wait_until([&] { return healthz(port) == 200; }, 5s)) << http(port, "GET", "/healthz").body;
}

// The replies seen, then every recurrence the service answered 2xx for in
// the store: asked ones exist, reported ones are finished.
void expect_nothing_answered_2xx_was_lost(Load::Tally tally, service::JobStore& store) {
  EXPECT_TRUE(tally.unexpected.empty()) << "replies other than 2xx and 503, e.g. " << tally.unexpected.front();
  EXPECT_EQ(tally.without_retry_after, 0) << "503s without Retry-After";
  EXPECT_GT(tally.statuses[503], 0) << "no request met the outage";
  std::map<int64_t, service::RecurrenceRow> rows;
  for (service::RecurrenceRow& r : store.recurrences(kJob)) rows[r.id] = std::move(r);
  int64_t missing = 0, unfinished = 0;
  for (const int64_t id : tally.asked) missing += rows.count(id) == 0;
  for (const int64_t id : tally.reported) unfinished += rows.count(id) == 0 || !rows[id].finished();
  for (const int64_t id : tally.in_doubt) unfinished += rows.count(id) == 0 || !rows[id].finished();
  EXPECT_EQ(missing, 0) << "of " << tally.asked.size() << " asks answered 201";
  EXPECT_EQ(unfinished, 0) << "of " << tally.reported.size() << " reports answered 200";
  std::cout << "[   INFO   ] statuses:";
  for (const auto& [status, n] : tally.statuses) std::cout << " " << status << " x" << n;
  std::cout << "; " << tally.asked.size() << " asks and " << tally.reported.size() << " reports answered 2xx, all "
            << "in the store (" << rows.size() << " rows); a 503: " << tally.a_503_body << std::endl;
}

TEST(StoreOutageTest, PostgresStoppedUnderLoadAnswers503AndRecoversWithoutLosingAnAnsweredWrite) {
  testing::PostgresServer pg;  // its own: this test stops it
  if (!pg.running()) JOULE_SKIP_WITHOUT_SERVER(pg.skip_reason());
  const std::string url = pg.create_database("outage");
  testing::TempDir tmp;
  Server serve(tmp, url);
  ASSERT_GT(serve.port(), 0) << serve.log_tail();
  register_job(serve.port());
  // A store of the test's own on the same database: its health() as the
  // server's BatchSizeService::store_health() would answer.
  const auto store = service::open_job_store(url);
  EXPECT_TRUE(store->health().available) << store->health().problem;

  Load load(serve.port(), 4);
  ASSERT_TRUE(wait_until([&] { return load.ok() >= 40; }, 10s)) << serve.log_tail();
  ASSERT_EQ(pg.stop(), "");
  EXPECT_TRUE(wait_until([&] { return load.unavailable() >= 20; }, 10s)) << serve.log_tail();
  const auto health = store->health();
  EXPECT_FALSE(health.available);
  EXPECT_NE(health.problem.find("unavailable"), std::string::npos) << health.problem;
  expect_healthz_says_down(serve.port());
  // Reads too.
  const HttpReply list = http(serve.port(), "GET", "/v1/jobs");
  EXPECT_EQ(list.status, 503) << list.body;
  EXPECT_EQ(list.headers.count("retry-after"), 1u);

  ASSERT_EQ(pg.restart(), "");
  const auto restarted = std::chrono::steady_clock::now();
  const int64_t ok_before = load.ok();
  EXPECT_TRUE(wait_until([&] { return load.ok() >= ok_before + 40 && load.every_client_served_since(restarted); }, 15s))
      << "the service did not recover by itself: " << serve.log_tail();
  load.stop();
  EXPECT_TRUE(store->health().available) << store->health().problem;
  expect_healthz_says_up(serve.port());
  expect_metrics_counted(serve.port(), load.unavailable());
  EXPECT_EQ(serve.stop(), 0);
  expect_nothing_answered_2xx_was_lost(load.tally(), *store);
}

// The pool's connections all die while the service idles (the server
// restarted between two requests): the next requests find them dead before
// sending anything and succeed on fresh ones, with their session settings
// and prepared statements, instead of failing once per pooled connection.
TEST(StoreOutageTest, PostgresRestartedWhileTheServiceIdlesIsUsedAgainAtOnce) {
  testing::PostgresServer pg;
  if (!pg.running()) JOULE_SKIP_WITHOUT_SERVER(pg.skip_reason());
  const std::string url = pg.create_database("idle");
  std::shared_ptr<service::JobStore> store = service::open_job_store(url);
  service::BatchSizeService service(store);
  service.register_job(service::JobSpec::from_json(
      {{"name", kJob}, {"batch_sizes", {32, 64, 128}}, {"default_batch_size", 64}, {"max_power_w", 300}}));
  const auto recur = [&] {
    const service::Assignment a = service.ask(kJob, "n");
    service::RecurrenceResult r;
    r.energy_j = 2500.0;
    r.time_s = 10.0;
    r.reached_target = true;
    service.report(a.recurrence_id, r);
  };
  {
    std::vector<std::thread> threads;  // several connections in the pool
    for (int i = 0; i < 4; ++i) threads.emplace_back([&] {
      for (int j = 0; j < 5; ++j) recur();
    });
    for (auto& t : threads) t.join();
  }
  ASSERT_EQ(pg.stop(), "");
  ASSERT_EQ(pg.restart(), "");
  for (int i = 0; i < 6; ++i) EXPECT_NO_THROW(recur()) << "recurrence " << i << " after the restart";
  EXPECT_EQ(store->recurrence_counts(kJob).total, 26);
  EXPECT_TRUE(store->health().available) << store->health().problem;
}

// A connection lost inside a transaction (its backend terminated): the step
// fails as unavailable, naming the store and the step, the transaction is
// gone, and the next one runs on a fresh connection.
TEST(StoreOutageTest, PostgresConnectionLostMidTransactionIsUnavailableAndTheNextOneReconnects) {
  auto& pg = testing::shared_postgres();
  if (!pg.running()) JOULE_SKIP_WITHOUT_SERVER(pg.skip_reason());
  static int databases = 0;  // the shared server outlives a test under --gtest_repeat
  const std::string database = fmt::format("midtxn_{}", ++databases);
  const std::string url = pg.create_database(database);
  const auto store = service::open_job_store(url);
  auto txn = store->begin();
  EXPECT_FALSE(txn->job_revision("nothing").has_value());
  pg.exec("postgres",
          fmt::format("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'", database));
  try {
    txn->job("nothing");
    ADD_FAILURE() << "a step on a terminated connection succeeded";
  } catch (const service::StoreUnavailableError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("is unavailable: reading a job failed"), std::string::npos) << what;
    EXPECT_NE(what.find("/" + database), std::string::npos) << what;
  }
  txn.reset();
  auto next = store->begin();
  EXPECT_FALSE(next->job("nothing").has_value());
  EXPECT_NO_THROW(next->commit());
}

// A tmpfs of its own, unmounted at scope exit (lazily, should something
// still hold it).
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& dir, const char* size) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, fmt::format("size={}", size).c_str()) != 0) {
      error_ = std::strerror(errno);
    }
  }
  ~SmallTmpfs() {
    if (error_.empty()) umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  // Writes `name` until the filesystem is full; returns the bytes written.
  std::size_t fill(const std::string& name) const {
    std::FILE* f = std::fopen((dir_ + "/" + name).c_str(), "wb");
    if (f == nullptr) return 0;
    std::setvbuf(f, nullptr, _IONBF, 0);
    const std::string chunk(4096, 'x');
    std::size_t written = 0;
    for (int i = 0; i < 1 << 16; ++i) {  // bounded: 256 MiB
      const std::size_t n = std::fwrite(chunk.data(), 1, chunk.size(), f);
      written += n;
      if (n < chunk.size()) break;
    }
    std::fclose(f);
    return written;
  }

 private:
  std::string dir_, error_;
};

// The integrity check's answer on a closed store's file ("ok" when sound).
std::string integrity_of(const std::string& path) {
  sqlite3* db = nullptr;
  std::string answer = "cannot open";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_exec(
        db, "PRAGMA integrity_check",
        [](void* out, int, char** values, char**) {
          *static_cast<std::string*>(out) = values[0] ? values[0] : "";
          return 0;
        },
        &answer, nullptr);
  }
  sqlite3_close(db);
  return answer;
}

TEST(StoreOutageTest, SqliteOnAFullFilesystemAnswers503AndRecoversWhenSpaceIsFreed) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs the tests as root)";
  testing::TempDir tmp;
  SmallTmpfs fs(tmp.file("fs"), "4m");
  if (!fs.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs here: " << fs.error();
  const std::string path = tmp.file("fs/jobs.db");
  int64_t rows_at_end = 0;
  {
    Server serve(tmp, "sqlite:" + path);
    ASSERT_GT(serve.port(), 0) << serve.log_tail();
    register_job(serve.port());
    auto store = service::open_job_store("sqlite:" + path);
    EXPECT_TRUE(store->health().available) << store->health().problem;

    Load load(serve.port(), 4);
    ASSERT_TRUE(wait_until([&] { return load.ok() >= 40; }, 10s)) << serve.log_tail();
    EXPECT_GT(fs.fill("filler"), 0u);
    EXPECT_TRUE(wait_until([&] { return load.unavailable() >= 10; }, 15s)) << serve.log_tail();
    const auto health = store->health();
    EXPECT_FALSE(health.available);
    EXPECT_NE(health.problem.find("free"), std::string::npos) << health.problem;
    expect_healthz_says_down(serve.port());

    std::filesystem::remove(tmp.file("fs/filler"));
    const auto freed = std::chrono::steady_clock::now();
    const int64_t ok_before = load.ok();
    EXPECT_TRUE(wait_until([&] { return load.ok() >= ok_before + 40 && load.every_client_served_since(freed); }, 15s))
        << "the service did not recover by itself: " << serve.log_tail();
    load.stop();
    EXPECT_TRUE(store->health().available) << store->health().problem;
    expect_healthz_says_up(serve.port());
    expect_metrics_counted(serve.port(), load.unavailable());
    EXPECT_EQ(serve.stop(), 0);
    expect_nothing_answered_2xx_was_lost(load.tally(), *store);
    rows_at_end = static_cast<int64_t>(store->recurrences(kJob).size());
  }
  EXPECT_EQ(integrity_of(path), "ok");
  EXPECT_GT(rows_at_end, 0);
}

// Without root: writes past a file-size limit (RLIMIT_FSIZE, SIGXFSZ
// ignored) fail with EFBIG, which SQLite reports as an I/O error, as a disk
// that fails writes would. The probe still reads and locks the file, so it is
// the memory of the failed writes that has /healthz say the store is down.
// Raising the limit of the running server (prlimit) is freeing the space.
TEST(StoreOutageTest, SqliteWritesFailingWithIoErrorsAnswer503AndRecoverWhenWritesWorkAgain) {
  testing::TempDir tmp;
  const std::string path = tmp.file("jobs.db");
  {
    service::BatchSizeService service(service::open_job_store("sqlite:" + path));
    service.register_job(service::JobSpec::from_json(
        {{"name", kJob}, {"batch_sizes", {32, 64, 128}}, {"default_batch_size", 64}, {"max_power_w", 300}}));
  }  // closed: the log folded into the file
  const auto limit_blocks = (std::filesystem::file_size(path) + 16 * 1024) / 512;
  Server serve(tmp, "sqlite:" + path, fmt::format("trap '' XFSZ; ulimit -S -f {}; exec \"$@\"", limit_blocks));
  ASSERT_GT(serve.port(), 0) << serve.log_tail();

  Load load(serve.port(), 4);
  EXPECT_TRUE(wait_until([&] { return load.unavailable() >= 10; }, 15s)) << serve.log_tail();
  EXPECT_TRUE(wait_until([&] { return healthz(serve.port()) == 503; }, 3s));
  const HttpReply health = http(serve.port(), "GET", "/healthz");
  EXPECT_NE(health.body.find("found the store unavailable"), std::string::npos) << health.body;

  const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  ASSERT_EQ(prlimit(serve.pid(), RLIMIT_FSIZE, &unlimited, nullptr), 0) << std::strerror(errno);
  const auto raised = std::chrono::steady_clock::now();
  const int64_t ok_before = load.ok();
  EXPECT_TRUE(wait_until([&] { return load.ok() >= ok_before + 40 && load.every_client_served_since(raised); }, 15s))
      << "the service did not recover by itself: " << serve.log_tail();
  load.stop();
  expect_healthz_says_up(serve.port());
  EXPECT_EQ(serve.stop(), 0);
  const auto store = service::open_job_store("sqlite:" + path);
  expect_nothing_answered_2xx_was_lost(load.tally(), *store);
  EXPECT_EQ(integrity_of(path), "ok");
}

TEST(StoreOutageTest, SqliteLockedByAnotherConnectionPastItsBusyTimeoutAnswers503) {
  testing::TempDir tmp;
  const std::string path = tmp.file("jobs.db");
  Server serve(tmp, "sqlite:" + path);
  ASSERT_GT(serve.port(), 0) << serve.log_tail();
  register_job(serve.port());
  auto store = service::open_job_store("sqlite:" + path);
  const std::string ask_path = fmt::format("/v1/jobs/{}/recurrences", kJob);
  ASSERT_EQ(http(serve.port(), "POST", ask_path, "{}").status, 201);

  // Another process's write transaction, left open (a person's sqlite3 shell).
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(holder);
  const auto locked = std::chrono::steady_clock::now();
  HttpReply ask;
  std::thread asker([&] { ask = http(serve.port(), "POST", ask_path, "{}"); });
  // The health check does not wait for the lock as long as a request does.
  const auto health = store->health();
  const double health_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - locked).count();
  EXPECT_FALSE(health.available);
  EXPECT_NE(health.problem.find("write lock"), std::string::npos) << health.problem;
  EXPECT_LT(health_s, 5.0);
  expect_healthz_says_down(serve.port());
  asker.join();
  const double ask_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - locked).count();
  EXPECT_EQ(ask.status, 503) << ask.body;
  EXPECT_EQ(ask.headers.count("retry-after"), 1u);
  EXPECT_NE(ask.body.find("busy timeout"), std::string::npos) << ask.body;
  EXPECT_GT(ask_s, 9.0);  // the busy timeout, 10 s
  EXPECT_LT(ask_s, 20.0);

  sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  EXPECT_EQ(http(serve.port(), "POST", ask_path, "{}").status, 201) << serve.log_tail();
  EXPECT_TRUE(store->health().available) << store->health().problem;
  expect_healthz_says_up(serve.port());
  expect_metrics_counted(serve.port(), 1);
  EXPECT_EQ(store->recurrences(kJob).size(), 2u);  // the two asks answered 201, not the refused one
}


// A store that is down: every transaction fails to begin after a while (a
// connect timeout, a busy timeout), as a real one does, counted.
class DownStore final : public service::JobStore {
 public:
  std::unique_ptr<service::StoreTransaction> begin() override {
    ++begins;
    std::this_thread::sleep_for(200ms);
    throw service::StoreUnavailableError("job store 'down' is unavailable: beginning a transaction failed: down");
  }
  std::optional<service::StoredJob> job(const std::string&) override { throw Error("not used"); }
  std::vector<service::StoredJob> jobs() override { throw Error("not used"); }
  std::vector<service::RecurrenceRow> recurrences(const std::string&) override { throw Error("not used"); }
  service::RecurrenceCounts recurrence_counts(const std::string&) override { throw Error("not used"); }
  std::string describe() const override { return "down"; }

  std::atomic<int> begins{0};
};

// Requests that queued behind a transaction which found the store
// unavailable all fail with it; none is run again alone, which would wait
// out the store's deadline once per request (a batch of k queued behind a
// SQLite lock: k x 10 s) and could apply twice the requests of a COMMIT in
// doubt.
TEST(StoreOutageTest, RequestsQueuedBehindAnUnavailableStoreFailTogetherNotOneByOne) {
  auto store = std::make_shared<DownStore>();
  service::BatchSizeService service(store);
  constexpr int kAsks = 8;
  std::atomic<int> unavailable{0};
  std::vector<std::thread> askers;
  for (int i = 0; i < kAsks; ++i) {
    askers.emplace_back([&] {
      try {
        service.ask(kJob, "n");
      } catch (const service::StoreUnavailableError&) {
        ++unavailable;
      }
    });
  }
  for (auto& t : askers) t.join();
  EXPECT_EQ(unavailable.load(), kAsks);
  // The first ask's transaction, then one for all that queued meanwhile
  // (one more should a thread start late); one by one it is 1 + 1 + 7.
  EXPECT_LE(store->begins.load(), 3);
}

}  // namespace
}  // namespace joule
