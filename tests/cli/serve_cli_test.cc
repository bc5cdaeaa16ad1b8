// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule serve` as users run it: the real binary on a loopback port, driven by
// `joule simulate --service`, `joule jobs`, the C++ client from several
// processes, and bad requests.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <thread>

#include "common/postgres_server.h"
#include "common/test_support.h"
#include "joule/service/client.h"

namespace joule {
namespace {

using testing::RawConnection;
using testing::run_process;

// The HTTP status a client call was refused with; 0 when it succeeded.
int status_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const service::ServiceError& e) {
    return e.status();
  }
  return 0;
}

// A job on 300 W GPUs, the default its middle size.
service::JobSpec small_job(const std::string& name, const std::vector<int>& batch_sizes = {32, 64, 128}) {
  return service::JobSpec::from_json(
      {{"name", name}, {"batch_sizes", batch_sizes}, {"default_batch_size", 64}, {"max_power_w", 300}});
}

// A `joule serve` on a free loopback port, stopped with SIGTERM at the end.
class Server {
 public:
  explicit Server(const testing::TempDir& dir, const std::string& store, const std::vector<std::string>& more = {})
      : err_path_(dir.file("serve.err")) {
    const std::string port_file = dir.file("port");
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {JOULE_BINARY, "serve",       "--store", store, "--listen", "127.0.0.1:0",
                                     "--port-file", port_file};
    argv.insert(argv.end(), more.begin(), more.end());
    pid_ = testing::start_process(argv, {}, dir.file("serve.out"), err_path_);
    port_ = testing::wait_for_port_file(port_file);
  }
  ~Server() {
    if (pid_ > 0) stop();
  }
  int stop() {
    kill(pid_, SIGTERM);
    const int code = testing::wait_process(pid_, 10.0);
    pid_ = -1;
    return code;
  }
  // SIGKILL: no shutdown code runs, as in a crash.
  void kill_hard() {
    kill(pid_, SIGKILL);
    testing::wait_process(pid_, 10.0);
    pid_ = -1;
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  int port() const { return port_; }
  std::string log() const { return testing::read_file(err_path_); }

 private:
  std::string err_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// The end-to-end proof: the six V100 workloads, ten seeds, through HTTP and
// the store, give byte for byte what the in-process optimizer gives.
void expect_simulating_through_the_service_gives_the_in_process_results(const std::string& store) {
  testing::TempDir tmp;
  Server server(tmp, store);
  ASSERT_GT(server.port(), 0) << server.log();
  const std::vector<std::string> common = {JOULE_BINARY, "simulate", "--seeds", "1..10", "--policy", "zeus"};
  auto local = common, remote = common;
  local.insert(local.end(), {"--out", tmp.file("local.csv")});
  remote.insert(remote.end(), {"--service", server.url(), "--out", tmp.file("remote.csv")});
  const auto a = run_process(local);
  const auto b = run_process(remote, {}, 120.0);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  const std::string local_csv = testing::read_file(tmp.file("local.csv"));
  EXPECT_GT(local_csv.size(), 1000000u);  // every recurrence of every seed
  EXPECT_TRUE(local_csv == testing::read_file(tmp.file("remote.csv"))) << "per-recurrence results differ";
  // 60 jobs were registered (6 workloads x 10 seeds), and `joule jobs` lists them.
  const auto jobs = run_process({JOULE_BINARY, "jobs", "list", "--json", "--service", server.url()});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_EQ(nlohmann::json::parse(jobs.out).size(), 60u);
  EXPECT_EQ(server.stop(), 0);
}

// A fresh database on the tests' PostgreSQL server, or "" with *skip_reason set.
std::string fresh_postgres_store(const std::string& name, std::string* skip_reason) {
  auto& server = testing::shared_postgres();
  if (!server.running()) {
    *skip_reason = server.skip_reason();
    return "";
  }
  return server.create_database(name);
}

TEST(ServeCliTest, SimulatingThroughTheServiceGivesTheInProcessResultsOnSqlite) {
  testing::TempDir tmp;
  expect_simulating_through_the_service_gives_the_in_process_results("sqlite:" + tmp.file("jobs.db"));
}

TEST(ServeCliTest, SimulatingThroughTheServiceGivesTheInProcessResultsOnPostgres) {
  std::string skip_reason;
  const std::string store = fresh_postgres_store("simulate", &skip_reason);
  if (store.empty()) JOULE_SKIP_WITHOUT_SERVER(skip_reason);
  expect_simulating_through_the_service_gives_the_in_process_results(store);
}

// Recurrences of one job from several processes at once, through HTTP, to
// the servers at `urls` (replicas of one store): none is lost, each is
// handed out once. With several servers a process asks and reports through
// different ones in turn, so recurrences cross between them. Returns the
// job as the first server shows it.
nlohmann::json expect_processes_sharing_one_job_lose_no_recurrence(const std::vector<std::string>& urls) {
  service::BatchSizeClient client(urls.front());
  EXPECT_TRUE(client.register_job(small_job("shared")));
  constexpr int kProcesses = 4, kEach = 30;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        std::vector<std::unique_ptr<service::BatchSizeClient>> mine;
        for (const std::string& url : urls) mine.push_back(std::make_unique<service::BatchSizeClient>(url));
        for (int i = 0; i < kEach; ++i) {
          service::BatchSizeClient& asker = *mine[static_cast<std::size_t>(p + i) % mine.size()];
          service::BatchSizeClient& reporter = *mine[static_cast<std::size_t>(p + i / 2) % mine.size()];
          const service::Assignment a = asker.ask("shared", fmt::format("node-{}", p));
          reporter.report(a.recurrence_id, {100.0 * a.batch_size, 10.0 + i, true, false});
        }
      } catch (const std::exception&) {
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) EXPECT_EQ(testing::wait_process(pid, 60.0), 0);
  const nlohmann::json job = client.job("shared");
  EXPECT_EQ(job["recurrences"].get<int>(), kProcesses * kEach);
  EXPECT_EQ(job["in_flight"].get<int>(), 0);
  EXPECT_EQ(job["revision"].get<int>(), 1 + 2 * kProcesses * kEach);  // every ask and report, once
  return job;
}

void expect_processes_sharing_one_job_lose_no_recurrence(const std::string& store) {
  testing::TempDir tmp;
  Server server(tmp, store);
  ASSERT_GT(server.port(), 0) << server.log();
  expect_processes_sharing_one_job_lose_no_recurrence(std::vector<std::string>{server.url()});
}

TEST(ServeCliTest, ProcessesSharingOneJobLoseNoRecurrence) {
  testing::TempDir tmp;
  expect_processes_sharing_one_job_lose_no_recurrence(tmp.file("jobs.db"));
}

TEST(ServeCliTest, ProcessesSharingOneJobLoseNoRecurrenceOnPostgres) {
  std::string skip_reason;
  const std::string store = fresh_postgres_store("shared", &skip_reason);
  if (store.empty()) JOULE_SKIP_WITHOUT_SERVER(skip_reason);
  expect_processes_sharing_one_job_lose_no_recurrence(store);
}

TEST(ServeCliTest, BadRequestsGetClearErrorsAndTheServiceGoesOn) {
  testing::TempDir tmp;
  Server server(tmp, tmp.file("jobs.db"));
  ASSERT_GT(server.port(), 0) << server.log();
  service::BatchSizeClient client(server.url());
  EXPECT_EQ(status_of([&] { client.ask("nobody"); }), 404);
  EXPECT_EQ(status_of([&] { client.report(99, {1, 1, true, false}); }), 404);
  EXPECT_EQ(status_of([&] { client.export_job("nobody"); }), 404);
  try {
    client.ask("nobody");
  } catch (const service::ServiceError& e) {
    EXPECT_NE(std::string(e.what()).find("no job 'nobody'"), std::string::npos) << e.what();
  }
  // Raw bodies the client would never send.
  const auto post = [&](const std::string& path, const std::string& body) {
    return run_process({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "--data-binary", body,
                        server.url() + path});
  };
  if (run_process({"curl", "--version"}).exit_code == 0) {
    EXPECT_EQ(post("/v1/jobs", "{not json").out, "400");
    EXPECT_EQ(post("/v1/jobs", "[1,2]").out, "400");
    EXPECT_EQ(post("/v1/jobs", std::string(70 * 1024, 'x')).out, "413");
    EXPECT_EQ(post("/v1/recurrences/abc/result", "{}").out, "404");
    // A batch size too large for any int is the client's mistake: 400, not 500.
    const auto put = run_process({"curl", "-s", "-w", "\n%{http_code}", "-X", "PUT", "--data-binary",
                                  R"({"entries": []})", server.url() + "/v1/jobs/j/profiles/A40/99999999999"});
    EXPECT_NE(put.out.find("not a batch size"), std::string::npos) << put.out;
    EXPECT_EQ(put.out.substr(put.out.rfind('\n') + 1), "400");
  }
  EXPECT_EQ(client.health()["status"], "ok");  // still serving
  EXPECT_EQ(client.jobs().size(), 0u);         // and nothing was stored
}  // the client goes first: the server's stop need not wait for its idle connection

// Two `joule serve` replicas on one PostgreSQL database, as in a cluster:
// processes asking and reporting through either, crossing over (a
// recurrence asked through one reports through the other), lose nothing.
TEST(ServeCliTest, ReplicasOnOnePostgresDatabaseShareOneBandit) {
  std::string skip_reason;
  const std::string store = fresh_postgres_store("replicas", &skip_reason);
  if (store.empty()) JOULE_SKIP_WITHOUT_SERVER(skip_reason);
  testing::TempDir dir_a, dir_b;
  Server a(dir_a, store), b(dir_b, store);
  ASSERT_GT(a.port(), 0) << a.log();
  ASSERT_GT(b.port(), 0) << b.log();
  const nlohmann::json job = expect_processes_sharing_one_job_lose_no_recurrence({a.url(), b.url()});
  service::BatchSizeClient via_b(b.url());
  EXPECT_EQ(via_b.job("shared"), job);
}

// What /metrics says after a register, two asks and a report: requests by
// route and status, their latency histograms, jobs and recurrences in flight,
// in the Prometheus text format.
TEST(ServeCliTest, MetricsCountRequestsJobsAndRecurrencesInFlight) {
  if (run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
  testing::TempDir tmp;
  Server server(tmp, tmp.file("jobs.db"));
  ASSERT_GT(server.port(), 0) << server.log();
  {
    service::BatchSizeClient client(server.url());
    ASSERT_TRUE(client.register_job(small_job("watched", {32, 64})));
    const service::Assignment first = client.ask("watched", "node-a");
    client.ask("watched", "node-b");
    client.report(first.recurrence_id, {1000.0, 10.0, true, false});
    EXPECT_EQ(status_of([&] { client.ask("nobody"); }), 404);
  }
  const auto r = run_process({"curl", "-s", "-D", tmp.file("headers"), server.url() + "/metrics"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& m = r.out;
  EXPECT_NE(testing::read_file(tmp.file("headers")).find("text/plain; version=0.0.4"), std::string::npos);
  for (const std::string line : {"joule_service_requests_total{route=\"register\",status=\"201\"} 1\n",
                                 "joule_service_requests_total{route=\"ask\",status=\"201\"} 2\n",
                                 "joule_service_requests_total{route=\"ask\",status=\"404\"} 1\n",
                                 "joule_service_requests_total{route=\"report\",status=\"200\"} 1\n",
                                 "joule_service_request_duration_seconds_count{route=\"ask\"} 3\n",
                                 "joule_service_request_duration_seconds_bucket{route=\"ask\",le=\"+Inf\"} 3\n",
                                 "# TYPE joule_service_request_duration_seconds histogram\n",
                                 "joule_service_jobs 1\n", "joule_service_recurrences_in_flight 1\n",
                                 // the refused ask went through a transaction too
                                 "joule_service_writes_total 4\n"}) {
    EXPECT_NE(m.find(line), std::string::npos) << "no line " << line << " in\n" << m;
  }
}

// The service killed outright (SIGKILL: no shutdown code runs) loses nothing
// it had answered: a restarted one on the same store knows every recurrence,
// the one still in flight can report, and the bandit goes on.
void expect_a_killed_service_loses_nothing_it_answered(const std::string& store) {
  testing::TempDir tmp;
  int64_t in_flight_id = 0;
  int revision = 0;
  {
    Server server(tmp, store);
    ASSERT_GT(server.port(), 0) << server.log();
    service::BatchSizeClient client(server.url());
    ASSERT_TRUE(client.register_job(small_job("survivor")));
    for (int i = 0; i < 5; ++i) {
      const service::Assignment a = client.ask("survivor", "node-a");
      client.report(a.recurrence_id, {100.0 * a.batch_size, 10.0 + i, true, false});
    }
    in_flight_id = client.ask("survivor", "node-b").recurrence_id;
    revision = client.job("survivor")["revision"].get<int>();
    server.kill_hard();
  }
  Server again(tmp, store);
  ASSERT_GT(again.port(), 0) << again.log();
  service::BatchSizeClient client(again.url());
  nlohmann::json job = client.job("survivor");
  EXPECT_EQ(job["recurrences"].get<int>(), 6);
  EXPECT_EQ(job["in_flight"].get<int>(), 1);
  EXPECT_EQ(job["revision"].get<int>(), revision);
  client.report(in_flight_id, {5000.0, 12.0, true, false});
  client.ask("survivor", "node-a");
  job = client.job("survivor");
  EXPECT_EQ(job["recurrences"].get<int>(), 7);
  EXPECT_EQ(job["revision"].get<int>(), revision + 2);
}

TEST(ServeCliTest, AKilledServiceLosesNothingItAnswered) {
  testing::TempDir tmp;
  expect_a_killed_service_loses_nothing_it_answered("sqlite:" + tmp.file("jobs.db"));
}

TEST(ServeCliTest, AKilledServiceLosesNothingItAnsweredOnPostgres) {
  std::string skip_reason;
  const std::string store = fresh_postgres_store("survivor", &skip_reason);
  if (store.empty()) JOULE_SKIP_WITHOUT_SERVER(skip_reason);
  expect_a_killed_service_loses_nothing_it_answered(store);
}

// Progress over HTTP, through the C++ client.
TEST(ServeCliTest, ProgressReportsReachTheServiceAndComeBackWithAdvice) {
  testing::TempDir tmp;
  Server server(tmp, tmp.file("jobs.db"));
  ASSERT_GT(server.port(), 0) << server.log();
  service::BatchSizeClient client(server.url());
  ASSERT_TRUE(client.register_job(small_job("epochs", {32, 64})));
  const service::Assignment a = client.ask("epochs", "node-a");
  const service::ProgressAdvice advice = client.progress(a.recurrence_id, {1, 500.0, 4.0});
  EXPECT_FALSE(advice.stop);  // the first recurrence has no threshold
  EXPECT_TRUE(std::isinf(advice.threshold_cost));
  EXPECT_GT(advice.cost, 0.0);
  EXPECT_EQ(client.export_job("epochs")["recurrences"][0]["progress_epochs"], 1);
  EXPECT_EQ(status_of([&] { client.progress(424242, {1, 1.0, 1.0}); }), 404);
  client.report(a.recurrence_id, {1000.0, 8.0, true, false});
  EXPECT_EQ(status_of([&] { client.progress(a.recurrence_id, {2, 1.0, 1.0}); }), 409);
}

// `joule jobs show` and `joule jobs export`, the commands users type.
TEST(ServeCliTest, JobsShowAndExportPrintTheJob) {
  testing::TempDir tmp;
  Server server(tmp, tmp.file("jobs.db"));
  ASSERT_GT(server.port(), 0) << server.log();
  {
    service::BatchSizeClient client(server.url());
    ASSERT_TRUE(client.register_job(small_job("shown", {32, 64})));
    const service::Assignment a = client.ask("shown", "node-a");
    client.report(a.recurrence_id, {1000.0, 10.0, true, false});
  }
  const auto show = run_process({JOULE_BINARY, "jobs", "show", "shown", "--service", server.url()});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const auto shown = nlohmann::json::parse(show.out);
  EXPECT_EQ(shown["spec"]["name"], "shown");
  EXPECT_EQ(shown["recurrences"], 1);
  const auto exported = run_process({JOULE_BINARY, "jobs", "export", "shown", "--service", server.url()});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const auto dump = nlohmann::json::parse(exported.out);
  EXPECT_FALSE(dump.empty());
  EXPECT_NE(exported.out.find("\"shown\""), std::string::npos);
  const auto missing = run_process({JOULE_BINARY, "jobs", "show", "nobody", "--service", server.url()});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no job 'nobody'"), std::string::npos) << missing.err;
  const auto unnamed = run_process({JOULE_BINARY, "jobs", "export", "--service", server.url()});
  EXPECT_EQ(unnamed.exit_code, 2);
  EXPECT_NE(unnamed.err.find("name the job"), std::string::npos) << unnamed.err;
}

// Tokens end to end, on loopback (--require-token makes this machine's
// clients need one as other machines' do): made and revoked with `joule
// tokens`, sent by the C++ client and `joule jobs` ($JOULE_SERVICE_TOKEN).
TEST(ServeCliTest, TokensLetClientsUseTheirJobsOnly) {
  testing::TempDir tmp;
  const std::string file = tmp.file("tokens");
  auto create = [&](const std::string& user, const std::string& jobs) {
    const auto r = run_process({JOULE_BINARY, "tokens", "create", "--file", file, "--user", user, "--jobs", jobs});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  };
  const std::string admin = create("admin", "*");
  const std::string alice = create("alice", "a*,shared");
  Server server(tmp, "sqlite:" + tmp.file("jobs.db"), {"--tokens", file, "--require-token"});
  ASSERT_GT(server.port(), 0) << server.log();
  auto spec = [](const std::string& name) {
    return small_job(name, {32, 64});
  };
  service::BatchSizeClient anonymous(server.url(), 10.0, std::string());
  service::BatchSizeClient as_admin(server.url(), 10.0, admin), as_alice(server.url(), 10.0, alice);
  EXPECT_EQ(status_of([&] { anonymous.jobs(); }), 401);
  EXPECT_EQ(status_of([&] { service::BatchSizeClient(server.url(), 10.0, "joule_forged").jobs(); }), 401);
  EXPECT_EQ(anonymous.health()["status"], "ok");  // health and metrics stay open
  as_admin.register_job(spec("b1"));
  EXPECT_EQ(status_of([&] { as_alice.register_job(spec("b2")); }), 403);
  as_alice.register_job(spec("a1"));
  const auto theirs = as_admin.ask("b1");
  EXPECT_EQ(status_of([&] { as_alice.ask("b1"); }), 403);
  EXPECT_EQ(status_of([&] { as_alice.report(theirs.recurrence_id, {1, 1, true, false}); }), 403);
  EXPECT_EQ(status_of([&] { as_alice.export_job("b1"); }), 403);
  const auto mine = as_alice.ask("a1");
  as_alice.report(mine.recurrence_id, {1, 1, true, false});
  EXPECT_EQ(as_alice.jobs().size(), 1u) << "alice sees her jobs only";
  EXPECT_EQ(as_admin.jobs().size(), 2u);
  EXPECT_EQ(as_admin.job("b1")["in_flight"], 1) << "a refused report changed nothing";
  const auto listed = run_process({JOULE_BINARY, "jobs", "list", "--json", "--service", server.url()},
                                  {{"JOULE_SERVICE_TOKEN", alice}});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(nlohmann::json::parse(listed.out).size(), 1u);
  const auto tokens_list = run_process({JOULE_BINARY, "tokens", "list", "--file", file});
  EXPECT_NE(tokens_list.out.find("alice"), std::string::npos);
  EXPECT_EQ(tokens_list.out.find(alice), std::string::npos);
  // Revoked: refused within the server's once-a-second look at the file.
  ASSERT_EQ(run_process({JOULE_BINARY, "tokens", "revoke", "alice", "--file", file}).exit_code, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(status_of([&] { as_alice.jobs(); }), 401);
  EXPECT_EQ(as_admin.jobs().size(), 2u);
  EXPECT_EQ(server.stop(), 0);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Slow clients (slowloris): one stalls mid-body, one mid-request-line. The
// first gets 408 once the read timeout passes, the second is dropped; neither
// changes anything, and a normal client is served meanwhile.
TEST(ServeCliTest, StalledClientsAreRefusedAndOthersAreServedMeanwhile) {
  testing::TempDir tmp;
  // Room for the other client's ask and report (two SQLite commits, each an
  // fsync) on a CI machine busy with other tests' builds and writes.
  constexpr int kTimeoutS = 4;
  Server server(tmp, tmp.file("jobs.db"), {"--read-timeout-s", std::to_string(kTimeoutS)});
  ASSERT_GT(server.port(), 0) << server.log();
  service::BatchSizeClient client(server.url());
  for (const char* name : {"stalled", "busy"}) {
    ASSERT_TRUE(client.register_job(small_job(name, {32, 64})));
  }
  const int64_t waiting = client.ask("stalled", "node-1").recurrence_id;
  const std::string before = client.export_job("stalled").dump();

  const auto start = std::chrono::steady_clock::now();
  RawConnection mid_body(server.port()), mid_line(server.port()), mid_headers(server.port());
  ASSERT_TRUE(mid_body.connected() && mid_line.connected() && mid_headers.connected());
  const std::string body = R"({"energy_j": 1000, "time_s": 10, "reached_target": true, "stopped_early": false})";
  ASSERT_LT(body.size(), 100u);
  ASSERT_TRUE(mid_body.send_text(fmt::format("POST /v1/recurrences/{}/result HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                             "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{}",
                                             waiting, body.substr(0, 40))));
  ASSERT_TRUE(mid_line.send_text("POST /v1/jobs/stalled/recurr"));
  ASSERT_TRUE(mid_headers.send_text("POST /v1/jobs/stalled/recurrences HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"));

  // While both stall, another client asks and reports.
  const service::Assignment a = client.ask("busy", "node-2");
  EXPECT_GT(client.report(a.recurrence_id, {500.0, 5.0, true, false}), 0.0);
  const double served_after_s = seconds_since(start);
  EXPECT_FALSE(mid_body.readable_now()) << "answered before the read timeout";
  EXPECT_LT(served_after_s, kTimeoutS) << "the normal client waited for the stalled ones";

  const std::string answer = mid_body.read_until_closed(10.0);
  const double closed_after_s = seconds_since(start);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408 ", 0), 0u) << answer;
  EXPECT_NE(answer.find(R"({"error":"the request body stopped after 40 of 100 bytes)"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_TRUE(mid_body.closed()) << "still open 10 s later";
  EXPECT_GE(closed_after_s, kTimeoutS - 0.5);  // it waited for the body
  EXPECT_LT(closed_after_s, 10.0);

  EXPECT_EQ(mid_line.read_until_closed(10.0), "");  // dropped without an answer
  EXPECT_TRUE(mid_line.closed()) << "the half request line still holds its connection";
  // The library cannot tell a stall in the headers from bad headers: 400.
  const std::string headers_answer = mid_headers.read_until_closed(10.0);
  EXPECT_EQ(headers_answer.rfind("HTTP/1.1 400 ", 0), 0u) << headers_answer;
  EXPECT_NE(headers_answer.find("refused (a malformed or incomplete request)"), std::string::npos) << headers_answer;
  EXPECT_TRUE(mid_headers.closed());

  // A new client: the first one's connection has sat idle for the read
  // timeout, and the server may close it just as a request goes out on it
  // ("no answer (Read)"; a client's retry of that race is not this test's).
  service::BatchSizeClient after(server.url());
  EXPECT_EQ(after.export_job("stalled").dump(), before);  // nothing changed
  EXPECT_EQ(after.job("stalled")["in_flight"].get<int>(), 1);
  EXPECT_EQ(after.job("busy")["recurrences"].get<int>(), 1);
  EXPECT_NE(server.log().find("POST /v1/recurrences/" + std::to_string(waiting) + "/result 408"), std::string::npos)
      << server.log();
}

// The whole-request deadline from the command line: a client sending a
// header byte every 100 ms (never silent for a read timeout) is answered 400
// and closed at --header-timeout-s, while other clients are served.
TEST(ServeCliTest, AHeaderTrickledPastHeaderTimeoutIsRefusedWhileOthersAreServed) {
  testing::TempDir tmp;
  Server server(tmp, tmp.file("jobs.db"), {"--header-timeout-s", "1", "--max-connections", "100"});
  ASSERT_GT(server.port(), 0) << server.log();
  RawConnection slow(server.port());
  ASSERT_TRUE(slow.connected());
  const std::string header = "Host: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.send_text("GET /healthz HTTP/1.1\r\n"));  // the request line at once: a 400 names it
  std::string answer;
  for (std::size_t i = 0; i < header.size() && !slow.closed(); ++i) {
    slow.send_text(header.substr(i, 1));
    answer += slow.read_until_closed(0.1);
  }
  const double closed_after_s = seconds_since(start);
  EXPECT_TRUE(slow.closed()) << "still open after " << closed_after_s << " s";
  EXPECT_GT(closed_after_s, 0.8);
  EXPECT_LT(closed_after_s, 2.5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 400 ", 0), 0u) << answer;
  EXPECT_EQ(service::BatchSizeClient(server.url()).health()["status"], "ok");
  EXPECT_NE(server.log().find("GET /healthz 400 (refused before routing)"), std::string::npos) << server.log();
  const auto help = run_process({JOULE_BINARY, "serve", "--help"});
  for (const char* flag : {"--header-timeout-s", "--body-timeout-s", "--max-connections", "--max-anonymous-connections"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
}

TEST(ServeCliTest, ReadTimeoutMustBeAtLeastOneSecond) {
  testing::TempDir tmp;
  const auto r = run_process({JOULE_BINARY, "serve", "--store", tmp.file("j.db"), "--read-timeout-s", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--read-timeout-s"), std::string::npos) << r.err;
  const auto help = run_process({JOULE_BINARY, "serve", "--help"});
  EXPECT_NE(help.out.find("--read-timeout-s"), std::string::npos) << help.out;
}

TEST(ServeCliTest, ListensOnLoopbackOnlyUntilTokensExist) {
  testing::TempDir tmp;
  const auto r = run_process({JOULE_BINARY, "serve", "--store", tmp.file("j.db"), "--listen", "0.0.0.0:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs --tokens FILE"), std::string::npos) << r.err;
  const auto missing = run_process({JOULE_BINARY, "serve", "--store", tmp.file("j.db"), "--tokens", tmp.file("none")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
  const auto bad = run_process({JOULE_BINARY, "serve", "--store", tmp.file("j.db"), "--listen", "127.0.0.1:99999"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("0-65535"), std::string::npos) << bad.err;
  const auto jobs = run_process({JOULE_BINARY, "jobs", "list", "--service", "http://127.0.0.1:1"});
  EXPECT_EQ(jobs.exit_code, 1);
  EXPECT_NE(jobs.err.find("no answer"), std::string::npos) << jobs.err;
}

}  // namespace
}  // namespace joule
