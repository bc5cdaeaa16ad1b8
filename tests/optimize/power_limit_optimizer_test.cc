// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/optimize/power_limit_optimizer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "common/test_support.h"
#include "joule/common/csv.h"
#include "joule/error.h"
#include "joule/simulate/training_loop.h"

namespace joule {
namespace {


PowerLimitOptimizerOptions quiet(Objective objective) {
  PowerLimitOptimizerOptions o;
  o.objective = objective;
  o.warmup_steps = 2;
  o.measure_steps = 5;
  o.min_warmup_s = 0;  // step counts alone, so expectations are exact
  o.min_measure_s = 0;
  o.screening_rounds = 2;  // no noise: two rounds decide
  o.restore_on_signals = false;
  o.log = [](const std::string&) {};
  return o;
}

// What an exhaustive sweep of the model says, per candidate limit.
std::vector<LimitMeasurement> sweep(const SimGpuModel& model, int gpus, double base_step_s, double step_w) {
  std::vector<LimitMeasurement> rows;
  for (double w = model.max_limit_mw / 1000.0; w >= model.min_limit_mw / 1000.0 - 1e-9; w -= step_w) {
    const double t = base_step_s / model.relative_speed(1.0, w);
    rows.push_back({w, t, gpus * model.power_w(1.0, w) * t});
  }
  return rows;
}

TEST(PowerLimitOptimizerTest, ConvergesToTheModelsOptimumForEachObjective) {
  for (const Objective& objective : {Objective::time(), Objective::energy(), Objective::cost(0.5), Objective::cost(0.9),
                                     Objective::slowdown(1.1), Objective::slowdown(1.3)}) {
    SimulatedTraining training({SimGpuModel{}, SimGpuModel{}});
    PowerLimitOptimizer optimizer(training.monitor(), quiet(objective));
    training.epoch(optimizer, 600);
    ASSERT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided) << objective.describe();
    const auto expected = sweep(SimGpuModel{}, 2, 0.1, 25.0);
    const double best = expected[choose_power_limit(expected, objective, 2 * 700.0)].power_limit_w;
    EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), best) << objective.describe();
    // Both GPUs now train at the chosen limit.
    for (const auto& gpu : training.gpus()) EXPECT_EQ(gpu->power_limit_mw(), static_cast<uint32_t>(best * 1000));
    // The measured profile matches the model row by row.
    const auto rows = optimizer.profile();
    ASSERT_EQ(rows.size(), expected.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_NEAR(rows[i].time_per_step_s, expected[i].time_s, 1e-9);
      // Within 1e-4: a row pools several stretches, each with the sampler's edges.
      EXPECT_NEAR(rows[i].energy_per_step_j, expected[i].energy_j, 1e-4 * expected[i].energy_j);
    }
  }
}

// The SM clock knob on the simulated GPUs: caps snapped to supported clocks,
// the model's optimum for each objective, both GPUs locked, the lock reset at
// the end.
TEST(PowerLimitOptimizerTest, SmClockCapsConvergeToTheModelsOptimumAndAreResetAfter) {
  for (const Objective& objective : {Objective::energy(), Objective::cost(0.5), Objective::slowdown(1.1)}) {
    SimulatedTraining training({SimGpuModel{}, SimGpuModel{}});
    auto options = quiet(objective);
    options.knob = OptimizerKnob::kSmClock;
    options.step_mhz = 150;
    options.min_clock_fraction = 0.5;
    {
      PowerLimitOptimizer optimizer(training.monitor(), options);
      const auto candidates = optimizer.candidates();
      ASSERT_FALSE(candidates.empty());
      EXPECT_EQ(candidates.front(), 1980.0);
      EXPECT_TRUE(optimizer.candidate_limits_w().empty());
      const auto supported = training.gpus()[0]->supported_clocks_mhz(ClockDomain::kSm);
      for (double c : candidates) {
        EXPECT_GE(c, 990.0);
        EXPECT_TRUE(std::count(supported.begin(), supported.end(), static_cast<uint32_t>(c))) << c;
      }
      training.epoch(optimizer, 600);
      ASSERT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
      // The model's costs at each cap: time falls with the clock, power above idle with its cube.
      const SimGpuModel model;
      std::vector<LimitMeasurement> expected;
      for (double c : candidates) {
        const SimGpuModel::Settings settings{700, static_cast<uint32_t>(c), 0};
        const double t = 0.1 / model.relative_speed(1.0, settings);
        expected.push_back({c, t, 2 * model.power_w(1.0, settings) * t});
      }
      const double best = expected[choose_power_limit(expected, objective, 2 * 700.0)].power_limit_w;
      ASSERT_TRUE(optimizer.chosen_setting());
      EXPECT_DOUBLE_EQ(*optimizer.chosen_setting(), best) << objective.describe();
      EXPECT_FALSE(optimizer.chosen_limit_w());
      for (const auto& gpu : training.gpus()) {
        if (best < 1980) {
          EXPECT_EQ(gpu->clock_lock_mhz(ClockDomain::kSm), (ClockLock{210, static_cast<uint32_t>(best)}));
        } else {
          EXPECT_FALSE(gpu->clock_lock_mhz(ClockDomain::kSm));
        }
        EXPECT_EQ(gpu->power_limit_mw(), 700'000u);  // the other knob is left alone
      }
      const auto rows = optimizer.profile();
      ASSERT_EQ(rows.size(), candidates.size());
      EXPECT_DOUBLE_EQ(rows.front().clock_mhz, 1980.0);
      EXPECT_DOUBLE_EQ(rows.front().power_limit_w, 700.0);
      const std::string report = optimizer.report();
      EXPECT_NE(report.find("joule SM clock profile"), std::string::npos) << report;
      EXPECT_NE(report.find("SM cap MHz"), std::string::npos) << report;
    }
    for (const auto& gpu : training.gpus()) EXPECT_FALSE(gpu->clock_lock_mhz(ClockDomain::kSm));
  }
}

// A GPU that was locked before keeps its lock: the optimizer's baseline is
// that cap, and restore puts that lock back rather than resetting it.
TEST(PowerLimitOptimizerTest, AMemoryClockKnobRestoresALockThatWasThereBefore) {
  SimulatedTraining training({SimGpuModel{}});
  training.gpus()[0]->lock_clock_mhz(ClockDomain::kMemory, {1593, 2619});
  auto options = quiet(Objective::energy());
  options.knob = OptimizerKnob::kMemoryClock;
  {
    PowerLimitOptimizer optimizer(training.monitor(), options);
    EXPECT_EQ(optimizer.candidates(), (std::vector<double>{2619, 1593}));
    training.epoch(optimizer, 200);
    ASSERT_TRUE(optimizer.chosen_setting());
    // At 1593 MHz the memory saves 15% x 39% of the dynamic power and stretches 20% of the work by 64%: more energy.
    EXPECT_DOUBLE_EQ(*optimizer.chosen_setting(), 2619.0);
  }
  EXPECT_EQ(training.gpus()[0]->clock_lock_mhz(ClockDomain::kMemory), (ClockLock{1593, 2619}));
}

TEST(PowerLimitOptimizerTest, AClockKnobRefusesPowerLimitAdviceAndBadSteps) {
  SimulatedTraining training({SimGpuModel{}});
  auto options = quiet(Objective::energy());
  options.knob = OptimizerKnob::kSmClock;
  options.known_limit_w = 500;
  EXPECT_THROW(PowerLimitOptimizer(training.monitor(), options), UsageError);
  options.known_limit_w.reset();
  options.step_mhz = 0;
  EXPECT_THROW(PowerLimitOptimizer(training.monitor(), options), UsageError);
  options.step_mhz = 90;
  options.min_clock_fraction = 1.5;
  EXPECT_THROW(PowerLimitOptimizer(training.monitor(), options), UsageError);
  EXPECT_EQ(parse_optimizer_knob("sm_clock"), OptimizerKnob::kSmClock);
  EXPECT_THROW(parse_optimizer_knob("core_clock"), UsageError);
}

TEST(PowerLimitOptimizerTest, CandidatesStepDownFromTheLargestToTheSmallestLimit) {
  SimGpuModel model;
  model.min_limit_mw = 210'000;  // not on the 25 W grid: the minimum is still tried
  SimulatedTraining training({model});
  PowerLimitOptimizer optimizer(training.monitor(), quiet(Objective::energy()));
  const auto c = optimizer.candidate_limits_w();
  EXPECT_DOUBLE_EQ(c.front(), 700.0);
  EXPECT_DOUBLE_EQ(c[1], 675.0);
  EXPECT_DOUBLE_EQ(c[c.size() - 2], 225.0);
  EXPECT_DOUBLE_EQ(c.back(), 210.0);
}

TEST(PowerLimitOptimizerTest, EpochEndDropsAMeasurementInProgressAndContinuesNextEpoch) {
  SimulatedTraining training({SimGpuModel{}});
  PowerLimitOptimizer optimizer(training.monitor(), quiet(Objective::time()));
  // 8 steps per visit; epochs of 10 steps cut measurements short.
  for (int e = 0; e < 60 && optimizer.state() == PowerLimitOptimizer::State::kProfiling; ++e) {
    training.epoch(optimizer, 10);
  }
  ASSERT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
  // Two rounds, each visit two stretches of 3 steps (5 measured steps, split).
  for (const auto& row : optimizer.profile()) EXPECT_EQ(row.steps, 12);
  EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), 700.0);
}

TEST(PowerLimitOptimizerTest, RestoreAndDestructorPutTheOriginalLimitBack) {
  SimulatedTraining training({SimGpuModel{}, SimGpuModel{}});
  training.gpus()[1]->set_power_limit_mw(650'000);  // GPUs need not start equal
  {
    PowerLimitOptimizer optimizer(training.monitor(), quiet(Objective::energy()));
    training.epoch(optimizer, 600);
    EXPECT_NE(training.gpus()[0]->power_limit_mw(), 700'000u);
  }
  EXPECT_EQ(training.gpus()[0]->power_limit_mw(), 700'000u);
  EXPECT_EQ(training.gpus()[1]->power_limit_mw(), 650'000u);
}

TEST(PowerLimitOptimizerTest, ObserverModeNeverChangesALimit) {
  SimulatedTraining training({SimGpuModel{}});
  auto options = quiet(Objective::energy());
  options.observer = true;
  std::string report;
  options.log = [&](const std::string& text) { report += text; };
  PowerLimitOptimizer optimizer(training.monitor(), options);
  training.epoch(optimizer, 600);
  EXPECT_EQ(training.gpus()[0]->power_limit_mw(), 700'000u);
  EXPECT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
  EXPECT_NE(report.find("OBSERVER MODE"), std::string::npos) << report;
  EXPECT_NE(report.find("would choose"), std::string::npos) << report;
}

TEST(PowerLimitOptimizerTest, SavedProfileSkipsProfilingForTheSameJob) {
  testing::TempDir tmp;
  auto options = quiet(Objective::energy());
  options.profile_path = tmp.file("profiles.json");
  options.job_name = "resnet";
  options.batch_size = 128;
  double chosen = 0;
  {
    SimulatedTraining training({SimGpuModel{}});
    PowerLimitOptimizer optimizer(training.monitor(), options);
    training.epoch(optimizer, 600);
    chosen = *optimizer.chosen_limit_w();
  }
  {
    SimulatedTraining training({SimGpuModel{}});
    PowerLimitOptimizer optimizer(training.monitor(), options);
    EXPECT_TRUE(optimizer.from_saved_profile());
    EXPECT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
    training.step(optimizer);
    EXPECT_EQ(training.gpus()[0]->power_limit_mw(), static_cast<uint32_t>(chosen * 1000));
    // A changed objective reuses the saved rows: the fastest limit for time.
    auto for_time = options;
    for_time.objective = Objective::time();
    PowerLimitOptimizer again(training.monitor(), for_time);
    EXPECT_DOUBLE_EQ(*again.chosen_limit_w(), 700.0);
  }
  {
    SimulatedTraining training({SimGpuModel{}});
    auto other = options;
    other.batch_size = 256;  // another key: profile again
    PowerLimitOptimizer optimizer(training.monitor(), other);
    EXPECT_FALSE(optimizer.from_saved_profile());
    other.reprofile = true;
    other.batch_size = 128;
    PowerLimitOptimizer forced(training.monitor(), other);
    EXPECT_FALSE(forced.from_saved_profile());
  }
}

// What the batch-size service hands a recurrence: the limit alone. Training
// starts at it, and no step is spent on other limits.
TEST(PowerLimitOptimizerTest, AKnownLimitSkipsProfilingAndIsAppliedAtTheFirstStep) {
  SimulatedTraining training({SimGpuModel{}, SimGpuModel{}});
  auto options = quiet(Objective::energy());
  options.known_limit_w = 450.0;
  int profiled = 0;
  options.on_profiled = [&](const auto&) { ++profiled; };
  std::string report;
  options.log = [&](const std::string& text) { report += text; };
  {
    PowerLimitOptimizer optimizer(training.monitor(), options);
    EXPECT_TRUE(optimizer.from_caller());
    EXPECT_FALSE(optimizer.from_saved_profile());
    EXPECT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
    EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), 450.0);
    for (int i = 0; i < 200; ++i) {
      training.step(optimizer);
      for (const auto& gpu : training.gpus()) ASSERT_EQ(gpu->power_limit_mw(), 450'000u) << "step " << i;
    }
    EXPECT_TRUE(optimizer.profile().empty());
  }
  EXPECT_EQ(profiled, 0);
  for (const auto& gpu : training.gpus()) EXPECT_EQ(gpu->power_limit_mw(), 700'000u);  // restored
  EXPECT_NE(report.find("(limit from the caller)"), std::string::npos) << report;
  EXPECT_NE(report.find("uses 450 W, not profiled here"), std::string::npos) << report;
}

// A profile measured here goes to the caller once, when the choice is made;
// handed to the next run, it decides without profiling, by that run's own
// objective.
TEST(PowerLimitOptimizerTest, AMeasuredProfileGoesToTheCallerAndAKnownProfileDecidesTheNextRun) {
  testing::TempDir tmp;
  auto options = quiet(Objective::energy());
  options.profile_path = tmp.file("profiles.json");  // the file keeps working alongside
  std::vector<PowerLimitProfileRow> handed;
  int calls = 0;
  double chosen = 0;
  {
    SimulatedTraining training({SimGpuModel{}});
    PowerLimitOptimizer* self = nullptr;
    options.on_profiled = [&](const std::vector<PowerLimitProfileRow>& rows) {
      ++calls;
      handed = rows;
      // Outside the lock: the optimizer answers, and the choice is in place.
      ASSERT_EQ(self->state(), PowerLimitOptimizer::State::kDecided);
      EXPECT_EQ(training.gpus()[0]->power_limit_mw(), static_cast<uint32_t>(*self->chosen_limit_w() * 1000));
      EXPECT_EQ(self->profile().size(), rows.size());
    };
    PowerLimitOptimizer optimizer(training.monitor(), options);
    self = &optimizer;
    training.epoch(optimizer, 600);
    training.epoch(optimizer, 600);
    ASSERT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
    chosen = *optimizer.chosen_limit_w();
    EXPECT_EQ(handed.size(), optimizer.candidate_limits_w().size());
  }
  EXPECT_EQ(calls, 1);
  EXPECT_LT(chosen, 700.0);  // energy prefers a lower limit on the model
  EXPECT_TRUE(std::filesystem::exists(options.profile_path));

  SimulatedTraining training({SimGpuModel{}});
  auto next = quiet(Objective::energy());
  next.known_profile = handed;
  next.on_profiled = [&](const auto&) { ++calls; };
  PowerLimitOptimizer optimizer(training.monitor(), next);
  EXPECT_TRUE(optimizer.from_caller());
  EXPECT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided);
  EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), chosen);
  training.epoch(optimizer, 50);
  EXPECT_EQ(training.gpus()[0]->power_limit_mw(), static_cast<uint32_t>(chosen * 1000));
  EXPECT_EQ(calls, 1);
  auto for_time = next;
  for_time.objective = Objective::time();
  EXPECT_DOUBLE_EQ(*PowerLimitOptimizer(training.monitor(), for_time).chosen_limit_w(), 700.0);
  // The caller's profile wins over the saved file.
  next.profile_path = options.profile_path;
  EXPECT_FALSE(PowerLimitOptimizer(training.monitor(), next).from_saved_profile());
}

TEST(PowerLimitOptimizerTest, ObserverModeNeverAppliesAKnownLimitOrProfile) {
  SimulatedTraining training({SimGpuModel{}});
  auto options = quiet(Objective::energy());
  options.observer = true;
  std::string report;
  options.log = [&](const std::string& text) { report += text; };
  options.known_limit_w = 300.0;
  {
    PowerLimitOptimizer optimizer(training.monitor(), options);
    for (int i = 0; i < 50; ++i) {
      training.step(optimizer);
      ASSERT_EQ(training.gpus()[0]->power_limit_mw(), 700'000u) << "step " << i;
    }
    EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), 300.0);
  }
  EXPECT_NE(report.find("OBSERVER MODE"), std::string::npos) << report;
  EXPECT_NE(report.find("would use 300 W"), std::string::npos) << report;
  options.known_limit_w.reset();
  options.known_profile = {{700.0, 5, 0.1, 70.0, 700.0}, {300.0, 5, 0.2, 40.0, 200.0}};
  PowerLimitOptimizer optimizer(training.monitor(), options);
  EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), 300.0);
  training.epoch(optimizer, 50);
  EXPECT_EQ(training.gpus()[0]->power_limit_mw(), 700'000u);
}

TEST(PowerLimitOptimizerTest, RefusesKnownLimitsTheGpusCannotTakeAndContradictions) {
  SimulatedTraining training({SimGpuModel{}});
  auto expect_refused = [&](const PowerLimitOptimizerOptions& options, const std::string& part) {
    try {
      PowerLimitOptimizer optimizer(training.monitor(), options);
      ADD_FAILURE() << "accepted; expected: " << part;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto options = quiet(Objective::energy());
  options.known_limit_w = 150.0;
  expect_refused(options, "the known limit 150 W is outside the GPUs' limit range 200-700 W");
  options.known_limit_w = 750.0;
  expect_refused(options, "outside the GPUs' limit range");
  options.known_limit_w = 300.0;
  options.reprofile = true;
  expect_refused(options, "reprofile contradicts");
  options.reprofile = false;
  options.known_profile = {{300.0, 5, 0.1, 30.0, 300.0}};
  expect_refused(options, "not both");
  options.known_limit_w.reset();
  options.known_profile = {{300.0, 5, 0.0, 30.0, 300.0}};
  expect_refused(options, "row for 300 W needs a positive time");
  options.known_profile = {{100.0, 5, 0.1, 30.0, 300.0}};
  expect_refused(options, "the known profile's limit 100 W is outside");
  EXPECT_EQ(training.gpus()[0]->power_limit_mw(), 700'000u);
}

TEST(PowerLimitOptimizerTest, CorruptProfileFileIsAnErrorAndIsLeftAlone) {
  testing::TempDir tmp;
  testing::write_file(tmp.file("p.json"), "{not json");
  SimulatedTraining training({SimGpuModel{}});
  auto options = quiet(Objective::energy());
  options.profile_path = tmp.file("p.json");
  try {
    PowerLimitOptimizer optimizer(training.monitor(), options);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json' is not valid JSON"), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::read_file(tmp.file("p.json")), "{not json");
}

TEST(PowerLimitOptimizerTest, RejectsBadOptions) {
  SimulatedTraining training({SimGpuModel{}});
  auto options = quiet(Objective::cost(1.5));
  EXPECT_THROW(PowerLimitOptimizer(training.monitor(), options), UsageError);
  options = quiet(Objective::slowdown(0.9));
  EXPECT_THROW(PowerLimitOptimizer(training.monitor(), options), UsageError);
  options = quiet(Objective::energy());
  options.step_w = 0;
  EXPECT_THROW(PowerLimitOptimizer(training.monitor(), options), UsageError);
}

// Profiles measured by others on A40 and V100 GPUs (../shared/profile_data):
// per-limit windows with elapsed time and energy per GPU. The simulated GPUs
// replay them; the optimizer must pick what the data says directly.
TEST(PowerLimitOptimizerTest, PicksTheArgminOfMeasuredA40AndV100Profiles) {
  const std::string dir = std::string(JOULE_SOURCE_DIR) + "/../shared/profile_data";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no profile data at " << dir;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const CsvTable table = CsvTable::read(entry.path().string());
    table.require_columns({"window_name", "elapsed_time", "gpu0_energy"});
    int gpu_count = 0;
    while (table.has_column(fmt::format("gpu{}_energy", gpu_count))) ++gpu_count;
    std::vector<LimitMeasurement> direct;  // (limit, elapsed, energy of all GPUs)
    std::vector<SimGpuModel> models(gpu_count);
    double max_w = 0, min_w = 1e9, max_elapsed = 0;
    for (std::size_t i = 0; i < table.size(); ++i) {
      const auto row = table.row(i);
      const std::string& name = row.text("window_name");
      const double limit_w = std::stod(name.substr(name.rfind('_') + 1));
      double energy_j = 0;
      for (int g = 0; g < gpu_count; ++g) energy_j += row.number(fmt::format("gpu{}_energy", g));
      direct.push_back({limit_w, row.number("elapsed_time"), energy_j});
      max_w = std::max(max_w, limit_w);
      min_w = std::min(min_w, limit_w);
    }
    for (const auto& d : direct) {
      if (d.power_limit_w == max_w) max_elapsed = d.time_s;
    }
    for (std::size_t i = 0; i < table.size(); ++i) {
      const auto row = table.row(i);
      for (int g = 0; g < gpu_count; ++g) {
        const double elapsed = row.number("elapsed_time");
        models[g].measured[static_cast<uint32_t>(direct[i].power_limit_w * 1000)] = {
            row.number(fmt::format("gpu{}_energy", g)) / elapsed, max_elapsed / elapsed};
      }
    }
    for (auto& m : models) {
      m.name = entry.path().filename().string();
      m.min_limit_mw = static_cast<uint32_t>(min_w * 1000);
      m.max_limit_mw = m.default_limit_mw = static_cast<uint32_t>(max_w * 1000);
      m.idle_power_w = 0;
    }
    for (const Objective& objective :
         {Objective::time(), Objective::energy(), Objective::cost(0.5), Objective::slowdown(1.1)}) {
      SimulatedTraining training(models, 0.05);
      PowerLimitOptimizer optimizer(training.monitor(), quiet(objective));
      training.epoch(optimizer, 600);
      ASSERT_EQ(optimizer.state(), PowerLimitOptimizer::State::kDecided)
          << entry.path() << " " << objective.describe() << " " << (optimizer.noise_choice() ? optimizer.noise_choice()->summary : "");
      const double expected = direct[choose_power_limit(direct, objective, max_w * gpu_count)].power_limit_w;
      EXPECT_DOUBLE_EQ(*optimizer.chosen_limit_w(), expected) << entry.path() << " " << objective.describe();
    }
    ++files;
  }
  EXPECT_EQ(files, 12);
}

}  // namespace
}  // namespace joule
