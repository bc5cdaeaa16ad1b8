// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/simulate/trace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <tuple>

#include "common/test_support.h"
#include "joule/error.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

const WorkloadSpec kSpec = {"toy", "toy", "net", "sgd", 0.5, "acc >= 0.5", 32};

const char* kTrain =
    "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
    "toy,net,16,sgd,0.1,1,0.4,2\n"
    "toy,net,16,sgd,0.1,1,0.5,4\n"
    "toy,net,16,sgd,0.1,2,0.5,nan\n"
    "toy,net,32,sgd,0.1,1,0.5,3\n"
    "toy,net,32,sgd,0.1,2,0.5,5\n"
    "toy,net,32,sgd,0.1,2,0.6,9\n"
    "other,net,32,sgd,0.1,1,0.5,1\n";

const char* kPower =
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
    "toy,net,16,sgd,100,20,90\n"
    "toy,net,16,sgd,200,15,150\n"
    "toy,net,32,sgd,100,12,95\n"
    "toy,net,32,sgd,200,10,180\n";

struct Files {
  TempDir dir;
  std::string train = dir.file("train.csv"), power = dir.file("power.csv");
  Files(const std::string& train_text, const std::string& power_text) {
    write_file(train, train_text);
    write_file(power, power_text);
  }
};

std::string load_error(const std::string& train_text, const std::string& power_text, bool strict = false) {
  Files f(train_text, power_text);
  try {
    load_workload(f.train, f.power, kSpec, {strict});
  } catch (const Error& e) {
    // Report paths relative to the temporary directory.
    std::string message = e.what();
    for (std::size_t at; (at = message.find(f.dir.path() + "/")) != std::string::npos;) {
      message.erase(at, f.dir.path().size() + 1);
    }
    return message;
  }
  return "no error";
}

TEST(TraceTest, LoadsRunsEpochsAndPowerOfOneWorkload) {
  Files f(kTrain, kPower);
  const WorkloadTrace t = load_workload(f.train, f.power, kSpec);
  EXPECT_EQ(t.batch_sizes, (std::vector<int>{16, 32}));
  ASSERT_EQ(t.epochs.at(16).size(), 2u);
  EXPECT_EQ(t.epochs.at(16)[0], 4);
  EXPECT_FALSE(t.epochs.at(16)[1].has_value());  // nan: never reached
  EXPECT_EQ(t.epochs.at(32)[1], 5);
  EXPECT_EQ(t.max_epochs, 9);
  EXPECT_EQ(t.power_limits_w, (std::vector<double>{100, 200}));
  EXPECT_DOUBLE_EQ(t.max_power_w, 200);
  EXPECT_DOUBLE_EQ(t.power.at(32)[1].avg_power_w, 180);
  EXPECT_TRUE(t.notes.empty());
}

TEST(TraceTest, ValidationErrorsNameFileLineAndColumn) {
  const std::string header = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n";
  EXPECT_EQ(load_error("dataset,network,batch_size,optimizer,learning_rate,target_metric,target_epoch\n", kPower),
            "train.csv:1: missing column: run");
  EXPECT_EQ(load_error(header + "toy,net,sixteen,sgd,0.1,1,0.5,4\n", kPower),
            "train.csv:2: column 'batch_size' (column 3): 'sixteen' is not a number");
  EXPECT_EQ(load_error(header + "toy,net,16,sgd,0.1,1,0.5,4.5\n", kPower),
            "train.csv:2: column 'target_epoch' (column 8): '4.5' is not a whole number");
  EXPECT_EQ(load_error(header + "toy,net,16,sgd,0.1,1,0.5\n", kPower), "train.csv:2: 7 fields, but the header has 8");
  EXPECT_EQ(load_error(header + "other,net,16,sgd,0.1,1,0.5,4\n", kPower),
            "train.csv: no rows for dataset=toy, network=net, optimizer=sgd");
  EXPECT_EQ(load_error(kTrain, std::string(kPower) + "toy,net,32,sgd,150,11,-3\n"),
            "power.csv:6: column 'average_power' (column 7): must be positive");
  EXPECT_EQ(load_error(kTrain, std::string(kPower) + "toy,net,64,sgd,100,11,100\n", /*strict=*/true),
            "power.csv:6: batch size 64 has no row for power limit 200 W (other batch sizes have one)");
  EXPECT_EQ(load_error("", kPower), "train.csv: empty file (no header row)");
}

TEST(TraceTest, BatchSizeInOneTraceOnlyIsANoteOrInStrictModeAnError) {
  const std::string train = std::string(kTrain) + "toy,net,64,sgd,0.1,1,0.5,2\n";
  EXPECT_EQ(load_error(train, kPower, /*strict=*/true),
            "train.csv:9: batch size 64 of dataset=toy, network=net, optimizer=sgd has no power data in power.csv");
  Files f(train, kPower);
  const WorkloadTrace t = load_workload(f.train, f.power, kSpec);
  EXPECT_EQ(t.batch_sizes, (std::vector<int>{16, 32}));
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("batch size 64"), std::string::npos);
  EXPECT_EQ(t.note_kinds, std::vector<TraceNoteKind>{TraceNoteKind::kNoPowerData});
}

// Real traces: a failed run leaves a batch size without some power limits.
TEST(TraceTest, ABatchSizeMissingPowerLimitsIsSimulatedOverThoseItHasOrInStrictModeAnError) {
  const std::string power = std::string(kPower) + "toy,net,16,sgd,150,17,120\n" + "toy,net,32,sgd,150,11,140\n" +
                            "toy,net,64,sgd,100,11,100\n";
  const std::string train = std::string(kTrain) + "toy,net,64,sgd,0.1,1,0.5,2\n";
  EXPECT_EQ(load_error(train, power, /*strict=*/true),
            "power.csv:8: batch size 64 has no row for power limits 150, 200 W (other batch sizes have one)");
  Files f(train, power);
  const WorkloadTrace t = load_workload(f.train, f.power, kSpec);
  EXPECT_EQ(t.batch_sizes, (std::vector<int>{16, 32, 64}));
  EXPECT_EQ(t.power_limits_w, (std::vector<double>{100, 150, 200}));
  ASSERT_EQ(t.power.at(64).size(), 1u);
  EXPECT_DOUBLE_EQ(max_power_limit_w(t, 64), 100);
  EXPECT_DOUBLE_EQ(max_power_limit_w(t, 32), 200);
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("power.csv:8: batch size 64 has no row for power limits 150, 200 W"), std::string::npos);
  EXPECT_NE(t.notes[0].find("simulated over the 1 limit it has"), std::string::npos) << t.notes[0];
  EXPECT_EQ(t.note_kinds, std::vector<TraceNoteKind>{TraceNoteKind::kMissingPowerLimits});
}

// Real traces: on a GPU with less memory the default batch size never ran.
TEST(TraceTest, AnAbsentDefaultBatchSizeFallsBackToTheLargestBelowItOrInStrictModeIsAnError) {
  for (const auto& [requested, expected, why] : std::vector<std::tuple<int, int, std::string>>{
           {24, 16, "the largest below it"}, {64, 32, "the largest below it"}, {8, 16, "none is below it: the smallest"}}) {
    WorkloadSpec spec = kSpec;
    spec.default_batch_size = requested;
    Files f(kTrain, kPower);
    EXPECT_THROW(load_workload(f.train, f.power, spec, {true}), Error);
    const WorkloadTrace t = load_workload(f.train, f.power, spec);
    EXPECT_EQ(t.default_batch_size, expected) << requested;
    EXPECT_EQ(t.spec.default_batch_size, requested);  // what the user asked for stays visible
    ASSERT_EQ(t.notes.size(), 1u);
    EXPECT_EQ(t.notes[0], fmt::format("the default batch size {} of workload 'toy' is not in both traces; {} stands "
                                      "in ({})", requested, expected, why));
  }
  Files f(kTrain, kPower);
  EXPECT_EQ(load_workload(f.train, f.power, kSpec).default_batch_size, 32);
}

TEST(TraceTest, KnowsTheZeusWorkloads) {
  EXPECT_EQ(zeus_workloads().size(), 6u);
  EXPECT_EQ(find_workload("librispeech").default_batch_size, 192);
  EXPECT_EQ(find_workload("movielens-1m").network, "ncf");
  EXPECT_THROW(find_workload("mnist"), UsageError);
}

}  // namespace
}  // namespace joule
