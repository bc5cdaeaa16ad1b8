// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Every number on joule's command line is checked as it is parsed (issue 47:
// `cluster-trace --jobs -5` crashed, `--days 1e400` wrote inf): a table of
// every numeric option with its range, checked complete against the app the
// binary parses with; the real binary refuses negative, huge, non-finite and
// non-numeric values with exit 2 and a message naming the option; the bounds
// themselves are accepted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <set>
#include <sstream>

#include "cli/app.h"
#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;

// The binary under test: the build's, or another (JOULE_NUMERIC_TEST_BINARY,
// e.g. one built from older code, to see which rows it fails).
std::string joule_binary() {
  const char* other = std::getenv("JOULE_NUMERIC_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : JOULE_BINARY;
}

enum class Kind { kWhole, kReal };

struct NumericOption {
  std::string command;
  std::string option;
  Kind kind;
  std::string min, max;       // as the user would write them
  bool min_excluded = false;  // (min, max]
};

const std::string kUint64Max = "18446744073709551615";
const std::string kDoubleMax = "1.7976931348623157e308";

const std::vector<NumericOption>& numeric_options() {
  static const std::vector<NumericOption> table = {
      {"measure", "--interval-ms", Kind::kReal, "0.5", "3600000"},
      {"measure", "--counter-interval-ms", Kind::kReal, "0", "86400000"},
      {"measure", "--mpi-timeout", Kind::kReal, "0.1", "86400"},
      {"measure", "--kill-grace-s", Kind::kReal, "0", "3600"},
      {"measure", "--carbon-intensity", Kind::kReal, "0", "5000"},
      {"measure", "--pue", Kind::kReal, "1", "3"},
      {"measure", "--price", Kind::kReal, "0", "1000000"},
      {"top", "--interval-ms", Kind::kReal, "10", "3600000"},
      {"top", "--iterations", Kind::kWhole, "0", "1000000000"},
      {"simulate", "--target", Kind::kReal, "-" + kDoubleMax, kDoubleMax},
      {"simulate", "--default-batch-size", Kind::kWhole, "1", "1000000"},
      {"simulate", "--eta", Kind::kReal, "0", "1"},
      {"simulate", "--beta", Kind::kReal, "1", "100", true},
      {"simulate", "--seed", Kind::kWhole, "0", kUint64Max},
      {"simulate", "--window", Kind::kWhole, "1", "1000000"},
      {"simulate", "--recurrences", Kind::kWhole, "0", "1000000"},
      {"simulate", "--drift-after", Kind::kWhole, "1", "1000000"},
      {"simulate", "--learn-recurrences", Kind::kWhole, "0", "100000"},
      {"simulate", "--deploy-recurrences", Kind::kWhole, "1", "100000"},
      {"simulate", "--prior-observations", Kind::kReal, "0", "1000000", true},
      {"simulate", "--max-retries", Kind::kWhole, "0", "1000"},
      {"cluster-trace", "--jobs", Kind::kWhole, "1", "100000000"},
      {"cluster-trace", "--groups", Kind::kWhole, "1", "1000000"},
      {"cluster-trace", "--days", Kind::kReal, "0", "36500", true},
      {"cluster-trace", "--seed", Kind::kWhole, "0", kUint64Max},
      {"cluster-trace", "--group-size-alpha", Kind::kReal, "0", "100", true},
      {"cluster-trace", "--max-group-weight", Kind::kReal, "1", "1000000"},
      {"cluster-trace", "--bursty-fraction", Kind::kReal, "0", "1"},
      {"cluster-trace", "--median-runtime-s", Kind::kReal, "0", "31536000", true},
      {"cluster-trace", "--runtime-spread", Kind::kReal, "0", "5"},
      {"cluster-trace", "--job-runtime-spread", Kind::kReal, "0", "5"},
      {"train-sim", "--eta", Kind::kReal, "0", "1"},
      {"train-sim", "--max-slowdown", Kind::kReal, "1", "100"},
      {"train-sim", "--epochs", Kind::kWhole, "1", "100000"},
      {"train-sim", "--steps-per-epoch", Kind::kWhole, "1", "10000000"},
      {"train-sim", "--step-ms", Kind::kReal, "0", "3600000", true},
      {"train-sim", "--step-w", Kind::kReal, "0", "1000", true},
      {"train-sim", "--step-mhz", Kind::kReal, "0", "10000", true},
      {"train-sim", "--warmup-steps", Kind::kWhole, "0", "1000000"},
      {"train-sim", "--measure-steps", Kind::kWhole, "1", "1000000"},
      {"train-sim", "--stall-ms", Kind::kReal, "0", "3600000"},
      {"train-sim", "--seed", Kind::kWhole, "0", kUint64Max},
      {"train-sim", "--batch-size", Kind::kWhole, "0", "1000000"},
      {"sweep", "--kill-grace-s", Kind::kReal, "0", "3600"},
      {"analyze", "--max-power-w", Kind::kReal, "0", "1000000", true},
      {"report", "--carbon-intensity", Kind::kReal, "0", "5000"},
      {"report", "--pue", Kind::kReal, "1", "3"},
      {"report", "--price", Kind::kReal, "0", "1000000"},
      {"exporter", "--interval-s", Kind::kReal, "0.01", "3600"},
      {"exporter", "--carbon-intensity", Kind::kReal, "0", "5000"},
      {"exporter", "--pue", Kind::kReal, "1", "3"},
      {"exporter", "--keep-jobs-days", Kind::kReal, "0", "3650"},
      {"ledger", "--carbon-intensity", Kind::kReal, "0", "5000"},
      {"ledger", "--pue", Kind::kReal, "1", "3"},
      {"ledger", "--price", Kind::kReal, "0", "1000000"},
      {"slurm-epilog", "--exporter-port", Kind::kWhole, "1", "65535"},
      {"slurm-epilog", "--timeout-s", Kind::kReal, "0.1", "600"},
      {"slurm-epilog", "--wait-s", Kind::kReal, "0", "3600"},
      {"serve", "--max-body-kb", Kind::kWhole, "1", "1048576"},
      {"serve", "--read-timeout-s", Kind::kWhole, "1", "3600"},
      {"serve", "--header-timeout-s", Kind::kReal, "0.1", "3600"},
      {"serve", "--body-timeout-s", Kind::kReal, "0.1", "3600"},
      {"serve", "--max-connections", Kind::kWhole, "1", "1000000"},
      {"serve", "--max-anonymous-connections", Kind::kWhole, "1", "1000000"},
  };
  return table;
}

// Options whose text carries numbers, each with values that must be refused.
struct TextOption {
  std::vector<std::string> commands;
  std::string option;
  std::vector<std::string> bad_values;
  bool checked_as_parsed = true;  // else by the command, before it starts anything
};

const std::vector<TextOption>& text_options() {
  const std::vector<std::string> with_devices = {"info", "measure", "top", "sweep", "exporter"};
  static const std::vector<TextOption> table = {
      {{"simulate"}, "--seeds", {"-1", "1..1e400", "nan", "1.." + kUint64Max + "0", "1..200000", "abc", "0x10"}},
      {{"simulate"},
       "--drift-scale",
       {"inf", "1e400", "nan", "-2", "0", "1001", "64=inf", "99999999999=2", "-5=2", "0=2", "64=abc"}},
      {{"simulate"},
       "--translate-with",
       {"profiled:-5", "profiled:1e400", "profiled:99999999999", "profiled:nan", "profiled:0", "sizes:nan",
        "sizes:-1", "sizes:1e400", "sizes:"}},
      {with_devices, "--gpus", {"-1", kUint64Max, "1e400", "nan", "0,abc", "4294967296", "1024"}},
      {{"info", "measure", "top", "sweep", "exporter", "train-sim"},
       "--sim",
       {"count=-5", "count=1e400", "load=nan", "idle_w=inf", "count=" + kUint64Max, "sample_ms=-1"}},
      {{"serve", "exporter"},
       "--listen",
       {"127.0.0.1:-1", "127.0.0.1:65536", "127.0.0.1:1e400", "127.0.0.1:nan", "127.0.0.1:" + kUint64Max},
       false},
  };
  return table;
}

// What a command needs besides the option under test to get past its own
// parse: its positional arguments.
std::vector<std::string> command_words(const std::string& command) {
  if (command == "sweep") return {"sweep", "sweep.toml"};
  if (command == "analyze" || command == "report") return {command, "sweep.sqlite"};
  return {command};
}

// Values outside the row's range: those the issue found, every non-finite
// and non-numeric spelling, and one past each end.
std::vector<std::string> bad_values(const NumericOption& row) {
  std::vector<std::string> values = {"abc", "", "nan", "-nan", "inf", "-inf", "1e400", "-1e400", "0x10x",
                                     kUint64Max + "0", "5 ", " 5"};
  if (row.kind == Kind::kWhole) {
    for (const char* v : {"1.5", "1e3", "0x10", "-5", "-1"}) values.push_back(v);
    if (row.max != kUint64Max) values.push_back(kUint64Max);
    values.push_back(std::to_string(std::stoll(row.min) - 1));
    if (row.max != kUint64Max) values.push_back(std::to_string(std::stoull(row.max) + 1));
  } else if (row.max != kDoubleMax) {
    values.push_back(row.min_excluded ? row.min : fmt::format("{}", std::stod(row.min) - 1));
    values.push_back(fmt::format("{}", std::stod(row.max) * 2));
    values.push_back("-5");
  }
  // Where the range takes a value ("-5" as a target), it is no bad value.
  std::erase_if(values, [&](const std::string& v) {
    char* end = nullptr;
    const long double x = std::strtold(v.c_str(), &end);
    const bool number = !v.empty() && *end == '\0' && std::isfinite(x) && v.find_first_of("xn ") == std::string::npos;
    const long double min = std::strtold(row.min.c_str(), nullptr), max = std::strtold(row.max.c_str(), nullptr);
    const bool whole_enough = row.kind == Kind::kReal || v.find_first_of(".e") == std::string::npos;
    return number && whole_enough && (row.min_excluded ? x > min : x >= min) && x <= max;
  });
  return values;
}

// The values the real binary is run with, per row (the rest are parsed in
// process by the same app): one past the lower end, NaN, and a huge one.
std::vector<std::string> bad_values_for_the_binary(const NumericOption& row) {
  std::vector<std::string> values = {"nan", "1e400"};
  if (row.max != kDoubleMax) values.push_back(row.kind == Kind::kWhole ? "-5" : "-inf");
  return values;
}

// argv of the row's command with --OPTION=VALUE.
std::vector<std::string> argv_of(const std::string& binary, const std::string& command, const std::string& option,
                                 const std::string& value) {
  std::vector<std::string> argv = {binary};
  for (const auto& w : command_words(command)) argv.push_back(w);
  argv.push_back(option + "=" + value);
  if (command == "measure") argv.insert(argv.end(), {"--", "true"});
  return argv;
}

// Parses argv with the app the binary builds; the status it would exit with
// (nullopt: it would run the command) and what it would write on stderr.
std::pair<std::optional<int>, std::string> parse_in_process(const std::vector<std::string>& words) {
  cli::CommandLine cli;
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  std::ostringstream out, err;
  const auto status = cli::parse_command_line(cli, static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, err.str()};
}

// Runs each argv in parallel (a few at a time) and returns the results in order.
std::vector<testing::RunResult> run_all(const std::vector<std::vector<std::string>>& argvs) {
  std::vector<testing::RunResult> results(argvs.size());
  constexpr std::size_t kAtOnce = 8;
  for (std::size_t first = 0; first < argvs.size(); first += kAtOnce) {
    std::vector<std::future<testing::RunResult>> running;
    for (std::size_t i = first; i < std::min(argvs.size(), first + kAtOnce); ++i) {
      running.push_back(std::async(std::launch::async, [&argvs, i] {
        return run_process(argvs[i], testing::simulated_only_env(), 30.0);
      }));
    }
    for (std::size_t i = 0; i < running.size(); ++i) results[first + i] = running[i].get();
  }
  return results;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

// Each bad value: exit 2 and one line that begins with the option's name.
void expect_refused(const std::vector<std::vector<std::string>>& argvs, const std::vector<std::string>& options) {
  const std::vector<testing::RunResult> results = run_all(argvs);
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    const auto& r = results[i];
    EXPECT_EQ(r.exit_code, 2) << joined(argvs[i]) << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("joule: " + options[i], 0), 0u) << joined(argvs[i]) << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined(argvs[i]) << "\n" << r.err;
    EXPECT_EQ(r.out, "") << joined(argvs[i]);
  }
}

TEST(NumericOptionsCliTest, TheTableListsEveryNumericOptionOfEveryCommand) {
  cli::CommandLine cli;
  std::set<std::pair<std::string, std::string>> in_table, in_app;
  for (const auto& row : numeric_options()) in_table.insert({row.command, row.option});
  std::set<std::pair<std::string, std::string>> text_in_table, text_in_app;
  for (const auto& row : text_options()) {
    for (const auto& command : row.commands) text_in_table.insert({command, row.option});
  }
  for (const CLI::App* command : cli.app.get_subcommands({})) {
    for (const CLI::Option* option : command->get_options()) {
      if (option->get_lnames().empty()) continue;
      const std::string name = "--" + option->get_lnames().front();
      const std::string type = option->get_type_name();
      const std::string kind = type.substr(0, type.find(' '));
      if (kind == "INT" || kind == "UINT" || kind == "FLOAT" || kind == "NUMBER") {
        in_app.insert({command->get_name(), name});
      }
      if (text_in_table.count({command->get_name(), name})) text_in_app.insert({command->get_name(), name});
    }
  }
  for (const auto& [command, option] : in_app) {
    EXPECT_TRUE(in_table.count({command, option})) << command << " " << option << " takes a number: add it to the table";
  }
  for (const auto& [command, option] : in_table) {
    EXPECT_TRUE(in_app.count({command, option})) << command << " " << option << " is no numeric option of the app";
  }
  EXPECT_EQ(text_in_app, text_in_table) << "an option of the text table is missing from the app";
  EXPECT_GE(in_app.size(), 50u);
}

TEST(NumericOptionsCliTest, BoundsAreAcceptedAndShownInHelp) {
  for (const auto& row : numeric_options()) {
    std::vector<std::string> values = {row.max};
    if (!row.min_excluded) values.push_back(row.min);
    for (const auto& value : values) {
      const auto words = argv_of("joule", row.command, row.option, value);
      const auto [status, err] = parse_in_process(words);
      EXPECT_EQ(status, std::nullopt) << joined(words) << "\n" << err;
    }
    // The range is in --help unless it is the type's own (a seed, a target).
    cli::CommandLine cli;
    const std::string type = cli.app.get_subcommand(row.command)->get_option(row.option)->get_type_name();
    if (row.max != kUint64Max && row.max != kDoubleMax) {
      EXPECT_NE(type.find(fmt::format("{}{}, {}]", row.min_excluded ? '(' : '[', row.min, row.max)), std::string::npos)
          << row.command << " " << row.option << ": " << type;
    }
  }
}

TEST(NumericOptionsCliTest, OutOfRangeNonFiniteAndNonNumericValuesAreUsageErrors) {
  for (const auto& row : numeric_options()) {
    for (const auto& value : bad_values(row)) {
      const auto words = argv_of("joule", row.command, row.option, value);
      const auto [status, err] = parse_in_process(words);
      EXPECT_EQ(status, 2) << joined(words) << "\n" << err;
      EXPECT_EQ(err.rfind("joule: " + row.option + ": ", 0), 0u) << joined(words) << "\n" << err;
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << joined(words) << "\n" << err;
    }
  }
}

TEST(NumericOptionsCliTest, TheBinaryRefusesBadNumbersWithExit2) {
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::string> options;
  for (const auto& row : numeric_options()) {
    for (const auto& value : bad_values_for_the_binary(row)) {
      argvs.push_back(argv_of(joule_binary(), row.command, row.option, value));
      options.push_back(row.option + ": ");
    }
  }
  expect_refused(argvs, options);
}

// Each value through the binary with the row's first command, and in
// process with every command that takes the option.
TEST(NumericOptionsCliTest, NumbersInsideOptionTextsAreCheckedToo) {
  testing::TempDir cwd;  // serve would make its default store here, were --listen not refused first
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::string> options;
  for (const auto& row : text_options()) {
    for (const auto& command : row.commands) {
      for (const auto& value : row.bad_values) {
        if (command == row.commands.front() || !row.checked_as_parsed) {
          argvs.push_back(argv_of(joule_binary(), command, row.option, value));
          options.push_back(row.option);
        }
        if (!row.checked_as_parsed) continue;
        const auto words = argv_of("joule", command, row.option, value);
        const auto [status, err] = parse_in_process(words);
        EXPECT_EQ(status, 2) << joined(words) << "\n" << err;
        EXPECT_EQ(err.rfind("joule: " + row.option + ": ", 0), 0u) << joined(words) << "\n" << err;
      }
    }
  }
  const auto cwd_before = std::filesystem::current_path();
  std::filesystem::current_path(cwd.path());
  expect_refused(argvs, options);
  std::filesystem::current_path(cwd_before);
  EXPECT_TRUE(std::filesystem::is_empty(cwd.path()));
}

// The commands of the issue, as typed there (value as its own word).
TEST(NumericOptionsCliTest, ClusterTraceRefusesTheIssuesValues) {
  testing::TempDir tmp;
  for (const auto& [option, value] : std::vector<std::pair<std::string, std::string>>{
           {"--jobs", "-5"}, {"--jobs", kUint64Max}, {"--days", "1e400"}, {"--groups", "-1"}, {"--days", "nan"}}) {
    const auto r = run_process({joule_binary(), "cluster-trace", option, value, "--out", tmp.file("t.csv")});
    EXPECT_EQ(r.exit_code, 2) << option << " " << value << "\n" << r.err;
    EXPECT_NE(r.err.find(option + ": "), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp.file("t.csv"))) << option << " " << value;
  }
}

}  // namespace
}  // namespace joule
