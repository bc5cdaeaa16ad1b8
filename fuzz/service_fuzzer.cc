// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for `joule serve`'s requests, through the code the server
// runs between "a whole request was read" and "an answer to write"
// (RequestRouter: the client's bytes checked, routing, tokens, the routes,
// error replies, /metrics) on a real SQLite store. An input is a request as
// a client writes it, with '\n' for CRLF:
//
//   METHOD TARGET            the target as sent: percent-escapes, raw bytes, a query
//   Authorization: Bearer T  optional headers; with one, the client counts as another machine's
//                            an empty line, then the body (any bytes)
//
// The target is split and decoded by the transport's own request_of(). In
// a target, RID and XID stand for a fresh recurrence of job "job" and of job
// "extreme" (whose costs are the largest a report may give). The method
// DAMAGE writes the body as job "damaged"'s stored state instead.
//
// Every answer must be one of the statuses the service gives for bad input
// (a 500 is a bug), valid UTF-8, and JSON where it says so. An exception out
// of the router aborts the run, as it would end the server's thread. After
// every input the job list must still be served, and every job that is not
// damaged must hold finite running sums: no accepted number may overflow them.
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "joule/common/utf8.h"
#include "joule/service/batch_size_service.h"
#include "service/http_transport.h"
#include "service/request_router.h"

namespace {

using joule::service::BatchSizeService;
namespace http = joule::service::http;

// The token the seeds use (Authorization: Bearer fuzz-token): jobs "job" and "extreme".
constexpr const char* kToken = "fuzz-token";

// In memory where the system has it: the store syncs every write, and on a
// disk that alone would cap the fuzzer at a few dozen inputs a second.
std::string scratch_path(const char* what) {
  static const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return dir + "/joule_service_fuzzer_" + std::to_string(getpid()) + what;
}

struct Fixture {
  std::shared_ptr<BatchSizeService> service;
  std::unique_ptr<joule::service::RequestRouter> router;
};

Fixture& fixture() {
  static Fixture* instance = [] {
    auto* f = new Fixture;
    f->service = std::make_shared<BatchSizeService>(joule::service::open_job_store(scratch_path(".db")));
    f->service->register_job(joule::service::JobSpec::from_json(
        {{"name", "job"}, {"batch_sizes", {16, 32, 64}}, {"default_batch_size", 32}, {"max_power_w", 300}}));
    // The extremes a spec may have: every report's cost is as large as it gets.
    f->service->register_job(joule::service::JobSpec::from_json({{"name", "extreme"},
                                                                 {"batch_sizes", {1, 1000000000}},
                                                                 {"default_batch_size", 1},
                                                                 {"max_power_w", 1e5},
                                                                 {"beta", 100},
                                                                 {"eta", 0}}));
    f->service->register_job(joule::service::JobSpec::from_json(
        {{"name", "damaged"}, {"batch_sizes", {16, 32}}, {"default_batch_size", 16}, {"max_power_w", 300}}));
    const std::string tokens = scratch_path(".tokens");
    std::ofstream(tokens) << joule::service::token_digest(kToken) << " user=fuzz jobs=job,extreme\n";
    joule::service::RouterOptions options;
    options.service = f->service;
    options.store_description = "sqlite:" + scratch_path(".db");
    options.tokens = std::make_shared<joule::service::TokenFile>(tokens);
    f->router = std::make_unique<joule::service::RequestRouter>(std::move(options));
    return f;
  }();
  return *instance;
}

// Writes text as job "damaged"'s stored state, outside the service, as an
// older joule or a person with sqlite3 could have left it.
void store_state_of_damaged(const std::string& text) {
  sqlite3* db = nullptr;
  if (sqlite3_open(scratch_path(".db").c_str(), &db) != SQLITE_OK) std::abort();
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "UPDATE jobs SET state = ?, revision = revision + 1 WHERE name = 'damaged'", -1, &stmt,
                     nullptr);
  sqlite3_bind_text(stmt, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(stmt) != SQLITE_DONE) std::abort();
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

struct RawRequest {
  std::string method, target, authorization, body;
};

// "METHOD TARGET\nHeader: value\n...\n\nbody"; a missing part is empty.
RawRequest split_input(std::string_view input) {
  RawRequest r;
  const auto line_end = [&](std::size_t from) { return std::min(input.find('\n', from), input.size()); };
  std::size_t end = line_end(0);
  const std::string_view line = input.substr(0, end);
  const std::size_t space = line.find(' ');
  r.method = std::string(line.substr(0, space));
  if (space != std::string_view::npos) r.target = std::string(line.substr(space + 1));
  std::size_t at = end + 1;
  while (at < input.size()) {
    end = line_end(at);
    const std::string_view header = input.substr(at, end - at);
    at = end + 1;
    if (header.empty()) break;
    constexpr std::string_view kAuthorization = "Authorization: ";
    if (header.substr(0, kAuthorization.size()) == kAuthorization) {
      r.authorization = std::string(header.substr(kAuthorization.size()));
    }
  }
  if (at < input.size()) r.body = std::string(input.substr(at));
  return r;
}

// A fresh recurrence of job for each `placeholder` in target; their ids, to
// close them afterwards (few recurrences stay in flight).
std::vector<int64_t> fill_recurrences(std::string& target, std::string_view placeholder, const std::string& job) {
  std::vector<int64_t> ids;
  for (std::size_t at = target.find(placeholder); at != std::string::npos; at = target.find(placeholder, at)) {
    ids.push_back(fixture().service->ask(job, "fuzz").recurrence_id);
    const std::string id = std::to_string(ids.back());
    target.replace(at, placeholder.size(), id);
    at += id.size();
  }
  return ids;
}

// What any answer must be: a status the service gives, valid UTF-8 (an
// answer holding a client's bytes raw is how issue 47's crash began), and
// JSON with an "error" text where it is an error.
void check_answer(const http::Response& res) {
  static const std::set<int> kStatuses = {200, 201, 204, 400, 401, 403, 404, 409};
  if (!kStatuses.count(res.status)) {
    std::fprintf(stderr, "status %d: %s\n", res.status, joule::printable(res.body).c_str());
    std::abort();
  }
  if (!joule::is_valid_utf8(res.body)) std::abort();
  if (res.content_type != "application/json") return;
  const nlohmann::json body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) std::abort();
  if (res.status >= 400 && !(body.contains("error") && body["error"].is_string())) std::abort();
}

// A damaged job must be listed, counted, exported and refused asks (409),
// and reset must repair it.
void damage(BatchSizeService& s, const std::string& state) {
  store_state_of_damaged(state);
  const auto summary = s.job("damaged");
  if ((summary.phase == "damaged") != !summary.damaged.empty()) std::abort();
  (void)s.damaged_jobs();
  RawRequest exported{"GET", "/v1/jobs/damaged/export", "", ""};
  http::Request head = http::request_of(exported.method, exported.target);
  const http::Admission admission = fixture().router->admit(head);
  if (admission.refusal) std::abort();
  check_answer(fixture().router->answer(admission.context, head));
  try {
    const auto a = s.ask("damaged", "fuzz");
    s.report(a.recurrence_id, {1.0, 1.0, true, false});
  } catch (const joule::service::RequestError& e) {
    if (e.status() != 409 || summary.damaged.empty()) throw;
  }
  s.reset_job("damaged");
  if (!s.job("damaged").damaged.empty()) std::abort();
}

void handle(RawRequest raw) {
  std::vector<int64_t> open = fill_recurrences(raw.target, "RID", "job");
  const std::vector<int64_t> extreme = fill_recurrences(raw.target, "XID", "extreme");
  open.insert(open.end(), extreme.begin(), extreme.end());

  http::Request request = http::request_of(raw.method, raw.target);
  request.remote_address = "127.0.0.1";
  request.remote = !raw.authorization.empty();
  request.authorization = raw.authorization;
  joule::service::RequestRouter& router = *fixture().router;
  const http::Admission admission = router.admit(request);
  if (admission.refusal) {
    check_answer(*admission.refusal);
  } else {
    request.body = std::move(raw.body);
    check_answer(router.answer(admission.context, request));
  }
  for (const int64_t id : open) {
    try {
      fixture().service->report(id, {1.0, 1.0, true, false});
    } catch (const joule::service::RequestError&) {  // reported by the request itself
    }
  }
}

// The list is served whatever happened, and no job but a damaged one holds
// a non-finite sum.
void check_every_job(BatchSizeService& s) {
  for (const auto& summary : s.jobs()) {
    if (!summary.damaged.empty()) continue;
    const nlohmann::json state = s.export_job(summary.spec.name)["state"];
    if (!state.contains("running_sums")) continue;
    for (const auto& [size, sums] : state["running_sums"].items()) {
      for (const char* name : {"sum", "welford_mean", "m2"}) {
        if (!sums[name].is_number() || !std::isfinite(sums[name].get<double>())) std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RawRequest request = split_input(std::string_view(reinterpret_cast<const char*>(data), size));
  if (request.method == "DAMAGE") {
    damage(*fixture().service, request.body);
  } else {
    handle(std::move(request));
  }
  check_every_job(*fixture().service);
  return 0;
}
