// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule serve` under the numbers and stored states that broke it (issue 31)
// and the bytes that killed it (issue 47): the real binary on a SQLite file,
// requests through curl (bodies the C++ client cannot write, such as 1e400)
// or written byte for byte on a socket, `joule jobs list` and `joule jobs reset`.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/test_support.h"
#include "joule/common/utf8.h"
#include "joule/service/client.h"

namespace joule {
namespace {

using testing::run_process;

// A `joule serve` on a free loopback port, stopped with SIGTERM at the end.
class Server {
 public:
  Server(const testing::TempDir& dir, const std::string& store) : err_path_(dir.file("serve.err")) {
    const std::string port_file = dir.file("port");
    std::filesystem::remove(port_file);
    pid_ = testing::start_process(
        {JOULE_BINARY, "serve", "--store", store, "--listen", "127.0.0.1:0", "--port-file", port_file}, {},
        dir.file("serve.out"), err_path_);
    port_ = testing::wait_for_port_file(port_file);
  }
  ~Server() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
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

struct Reply {
  int status = 0;
  std::string body;
};

// One request through curl, the body sent as written.
Reply request(const std::string& method, const std::string& url, const std::string& body = "") {
  std::vector<std::string> argv = {"curl", "-s", "-X", method, "-w", "\n%{http_code}", url};
  if (!body.empty()) argv.insert(argv.end(), {"-H", "Content-Type: application/json", "--data-binary", body});
  const auto r = run_process(argv);
  const auto cut = r.out.rfind('\n');
  if (r.exit_code != 0 || cut == std::string::npos) return {-1, r.err};
  return {std::stoi(r.out.substr(cut + 1)), r.out.substr(0, cut)};
}

void skip_without_curl() {
  if (run_process({"curl", "--version"}).exit_code != 0) GTEST_SKIP() << "curl is not installed";
}

service::JobSpec job_named(const std::string& name) {
  return service::JobSpec::from_json(
      {{"name", name}, {"batch_sizes", {32, 64, 128}}, {"default_batch_size", 64}, {"max_power_w", 300}});
}

std::string result_body(const std::string& energy_j, const std::string& time_s) {
  return fmt::format(R"({{"energy_j": {}, "time_s": {}, "reached_target": true, "stopped_early": false}})", energy_j,
                     time_s);
}

// The issue's reports: 1e308 was answered 200 {"cost": null} and made every
// later request on the job, and GET /v1/jobs for every job, a 500; two of
// 1e306 did the same; 1e400 was a 500. Each is now a 400 naming the field,
// and nothing changes.
TEST(ServeInputCliTest, HugeNumbersInReportsAre400sAndEveryJobStaysUsable) {
  skip_without_curl();
  testing::TempDir tmp;
  Server server(tmp, "sqlite:" + tmp.file("jobs.db"));
  service::BatchSizeClient client(server.url());
  client.register_job(job_named("a"));
  client.register_job(job_named("b"));
  const int64_t id = client.ask("a", "n").recurrence_id;
  const std::string report_url = fmt::format("{}/v1/recurrences/{}/result", server.url(), id);

  for (const auto& [energy_j, time_s] : std::vector<std::pair<std::string, std::string>>{
           {"1e308", "1e308"}, {"1e306", "1e306"}, {"1e306", "1e306"}, {"1e400", "1"}, {"1", "1e400"}}) {
    SCOPED_TRACE(energy_j + ", " + time_s);
    const Reply r = request("POST", report_url, result_body(energy_j, time_s));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(energy_j != "1" ? "energy_j" : "time_s"), std::string::npos) << r.body;
  }
  const Reply progress = request("POST", fmt::format("{}/v1/recurrences/{}/progress", server.url(), id),
                                 R"({"epochs": 1e10, "energy_j": 1, "time_s": 1})");
  EXPECT_EQ(progress.status, 400) << progress.body;
  EXPECT_NE(progress.body.find("epochs"), std::string::npos) << progress.body;
  const Reply spec = request("POST", server.url() + "/v1/jobs",
                             R"({"name": "c", "batch_sizes": [32], "default_batch_size": 32, "max_power_w": 1e300})");
  EXPECT_EQ(spec.status, 400) << spec.body;
  EXPECT_NE(spec.body.find("max_power_w"), std::string::npos) << spec.body;

  const Reply list = request("GET", server.url() + "/v1/jobs");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(nlohmann::json::parse(list.body)["jobs"].size(), 2u);
  const auto jobs = run_process({JOULE_BINARY, "jobs", "list", "--service", server.url()});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_EQ(request("GET", server.url() + "/v1/jobs/a/export").status, 200);
  EXPECT_EQ(client.job("a")["in_flight"], 1);  // nothing was stored
  const Reply fine = request("POST", report_url, result_body("1000", "10"));
  EXPECT_EQ(fine.status, 200) << fine.body;
  EXPECT_TRUE(nlohmann::json::parse(fine.body)["cost"].is_number()) << fine.body;
  EXPECT_EQ(request("POST", server.url() + "/v1/jobs/a/recurrences", "{}").status, 201);
}

// Writes a job's stored state as an older joule could have left it.
void damage_state(const std::string& db_path, const std::string& job, const std::string& state) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE jobs SET state = ? WHERE name = ?", -1, &stmt, nullptr), SQLITE_OK);
  sqlite3_bind_text(stmt, 1, state.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, job.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// A database an older joule left with an infinite sum in one job (saved as
// null): GET /v1/jobs, joule jobs list and /metrics answered 500 for every
// job. Now the job is listed as damaged with the repair, the others work, and
// `joule jobs reset` repairs it while the service runs.
TEST(ServeInputCliTest, ADamagedJobIsListedAndOneCommandRepairsIt) {
  skip_without_curl();
  testing::TempDir tmp;
  const std::string db = tmp.file("jobs.db"), store = "sqlite:" + db;
  nlohmann::json state;
  {
    Server server(tmp, store);
    service::BatchSizeClient client(server.url());
    client.register_job(job_named("broken"));
    client.register_job(job_named("fine"));
    for (int i = 0; i < 5; ++i) {
      const service::Assignment a = client.ask("broken", "n");
      client.report(a.recurrence_id, {1000.0 + i, 10.0, true, false});
    }
    state = client.export_job("broken")["state"];
  }
  state["running_sums"]["64"]["sum"] = nullptr;
  damage_state(db, "broken", state.dump());

  Server server(tmp, store);
  const Reply list = request("GET", server.url() + "/v1/jobs");
  ASSERT_EQ(list.status, 200) << list.body;
  const nlohmann::json listed = nlohmann::json::parse(list.body)["jobs"];
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& job : listed) {
    EXPECT_EQ(job["phase"] == "damaged", job["spec"]["name"] == "broken") << job.dump();
    EXPECT_EQ(job.contains("damaged"), job["spec"]["name"] == "broken") << job.dump();  // the reason
  }
  const auto jobs = run_process({JOULE_BINARY, "jobs", "list", "--service", server.url()});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("damaged"), std::string::npos) << jobs.out;
  EXPECT_NE(jobs.out.find("sum"), std::string::npos) << jobs.out;  // what is wrong, not only that something is
  EXPECT_NE(jobs.out.find("joule jobs reset broken"), std::string::npos) << jobs.out;
  const Reply metrics = request("GET", server.url() + "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("joule_service_damaged_jobs 1\n"), std::string::npos) << metrics.body;
  EXPECT_EQ(request("GET", server.url() + "/v1/jobs/broken").status, 200);
  EXPECT_EQ(request("GET", server.url() + "/v1/jobs/broken/export").status, 200);
  const Reply ask = request("POST", server.url() + "/v1/jobs/broken/recurrences", "{}");
  EXPECT_EQ(ask.status, 409) << ask.body;
  EXPECT_NE(ask.body.find("joule jobs reset broken"), std::string::npos) << ask.body;
  EXPECT_EQ(request("POST", server.url() + "/v1/jobs/fine/recurrences", "{}").status, 201);
  EXPECT_NE(server.log().find("job 'broken' is damaged"), std::string::npos) << server.log();

  const auto reset = run_process({JOULE_BINARY, "jobs", "reset", "broken", "--store", store});
  ASSERT_EQ(reset.exit_code, 0) << reset.err;
  EXPECT_NE(reset.out.find("was damaged"), std::string::npos) << reset.out;
  EXPECT_NE(reset.out.find("rebuilt from 5 finished recurrences"), std::string::npos) << reset.out;
  // The running service reloads the job: the reset bumped its revision.
  EXPECT_EQ(request("POST", server.url() + "/v1/jobs/broken/recurrences", "{}").status, 201);
  const auto after = run_process({JOULE_BINARY, "jobs", "list", "--service", server.url()});
  EXPECT_EQ(after.out.find("damaged"), std::string::npos) << after.out;
  // Without --store, or for an unknown job, reset says why.
  EXPECT_EQ(run_process({JOULE_BINARY, "jobs", "reset", "broken"}).exit_code, 2);
  EXPECT_NE(run_process({JOULE_BINARY, "jobs", "reset", "nobody", "--store", store}).exit_code, 0);
}

// One request written as given (any bytes) on a connection of its own.
Reply raw_request(int port, const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& extra_headers = "") {
  testing::RawConnection connection(port);
  if (!connection.connected()) return {-1, "no connection"};
  connection.send_text(fmt::format("{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: {}\r\n\r\n{}", method,
                                   target, extra_headers, body.size(), body));
  const std::string answer = connection.answer(5.0);
  const auto head_end = answer.find("\r\n\r\n");
  if (answer.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return {-1, answer};
  return {std::stoi(answer.substr(9, 3)), answer.substr(head_end + 4)};
}

int64_t count_rows(const std::string& db_path, const std::string& table) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, ("SELECT count(*) FROM " + table).c_str(), -1, &stmt, nullptr), SQLITE_OK);
  const int64_t n = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

// Issue 47: any byte that was not UTF-8, in a body, the path (raw or
// percent-escaped), the query or the Authorization header, ended joule
// serve (std::terminate: the error text echoing it could not be written as
// JSON), and PUT .../profiles/%ff/16 stored 0xFF as a GPU model. Each is now
// a 400 naming where the byte is; the service lives on; nothing is stored.
TEST(ServeInputCliTest, BytesThatAreNotUtf8AreA400NamingWhereAndTheServiceLivesOn) {
  testing::TempDir tmp;
  const std::string db = tmp.file("jobs.db");
  Server server(tmp, "sqlite:" + db);
  service::BatchSizeClient client(server.url());
  client.register_job(job_named("a"));
  const int64_t id = client.ask("a", "n").recurrence_id;
  const std::string result = R"({"energy_j": 1000, "time_s": 10, "reached_target": true, "note": ")";
  struct Variant {
    std::string method, target, body, headers, where;
  };
  const std::vector<Variant> variants = {
      {"POST", fmt::format("/v1/recurrences/{}/result", id), result + "\xff\"}", "", "the request body"},
      {"POST", fmt::format("/v1/recurrences/{}/progress", id),
       "{\"epochs\": 1, \"energy_j\": 1, \"time_s\": 1, \"x\": \"\xed\xa0\x80\"}", "", "the request body"},
      {"POST", "/v1/jobs/a/recurrences", "{\"node\":\"\xff\"}", "", "the request body"},
      {"POST", "/v1/jobs/a/recurrences", "{\"node\":\"n\", \"gpu_model\":\"\xc3\x28\"}", "", "the request body"},
      {"POST", "/v1/jobs",
       "{\"name\": \"b\xe2\x82\", \"batch_sizes\": [32], \"default_batch_size\": 32, \"max_power_w\": 300}", "",
       "the request body"},
      {"PUT", "/v1/jobs/a/profiles/%ff/64",
       R"({"entries": [{"power_limit_w": 300, "time_per_epoch_s": 10, "avg_power_w": 250}]})", "",
       "the request path"},
      {"PUT", "/v1/jobs/a/profiles/\xc0\xaf/64",
       R"({"entries": [{"power_limit_w": 300, "time_per_epoch_s": 10, "avg_power_w": 250}]})", "",
       "the request path"},
      {"GET", "/v1/jobs/%ff", "", "", "the request path"},
      {"GET", "/v1/jobs/\xff", "", "", "the request path"},
      {"GET", "/v1/jobs/a/export?since=%fe", "", "", "the request query"},
      {"GET", "/v1/jobs/a", "", "Authorization: Bearer \xff\r\n", "the Authorization header"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.method + " " + printable(v.target) + " " + printable(v.body));
    const Reply r = raw_request(server.port(), v.method, v.target, v.body, v.headers);
    ASSERT_EQ(r.status, 400) << printable(r.body) << "\n" << server.log();
    const nlohmann::json answer = nlohmann::json::parse(r.body);  // valid UTF-8 and JSON
    const std::string error = answer.at("error");
    EXPECT_NE(error.find(v.where), std::string::npos) << error;
    EXPECT_NE(error.find("invalid UTF-8 at byte"), std::string::npos) << error;
    EXPECT_EQ(raw_request(server.port(), "GET", "/healthz").status, 200) << server.log();
  }
  // Valid UTF-8 that no GPU model or node name may hold: a control character.
  const Reply control = raw_request(server.port(), "PUT", "/v1/jobs/a/profiles/A40%0A/64", variants[5].body);
  EXPECT_EQ(control.status, 400) << control.body;
  EXPECT_NE(control.body.find("control character"), std::string::npos) << control.body;
  const Reply node = raw_request(server.port(), "POST", "/v1/jobs/a/recurrences", R"({"node": "n\u0007"})");
  EXPECT_EQ(node.status, 400) << node.body;
  EXPECT_NE(node.body.find("'node'"), std::string::npos) << node.body;

  // Nothing was stored: one job, its one recurrence still open, no profile.
  EXPECT_EQ(client.job("a")["in_flight"], 1);
  EXPECT_EQ(client.jobs().size(), 1u);
  EXPECT_EQ(count_rows(db, "recurrences"), 1);
  EXPECT_EQ(count_rows(db, "power_profiles"), 0);
  const Reply exported = raw_request(server.port(), "GET", "/v1/jobs/a/export");
  EXPECT_EQ(exported.status, 200);
  EXPECT_TRUE(is_valid_utf8(exported.body));
  // A sound request still works, and the log names the refusals printably.
  EXPECT_EQ(raw_request(server.port(), "PUT", "/v1/jobs/a/profiles/NVIDIA%20A40/64", variants[5].body).status, 204);
  EXPECT_EQ(count_rows(db, "power_profiles"), 1);
  const std::string log = server.log();
  EXPECT_NE(log.find("GET /v1/jobs/%ff 400"), std::string::npos) << log;
  EXPECT_TRUE(is_valid_utf8(log)) << printable(log);
  EXPECT_EQ(log.find("terminate"), std::string::npos) << log;
}

}  // namespace
}  // namespace joule
