// `joule simulate` end to end.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;

const std::string kTraces = std::string(JOULE_SOURCE_DIR) + "/../shared/traces/zeus-nsdi23";

TEST(SimulateCliTest, RunsSyntheticWorkloadsWithoutTraces) {
  const auto r = run_process({JOULE_BINARY, "simulate", "--seeds", "1..3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SYNTHETIC"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("synthetic-cnn"), std::string::npos);
  EXPECT_NE(r.out.find("zeus"), std::string::npos);
  EXPECT_NE(r.out.find("grid"), std::string::npos);
}

TEST(SimulateCliTest, WritesOneRowPerRecurrenceForTheV100Traces) {
  if (!std::filesystem::exists(kTraces)) GTEST_SKIP() << "no traces at " << kTraces;
  testing::TempDir tmp;
  const auto r = run_process({JOULE_BINARY, "simulate", "--train-trace", kTraces + "/summary_train.csv",
                              "--power-trace", kTraces + "/summary_power_v100.csv", "--workload", "cifar100",
                              "--policy", "zeus", "--seeds", "1,2", "--out", tmp.file("r.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cifar100       accuracy >= 0.60     zeus"), std::string::npos) << r.out;
  const auto lines = testing::read_lines(tmp.file("r.csv"));
  // cifar100 on V100: 10 batch sizes x 7 limits x 2 = 140 recurrences, for
  // zeus and the default it is compared with, for 2 seeds.
  ASSERT_EQ(lines.size(), 1u + 140u * 2u * 2u);
  EXPECT_EQ(lines[0],
            "workload,policy,seed,recurrence,batch_size,power_limit_w,converged,stopped_early,epochs,time_s,energy_j,"
            "cost,regret");
  EXPECT_EQ(lines[1].rfind("cifar100,zeus,1,0,1024,", 0), 0u) << lines[1];
}

TEST(SimulateCliTest, BadInputIsNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--eta", "2"}, "eta 2 is outside [0, 1]"},
      {{"--beta", "1"}, "--beta 1 must be greater than 1"},
      {{"--policy", "random"}, "unknown policy 'random'"},
      {{"--seeds", "5..1"}, "--seeds: bad range '5..1'"},
      {{"--workload", "cifar100"}, "need --train-trace and --power-trace"},
      {{"--train-trace", "/nonexistent/t.csv", "--power-trace", "/nonexistent/p.csv"}, "cannot read '/nonexistent/t.csv'"},
      {{"--train-trace", kTraces + "/summary_train.csv", "--power-trace", kTraces + "/summary_power_v100.csv",
        "--workload", "mnist"},
       "unknown workload 'mnist'"},
      {{"--out", "/nonexistent/dir/r.csv"}, "cannot write '/nonexistent/dir/r.csv'"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {JOULE_BINARY, "simulate"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_process(argv);
    EXPECT_NE(r.exit_code, 0) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace joule
