// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule serve`'s HTTP server (HttpServer, in process) against clients that
// try to hold it: headers sent a byte at a time, connections opened and left
// idle, a body declared far too large, anonymous connections "from other
// machines" by the hundred; and against a store that is down or blocked.
// /healthz and clients holding a token must be answered meanwhile, quickly.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "common/test_support.h"
#include "joule/common/utf8.h"
#include "joule/service/client.h"
#include "joule/service/http_server.h"
#include "joule/service/job_store.h"

namespace joule::service {
namespace {

using SteadyClock = std::chrono::steady_clock;
using testing::RawConnection;

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// A real SQLite store whose health, and whether its reads fail or wait, the
// test decides (the store layer's own outages are tested with it).
class StubStore : public JobStore {
 public:
  explicit StubStore(const std::string& path) : inner_(open_job_store("sqlite:" + path)) {}

  std::atomic<bool> down{false};  // health() unavailable, reads throw StoreUnavailableError
  // job() throws what no store should: 1 a std::exception whose text is not
  // UTF-8, 2 something that is not a std::exception at all.
  std::atomic<int> job_throws{0};

  // jobs() waits until release() (requests pile up on the store's workers).
  void block() {
    std::lock_guard lock(mutex_);
    blocked_ = true;
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      blocked_ = false;
    }
    released_.notify_all();
  }
  int waiting() const { return waiting_; }

  std::unique_ptr<StoreTransaction> begin() override { return inner_->begin(); }
  std::optional<StoredJob> job(const std::string& name) override {
    if (job_throws == 1) throw std::runtime_error("stub store: \xff\xfe is no text");
    if (job_throws == 2) throw 47;
    return inner_->job(name);
  }
  std::vector<StoredJob> jobs() override {
    if (down) throw StoreUnavailableError("the stub store is down");
    std::unique_lock lock(mutex_);
    ++waiting_;
    released_.wait_for(lock, std::chrono::seconds(20), [this] { return !blocked_; });
    --waiting_;
    lock.unlock();
    return inner_->jobs();
  }
  std::vector<RecurrenceRow> recurrences(const std::string& job) override { return inner_->recurrences(job); }
  RecurrenceCounts recurrence_counts(const std::string& job) override { return inner_->recurrence_counts(job); }
  std::string describe() const override { return "stub over " + inner_->describe(); }
  StoreHealth health() override {
    if (down) return {false, "the stub store is down"};
    return inner_->health();
  }

 private:
  std::unique_ptr<JobStore> inner_;
  std::mutex mutex_;
  std::condition_variable released_;
  bool blocked_ = false;
  std::atomic<int> waiting_{0};
};

// An HttpServer on a free loopback port, serving on a thread of its own.
class Served {
 public:
  Served(std::shared_ptr<JobStore> store, ServeOptions options)
      : service_(std::make_shared<BatchSizeService>(store)),
        server_(service_, store->describe(), with_any_port(std::move(options))),
        serving_([this] { server_.run(); }) {}
  ~Served() {
    server_.stop();
    serving_.join();
  }
  int port() const { return server_.port(); }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port()); }

 private:
  static ServeOptions with_any_port(ServeOptions o) {
    o.port = 0;
    return o;
  }
  std::shared_ptr<BatchSizeService> service_;
  HttpServer server_;
  std::thread serving_;
};

// Clients that send a request's headers a byte every `period` and never
// finish them, until stopped.
class Tricklers {
 public:
  Tricklers(int port, int count, std::chrono::milliseconds period) {
    for (int i = 0; i < count; ++i) clients_.push_back(std::make_unique<RawConnection>(port));
    thread_ = std::thread([this, period] {
      const std::string header = "POST /v1/jobs/x/recurrences HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
      for (std::size_t sent = 0; !stop_; ++sent) {
        const char c = sent < header.size() ? header[sent] : 'a';
        for (auto& client : clients_) client->send_text(std::string_view(&c, 1));
        std::this_thread::sleep_for(period);
      }
    });
  }
  ~Tricklers() {
    stop_ = true;
    thread_.join();
  }
  // How many the server has closed (it may answer 400 first).
  int closed() {
    int n = 0;
    for (auto& client : clients_) {
      client->take();
      n += client->closed() ? 1 : 0;
    }
    return n;
  }

 private:
  std::vector<std::unique_ptr<RawConnection>> clients_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A sample's value in a /metrics answer; -1 when it is not there.
double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

JobSpec small_job(const std::string& name) {
  return JobSpec::from_json({{"name", name}, {"batch_sizes", {32, 64}}, {"default_batch_size", 64}, {"max_power_w", 300}});
}

// The slowest of `rounds` round trips: /healthz anonymously, ask + report with the token.
struct Slowest {
  double health_s = 0, ask_report_s = 0;
};
Slowest time_clients(const std::string& url, const std::string& token, int rounds) {
  BatchSizeClient anonymous(url, 5.0, std::string()), holder(url, 5.0, token);
  Slowest slowest;
  for (int i = 0; i < rounds; ++i) {
    auto start = SteadyClock::now();
    EXPECT_EQ(anonymous.health()["status"], "ok");
    slowest.health_s = std::max(slowest.health_s, seconds_since(start));
    start = SteadyClock::now();
    const Assignment a = holder.ask("held", "node");
    holder.report(a.recurrence_id, {1000.0, 10.0, true, false});
    slowest.ask_report_s = std::max(slowest.ask_report_s, seconds_since(start));
  }
  return slowest;
}

// Tokens, and every client counted as another machine's (the test's
// clients are all on loopback).
ServeOptions remote_options(const testing::TempDir& dir, std::string* token) {
  *token = create_token(dir.file("tokens"), "alice", {"*"});
  ServeOptions o;
  o.tokens = std::make_shared<TokenFile>(dir.file("tokens"));
  o.treat_as_remote = {"127.0.0.1"};
  return o;
}

// 200 clients trickling their headers and 200 idle connections, all
// anonymous and "remote": more than the 64 connection threads the
// cpp-httplib server had, where /healthz then waited ~5 s (the read
// timeout) for a thread.
TEST(HostileClientsTest, SlowAndIdleConnectionsDelayNeitherHealthNorTokenHolders) {
  testing::TempDir dir;
  std::string token;
  auto store = std::make_shared<StubStore>(dir.file("jobs.db"));
  Served served(store, remote_options(dir, &token));
  ASSERT_TRUE(BatchSizeClient(served.url(), 5.0, token).register_job(small_job("held")));
  Tricklers slow(served.port(), 200, std::chrono::milliseconds(100));
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<RawConnection>(served.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // all of them in
  const Slowest slowest = time_clients(served.url(), token, 10);
  EXPECT_LT(slowest.health_s, 1.0);
  EXPECT_LT(slowest.ask_report_s, 1.0);
  EXPECT_EQ(slow.closed(), 0) << "within their deadline, slow clients are not closed (the cap is 1000)";
}

TEST(HostileClientsTest, ADeclaredHugeBodyIsRefusedRightAfterItsHeaders) {
  testing::TempDir dir;
  Served served(std::make_shared<StubStore>(dir.file("jobs.db")), ServeOptions{});
  RawConnection client(served.port());
  const auto start = SteadyClock::now();
  ASSERT_TRUE(client.send_text("POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               "Content-Length: 50000000000\r\n\r\n{\"name\": "));
  const std::string answer = client.answer(5.0);
  EXPECT_LT(seconds_since(start), 0.5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_NE(answer.find("larger than the service takes"), std::string::npos) << answer;
}

// The deadline is for the whole header: a client sending a byte every 50 ms
// (never silent for a read timeout) is still cut off at header_timeout_s.
TEST(HostileClientsTest, AHeaderTrickledPastItsDeadlineIsAnsweredAndClosed) {
  testing::TempDir dir;
  ServeOptions options;
  options.header_timeout_s = 1.0;  // read_timeout_s stays 5
  Served served(std::make_shared<StubStore>(dir.file("jobs.db")), options);
  const auto start = SteadyClock::now();
  Tricklers slow(served.port(), 1, std::chrono::milliseconds(50));
  Tricklers slower(served.port(), 1, std::chrono::milliseconds(2000));  // not even a request line in time
  while (slow.closed() + slower.closed() < 2 && seconds_since(start) < 4.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double closed_after_s = seconds_since(start);
  EXPECT_EQ(slow.closed() + slower.closed(), 2) << "still open after 4 s";
  EXPECT_GT(closed_after_s, 0.8);
  EXPECT_LT(closed_after_s, 2.0);
}

TEST(HostileClientsTest, TheHeaderDeadlineAnswers400WhenTheRequestLineCame) {
  testing::TempDir dir;
  ServeOptions options;
  options.header_timeout_s = 0.5;
  Served served(std::make_shared<StubStore>(dir.file("jobs.db")), options);
  RawConnection client(served.port());
  ASSERT_TRUE(client.send_text("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a"));
  const auto start = SteadyClock::now();
  const std::string answer = client.answer(3.0);
  EXPECT_LT(seconds_since(start), 1.5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("GET /healthz: refused (a malformed or incomplete request)"), std::string::npos) << answer;
}

// Anonymous connections from other machines beyond the cap close the oldest
// of them; a token holder's connection is not among them, and token holders
// and /healthz are answered at once.
TEST(HostileClientsTest, AnonymousRemoteConnectionsAreCappedAndTokenHoldersKeepTheirs) {
  testing::TempDir dir;
  std::string token;
  ServeOptions options = remote_options(dir, &token);
  options.max_anonymous_remote_connections = 50;
  Served served(std::make_shared<StubStore>(dir.file("jobs.db")), options);
  ASSERT_TRUE(BatchSizeClient(served.url(), 5.0, token).register_job(small_job("held")));
  const std::string authorized =
      fmt::format("GET /v1/jobs/held HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n", token);
  RawConnection holder(served.port());
  ASSERT_TRUE(holder.send_text(authorized));
  ASSERT_EQ(holder.answer(2.0).rfind("HTTP/1.1 200 ", 0), 0u);

  Tricklers slow(served.port(), 200, std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GE(slow.closed(), 150) << "more than 50 anonymous remote connections held";
  ASSERT_TRUE(holder.send_text(authorized));
  EXPECT_EQ(holder.answer(2.0).rfind("HTTP/1.1 200 ", 0), 0u) << "the token holder's connection was closed";
  const Slowest slowest = time_clients(served.url(), token, 5);
  EXPECT_LT(slowest.health_s, 1.0);
  EXPECT_LT(slowest.ask_report_s, 1.0);
  RawConnection scrape(served.port());
  scrape.send_text("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_GE(metric(scrape.answer(2.0), "joule_service_connections_evicted_total"), 150);
}

TEST(HostileClientsTest, HealthSaysTheStoreIsDownWhileItIs) {
  testing::TempDir dir;
  auto store = std::make_shared<StubStore>(dir.file("jobs.db"));
  Served served(store, ServeOptions{});
  const auto health_status = [&] {
    RawConnection client(served.port());
    client.send_text("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    return client.answer(2.0);
  };
  EXPECT_EQ(health_status().rfind("HTTP/1.1 200 ", 0), 0u);
  store->down = true;
  std::string answer;
  const auto start = SteadyClock::now();
  while (answer.rfind("HTTP/1.1 503 ", 0) != 0 && seconds_since(start) < 3.0) {
    answer = health_status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(seconds_since(start), 2.5) << "the store's outage took this long to show";
  EXPECT_EQ(answer.rfind("HTTP/1.1 503 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  const nlohmann::json body = nlohmann::json::parse(answer.substr(answer.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["status"], "unavailable");
  EXPECT_EQ(body["store_available"], false);
  EXPECT_EQ(body["store_problem"], "the stub store is down");
  EXPECT_NE(body["store"].get<std::string>().find("stub over SQLite"), std::string::npos);
  RawConnection scrape(served.port());
  scrape.send_text("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string metrics = scrape.answer(2.0);
  EXPECT_NE(metrics.find("\njoule_service_store_up 0\n"), std::string::npos) << metrics;
  store->down = false;
  const auto back = SteadyClock::now();
  while (health_status().rfind("HTTP/1.1 200 ", 0) != 0 && seconds_since(back) < 3.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(seconds_since(back), 2.5) << "still down after the store came back";
}

TEST(HostileClientsTest, AnUnavailableStoreIsA503WithRetryAfterAndCounted) {
  testing::TempDir dir;
  auto store = std::make_shared<StubStore>(dir.file("jobs.db"));
  Served served(store, ServeOptions{});
  store->down = true;
  RawConnection client(served.port());
  client.send_text("GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string answer = client.answer(2.0);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503 ", 0), 0u) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("the stub store is down"), std::string::npos) << answer;
  client.send_text("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string metrics = client.answer(2.0);
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 ", 0), 0u) << "metrics must answer while the store is down: " << metrics;
  EXPECT_NE(metrics.find("\njoule_service_store_unavailable_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("joule_service_requests_total{route=\"jobs\",status=\"503\"} 1\n"), std::string::npos);
}

// Every store worker blocked in the store (more requests than workers):
// /healthz is answered on its own, at once.
TEST(HostileClientsTest, HealthDoesNotWaitBehindRequestsBlockedOnTheStore) {
  testing::TempDir dir;
  auto store = std::make_shared<StubStore>(dir.file("jobs.db"));
  ServeOptions options;
  options.threads = 8;
  Served served(store, options);
  store->block();
  std::vector<std::unique_ptr<RawConnection>> blocked;
  for (int i = 0; i < 80; ++i) {
    blocked.push_back(std::make_unique<RawConnection>(served.port()));
    blocked.back()->send_text("GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  }
  const auto start = SteadyClock::now();
  while (store->waiting() < 8 && seconds_since(start) < 3.0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(store->waiting(), 8) << "the workers did not all reach the store";
  const auto asked = SteadyClock::now();
  EXPECT_EQ(BatchSizeClient(served.url(), 5.0).health()["status"], "ok");
  EXPECT_LT(seconds_since(asked), 1.0);
  store->release();
  for (auto& client : blocked) EXPECT_EQ(client->answer(5.0).rfind("HTTP/1.1 200 ", 0), 0u);
}

// Issue 47: an exception that a route let out ended the server: on a worker
// thread, an exception of another type than std::exception, or a
// std::exception whose text is not UTF-8 (the catch block's own reply threw).
// Now that request is a 500 in valid JSON, logged once with its request
// line, counted in /metrics, and the service goes on.
TEST(HostileClientsTest, AnExceptionOutOfARouteIsThatRequestsOwn500) {
  testing::TempDir dir;
  auto store = std::make_shared<StubStore>(dir.file("jobs.db"));
  std::mutex log_mutex;
  std::vector<std::string> lines;
  ServeOptions options;
  options.log = [&](const std::string& line) {
    std::lock_guard lock(log_mutex);
    lines.push_back(line);
  };
  Served served(store, options);
  BatchSizeClient client(served.url());
  ASSERT_TRUE(client.register_job(small_job("held")));
  for (const int kind : {1, 2}) {
    SCOPED_TRACE(kind);
    store->job_throws = kind;
    RawConnection connection(served.port());
    ASSERT_TRUE(connection.send_text("GET /v1/jobs/held HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string answer = connection.answer(5.0);
    store->job_throws = 0;
    ASSERT_EQ(answer.rfind("HTTP/1.1 500", 0), 0u) << answer;
    const nlohmann::json body = nlohmann::json::parse(answer.substr(answer.find("\r\n\r\n") + 4));
    EXPECT_NE(body.at("error").get<std::string>().find("internal error"), std::string::npos) << body;
    EXPECT_EQ(client.health()["status"], "ok");
    EXPECT_EQ(client.job("held")["spec"]["name"], "held");
  }
  RawConnection scrape(served.port());
  scrape.send_text("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string metrics = scrape.answer(5.0);
  EXPECT_EQ(metric(metrics, "joule_service_internal_errors_total"), 2) << metrics;
  std::lock_guard lock(log_mutex);
  const auto internal = std::count_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("internal error answering GET /v1/jobs/held") != std::string::npos;
  });
  EXPECT_EQ(internal, 2);
  for (const std::string& line : lines) EXPECT_TRUE(is_valid_utf8(line)) << printable(line);
}

}  // namespace
}  // namespace joule::service
