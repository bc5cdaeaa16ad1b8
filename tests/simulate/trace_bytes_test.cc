// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Issue 47: traces are outside bytes. A line that is not UTF-8 was read
// (a row of another workload skipped unseen, a group name handed on raw),
// and numbers too large for their type were cast (undefined past 2^63,
// wrapped past 2^31).
#include <gtest/gtest.h>

#include <string>

#include "common/test_support.h"
#include "joule/common/utf8.h"
#include "joule/error.h"
#include "joule/simulate/cluster.h"
#include "joule/simulate/trace.h"

namespace joule {
namespace {

using testing::TempDir;
using testing::write_file;

const WorkloadSpec kSpec = {"toy", "toy", "net", "sgd", 0.5, "acc >= 0.5", 32};
const std::string kTrainHeader = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n";
const std::string kTrain = kTrainHeader + "toy,net,32,sgd,0.1,1,0.5,3\n";
const std::string kPower =
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
    "toy,net,32,sgd,100,12,95\ntoy,net,32,sgd,200,10,180\n";

// What load_workload says of the two texts, paths relative to the directory.
std::string load_error(const std::string& train, const std::string& power) {
  TempDir dir;
  write_file(dir.file("train.csv"), train);
  write_file(dir.file("power.csv"), power);
  try {
    load_workload(dir.file("train.csv"), dir.file("power.csv"), kSpec);
  } catch (const Error& e) {
    std::string message = e.what();
    for (std::size_t at; (at = message.find(dir.path() + "/")) != std::string::npos;) message.erase(at, dir.path().size() + 1);
    return message;
  }
  return "no error";
}

TEST(TraceBytesTest, ALineThatIsNotUtf8IsRefusedNamingFileLineAndByte) {
  // A row of another workload: it was skipped, its bytes never looked at.
  EXPECT_EQ(load_error(kTrain + "other,n\xff" "et,32,sgd,0.1,1,0.5,3\n", kPower),
            "train.csv:3: byte 8 of the line (0xff) is not UTF-8");
  EXPECT_EQ(load_error(kTrain, kPower + "toy,net,32,sgd,150,11,\xc3\n"), "power.csv:4: byte 23 of the line (0xc3) is not UTF-8");
  // A header's name too; valid UTF-8 beyond ASCII is a name like any other.
  EXPECT_EQ(load_error("data\xe9set" + kTrain.substr(7), kPower), "train.csv:1: byte 5 of the line (0xe9) is not UTF-8");
  EXPECT_EQ(load_error(kTrain + "caf\xc3\xa9,r\xc3\xa9seau,32,sgd,0.1,1,0.5,3\n", kPower), "no error");

  // A cluster trace's group name, handed on to the replay and its outputs.
  TempDir dir;
  write_file(dir.file("raw.csv"), "group,submit_s,duration_s\ng1,0,100\nstudio-\xff,10,200\n");
  try {
    ClusterTraceReader reader(dir.file("raw.csv"), {{"toy", "toy", 100.0}});
    ClusterJob job;
    while (reader.next(job)) {
    }
    FAIL() << "read a group name that is not UTF-8";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("raw.csv") + ":3: byte 8 of the line (0xff) is not UTF-8");
  }
}

TEST(TraceBytesTest, NumbersTooLargeForTheirTypeAreRefusedWhereTheyStand) {
  EXPECT_EQ(load_error(kTrain + "toy,net,1e300,sgd,0.1,1,0.5,3\n", kPower),
            "train.csv:3: column 'batch_size' (column 3): '1e300' is outside [-2^53, 2^53]");
  // 2^32 + 16 was read as batch size 16.
  EXPECT_EQ(load_error(kTrain + "toy,net,4294967312,sgd,0.1,1,0.5,3\n", kPower),
            "train.csv:3: column 'batch_size' (column 3): 4294967312 is larger than 2147483647");
  EXPECT_EQ(load_error(kTrain + "toy,net,32,sgd,0.1,2,0.5,2147483648\n", kPower),
            "train.csv:3: column 'target_epoch' (column 8): 2147483648 is larger than 2147483647");
  EXPECT_EQ(load_error(kTrain, kPower + "toy,net,4294967312,sgd,150,11,100\n"),
            "power.csv:4: column 'batch_size' (column 3): 4294967312 is larger than 2147483647");
}

// The real binary: `joule simulate` on such a trace names the file and the
// line, in text that is UTF-8 (exit 1, the workload could not be simulated).
TEST(TraceBytesCliTest, SimulateOnATraceThatIsNotUtf8NamesFileAndLine) {
  TempDir dir;
  write_file(dir.file("train.csv"), kTrain + "toy,net,32,sgd,0.1,2,0.5,\xff\n");
  write_file(dir.file("power.csv"), kPower);
  const auto r = testing::run_process({JOULE_BINARY, "simulate", "--train-trace", dir.file("train.csv"), "--power-trace",
                                       dir.file("power.csv"), "--dataset", "toy", "--network", "net", "--optimizer",
                                       "sgd", "--target", "0.5", "--default-batch-size", "32"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(dir.file("train.csv") + ":3: byte 26 of the line (0xff) is not UTF-8"), std::string::npos) << r.err;
  EXPECT_TRUE(is_valid_utf8(r.err)) << r.err;
}

}  // namespace
}  // namespace joule
