// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The batch-size service's logic on each store, a real SQLite file and a real
// PostgreSQL server: registration, the ask/report cycle against the
// in-process optimizer, persistence across reopening, power profiles,
// concurrent recurrences, bad input, schema versions.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "common/postgres_server.h"
#include "common/test_support.h"
#include "joule/common/utf8.h"
#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/cost.h"
#include "joule/service/batch_size_service.h"

namespace joule::service {
namespace {

using testing::TempDir;

// A kind of store the same tests run on.
struct StoreKind {
  std::string name;
  // A fresh, empty store's URL (its files under dir), or "" with *skip_reason set.
  std::function<std::string(const TempDir& dir, std::string* skip_reason)> fresh_url;
  // Runs one SQL statement in the store behind url, outside joule.
  std::function<void(const std::string& url, const std::string& sql)> exec;
};

// Names the store in test names and failures (not its bytes).
void PrintTo(const StoreKind& kind, std::ostream* os) { *os << kind.name; }

const StoreKind kSqlite{
    "Sqlite",
    [](const TempDir& dir, std::string*) { return "sqlite:" + dir.file("jobs.db"); },
    [](const std::string& url, const std::string& sql) {
      sqlite3* db = nullptr;
      ASSERT_EQ(sqlite3_open(url.substr(std::string("sqlite:").size()).c_str(), &db), SQLITE_OK);
      EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
      sqlite3_close(db);
    }};

const StoreKind kPostgres{
    "Postgres",
    [](const TempDir&, std::string* skip_reason) -> std::string {
      auto& server = testing::shared_postgres();
      if (!server.running()) {
        *skip_reason = server.skip_reason();
        return "";
      }
      static int databases = 0;
      return server.create_database(fmt::format("jobs_{}", ++databases));
    },
    [](const std::string& url, const std::string& sql) {
      testing::shared_postgres().exec(url.substr(url.rfind('/') + 1), sql);
    }};

class BatchSizeServiceTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    std::string skip_reason;
    url_ = GetParam().fresh_url(tmp_, &skip_reason);
    if (url_.empty()) JOULE_SKIP_WITHOUT_SERVER(skip_reason);
  }

  TempDir tmp_;
  std::string url_;
};

JobSpec spec_named(const std::string& name) {
  return JobSpec::from_json({{"name", name},
                             {"batch_sizes", {16, 32, 64, 128, 256}},
                             {"default_batch_size", 64},
                             {"eta", 0.5},
                             {"beta", 2.0},
                             {"max_power_w", 300.0},
                             {"gpu_model", "V100"},
                             {"seed", 7}});
}

// A job whose cost per batch size has a minimum at 128, with noise; 16 never
// reaches the target.
struct CostModel {
  std::mt19937_64 rng{3};
  RecurrenceResult run(int batch_size) {
    std::normal_distribution<double> noise(1.0, 0.05);
    const double time_s = 1000.0 * std::pow(std::log2(static_cast<double>(batch_size)) - 7.0, 2) + 2000.0;
    RecurrenceResult r;
    r.time_s = time_s * noise(rng);
    r.energy_j = 250.0 * r.time_s;
    r.reached_target = batch_size != 16;
    return r;
  }
};

// Recurrences of `job` until the service hands out an early-stop threshold
// (at most 20); returns it, +inf when none came.
double run_until_a_threshold(BatchSizeService& service, const std::string& job) {
  CostModel model;
  double threshold = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 20 && std::isinf(threshold); ++i) {
    const Assignment a = service.ask(job, "n");
    service.report(a.recurrence_id, model.run(a.batch_size));
    threshold = service.ask(job, "n").early_stop_threshold_cost;
  }
  return threshold;
}

TEST_P(BatchSizeServiceTest, RegisteringTheSameSpecAgainIsFineADifferentOneConflicts) {
  BatchSizeService service(open_job_store(url_));
  EXPECT_TRUE(service.register_job(spec_named("resnet")));
  EXPECT_FALSE(service.register_job(spec_named("resnet")));
  JobSpec other = spec_named("resnet");
  other.beta = 3.0;
  try {
    service.register_job(other);
    FAIL() << "a different spec under a taken name was accepted";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 409);
    EXPECT_NE(std::string(e.what()).find("different spec"), std::string::npos) << e.what();
  }
  EXPECT_EQ(service.jobs().size(), 1u);
}

TEST_P(BatchSizeServiceTest, AskAndReportMakeTheSameDecisionsAsTheOptimizerInProcess) {
  BatchSizeService service(open_job_store(url_));
  const JobSpec spec = spec_named("bert");
  service.register_job(spec);
  BatchSizeOptimizer local({spec.batch_sizes, spec.default_batch_size, spec.beta, spec.window, {}, spec.seed});
  CostModel model_a, model_b;
  for (int i = 0; i < 60; ++i) {
    const Assignment a = service.ask("bert", "node-1");
    const int b = local.predict();
    ASSERT_EQ(a.batch_size, b) << "recurrence " << i;
    EXPECT_EQ(a.early_stop_threshold_cost, local.early_stop_threshold_cost());
    EXPECT_FALSE(a.power_limit_w.has_value());
    const RecurrenceResult result = model_a.run(a.batch_size);
    model_b.run(b);
    const double cost = service.report(a.recurrence_id, result);
    EXPECT_EQ(cost, zeus_cost(result.energy_j, result.time_s, spec.eta, spec.max_power_w));
    local.observe(b, cost, result.reached_target);
  }
  const JobSummary summary = service.job("bert");
  EXPECT_EQ(summary.recurrences, 60);
  EXPECT_EQ(summary.in_flight, 0);
  EXPECT_EQ(summary.best_batch_size, local.best_known());
  EXPECT_EQ(summary.phase, "thompson");
}

TEST_P(BatchSizeServiceTest, TheBanditContinuesAfterTheStoreIsReopened) {
  const JobSpec spec = spec_named("gpt");
  BatchSizeOptimizer local({spec.batch_sizes, spec.default_batch_size, spec.beta, spec.window, {}, spec.seed});
  CostModel model;
  for (int round = 0; round < 4; ++round) {  // a new service (a restart) every 10 recurrences
    BatchSizeService service(open_job_store(url_));
    if (round == 0) service.register_job(spec);
    for (int i = 0; i < 10; ++i) {
      const Assignment a = service.ask("gpt", "n");
      ASSERT_EQ(a.batch_size, local.predict());
      const RecurrenceResult r = model.run(a.batch_size);
      local.observe(a.batch_size, service.report(a.recurrence_id, r), r.reached_target);
    }
  }
}

TEST_P(BatchSizeServiceTest, ARunStoppedEarlyCostsTheThresholdItWasGiven) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("t5"));
  const double threshold = run_until_a_threshold(service, "t5");
  ASSERT_TRUE(std::isfinite(threshold));
  const Assignment a = service.ask("t5", "n");
  EXPECT_EQ(a.early_stop_threshold_cost, threshold);
  RecurrenceResult stopped{1.0, 2.0, false, true};
  EXPECT_EQ(service.report(a.recurrence_id, stopped), threshold);
}

TEST_P(BatchSizeServiceTest, APowerProfileGivesLaterRecurrencesTheirLimit) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("vit"));
  // At eta 0.5 and 300 W max: 250 W is cheapest per epoch here.
  const nlohmann::json entries = {{{"power_limit_w", 300}, {"time_per_epoch_s", 10.0}, {"avg_power_w", 290}},
                                  {{"power_limit_w", 250}, {"time_per_epoch_s", 10.2}, {"avg_power_w", 245}},
                                  {{"power_limit_w", 150}, {"time_per_epoch_s", 16.0}, {"avg_power_w", 150}}};
  service.put_power_profile("vit", "V100", 64, entries);
  const Assignment a = service.ask("vit", "n");
  ASSERT_EQ(a.batch_size, 64);  // the default comes first
  ASSERT_TRUE(a.power_limit_w.has_value());
  EXPECT_EQ(*a.power_limit_w, 250.0);
  // An asker on another model gets that model's profile, here none; naming
  // the spec's model is the same as naming none.
  EXPECT_FALSE(service.ask("vit", "n", "A100").power_limit_w);
  service.put_power_profile("vit", "A100", 64, {{{"power_limit_w", 400}, {"time_per_epoch_s", 5.0}, {"avg_power_w", 390}}});
  service.put_power_profile("vit", "A100", 32, {{{"power_limit_w", 400}, {"time_per_epoch_s", 5.0}, {"avg_power_w", 390}}});
  service.put_power_profile("vit", "A100", 128, {{{"power_limit_w", 400}, {"time_per_epoch_s", 5.0}, {"avg_power_w", 390}}});
  const Assignment on_a100 = service.ask("vit", "n", "A100");
  ASSERT_TRUE(on_a100.power_limit_w) << "batch size " << on_a100.batch_size;
  EXPECT_EQ(*on_a100.power_limit_w, 400.0);
  EXPECT_THROW(service.put_power_profile("vit", "V100", 48, entries), RequestError);
  EXPECT_THROW(service.put_power_profile("vit", "V100", 64, nlohmann::json::array()), RequestError);
}

TEST_P(BatchSizeServiceTest, UnknownJobsAndRecurrencesAndSecondReportsAreRefusedAndChangeNothing) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("a"));
  auto status_of = [](auto&& call) {
    try {
      call();
    } catch (const RequestError& e) {
      return e.status();
    }
    return 0;
  };
  EXPECT_EQ(status_of([&] { service.ask("missing", "n"); }), 404);
  EXPECT_EQ(status_of([&] { service.report(12345, {1, 1, true, false}); }), 404);
  const Assignment a = service.ask("a", "n");
  const int64_t revision = service.job("a").revision;
  service.report(a.recurrence_id, {10, 10, true, false});
  EXPECT_EQ(status_of([&] { service.report(a.recurrence_id, {10, 10, true, false}); }), 409);
  EXPECT_EQ(service.job("a").revision, revision + 1);
  // Bad results and specs are 400s that name the field.
  EXPECT_EQ(status_of([&] { RecurrenceResult::from_json({{"energy_j", -1}, {"time_s", 1}, {"reached_target", true}}); }),
            400);
  EXPECT_EQ(status_of([&] { RecurrenceResult::from_json({{"energy_j", 1}, {"time_s", 1}}); }), 400);
  EXPECT_EQ(status_of([&] { JobSpec::from_json({{"name", "x"}, {"batch_sizes", {32, 16}}, {"default_batch_size", 16},
                                               {"max_power_w", 300}}); }),
            400);
  EXPECT_EQ(status_of([&] { JobSpec::from_json({{"name", "bad name!"}, {"batch_sizes", {16}}, {"default_batch_size", 16},
                                               {"max_power_w", 300}}); }),
            400);
  EXPECT_EQ(status_of([&] { JobSpec::from_json({{"name", "x"}, {"batch_sizes", {16}}, {"default_batch_size", 8},
                                               {"max_power_w", 300}}); }),
            400);
}

// Threads asking and reporting at once on one job: every change is kept
// (the revision counts them all), every recurrence is finished once.
TEST_P(BatchSizeServiceTest, ConcurrentRecurrencesLoseNoUpdate) {
  auto store = std::shared_ptr<JobStore>(open_job_store(url_));
  BatchSizeService service(store);
  service.register_job(spec_named("busy"));
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      BatchSizeService mine(open_job_store(url_));  // its own connections, as a process would
      CostModel model;
      model.rng.seed(static_cast<uint64_t>(t));
      for (int i = 0; i < kEach; ++i) {
        const Assignment a = (t % 2 ? mine : service).ask("busy", fmt::format("node-{}", t));
        (t % 2 ? mine : service).report(a.recurrence_id, model.run(a.batch_size));
      }
    });
  }
  for (auto& t : threads) t.join();
  const JobSummary summary = service.job("busy");
  EXPECT_EQ(summary.recurrences, kThreads * kEach);
  EXPECT_EQ(summary.in_flight, 0);
  EXPECT_EQ(summary.revision, 1 + 2 * kThreads * kEach);
  const auto rows = store->recurrences("busy");
  EXPECT_TRUE(std::all_of(rows.begin(), rows.end(), [](const RecurrenceRow& r) { return r.cost.has_value(); }));
  // The revision counts writes, not what they kept: the optimizer's state
  // must hold every run that reached the target (it learns from all of
  // those; a state written over another's, read before it, would miss some).
  const auto state = nlohmann::json::parse(store->job("busy")->state_json);
  int64_t observed = 0;
  for (const auto& [size, sums] : state["running_sums"].items()) observed += sums["n"].get<int64_t>();
  const auto reached = std::count_if(rows.begin(), rows.end(), [](const RecurrenceRow& r) { return *r.reached_target; });
  EXPECT_GE(observed, reached);
  EXPECT_LE(observed, kThreads * kEach);
}

// A store whose first write transaction starts late (the first writer's
// batch takes a while), so that writes submitted meanwhile queue up.
class SlowFirstTransaction final : public JobStore {
 public:
  explicit SlowFirstTransaction(std::unique_ptr<JobStore> inner) : inner_(std::move(inner)) {}
  std::unique_ptr<StoreTransaction> begin() override {
    if (first_.exchange(false)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return inner_->begin();
  }
  std::optional<StoredJob> job(const std::string& name) override { return inner_->job(name); }
  std::vector<StoredJob> jobs() override { return inner_->jobs(); }
  std::vector<RecurrenceRow> recurrences(const std::string& job) override { return inner_->recurrences(job); }
  RecurrenceCounts recurrence_counts(const std::string& job) override { return inner_->recurrence_counts(job); }
  std::string describe() const override { return inner_->describe(); }
  void arm() { first_ = true; }

 private:
  std::unique_ptr<JobStore> inner_;
  std::atomic<bool> first_{false};
};

// Runs call on n threads at once; returns what each threw (null: nothing).
std::vector<std::exception_ptr> on_threads(int n, const std::function<void(int)>& call) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      try {
        call(t);
      } catch (...) {
        errors[static_cast<std::size_t>(t)] = std::current_exception();
      }
    });
    if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the first one leads
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Writes that arrive while a transaction runs go together in the next one,
// and each still gets its own answer.
TEST_P(BatchSizeServiceTest, WritesArrivingTogetherShareATransaction) {
  auto store = std::make_shared<SlowFirstTransaction>(open_job_store(url_));
  BatchSizeService service(store);
  service.register_job(spec_named("together"));
  store->arm();
  constexpr int kThreads = 12;
  std::vector<int64_t> ids(kThreads);
  const auto errors = on_threads(kThreads, [&](int t) { ids[static_cast<std::size_t>(t)] = service.ask("together", "n").recurrence_id; });
  for (const auto& e : errors) EXPECT_FALSE(e);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "every ask gets its own recurrence";
  const BatchSizeService::WriteCounts counts = service.write_counts();
  EXPECT_EQ(counts.writes, kThreads);
  // The first alone (it leads while the others queue), then the rest.
  EXPECT_LE(counts.transactions, 3u);
  EXPECT_EQ(service.job("together").revision, 1 + kThreads);
  EXPECT_EQ(service.job("together").in_flight, kThreads);
}

// Reports of one recurrence that land in one transaction: the first
// finishes it, the others see it finished (the rows are written only at
// commit, so the transaction must remember what it changed).
TEST_P(BatchSizeServiceTest, ASecondReportInTheSameTransactionIsRefused) {
  auto store = std::make_shared<SlowFirstTransaction>(open_job_store(url_));
  BatchSizeService service(store);
  service.register_job(spec_named("twice"));
  service.register_job(spec_named("other"));
  const Assignment a = service.ask("twice", "n");
  store->arm();
  std::atomic<int> finished{0}, conflicts{0};
  const auto errors = on_threads(5, [&](int t) {
    if (t == 0) {
      service.ask("other", "n");  // leads, in the slow transaction
      return;
    }
    try {
      service.report(a.recurrence_id, {100, 10, true, false});
      ++finished;
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 409) << e.what();
      ++conflicts;
    }
  });
  for (const auto& e : errors) EXPECT_FALSE(e);
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(conflicts, 3);
  EXPECT_LE(service.write_counts().transactions, 4u) << "the reports were meant to share a transaction";
  EXPECT_EQ(service.job("twice").revision, 1 + 2);
  EXPECT_EQ(service.job("twice").in_flight, 0);
  const auto rows = store->recurrences("twice");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].energy_j, 100.0);
}

// A write that fails inside a shared transaction rolls it back; the others
// are run again alone and succeed: only the failing one fails.
TEST_P(BatchSizeServiceTest, AWriteThatFailsInASharedTransactionFailsAlone) {
  auto store = std::make_shared<SlowFirstTransaction>(open_job_store(url_));
  BatchSizeService service(store);
  service.register_job(spec_named("good"));
  service.register_job(spec_named("broken"));
  // A stored profile that is not JSON: asking "broken" for its first size
  // (the default, 64) fails inside the transaction, after the optimizer moved.
  GetParam().exec(url_, "INSERT INTO power_profiles (gpu_model, job, batch_size, profile, updated_at)"
                        " VALUES ('V100', 'broken', 64, 'not json', 0)");
  store->arm();
  const auto errors = on_threads(9, [&](int t) {
    if (t % 3 == 1) {
      service.ask("broken", "n");
    } else if (t % 3 == 2) {
      service.report(100000 + t, {1, 1, true, false});
    } else {
      service.ask("good", "n");
    }
  });
  for (int t = 0; t < 9; ++t) {
    const auto& e = errors[static_cast<std::size_t>(t)];
    if (t % 3 == 0) {
      EXPECT_FALSE(e) << "ask on the good job, thread " << t;
      continue;
    }
    ASSERT_TRUE(e) << "thread " << t;
    try {
      std::rethrow_exception(e);
    } catch (const RequestError& r) {
      EXPECT_EQ(t % 3, 2) << r.what();
      EXPECT_EQ(r.status(), 404);
    } catch (const Error& err) {
      EXPECT_EQ(t % 3, 1) << err.what();
      EXPECT_NE(std::string(err.what()).find("power profile of broken"), std::string::npos) << err.what();
    }
  }
  EXPECT_EQ(service.job("good").revision, 1 + 3);
  EXPECT_EQ(service.job("good").recurrences, 3);
  EXPECT_EQ(service.job("broken").revision, 1);
  EXPECT_EQ(service.job("broken").recurrences, 0);
}

// A stored profile that is JSON but not a profile is the store's fault: the
// ask fails as a server error and changes nothing (a refusal of the request
// would have let the batch commit the optimizer's move without its row).
TEST_P(BatchSizeServiceTest, AMalformedStoredProfileFailsTheAskAndChangesNothing) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("hollow"));
  GetParam().exec(url_, "INSERT INTO power_profiles (gpu_model, job, batch_size, profile, updated_at)"
                        " VALUES ('V100', 'hollow', 64, '[]', 0)");
  try {
    service.ask("hollow", "n");
    FAIL() << "the ask succeeded";
  } catch (const RequestError& e) {
    FAIL() << "refused as the request's fault (" << e.status() << "): " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("power profile of hollow is malformed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(service.job("hollow").revision, 1);
  EXPECT_EQ(service.job("hollow").recurrences, 0);
}

// A recurrence reports progress once an epoch: the service keeps the last
// one (export shows it) and says when the run has passed its threshold.
TEST_P(BatchSizeServiceTest, ProgressIsKeptAndSaysWhenToStop) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("progress"));
  const double threshold = run_until_a_threshold(service, "progress");
  ASSERT_TRUE(std::isfinite(threshold));
  const Assignment a = service.ask("progress", "n");
  // eta 0.5, 300 W: cost = 0.5 * E + 0.5 * 300 * t.
  ProgressAdvice advice = service.progress(a.recurrence_id, {1, 100.0, 2.0});
  EXPECT_DOUBLE_EQ(advice.cost, zeus_cost(100.0, 2.0, 0.5, 300.0));
  EXPECT_EQ(advice.threshold_cost, threshold);
  EXPECT_FALSE(advice.stop);
  const double past_s = 2.0 * threshold / 150.0;  // time alone costs twice the threshold
  advice = service.progress(a.recurrence_id, {2, 100.0, past_s});
  EXPECT_TRUE(advice.stop);
  nlohmann::json exported = service.export_job("progress");
  const nlohmann::json& last = exported["recurrences"].back();
  EXPECT_EQ(last["id"], a.recurrence_id);
  EXPECT_EQ(last["progress_epochs"], 2);
  EXPECT_DOUBLE_EQ(last["progress_cost"].get<double>(), zeus_cost(100.0, past_s, 0.5, 300.0));
  EXPECT_TRUE(last["progress_at"].is_number());
  // Once reported, no more progress; unknown recurrences neither; bad bodies are 400s.
  service.report(a.recurrence_id, {1.0, 2.0, false, true});
  auto status = [&](const std::function<void()>& call) {
    try {
      call();
    } catch (const RequestError& e) {
      return e.status();
    }
    return 0;
  };
  EXPECT_EQ(status([&] { service.progress(a.recurrence_id, {3, 1.0, 1.0}); }), 409);
  EXPECT_EQ(status([&] { service.progress(999999, {1, 1.0, 1.0}); }), 404);
  EXPECT_EQ(status([&] { RecurrenceProgress::from_json({{"epochs", -1}, {"energy_j", 1}, {"time_s", 1}}); }), 400);
  EXPECT_EQ(status([&] { RecurrenceProgress::from_json({{"epochs", 1}, {"energy_j", "x"}, {"time_s", 1}}); }), 400);
  // A fresh recurrence, before any threshold: never told to stop.
  BatchSizeService fresh(open_job_store(url_));
  fresh.register_job(spec_named("young"));
  const Assignment first = fresh.ask("young", "n");
  advice = fresh.progress(first.recurrence_id, {1, 1e9, 1e6});
  EXPECT_TRUE(std::isinf(advice.threshold_cost));
  EXPECT_FALSE(advice.stop);
}

// A database written by the joule before progress reports (schema 1) is
// brought to schema 2 on opening, its jobs and recurrences kept.
TEST_P(BatchSizeServiceTest, ASchemaOneDatabaseIsMigratedKeepingItsRecurrences) {
  int64_t in_flight = 0;
  {
    BatchSizeService service(open_job_store(url_));
    service.register_job(spec_named("old"));
    const Assignment done = service.ask("old", "n");
    service.report(done.recurrence_id, {1000.0, 10.0, true, false});
    in_flight = service.ask("old", "n").recurrence_id;
  }
  // Back to schema 1, as the older joule left it.
  for (const char* column : {"progress_epochs", "progress_cost", "progress_at"}) {
    GetParam().exec(url_, fmt::format("ALTER TABLE recurrences DROP COLUMN {}", column));
  }
  GetParam().exec(url_, "DELETE FROM schema_version WHERE version = 2");
  BatchSizeService service(open_job_store(url_));
  EXPECT_EQ(service.job("old").recurrences, 2);
  EXPECT_EQ(service.job("old").in_flight, 1);
  EXPECT_FALSE(service.progress(in_flight, {1, 10.0, 1.0}).stop);
  EXPECT_EQ(service.export_job("old")["recurrences"].back()["progress_epochs"], 1);
  service.report(in_flight, {1000.0, 10.0, true, false});
  EXPECT_EQ(service.job("old").in_flight, 0);
}

TEST_P(BatchSizeServiceTest, ADatabaseFromANewerJouleIsRefused) {
  open_job_store(url_);
  GetParam().exec(url_, "INSERT INTO schema_version (version) VALUES (99)");
  try {
    open_job_store(url_);
    FAIL() << "a newer schema was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema 99, newer"), std::string::npos) << e.what();
  }
}

// What only the PostgreSQL store has to show: servers starting at once on an
// empty database, and a password kept out of what it says.
TEST(PostgresJobStoreTest, StoresOpeningAtOnceOnAnEmptyDatabaseMigrateItOnce) {
  auto& server = testing::shared_postgres();
  if (!server.running()) JOULE_SKIP_WITHOUT_SERVER(server.skip_reason());
  const std::string url = server.create_database("empty");
  std::vector<std::thread> threads;
  std::atomic<int> failures = 0;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      try {
        open_job_store(url);
      } catch (const Error&) {
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  const auto store = open_job_store(url);
  EXPECT_EQ(store->describe().rfind("PostgreSQL host=127.0.0.1 ", 0), 0u) << store->describe();
  EXPECT_NE(store->describe().find(fmt::format("dbname=empty, schema {}", kJobStoreSchemaVersion)), std::string::npos)
      << store->describe();
}

// The server drops every connection (a restart, a failover): at most the
// transaction under way fails, with an Error; the store then reconnects.
TEST(PostgresJobStoreTest, AStoreOutlivesItsConnectionsBeingDropped) {
  auto& server = testing::shared_postgres();
  if (!server.running()) JOULE_SKIP_WITHOUT_SERVER(server.skip_reason());
  BatchSizeService service(open_job_store(server.create_database("dropped")));
  service.register_job(spec_named("j"));
  service.ask("j", "n");
  server.exec("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'dropped'");
  int failures = 0;
  for (int i = 0; i < 2; ++i) {
    try {
      service.ask("j", "n");
    } catch (const Error& e) {
      ++failures;
      EXPECT_NE(std::string(e.what()).find("dropped': "), std::string::npos) << e.what();
    }
  }
  EXPECT_LE(failures, 1);
  EXPECT_GT(service.ask("j", "n").batch_size, 0);
}

TEST(PostgresJobStoreTest, ErrorsNameTheUrlWithoutItsPassword) {
  for (const std::string& url : {std::string("postgresql://joule:s3cret@127.0.0.1:1/jobs"),
                                 std::string("postgres://127.0.0.1:1/jobs?user=joule&password=s3cret")}) {
    try {
      open_job_store(url);
      FAIL() << "a store with no server behind it opened";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
      EXPECT_NE(what.find("127.0.0.1:1/jobs"), std::string::npos) << what;
      EXPECT_NE(what.find("connecting failed"), std::string::npos) << what;
    }
  }
}

// Checkpoints run beside the writers, and the log starts over once they
// have caught up: it stays near 16 MB (4,000 pages) while a writer goes on,
// where without them it would hold every page written (~150 MB here), and
// SQLite's own checkpoint in the commit path let it reach ~40 MB.
TEST(SqliteJobStoreTest, TheLogStaysSmallWhileWritesGoOn) {
  TempDir tmp;
  const std::string path = tmp.file("jobs.db");
  BatchSizeService service(open_job_store("sqlite:" + path));
  service.register_job(spec_named("busy"));
  constexpr int kRoundTrips = 6000;
  constexpr std::uintmax_t kMaxLogBytes = 64u << 20;  // room for a checkpointer a second late
  std::uintmax_t largest_log = 0;
  for (int i = 0; i < kRoundTrips; ++i) {
    const Assignment a = service.ask("busy", "node");
    service.report(a.recurrence_id, {100.0 * a.batch_size, 1000.0 / a.batch_size, true, false});
    if (i % 100 == 0) largest_log = std::max(largest_log, std::filesystem::file_size(path + "-wal"));
  }
  EXPECT_LT(largest_log, kMaxLogBytes);
  EXPECT_EQ(service.job("busy").recurrences, kRoundTrips);
}

// --- Input ranges and damaged states (issue 31, part 1) ---

// The RequestError a call throws (status and message); status 0 when none.
struct Refusal {
  int status = 0;
  std::string what;
};
Refusal refusal_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const RequestError& e) {
    return {e.status(), e.what()};
  }
  return {};
}

// A 400 whose message names the field and the range it must be in.
void expect_refused(const std::function<void()>& call, const std::string& field, const std::string& range) {
  const Refusal r = refusal_of(call);
  EXPECT_EQ(r.status, 400) << field << ": " << r.what;
  EXPECT_NE(r.what.find("'" + field + "'"), std::string::npos) << r.what;
  EXPECT_NE(r.what.find(range), std::string::npos) << r.what;
}

nlohmann::json spec_json_with(const std::string& field, const nlohmann::json& value) {
  nlohmann::json j = spec_named("x").to_json();
  j[field] = value;
  return j;
}

// Every number a client sends is range-checked: out of range (and not
// finite) is a 400 naming the field and the range, before anything is stored.
TEST(ServiceInputTest, NumbersOutsideTheirRangesAreRefusedNamingFieldAndRange) {
  const auto result = [](double energy_j, double time_s) {
    return nlohmann::json{{"energy_j", energy_j}, {"time_s", time_s}, {"reached_target", true}};
  };
  expect_refused([&] { RecurrenceResult::from_json(result(1e308, 1.0)); }, "energy_j", "[0, 1e+15]");
  expect_refused([&] { RecurrenceResult::from_json(result(1e16, 1.0)); }, "energy_j", "[0, 1e+15]");
  expect_refused([&] { RecurrenceResult::from_json(result(-1.0, 1.0)); }, "energy_j", "[0, 1e+15]");
  expect_refused([&] { RecurrenceResult::from_json(result(1.0, 1e308)); }, "time_s", "(0, 1e+09]");
  expect_refused([&] { RecurrenceResult::from_json(result(1.0, 0.0)); }, "time_s", "(0, 1e+09]");
  expect_refused([] { RecurrenceResult{std::numeric_limits<double>::infinity(), 1.0, true, false}.check(); },
                 "energy_j", "[0, 1e+15]");
  expect_refused([] { RecurrenceResult{1.0, std::nan(""), true, false}.check(); }, "time_s", "(0, 1e+09]");
  EXPECT_EQ(refusal_of([&] { RecurrenceResult::from_json(result(1e15, 1e9)); }).status, 0);  // the extremes are fine

  const auto progress = [](const nlohmann::json& epochs, double energy_j, double time_s) {
    return nlohmann::json{{"epochs", epochs}, {"energy_j", energy_j}, {"time_s", time_s}};
  };
  expect_refused([&] { RecurrenceProgress::from_json(progress(-1, 1, 1)); }, "epochs", "[0, 1000000]");
  expect_refused([&] { RecurrenceProgress::from_json(progress(5000000000, 1, 1)); }, "epochs", "[0, 1000000]");
  expect_refused([&] { RecurrenceProgress::from_json(progress(1e10, 1, 1)); }, "epochs", "[0, 1000000]");
  expect_refused([&] { RecurrenceProgress::from_json(progress(1.5, 1, 1)); }, "epochs", "[0, 1000000]");
  expect_refused([&] { RecurrenceProgress::from_json(progress(1, 1e300, 1)); }, "energy_j", "[0, 1e+15]");
  expect_refused([&] { RecurrenceProgress::from_json(progress(1, 1, 2e9)); }, "time_s", "[0, 1e+09]");
  EXPECT_EQ(refusal_of([&] { RecurrenceProgress::from_json(progress(0, 0, 0)); }).status, 0);

  expect_refused([] { JobSpec::from_json(spec_json_with("max_power_w", 1e6)); }, "max_power_w", "(0, 100000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("max_power_w", 0)); }, "max_power_w", "(0, 100000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("eta", 1.5)); }, "eta", "[0, 1]");
  expect_refused([] { JobSpec::from_json(spec_json_with("beta", 1e300)); }, "beta", "(1, 100]");
  expect_refused([] { JobSpec::from_json(spec_json_with("beta", 1.0)); }, "beta", "(1, 100]");
  expect_refused([] { JobSpec::from_json(spec_json_with("window", 100000)); }, "window", "[1, 1000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("window", 0)); }, "window", "[1, 1000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("max_epochs", 1e7)); }, "max_epochs", "[0, 1000000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("gpu_count", 0)); }, "gpu_count", "[1, 1000000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("gpu_count", 4294967297)); }, "gpu_count", "[1, 1000000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("seed", -1)); }, "seed", "[0, ");
  expect_refused([] { JobSpec::from_json(spec_json_with("batch_sizes", {16, 4294967360})); }, "batch_sizes",
                 "[1, 1000000000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("default_batch_size", 1e20)); }, "default_batch_size",
                 "[1, 1000000000]");
  expect_refused([] { JobSpec::from_json(spec_json_with("seed", 9.3e18)); }, "seed", "[0, ");
  expect_refused([] { JobSpec::from_json(spec_json_with("seed", 0x1p63)); }, "seed", "[0, ");
  EXPECT_EQ(JobSpec::from_json(spec_json_with("seed", 18446744073709551615u)).seed, 18446744073709551615u);
  EXPECT_EQ(JobSpec::from_json(spec_json_with("seed", 12.0)).seed, 12u);

  const auto entry = [](double limit_w, double time_s, double power_w) {
    return nlohmann::json{{"power_limit_w", limit_w}, {"time_per_epoch_s", time_s}, {"avg_power_w", power_w}};
  };
  TempDir dir;
  BatchSizeService service(open_job_store("sqlite:" + dir.file("jobs.db")));
  service.register_job(spec_named("profiled"));
  const auto put = [&](const nlohmann::json& e) { service.put_power_profile("profiled", "V100", 64, nlohmann::json::array({e})); };
  expect_refused([&] { put(entry(1e6, 1, 1)); }, "power_limit_w", "(0, 100000]");
  expect_refused([&] { put(entry(300, 1e300, 1)); }, "time_per_epoch_s", "(0, 1e+09]");
  expect_refused([&] { put(entry(300, 1, -5)); }, "avg_power_w", "[0, 100000]");
  EXPECT_FALSE(service.ask("profiled", "n").power_limit_w.has_value());  // none of them was stored
}

// A number no double holds: nlohmann's parser refuses it as out_of_range
// (406), which joule serve answered 500. parse_request_body makes it a 400
// naming the field and its range.
TEST(ServiceInputTest, ANumberBeyondADoubleInABodyIsA400NamingTheField) {
  expect_refused([] { parse_request_body(R"({"energy_j": 1e400, "time_s": 1, "reached_target": true})"); },
                 "energy_j", "[0, 1e+15]");
  expect_refused([] { parse_request_body(R"({"energy_j": 1, "time_s": -1e999, "reached_target": true})"); }, "time_s",
                 "(0, 1e+09]");
  EXPECT_EQ(refusal_of([] { parse_request_body("{\"energy_j\": "); }).status, 400);
  EXPECT_EQ(refusal_of([] { parse_request_body("[1e400]"); }).status, 400);
  EXPECT_EQ(parse_request_body(""), nlohmann::json::object());
  EXPECT_EQ(parse_request_body(R"({"epochs": 3})")["epochs"], 3);
}

// The issue's reports: 1e308 (an infinite cost) and two of 1e306 (an
// infinite sum) were answered 200 and broke the job and the job list for
// good. Now each is refused, nothing is stored, and everything goes on.
TEST_P(BatchSizeServiceTest, TheReportsThatBrokeAJobAreRefusedAndChangeNothing) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("huge"));
  service.register_job(spec_named("other"));
  const Assignment a = service.ask("huge", "n");
  const int64_t revision = service.job("huge").revision;
  expect_refused([&] { service.report(a.recurrence_id, {1e308, 1e308, true, false}); }, "energy_j", "[0, 1e+15]");
  expect_refused([&] { service.report(a.recurrence_id, {1e306, 1e306, true, false}); }, "energy_j", "[0, 1e+15]");
  expect_refused([&] { service.report(a.recurrence_id, {1.0, 1e306, true, false}); }, "time_s", "(0, 1e+09]");
  expect_refused([&] { service.progress(a.recurrence_id, {1, 1e306, 1.0}); }, "energy_j", "[0, 1e+15]");
  EXPECT_EQ(service.job("huge").revision, revision);
  EXPECT_EQ(service.job("huge").in_flight, 1);
  ASSERT_EQ(service.jobs().size(), 2u);
  EXPECT_EQ(service.damaged_jobs(), 0u);
  EXPECT_TRUE(std::isfinite(service.report(a.recurrence_id, {1000.0, 10.0, true, false})));
  EXPECT_EQ(service.job("huge").in_flight, 0);
  // A spec built in code is checked as a request's is.
  JobSpec wild = spec_named("wild");
  wild.max_power_w = 1e300;
  expect_refused([&] { service.register_job(wild); }, "max_power_w", "(0, 100000]");
  EXPECT_EQ(service.jobs().size(), 2u);
}

// The largest accepted numbers, reported again and again (and runs stopped
// at the largest threshold they lead to): every cost and every stored sum
// stays finite, and the job stays usable.
TEST_P(BatchSizeServiceTest, TheLargestAcceptedReportsRepeatedKeepEverySumFinite) {
  BatchSizeService service(open_job_store(url_));
  nlohmann::json spec = spec_named("extreme").to_json();
  spec["max_power_w"] = input_limits::kMaxPowerW;
  spec["beta"] = input_limits::kMaxBeta;
  spec["eta"] = 0.0;  // all of the cost from time: 1e5 W * 1e9 s
  service.register_job(JobSpec::from_json(spec));
  for (int i = 0; i < 150; ++i) {
    const Assignment a = service.ask("extreme", "n");
    const bool stop = i % 3 == 2 && std::isfinite(a.early_stop_threshold_cost);
    const double cost = service.report(
        a.recurrence_id, {input_limits::kMaxEnergyJ, input_limits::kMaxTimeS, !stop && i % 5 != 4, stop});
    ASSERT_TRUE(std::isfinite(cost)) << i;
    ASSERT_LE(cost, input_limits::kMaxCost) << i;
  }
  const JobSummary summary = service.job("extreme");
  EXPECT_TRUE(summary.damaged.empty()) << summary.damaged;
  const nlohmann::json state = service.export_job("extreme")["state"];
  for (const auto& [size, sums] : state["running_sums"].items()) {
    for (const char* name : {"sum", "welford_mean", "m2"}) {
      ASSERT_TRUE(sums[name].is_number()) << size << " " << name << ": " << sums.dump();
      EXPECT_TRUE(std::isfinite(sums[name].get<double>())) << size << " " << name;
    }
  }
  EXPECT_TRUE(state["min_cost"].is_number());
  EXPECT_EQ(service.jobs().size(), 1u);
}

// The states an older joule could leave, written straight into the store:
// not JSON, a running sum saved as null (an infinite sum), a sum no accepted
// reports give, and a spec that is not JSON.
struct Damage {
  const char* name;
  std::function<std::string(const nlohmann::json& state)> state;  // the stored state text
};

std::vector<Damage> damages() {
  return {{"not JSON", [](const nlohmann::json&) { return std::string("{\"version\": 2, \"running_s"); }},
          {"an infinite sum",
           [](nlohmann::json j) {
             j["running_sums"]["64"]["sum"] = nullptr;
             return j.dump();
           }},
          {"a sum out of range",
           [](nlohmann::json j) {
             j["running_sums"]["64"] = {{"n", 1}, {"sum", 1e306}, {"welford_mean", 1e306}, {"m2", 0}};
             j["min_cost"] = 1e306;
             return j.dump();
           }}};
}

std::string sql_text(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A damaged job is listed (phase "damaged", with why), counted, logged once,
// refuses asks with a 409 naming the repair, still records reports, and
// breaks no other job. One reset rebuilds it from its finished recurrences:
// the same sums its state had before the damage.
TEST_P(BatchSizeServiceTest, ADamagedStateBreaksNoOtherJobAndOneResetRepairsIt) {
  for (const Damage& damage : damages()) {
    SCOPED_TRACE(damage.name);
    TempDir dir;
    std::string skip;
    const std::string url = GetParam().fresh_url(dir, &skip);
    BatchSizeService service(open_job_store(url));
    std::vector<std::string> log;
    service.set_log([&](const std::string& line) { log.push_back(line); });
    service.register_job(spec_named("broken"));
    service.register_job(spec_named("fine"));
    CostModel model;
    for (int i = 0; i < 12; ++i) {
      const Assignment a = service.ask("broken", "n");
      service.report(a.recurrence_id, model.run(a.batch_size));
    }
    const Assignment in_flight = service.ask("broken", "n");
    const nlohmann::json before = service.export_job("broken")["state"];
    ASSERT_EQ(before["version"], 2);
    GetParam().exec(url, fmt::format("UPDATE jobs SET state = {} WHERE name = 'broken'", sql_text(damage.state(before))));
    BatchSizeService again(open_job_store(url));  // no cached optimizer: the stored state is read
    again.set_log([&](const std::string& line) { log.push_back(line); });

    const std::vector<JobSummary> listed = again.jobs();
    ASSERT_EQ(listed.size(), 2u);
    const JobSummary& broken = listed[0].spec.name == "broken" ? listed[0] : listed[1];
    const JobSummary& fine = listed[0].spec.name == "broken" ? listed[1] : listed[0];
    EXPECT_EQ(broken.phase, "damaged");
    EXPECT_NE(broken.damaged.find("state"), std::string::npos) << broken.damaged;
    EXPECT_EQ(broken.to_json()["damaged"], broken.damaged);
    EXPECT_EQ(broken.recurrences, 13);
    EXPECT_TRUE(fine.damaged.empty());
    EXPECT_FALSE(fine.to_json().contains("damaged"));
    EXPECT_EQ(again.damaged_jobs(), 1u);
    EXPECT_EQ(again.job("broken").phase, "damaged");
    EXPECT_EQ(again.export_job("broken")["damaged"], broken.damaged);

    const Refusal ask = refusal_of([&] { again.ask("broken", "n"); });
    EXPECT_EQ(ask.status, 409);
    EXPECT_NE(ask.what.find("joule jobs reset broken"), std::string::npos) << ask.what;
    // The other job, in the same transactions, is untouched.
    const Assignment other = again.ask("fine", "n");
    EXPECT_GT(again.report(other.recurrence_id, {1000.0, 10.0, true, false}), 0);
    // A report on the damaged job is kept in its recurrence, for the reset.
    const int64_t revision = again.job("broken").revision;
    EXPECT_GT(again.report(in_flight.recurrence_id, model.run(in_flight.batch_size)), 0);
    EXPECT_EQ(again.job("broken").in_flight, 0);
    EXPECT_EQ(again.job("broken").revision, revision);
    const auto logged = std::count_if(log.begin(), log.end(), [](const std::string& line) {
      return line.find("job 'broken' is damaged") != std::string::npos;
    });
    EXPECT_EQ(logged, 1) << fmt::format("{}", fmt::join(log, "\n"));

    const ResetOutcome reset = again.reset_job("broken");
    EXPECT_FALSE(reset.was_damaged.empty());
    EXPECT_EQ(reset.replayed, 13);
    EXPECT_TRUE(reset.skipped.empty());
    EXPECT_EQ(reset.revision, revision + 1);
    EXPECT_EQ(again.damaged_jobs(), 0u);
    EXPECT_NE(again.job("broken").phase, "damaged");
    // The first 12 results rebuild exactly the sums the state had before.
    BatchSizeService other_process(open_job_store(url));
    const nlohmann::json rebuilt = other_process.export_job("broken")["state"];
    const nlohmann::json expected = [&] {
      BatchSizeOptimizer local = BatchSizeOptimizer::from_json(before);
      const nlohmann::json last = other_process.export_job("broken")["recurrences"].back();
      local.observe(last["batch_size"].get<int>(), last["cost"].get<double>(), last["reached_target"].get<bool>());
      return local.to_json();
    }();
    EXPECT_EQ(rebuilt["running_sums"], expected["running_sums"]);
    EXPECT_EQ(rebuilt["phase"], expected["phase"]);
    EXPECT_EQ(rebuilt["min_cost"], expected["min_cost"]);
    const Assignment after = other_process.ask("broken", "n");
    EXPECT_GT(other_process.report(after.recurrence_id, model.run(after.batch_size)), 0);
    EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& line) {
      return line.find("job 'broken' reset") != std::string::npos;
    }));
  }
}

// A recurrence whose stored result an older joule accepted out of range is
// left out of the rebuilt state (and named); --fresh forgets every result.
TEST_P(BatchSizeServiceTest, AResetSkipsStoredResultsOutOfRangeOrStartsFresh) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("mixed"));
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    const Assignment a = service.ask("mixed", "n");
    service.report(a.recurrence_id, {1000.0 + i, 10.0, true, false});
    ids.push_back(a.recurrence_id);
  }
  GetParam().exec(url_, fmt::format("UPDATE recurrences SET cost = 1e306, energy_j = 1e306 WHERE id = {}", ids[1]));
  GetParam().exec(url_, fmt::format("UPDATE recurrences SET cost = NULL WHERE id = {}", ids[2]));
  ResetOutcome reset = service.reset_job("mixed");
  EXPECT_TRUE(reset.was_damaged.empty());
  EXPECT_EQ(reset.replayed, 2);
  EXPECT_EQ(reset.skipped, (std::vector<int64_t>{ids[1], ids[2]}));
  reset = service.reset_job("mixed", /*fresh=*/true);
  EXPECT_EQ(reset.replayed, 0);
  const nlohmann::json state = service.export_job("mixed")["state"];
  for (const auto& [size, sums] : state["running_sums"].items()) EXPECT_EQ(sums["n"], 0) << size;
  EXPECT_EQ(service.job("mixed").recurrences, 4);  // the recurrences are kept
  EXPECT_EQ(service.ask("mixed", "n").batch_size, 64);  // pruning starts again at the default
  EXPECT_EQ(refusal_of([&] { service.reset_job("nobody"); }).status, 404);
}

// A run stopped early costs the threshold it was handed; one an older joule
// handed out beyond any accepted cost (1e300, stored in the recurrence) would
// overflow the sums, so such a run costs what it measured.
TEST_P(BatchSizeServiceTest, AThresholdAnOlderJouleHandedOutIsNotTakenAsACost) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("old"));
  const Assignment a = service.ask("old", "n"), b = service.ask("old", "n");
  GetParam().exec(url_, fmt::format("UPDATE recurrences SET threshold_cost = 1e300 WHERE id IN ({}, {})",
                                    a.recurrence_id, b.recurrence_id));
  EXPECT_EQ(service.report(a.recurrence_id, {100.0, 2.0, false, true}), zeus_cost(100.0, 2.0, 0.5, 300.0));
  EXPECT_EQ(service.report(b.recurrence_id, {100.0, 2.0, false, true}), zeus_cost(100.0, 2.0, 0.5, 300.0));
  EXPECT_TRUE(service.job("old").damaged.empty()) << service.job("old").damaged;
  EXPECT_NO_THROW(service.ask("old", "n"));
}

// A spec that is not JSON: listed as damaged (not a 500), every request on
// the job a 409, and a reset refuses it (the spec cannot be rebuilt).
TEST_P(BatchSizeServiceTest, ADamagedSpecIsListedAndRefusedNotA500) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("nospec"));
  service.register_job(spec_named("fine"));
  const Assignment a = service.ask("nospec", "n");
  GetParam().exec(url_, "UPDATE jobs SET spec = '{\"name\": ' WHERE name = 'nospec'");
  BatchSizeService again(open_job_store(url_));
  const std::vector<JobSummary> listed = again.jobs();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(again.job("nospec").phase, "damaged");
  EXPECT_NE(again.job("nospec").damaged.find("spec of nospec"), std::string::npos) << again.job("nospec").damaged;
  EXPECT_EQ(again.damaged_jobs(), 1u);
  EXPECT_EQ(refusal_of([&] { again.ask("nospec", "n"); }).status, 409);
  EXPECT_EQ(refusal_of([&] { again.report(a.recurrence_id, {1.0, 1.0, true, false}); }).status, 409);
  EXPECT_EQ(refusal_of([&] { again.progress(a.recurrence_id, {1, 1.0, 1.0}); }).status, 409);
  EXPECT_EQ(refusal_of([&] { again.reset_job("nospec"); }).status, 409);
  EXPECT_EQ(again.export_job("nospec")["phase"], "damaged");
  EXPECT_EQ(again.ask("fine", "n").batch_size, 64);
}

// Issue 47: every name the service stores is listed, exported, logged and
// scraped; a GPU model or node name with bytes that are not UTF-8 was stored
// (PUT .../profiles/%ff/16 answered 204), and an export holding one could not
// be written. Such names, control characters and names past 256 bytes are a
// 400 naming the field, and nothing is stored.
TEST_P(BatchSizeServiceTest, NamesThatAreNotPrintableUtf8AreRefusedAndNothingIsStored) {
  BatchSizeService service(open_job_store(url_));
  service.register_job(spec_named("job"));
  const nlohmann::json entries = {{{"power_limit_w", 250}, {"time_per_epoch_s", 10}, {"avg_power_w", 200}}};
  nlohmann::json spec = spec_named("other").to_json();
  spec["gpu_model"] = std::string("V100\x01", 5);
  const std::vector<std::pair<std::function<void()>, std::string>> refused = {
      {[&] { service.ask("job", "\xff"); }, "'node'"},
      {[&] { service.ask("job", "gpu-node-1\n"); }, "'node'"},
      {[&] { service.ask("job", std::string(257, 'n')); }, "'node'"},
      {[&] { service.ask("job", "n", "A40\xc3"); }, "'gpu_model'"},
      {[&] { service.ask("job", "n", "A40\xc2\x85"); }, "'gpu_model'"},  // U+0085, a C1 control
      {[&] { service.put_power_profile("job", "\xff", 64, entries); }, "GPU model"},
      {[&] { service.put_power_profile("job", "\xc0\xaf", 64, entries); }, "GPU model"},  // an overlong '/'
      {[&] { service.put_power_profile("job", "A40\t", 64, entries); }, "GPU model"},
      {[&] { service.put_power_profile("job", "", 64, entries); }, "GPU model"},
      {[&] { service.register_job(JobSpec::from_json(spec)); }, "'gpu_model'"},
  };
  for (const auto& [call, field] : refused) {
    SCOPED_TRACE(field);
    const Refusal r = refusal_of(call);
    EXPECT_EQ(r.status, 400) << r.what;
    EXPECT_NE(r.what.find(field), std::string::npos) << r.what;
    EXPECT_TRUE(is_valid_utf8(r.what)) << printable(r.what);
  }
  EXPECT_EQ(service.export_job("job")["recurrences"].size(), 0u);
  EXPECT_EQ(service.jobs().size(), 1u);
  // Names in UTF-8 that are not ASCII are names.
  service.put_power_profile("job", "NVIDIA A40 (\xce\xa9)", 64, entries);
  EXPECT_EQ(service.ask("job", "n\xc5\x93ud-1", "NVIDIA A40 (\xce\xa9)").power_limit_w, 250.0);
}

// A node name or a state that an older joule, or a person with sqlite3, left
// in the store with bytes that are not UTF-8 is exported printable, so the
// export can be written as JSON.
TEST(ServiceInputTest, StoredBytesThatAreNotUtf8AreExportedPrintable) {
  TempDir dir;
  const std::string url = "sqlite:" + dir.file("jobs.db");
  BatchSizeService service(open_job_store(url));
  service.register_job(spec_named("job"));
  service.ask("job", "n");
  kSqlite.exec(url, "UPDATE recurrences SET node = CAST(X'6E6F6465FF' AS TEXT)");
  kSqlite.exec(url, "UPDATE jobs SET state = CAST(X'7B22FE' AS TEXT)");
  BatchSizeService again(open_job_store(url));
  const nlohmann::json exported = again.export_job("job");
  EXPECT_EQ(exported["recurrences"][0]["node"], "node\\xFF");
  EXPECT_EQ(exported["state"], "{\"\\xFE");
  EXPECT_NE(exported["damaged"].get<std::string>().find("cannot be read"), std::string::npos) << exported;
  EXPECT_TRUE(is_valid_utf8(exported["damaged"].get<std::string>())) << printable(exported["damaged"].get<std::string>());
  EXPECT_NO_THROW((void)exported.dump());
}

INSTANTIATE_TEST_SUITE_P(Stores, BatchSizeServiceTest, ::testing::Values(kSqlite, kPostgres),
                         [](const ::testing::TestParamInfo<StoreKind>& kind) { return kind.param.name; });

}  // namespace
}  // namespace joule::service
