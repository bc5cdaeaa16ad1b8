// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the batch-size service's requests: the first byte
// picks a request (register, ask, report, progress, power profile) or a
// damaged stored state, the rest is its body, handled as `joule serve` does
// (parse_request_body, then the service on a real SQLite store). Any input
// must end in an answer or a RequestError (a 4xx): any other exception would
// be a 500, a crash or hang a failed server. After every input the job list
// must still be served, and every job that is not damaged must hold finite
// running sums: no accepted number may overflow them.
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>

#include "joule/service/batch_size_service.h"

namespace {

using joule::service::BatchSizeService;

const std::string& store_path() {
  static const std::string path = "/tmp/joule_service_fuzzer_" + std::to_string(getpid()) + ".db";
  return path;
}

BatchSizeService& service() {
  static const std::unique_ptr<BatchSizeService> instance = [] {
    auto s = std::make_unique<BatchSizeService>(joule::service::open_job_store(store_path()));
    s->register_job(joule::service::JobSpec::from_json(
        {{"name", "job"}, {"batch_sizes", {16, 32, 64}}, {"default_batch_size", 32}, {"max_power_w", 300}}));
    // The extremes a spec may have: every report's cost is as large as it gets.
    s->register_job(joule::service::JobSpec::from_json({{"name", "extreme"},
                                                        {"batch_sizes", {1, 1000000000}},
                                                        {"default_batch_size", 1},
                                                        {"max_power_w", 1e5},
                                                        {"beta", 100},
                                                        {"eta", 0}}));
    s->register_job(joule::service::JobSpec::from_json(
        {{"name", "damaged"}, {"batch_sizes", {16, 32}}, {"default_batch_size", 16}, {"max_power_w", 300}}));
    return s;
  }();
  return *instance;
}

// Writes text as job "damaged"'s stored state, outside the service, as an
// older joule or a person with sqlite3 could have left it.
void store_state_of_damaged(const std::string& text) {
  sqlite3* db = nullptr;
  if (sqlite3_open(store_path().c_str(), &db) != SQLITE_OK) std::abort();
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "UPDATE jobs SET state = ?, revision = revision + 1 WHERE name = 'damaged'", -1, &stmt,
                     nullptr);
  sqlite3_bind_text(stmt, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(stmt) != SQLITE_DONE) std::abort();
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// A damaged job must be listed, counted, exported and refused asks (409),
// and reset must repair it.
void damage(BatchSizeService& s, const std::string& state) {
  store_state_of_damaged(state);
  const auto summary = s.job("damaged");
  if ((summary.phase == "damaged") != !summary.damaged.empty()) std::abort();
  (void)s.export_job("damaged");
  (void)s.damaged_jobs();
  try {
    const auto a = s.ask("damaged", "fuzz");
    s.report(a.recurrence_id, {1.0, 1.0, true, false});
  } catch (const joule::service::RequestError& e) {
    if (e.status() != 409 || summary.damaged.empty()) throw;
  }
  s.reset_job("damaged");
  if (!s.job("damaged").damaged.empty()) std::abort();
}

void handle(uint8_t route, const std::string& body) {
  BatchSizeService& s = service();
  // The seeds in fuzz/corpus_service_fuzzer start with these numbers.
  if (route % 7 == 6) return damage(s, body);
  const nlohmann::json j = joule::service::parse_request_body(body);  // 400s as the server's
  switch (route % 7) {
    case 0: s.register_job(joule::service::JobSpec::from_json(j)); break;
    case 1: {
      const auto a = s.ask("job", j.is_string() ? j.get<std::string>() : "");
      s.report(a.recurrence_id, {1.0, 1.0, true, false});  // keep few recurrences in flight
      break;
    }
    case 2: {
      const auto a = s.ask("job", "fuzz");
      s.report(a.recurrence_id, joule::service::RecurrenceResult::from_json(j));
      break;
    }
    case 3: {
      const auto a = s.ask("job", "fuzz");
      s.progress(a.recurrence_id, joule::service::RecurrenceProgress::from_json(j));
      s.report(a.recurrence_id, {1.0, 1.0, true, false});
      break;
    }
    case 4: s.put_power_profile("job", "gpu", 32, j); break;
    default: {  // a report to the job whose costs are the largest accepted
      const auto a = s.ask("extreme", "fuzz");
      s.report(a.recurrence_id, joule::service::RecurrenceResult::from_json(j));
      break;
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
  if (size == 0) return 0;
  try {
    handle(data[0], std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const joule::service::RequestError&) {
    // a 4xx: fine
  }
  check_every_job(service());
  return 0;
}
