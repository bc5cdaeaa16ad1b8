// The batch-size service's logic on a real SQLite file: registration, the
// ask/report cycle against the in-process optimizer, persistence across
// reopening, power profiles, concurrent recurrences, bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <random>
#include <thread>

#include "common/test_support.h"
#include "joule/optimize/batch_size_optimizer.h"
#include "joule/optimize/cost.h"
#include "joule/service/batch_size_service.h"

namespace joule::service {
namespace {

using testing::TempDir;

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

TEST(BatchSizeServiceTest, RegisteringTheSameSpecAgainIsFineADifferentOneConflicts) {
  TempDir tmp;
  BatchSizeService service(open_job_store(tmp.file("jobs.db")));
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

TEST(BatchSizeServiceTest, AskAndReportMakeTheSameDecisionsAsTheOptimizerInProcess) {
  TempDir tmp;
  BatchSizeService service(open_job_store(tmp.file("jobs.db")));
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

TEST(BatchSizeServiceTest, TheBanditContinuesAfterTheStoreIsReopened) {
  TempDir tmp;
  const JobSpec spec = spec_named("gpt");
  BatchSizeOptimizer local({spec.batch_sizes, spec.default_batch_size, spec.beta, spec.window, {}, spec.seed});
  CostModel model;
  for (int round = 0; round < 4; ++round) {  // a new service (a restart) every 10 recurrences
    BatchSizeService service(open_job_store("sqlite:" + tmp.file("jobs.db")));
    if (round == 0) service.register_job(spec);
    for (int i = 0; i < 10; ++i) {
      const Assignment a = service.ask("gpt", "n");
      ASSERT_EQ(a.batch_size, local.predict());
      const RecurrenceResult r = model.run(a.batch_size);
      local.observe(a.batch_size, service.report(a.recurrence_id, r), r.reached_target);
    }
  }
}

TEST(BatchSizeServiceTest, ARunStoppedEarlyCostsTheThresholdItWasGiven) {
  TempDir tmp;
  BatchSizeService service(open_job_store(tmp.file("jobs.db")));
  service.register_job(spec_named("t5"));
  CostModel model;
  double threshold = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 20 && std::isinf(threshold); ++i) {
    const Assignment a = service.ask("t5", "n");
    service.report(a.recurrence_id, model.run(a.batch_size));
    threshold = service.ask("t5", "n").early_stop_threshold_cost;
  }
  ASSERT_TRUE(std::isfinite(threshold));
  const Assignment a = service.ask("t5", "n");
  EXPECT_EQ(a.early_stop_threshold_cost, threshold);
  RecurrenceResult stopped{1.0, 2.0, false, true};
  EXPECT_EQ(service.report(a.recurrence_id, stopped), threshold);
}

TEST(BatchSizeServiceTest, APowerProfileGivesLaterRecurrencesTheirLimit) {
  TempDir tmp;
  BatchSizeService service(open_job_store(tmp.file("jobs.db")));
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
  EXPECT_THROW(service.put_power_profile("vit", "V100", 48, entries), RequestError);
  EXPECT_THROW(service.put_power_profile("vit", "V100", 64, nlohmann::json::array()), RequestError);
}

TEST(BatchSizeServiceTest, UnknownJobsAndRecurrencesAndSecondReportsAreRefusedAndChangeNothing) {
  TempDir tmp;
  BatchSizeService service(open_job_store(tmp.file("jobs.db")));
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
TEST(BatchSizeServiceTest, ConcurrentRecurrencesLoseNoUpdate) {
  TempDir tmp;
  auto store = std::shared_ptr<JobStore>(open_job_store(tmp.file("jobs.db")));
  BatchSizeService service(store);
  service.register_job(spec_named("busy"));
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      BatchSizeService mine(open_job_store(tmp.file("jobs.db")));  // its own connections, as a process would
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
}

TEST(BatchSizeServiceTest, ADatabaseFromANewerJouleIsRefused) {
  TempDir tmp;
  open_job_store(tmp.file("jobs.db"));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.file("jobs.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_version (version) VALUES (99)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    open_job_store(tmp.file("jobs.db"));
    FAIL() << "a newer schema was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema 99, newer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace joule::service
