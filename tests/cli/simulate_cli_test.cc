// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule simulate` end to end.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "common/test_support.h"
#include "joule/simulate/trace.h"

namespace joule {
namespace {

using testing::run_process;

// The traces bundled in the source tree (data/).
const std::string kTraces = std::string(JOULE_SOURCE_DIR) + "/data/zeus-nsdi23";

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream items(line);
  for (std::string field; std::getline(items, field, ',');) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

TEST(SimulateCliTest, RunsSyntheticWorkloadsOnRequest) {
  const auto r = run_process({JOULE_BINARY, "simulate", "--synthetic", "--seeds", "1..3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SYNTHETIC"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("synthetic-cnn"), std::string::npos);
  EXPECT_NE(r.out.find("zeus"), std::string::npos);
  EXPECT_NE(r.out.find("grid"), std::string::npos);
}

TEST(SimulateCliTest, WritesOneRowPerRecurrenceForTheV100Traces) {
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
            "cost,regret,default_batch_size,window,drifted");
  EXPECT_EQ(lines[1].rfind("cifar100,zeus,1,0,1024,", 0), 0u) << lines[1];
}

// What real traces of another GPU have: the default batch size (1024) never
// ran, and one batch size lacks a power limit. Only cifar100 has rows.
struct RealisticTraces {
  testing::TempDir dir;
  std::string train = dir.file("train.csv"), power = dir.file("power.csv");
  RealisticTraces() {
    std::string t = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n";
    for (const int b : {256, 512}) {
      for (int run = 1; run <= 3; ++run) {
        t += fmt::format("cifar100,shufflenetv2,{},adadelta,0.1,{},0.6,{}\n", b, run, b == 256 ? 20 + run : 30 + run);
      }
    }
    testing::write_file(train, t);
    testing::write_file(power,
                        "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
                        "cifar100,shufflenetv2,256,adadelta,100,30,95\n"
                        "cifar100,shufflenetv2,256,adadelta,150,24,140\n"
                        "cifar100,shufflenetv2,256,adadelta,200,22,170\n"
                        "cifar100,shufflenetv2,512,adadelta,100,20,98\n"
                        "cifar100,shufflenetv2,512,adadelta,150,15,145\n");
  }
};

TEST(SimulateCliTest, RealTracesWithoutTheDefaultOrWithAMissingLimitRunWithNotes) {
  RealisticTraces traces;
  const auto r = run_process({JOULE_BINARY, "simulate", "--train-trace", traces.train, "--power-trace", traces.power,
                              "--workload", "cifar100", "--seeds", "1..3", "--out", traces.dir.file("r.csv"),
                              "--verbose"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the default batch size 1024 of workload 'cifar100' is not in both traces; 512 stands in "
                       "(the largest below it)"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("batch size 512 has no row for power limit 200 W (other batch sizes have one); simulated over "
                       "the 2 limits it has"),
            std::string::npos) << r.err;
  EXPECT_NE(r.out.find("cifar100       accuracy >= 0.60     zeus"), std::string::npos) << r.out;
  const auto lines = testing::read_lines(traces.dir.file("r.csv"));
  ASSERT_GT(lines.size(), 1u);
  const std::vector<std::string> header = split_csv_line(lines[0]);
  const auto column = std::find(header.begin(), header.end(), "default_batch_size") - header.begin();
  for (std::size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(split_csv_line(lines[i]).at(column), "512") << lines[i];
    if (lines[i].find(",default,") != std::string::npos) {
      EXPECT_NE(lines[i].find(",512,150,"), std::string::npos);
    }
    EXPECT_EQ(lines[i].find(",512,200,"), std::string::npos) << lines[i];  // no row, never simulated
  }

  const auto strict = run_process({JOULE_BINARY, "simulate", "--train-trace", traces.train, "--power-trace",
                                   traces.power, "--workload", "cifar100", "--strict"});
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_NE(strict.err.find("batch size 512 has no row for power limit 200 W"), std::string::npos) << strict.err;
}

TEST(SimulateCliTest, AllWorkloadsRunThoseThatCanAndNameTheOthers) {
  RealisticTraces traces;
  const auto r = run_process(
      {JOULE_BINARY, "simulate", "--train-trace", traces.train, "--power-trace", traces.power, "--workload", "all"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("cifar100       accuracy >= 0.60     zeus"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("joule: error: workload 'librispeech' cannot be simulated: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no rows for dataset=librispeech"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("joule: 5 of 6 workloads could not be simulated"), std::string::npos) << r.err;
}

// A drift on the synthetic workloads: zeus with and without a window side by
// side, the stale column, the rows marked in --out, and an HTML page whose
// every chart draws in a real browser.
TEST(SimulateCliTest, DriftComparesZeusWithAndWithoutAWindowAndDrawsIt) {
  testing::TempDir tmp;
  const auto r = run_process({JOULE_BINARY, "simulate", "--synthetic", "--seeds", "1..3", "--recurrences", "60", "--drift-after",
                              "30", "--window", "8", "--out", tmp.file("r.csv"), "--html", tmp.file("r.html")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("drift after 30 recurrences (epochs x 2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" stale "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("synthetic-cnn  synthetic target     zeus window 8 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("after drift b="), std::string::npos) << r.out;
  const auto lines = testing::read_lines(tmp.file("r.csv"));
  // 2 workloads x (zeus, zeus window 8, grid, default) x 3 seeds x 60.
  ASSERT_EQ(lines.size(), 1u + 2u * 4u * 3u * 60u);
  const std::vector<std::string> header = split_csv_line(lines[0]);
  ASSERT_EQ(header.back(), "drifted");
  ASSERT_EQ(header[header.size() - 2], "window");
  std::map<std::string, int> drifted_rows;  // by policy and window
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto fields = split_csv_line(lines[i]);
    ASSERT_EQ(fields.size(), header.size()) << lines[i];
    const bool drifted = fields.back() == "1";
    EXPECT_EQ(drifted, std::stoi(fields[3]) >= 30) << lines[i];
    drifted_rows[fields[1] + "/" + fields[fields.size() - 2]] += drifted;
  }
  const std::map<std::string, int> expected = {{"zeus/", 180}, {"zeus/8", 180}, {"grid/", 180}, {"default/", 180}};
  EXPECT_EQ(drifted_rows, expected);
  const std::string html = testing::read_file(tmp.file("r.html"));
  // Made-up workloads are said at the top of the page, framed.
  const auto warning = html.find("<p class=\"simulated\">SYNTHETIC workloads: joule made these traces up");
  ASSERT_NE(warning, std::string::npos) << html.substr(0, 4000);
  EXPECT_LT(warning, html.find("<svg"));
  EXPECT_NE(html.find("zeus window 8"), std::string::npos);
  EXPECT_NE(html.find("cumulative regret"), std::string::npos);
  // The page's table has the text's columns: stale, and the optimum after the drift.
  EXPECT_NE(html.find("<th>at</th><th>stale</th><th>optimal</th>"), std::string::npos);
  EXPECT_NE(html.find(", after drift b="), std::string::npos);
  const std::string body = testing::chromium_body_tag(tmp.file("r.html"), tmp);
  if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
  // Two bar charts, then per workload: regret, batch size, a search path per
  // policy but Default (zeus, zeus window 8, grid).
  EXPECT_EQ(testing::tag_attribute(body, "data-plots"), "12") << body;
  EXPECT_EQ(testing::tag_attribute(body, "data-plots-ok"), "12") << body;
  EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << body;
}

// A run that fails after its outputs were opened leaves what was there.
TEST(SimulateCliTest, AFailedRunLeavesEarlierOutputsAlone) {
  testing::TempDir tmp;
  testing::write_file(tmp.file("r.html"), "earlier report");
  const auto r = run_process({JOULE_BINARY, "simulate", "--workload", "cifar100,mnist", "--html", tmp.file("r.html")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown workload 'mnist'"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_file(tmp.file("r.html")), "earlier report");
  EXPECT_FALSE(std::filesystem::exists(tmp.file("r.html.partial")));
}

TEST(SimulateCliTest, BadInputIsNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--eta", "2"}, "--eta: 2 is outside [0, 1]"},
      {{"--beta", "1"}, "--beta: 1 is outside (1, 100]"},
      {{"--policy", "random"}, "unknown policy 'random'"},
      {{"--seeds", "5..1"}, "--seeds: bad range '5..1'"},
      {{"--synthetic", "--workload", "cifar100"}, "--synthetic runs the built-in synthetic workloads"},
      {{"--gpu", "p100"}, "no bundled power trace for GPU 'p100'"},
      {{"--gpu", "a40", "--power-trace", kTraces + "/summary_power_a40.csv"}, "--gpu and --power-trace both"},
      {{"--train-trace", "/nonexistent/t.csv", "--power-trace", "/nonexistent/p.csv"}, "cannot read '/nonexistent/t.csv'"},
      {{"--train-trace", kTraces + "/summary_train.csv", "--power-trace", kTraces + "/summary_power_v100.csv",
        "--workload", "mnist"},
       "unknown workload 'mnist'"},
      {{"--out", "/nonexistent/dir/r.csv"}, "cannot write '/nonexistent/dir/r.csv'"},
      {{"--html", "/nonexistent/dir/r.html"}, "cannot write '/nonexistent/dir/r.html'"},
      {{"--train-trace", "/tmp", "--power-trace", kTraces + "/summary_power_v100.csv"},
       "cannot read '/tmp': it is a directory, a file is expected"},
      {{"--drift-after", "0"}, "--drift-after: 0 is outside [1, 1000000]"},
      {{"--drift-after", "5", "--drift-scale", "x"}, "--drift-scale: factor 'x' is not a number in (0, 1000]"},
      {{"--drift-after", "5", "--drift-scale", "64=2,abc"}, "--drift-scale: 'abc' is not B=F"},
      {{"--synthetic", "--drift-after", "5", "--drift-scale", "48=2"}, "drift: workload 'synthetic-cnn' has no batch size 48"},
      {{"--window", "0"}, "--window: 0 is outside [1, 1000000]"},
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

// A tiny data directory in the bundled layout (zeus-nsdi23/...), holding the
// RealisticTraces files as its V100 traces.
struct TinyDataDir {
  RealisticTraces traces;
  std::string root;
  explicit TinyDataDir(const std::string& data_root) : root(data_root) {
    std::filesystem::create_directories(root + "/zeus-nsdi23");
    std::filesystem::copy_file(traces.train, root + "/zeus-nsdi23/summary_train.csv");
    std::filesystem::copy_file(traces.power, root + "/zeus-nsdi23/summary_power_v100.csv");
  }
};

// What a fresh clone runs: no trace flag, no ../shared, no $JOULE_DATA_DIR.
TEST(SimulateCliTest, BundledTracesRunWithoutTraceFlags) {
  testing::TempDir elsewhere;  // the working directory must not matter
  for (const std::string gpu : {"v100", "a40"}) {
    const auto r = run_process({"/bin/sh", "-c", "cd " + elsewhere.path() + " && exec " + JOULE_BINARY +
                                                     " simulate --gpu " + gpu + " --policy zeus --seeds 1,2"},
                               {{"JOULE_DATA_DIR", ""}});
    ASSERT_EQ(r.exit_code, 0) << gpu << ": " << r.err;
    EXPECT_NE(r.out.find("bundled traces, GPU " + gpu + " in "), std::string::npos) << r.out;
    for (const auto& spec : zeus_workloads()) {
      EXPECT_NE(r.out.find(fmt::format("\n{:<14} {:<20} zeus", spec.name, spec.target_text)), std::string::npos)
          << gpu << " " << spec.name << "\n" << r.out;
    }
  }
  // The default is the V100: the same output as naming it.
  const auto plain = run_process({JOULE_BINARY, "simulate", "--workload", "squad", "--seeds", "1..2"});
  const auto v100 = run_process({JOULE_BINARY, "simulate", "--workload", "squad", "--seeds", "1..2", "--gpu", "v100"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, v100.out);
  // and the same figures as the files given explicitly (only the header differs).
  const auto explicit_files =
      run_process({JOULE_BINARY, "simulate", "--workload", "squad", "--seeds", "1..2", "--train-trace",
                   kTraces + "/summary_train.csv", "--power-trace", kTraces + "/summary_power_v100.csv"});
  ASSERT_EQ(explicit_files.exit_code, 0) << explicit_files.err;
  EXPECT_EQ(plain.out.substr(plain.out.find('\n')), explicit_files.out.substr(explicit_files.out.find('\n')));
}

TEST(SimulateCliTest, DataDirFromTheEnvironmentWins) {
  testing::TempDir tmp;
  TinyDataDir data(tmp.path() + "/data");
  const auto r = run_process({JOULE_BINARY, "simulate", "--workload", "cifar100", "--seeds", "1", "--verbose"},
                             {{"JOULE_DATA_DIR", data.root}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bundled traces, GPU v100 in " + data.root + "/zeus-nsdi23"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("512 stands in"), std::string::npos) << r.err;  // the tiny traces, not the real ones

  // A40 is not in that directory, and it is the only place looked.
  const auto a40 = run_process({JOULE_BINARY, "simulate", "--gpu", "a40"}, {{"JOULE_DATA_DIR", data.root}});
  EXPECT_EQ(a40.exit_code, 2);
  EXPECT_NE(a40.err.find("no bundled power trace for GPU 'a40' in " + data.root + "/zeus-nsdi23 (bundled: v100)"),
            std::string::npos) << a40.err;
}

TEST(SimulateCliTest, MissingDataDirIsNamed) {
  const auto r = run_process({JOULE_BINARY, "simulate"}, {{"JOULE_DATA_DIR", "/nonexistent/joule-data"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("JOULE_DATA_DIR=/nonexistent/joule-data: no zeus-nsdi23/summary_train.csv there"),
            std::string::npos) << r.err;
  // Explicit files need no data directory.
  const auto files = run_process({JOULE_BINARY, "simulate", "--workload", "squad", "--train-trace",
                                  kTraces + "/summary_train.csv", "--power-trace", kTraces + "/summary_power_v100.csv"},
                                 {{"JOULE_DATA_DIR", "/nonexistent/joule-data"}});
  EXPECT_EQ(files.exit_code, 0) << files.err;
}

// An installed joule (<prefix>/bin/joule) finds <prefix>/share/joule before
// the source tree it was built from.
TEST(SimulateCliTest, InstalledLayoutIsFoundBesideTheExecutable) {
  testing::TempDir prefix;
  std::filesystem::create_directories(prefix.path() + "/bin");
  std::filesystem::copy_file(JOULE_BINARY, prefix.path() + "/bin/joule");
  TinyDataDir data(prefix.path() + "/share/joule");
  const auto r = run_process({prefix.path() + "/bin/joule", "simulate", "--workload", "cifar100", "--seeds", "1", "--verbose"},
                             {{"JOULE_DATA_DIR", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("in " + prefix.path() + "/share/joule/zeus-nsdi23"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("512 stands in"), std::string::npos) << r.err;
}

// One row of the translation table: M, regret scratch/translated, energy
// scratch/translated.
struct TranslationRow {
  int m = 0;
  double regret_scratch = 0, regret_translated = 0, energy_scratch = 0, energy_translated = 0;
};

// The rows of `workload` in `joule simulate --learned-on` output.
std::vector<TranslationRow> translation_rows(const std::string& out, const std::string& workload) {
  std::vector<TranslationRow> rows;
  std::istringstream lines(out);
  bool in_workload = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first == workload) {
      in_workload = true;
      fields.str(line.substr(workload.size()));
      fields.clear();
    } else if (!line.empty() && line[0] != ' ') {
      in_workload = false;
    }
    if (!in_workload || line.find("optimal on") != std::string::npos) continue;
    if (first != workload) {
      fields.str(line);
      fields.clear();
    }
    TranslationRow row;
    double ratio = 0;
    if (fields >> row.m >> row.regret_scratch >> row.regret_translated >> ratio >> row.energy_scratch >>
        row.energy_translated) {
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(SimulateCliTest, TranslationFromV100ToA40OnTheBundledTraces) {
  const auto r = run_process({JOULE_BINARY, "simulate", "--gpu", "a40", "--learned-on", "v100", "--seeds", "1..10"},
                             {{"JOULE_DATA_DIR", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("learned on v100 (20 recurrences, zeus), deployed on a40 (20), costs translated with the a40 "
                       "power trace; eta 0.5, beta 2, seeds 1..10"),
            std::string::npos) << r.out;
  for (const auto& spec : zeus_workloads()) {
    const auto rows = translation_rows(r.out, spec.name);
    ASSERT_EQ(rows.size(), 3u) << spec.name << "\n" << r.out;
    EXPECT_EQ(rows[0].m, 5);
    EXPECT_EQ(rows[1].m, 10);
    EXPECT_EQ(rows[2].m, 20);
    for (const auto& row : rows) {
      EXPECT_GT(row.energy_scratch, 0) << spec.name;
      EXPECT_GT(row.energy_translated, 0) << spec.name;
    }
  }
  // Where V100 and A40 rank batch sizes alike (their epoch-cost ratio varies
  // little across sizes) translation must pay off from the first recurrences:
  // checked robust over seeds 1-10, 11-40 and 41-100.
  for (const std::string workload : {"cifar100", "sentiment140", "movielens"}) {
    for (const auto& row : translation_rows(r.out, workload)) {
      EXPECT_LT(row.regret_translated, row.regret_scratch) << workload << " M=" << row.m;
      EXPECT_LT(row.energy_translated, row.energy_scratch) << workload << " M=" << row.m;
    }
  }
  // imagenet's 512 fits only the A40's memory: it starts unexplored. V100's
  // best librispeech size, 48, has no A40 row: dropped.
  EXPECT_NE(r.out.find("unexplored b=512"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dropped b=12,24,48,"), std::string::npos) << r.out;
}

TEST(SimulateCliTest, TranslationWithProfiledSizesAndBadInput) {
  const auto profiled = run_process({JOULE_BINARY, "simulate", "--gpu", "a40", "--learned-on", "v100", "--workload",
                                     "squad", "--translate-with", "profiled:2", "--deploy-recurrences", "8"});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_NE(profiled.out.find("costs translated with 2 profiled batch sizes"), std::string::npos) << profiled.out;
  const auto rows = translation_rows(profiled.out, "squad");
  ASSERT_EQ(rows.size(), 2u) << profiled.out;
  EXPECT_EQ(rows[0].m, 5);
  EXPECT_EQ(rows[1].m, 8);

  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--learned-on", "p100"}, "no bundled power trace for GPU 'p100'"},
      {{"--learned-on", "v100", "--translate-with", "guess"}, "--translate-with: 'guess' is not trace, profiled:N"},
      {{"--learned-on", "v100", "--translate-with", "profiled:0"}, "--translate-with: profiled:0 is outside [1, 1000]"},
      {{"--learned-on", "v100", "--workload", "squad", "--translate-with", "sizes:7"},
       "profiled batch size 7 of 'squad' is not run on both GPUs"},
      {{"--learned-on", "v100", "--policy", "grid"}, "--policy does not apply with --learned-on"},
      {{"--learned-on", "v100", "--deploy-recurrences", "0"}, "--deploy-recurrences: 0 is outside [1, 100000]"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv = {JOULE_BINARY, "simulate", "--gpu", "a40"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2) << message << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// The notes on what the bundled V100 traces lack: one line of counts, after
// any real error; each note with file and line under --verbose.
TEST(SimulateCliTest, NotesOnTheTracesAreOneLineAfterErrors) {
  const auto r = run_process({JOULE_BINARY, "simulate", "--workload", "librispeech,imagenet", "--policy", "zeus"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err,
            "joule: note: the traces lack some rows, 7 batch sizes (left out, no power data: 4; left out, no training "
            "runs: 3; by workload: librispeech 2, imagenet 5); --verbose lists each with file and line, --strict makes "
            "them errors\n");
  const auto verbose =
      run_process({JOULE_BINARY, "simulate", "--workload", "librispeech,imagenet", "--policy", "zeus", "--verbose"});
  ASSERT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_EQ(std::count(verbose.err.begin(), verbose.err.end(), '\n'), 7) << verbose.err;
  EXPECT_NE(verbose.err.find("summary_train.csv:1739: batch size 256 of dataset=librispeech"), std::string::npos)
      << verbose.err;
  EXPECT_EQ(r.out, verbose.out);

  // Cluster replay says the same once, after opening its trace; a missing
  // trace is the only thing said.
  const auto replay = run_process({JOULE_BINARY, "simulate", "--cluster",
                                   std::string(JOULE_SOURCE_DIR) + "/data/cluster/example_groups.csv", "--policy", "zeus"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(std::count(replay.err.begin(), replay.err.end(), '\n'), 1) << replay.err;
  EXPECT_EQ(replay.err.rfind("joule: note: the traces lack some rows, 11 batch sizes (", 0), 0u) << replay.err;
  const auto cluster = run_process({JOULE_BINARY, "simulate", "--cluster", "/nonexistent/groups.csv"});
  EXPECT_EQ(cluster.exit_code, 1);
  EXPECT_EQ(cluster.err, "joule: error: cannot read '/nonexistent/groups.csv': No such file or directory\n");
}

// The <svg> charts of one kind on a simulation page, in page order.
std::vector<std::string> charts_of(const std::string& html, const std::string& kind) {
  std::vector<std::string> charts;
  // The desk drawings (each chart has a phone drawing after it).
  const std::string open = "<svg class=\"plot desk\" data-chart=\"" + kind + "\"";
  for (std::size_t at = html.find(open); at != std::string::npos; at = html.find(open, at + 1)) {
    charts.push_back(html.substr(at, html.find("</svg>", at) - at));
  }
  return charts;
}

// Every value of `attribute="..."` in `svg`, in order.
std::vector<std::string> attributes(const std::string& svg, const std::string& attribute) {
  std::vector<std::string> values;
  const std::string key = " " + attribute + "=\"";
  for (std::size_t at = svg.find(key); at != std::string::npos; at = svg.find(key, at + 1)) {
    const std::size_t from = at + key.size();
    values.push_back(svg.substr(from, svg.find('"', from) - from));
  }
  return values;
}

// The tick values on one axis ("x" or "y"), as numbers ("150 W" -> 150).
std::vector<double> ticks(const std::string& svg, const std::string& axis) {
  std::vector<double> values;
  const std::string key = "data-axis=\"" + axis + "\"";
  for (std::size_t at = svg.find(key); at != std::string::npos; at = svg.find(key, at + 1)) {
    const std::size_t from = svg.find('>', at) + 1;
    values.push_back(std::stod(svg.substr(from, svg.find('<', from) - from)));
  }
  return values;
}

// What issue 34 found on the page: thick lines hiding each other, the y range
// clipped at the top, the x axis past the data, search paths drawn over each
// other, a wrapped title, the machine's paths in the header.
TEST(SimulateCliTest, PageChartsKeepEverySeriesVisibleAndTheAxesFitTheData) {
  testing::TempDir tmp;
  const auto r = run_process(
      {JOULE_BINARY, "simulate", "--workload", "librispeech,movielens", "--html", tmp.file("p.html")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = testing::read_file(tmp.file("p.html"));
  EXPECT_NE(html.find("bundled Zeus NSDI'23 traces (zeus-nsdi23), GPU v100</p>"), std::string::npos);
  EXPECT_EQ(html.find(JOULE_SOURCE_DIR), std::string::npos);
  EXPECT_EQ(html.find("class=\"simulated\""), std::string::npos) << "published traces: no made-up warning";

  const auto steps = charts_of(html, "batch-size");
  ASSERT_EQ(steps.size(), 2u);
  // librispeech: 210 recurrences, the default batch size 192 the largest.
  EXPECT_EQ(attributes(steps[0], "data-x-high"), std::vector<std::string>{"210"});
  const auto x = ticks(steps[0], "x");
  ASSERT_FALSE(x.empty());
  EXPECT_EQ(x.back(), 200);
  const auto y = ticks(steps[0], "y");
  ASSERT_FALSE(y.empty());
  EXPECT_EQ(y.back(), 256) << "a tick above the default's 192";
  EXPECT_EQ(attributes(steps[0], "data-y-high"), std::vector<std::string>{"256"});

  const auto regrets = charts_of(html, "regret");
  ASSERT_EQ(regrets.size(), 2u);
  EXPECT_EQ(attributes(regrets[0], "data-x-high"), std::vector<std::string>{"210"});
  for (const auto& svg : {steps[0], steps[1], regrets[0], regrets[1]}) {
    // Thin lines, zeus drawn last (on top), each series its own path.
    for (const auto& width : attributes(svg, "stroke-width")) EXPECT_LE(std::stod(width), 2.5) << width;
    const auto series = attributes(svg, "data-series");
    ASSERT_EQ(series.size(), 3u);
    EXPECT_EQ(series.back(), "zeus");
    const auto points = attributes(svg, "points");
    ASSERT_EQ(points.size(), 3u);
    EXPECT_NE(points[0], points[1]);
    EXPECT_NE(points[1], points[2]);
    EXPECT_NE(points[0], points[2]);
  }
  // Where zeus and grid choose the same batch size, their steps lie apart.
  const auto movielens_points = attributes(steps[1], "points");
  const auto last_y = [](const std::string& points) {
    const std::string last = points.substr(points.rfind(' ', points.size() - 2) + 1);
    return std::stod(last.substr(last.find(',') + 1));
  };
  EXPECT_NE(last_y(movielens_points[1]), last_y(movielens_points[2]));  // grid, zeus: both end on b=16384

  // One search path per policy but Default, the optimum ringed on top.
  const auto paths = charts_of(html, "search-path");
  ASSERT_EQ(paths.size(), 4u);
  for (const auto& svg : paths) {
    EXPECT_EQ(attributes(svg, "data-series").size(), 1u);
    const std::size_t ring = svg.rfind("r=\"10\" class=\"mark optimum\"");
    ASSERT_NE(ring, std::string::npos);
    EXPECT_GT(ring, svg.rfind("fill-opacity")) << "the optimum after the policy's dots";
  }
  // Titles on one line, short enough for the chart's width.
  for (const std::string kind : {"batch-size", "regret", "search-path"}) {
    for (const auto& svg : charts_of(html, kind)) {
      const std::size_t title = svg.find("class=\"title\">");
      ASSERT_NE(title, std::string::npos);
      EXPECT_EQ(svg.find("class=\"title\">", title + 1), std::string::npos) << "one title line";
      const std::size_t from = title + 14;
      EXPECT_LE(svg.find('<', from) - from, 56u) << svg.substr(from, 80);
    }
  }

  // The power-limit axis names its unit once; its ticks are plain numbers.
  EXPECT_NE(paths[0].find(">power limit (W)</text>"), std::string::npos);
  for (double tick : ticks(paths[0], "y")) EXPECT_GT(tick, 0);

  const std::string body = testing::chromium_body_tag(tmp.file("p.html"), tmp);
  if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
  EXPECT_EQ(testing::tag_attribute(body, "data-plots"), "10") << body;
  EXPECT_EQ(testing::tag_attribute(body, "data-plots-ok"), "10") << body;
  EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << body;
}

// The drift page as a reader sees it on a phone and at a desk: nothing cut,
// text at 11 px or more, the summary table without scrolling at 1280 px, and
// a colour means one policy on the whole page (its bars, lines and paths).
TEST(SimulateCliTest, DriftPageReadsAtPhoneAndDeskWidthsWithAColourPerPolicy) {
  testing::TempDir tmp;
  const auto r = run_process({JOULE_BINARY, "simulate", "--seeds", "1..2", "--policy", "all", "--drift-after",
                              "60", "--window", "10", "--recurrences", "120", "--workload", "cifar100,movielens", "--html",
                              tmp.file("d.html")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string width : {"390", "1280"}) {
    const std::string body = testing::chromium_body_tag(tmp.file("d.html"), tmp, width + ",900");
    if (body.empty()) GTEST_SKIP() << "no /usr/bin/chromium (scripts/install-deps.sh installs it)";
    EXPECT_EQ(testing::tag_attribute(body, "data-overflow"), "none") << "at " << width << ": " << body;
    EXPECT_EQ(testing::tag_attribute(body, "data-colour-conflicts"), "none") << "at " << width << ": " << body;
    EXPECT_GE(std::stod(testing::tag_attribute(body, "data-min-font-px")), 10.95) << "at " << width << ": " << body;
    if (width == "1280") {
      EXPECT_EQ(testing::tag_attribute(body, "data-table-scroll"), "none") << body;
    }
    // "c0=zeus, all|zeus, last 5|zeus": every name of a colour is one policy's.
    const std::string colours = testing::tag_attribute(body, "data-colours");
    ASSERT_FALSE(colours.empty()) << body;
    std::size_t at = 0;
    while (at < colours.size()) {
      const std::size_t end = std::min(colours.find("; ", at), colours.size());
      const std::string entry = colours.substr(at, end - at);
      const std::string names = entry.substr(entry.find('=') + 1);
      std::set<std::string> policies;
      for (std::size_t from = 0; from <= names.size();) {
        const std::size_t bar = std::min(names.find('|', from), names.size());
        const std::string name = names.substr(from, bar - from);
        policies.insert(name.substr(0, name.find(',')));
        from = bar + 1;
      }
      EXPECT_EQ(policies.size(), 1u) << "at " << width << ": " << entry;
      at = end + 2;
    }
  }
}

// Trace files given by path: the page names the files, not their directory.
TEST(SimulateCliTest, PageHeaderNamesTraceFilesWithoutTheirDirectory) {
  RealisticTraces traces;
  const auto r = run_process({JOULE_BINARY, "simulate", "--train-trace", traces.train, "--power-trace", traces.power,
                              "--workload", "cifar100", "--html", traces.dir.file("p.html")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = testing::read_file(traces.dir.file("p.html"));
  EXPECT_NE(html.find("train trace train.csv, power trace power.csv</p>"), std::string::npos);
  EXPECT_EQ(html.find(traces.dir.path()), std::string::npos);
}

}  // namespace
}  // namespace joule
