// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The `joule` command line: every subcommand, option and range, built in one
// place so that the binary, the tests and the CLI fuzzer parse the same app.
// main.cc runs what was parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <optional>
#include <string>

#include "cli/commands.h"

namespace joule::cli {

// The parsed options of every subcommand, bound to the app that fills them
// (so neither copied nor moved).
struct CommandLine {
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  CLI::App app;
  CommonOptions common;
  InfoOptions info;
  MeasureOptions measure;
  TopOptions top;
  std::string top_unit = "J";
  bool top_once = false;
  SimulateOptions simulate;
  ClusterTraceOptions cluster_trace;
  TrainSimOptions train_sim;
  SweepCommandOptions sweep;
  AnalyzeOptions analyze;
  ReportOptions report;
  ExporterCliOptions exporter;
  ServeCliOptions serve;
  TokensCliOptions tokens;
  JobsCliOptions jobs;
  LedgerCliOptions ledger;
  SlurmEpilogCliOptions slurm_epilog;

  CLI::App* info_command = nullptr;
  CLI::App* measure_command = nullptr;
  CLI::App* top_command = nullptr;
  CLI::App* simulate_command = nullptr;
  CLI::App* cluster_trace_command = nullptr;
  CLI::App* train_sim_command = nullptr;
  CLI::App* sweep_command = nullptr;
  CLI::App* analyze_command = nullptr;
  CLI::App* report_command = nullptr;
  CLI::App* exporter_command = nullptr;
  CLI::App* serve_command = nullptr;
  CLI::App* tokens_command = nullptr;
  CLI::App* jobs_command = nullptr;
  CLI::App* ledger_command = nullptr;
  CLI::App* slurm_epilog_command = nullptr;
};

// Parses argv into cli. nullopt: a subcommand is to run. Otherwise the
// status to exit with, its text written: help and version on out (0), a
// usage error on err (2), each naming the option or command at fault.
std::optional<int> parse_command_line(CommandLine& cli, int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err);

}  // namespace joule::cli
