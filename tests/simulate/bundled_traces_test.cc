// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Finding the bundled Zeus traces, and that they load.
#include "joule/simulate/bundled_traces.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/test_support.h"
#include "joule/error.h"
#include "joule/simulate/trace.h"

namespace joule {
namespace {

const std::string kSourceData = std::string(JOULE_SOURCE_DIR) + "/data";

void make_trace_set(const std::string& root) {
  std::filesystem::create_directories(root + "/zeus-nsdi23");
  testing::write_file(root + "/zeus-nsdi23/summary_train.csv", "x\n");
  testing::write_file(root + "/zeus-nsdi23/summary_power_h100.csv", "x\n");
}

TEST(BundledTracesTest, SearchOrderIsEnvironmentThenInstallThenSource) {
  testing::TempDir tmp;
  make_trace_set(tmp.file("env"));
  make_trace_set(tmp.file("prefix/share/joule"));
  const std::string exe = tmp.file("prefix/bin/joule");

  EXPECT_EQ(find_bundled_traces({tmp.file("env"), exe, kSourceData}).dir, tmp.file("env/zeus-nsdi23"));
  EXPECT_EQ(find_bundled_traces({std::nullopt, exe, kSourceData}).dir,
            tmp.file("prefix/share/joule/zeus-nsdi23"));
  EXPECT_EQ(find_bundled_traces({std::nullopt, tmp.file("elsewhere/bin/joule"), kSourceData}).dir,
            kSourceData + "/zeus-nsdi23");
}

TEST(BundledTracesTest, NothingFoundNamesEveryPlaceLooked) {
  testing::TempDir tmp;
  try {
    find_bundled_traces({std::nullopt, tmp.file("bin/joule"), tmp.file("src/data")});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(tmp.path() + "/share/joule/zeus-nsdi23 or " + tmp.path() + "/src/data/zeus-nsdi23"),
              std::string::npos) << message;
    EXPECT_NE(message.find("set JOULE_DATA_DIR"), std::string::npos) << message;
  }
  // A set $JOULE_DATA_DIR is never passed over for another place.
  try {
    find_bundled_traces({tmp.file("empty"), tmp.file("bin/joule"), kSourceData});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("JOULE_DATA_DIR=" + tmp.file("empty") + ": no zeus-nsdi23/summary_train.csv"),
              std::string::npos) << e.what();
  }
}

TEST(BundledTracesTest, GpusAreThePowerTracesPresent) {
  testing::TempDir tmp;
  make_trace_set(tmp.path());
  const BundledTraces traces = find_bundled_traces({tmp.path(), "", ""});
  EXPECT_EQ(traces.gpus(), std::vector<std::string>{"h100"});
  EXPECT_EQ(traces.power_path("h100"), tmp.file("zeus-nsdi23/summary_power_h100.csv"));
  EXPECT_THROW(traces.power_path("v100"), UsageError);
}

// Every workload of the paper loads from the bundled V100 and A40 traces.
TEST(BundledTracesTest, EveryWorkloadLoadsOnBothBundledGpus) {
  const BundledTraces traces = find_bundled_traces({kSourceData, "", ""});
  EXPECT_EQ(traces.gpus(), (std::vector<std::string>{"a40", "v100"}));
  for (const std::string gpu : {"v100", "a40"}) {
    for (const auto& spec : zeus_workloads()) {
      const WorkloadTrace t = load_workload(traces.train_path(), traces.power_path(gpu), spec);
      EXPECT_GE(t.batch_sizes.size(), 5u) << gpu << " " << spec.name;
    }
  }
}

}  // namespace
}  // namespace joule
