// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule`: measure and lower the energy of deep-learning training on GPUs.
// The command line is built and parsed in app.cc; here the parsed command runs.
#include <fmt/format.h>

#include <iostream>

#include "cli/app.h"
#include "joule/common/child_process.h"
#include "joule/common/utf8.h"
#include "joule/error.h"

int main(int argc, char** argv) {
  joule::cli::CommandLine cli;
  if (const auto status = joule::cli::parse_command_line(cli, argc, argv, std::cout, std::cerr)) return *status;

  try {
    if (*cli.info_command) return joule::cli::run_info(cli.common, cli.info);
    if (*cli.measure_command) return joule::cli::run_measure(cli.common, cli.measure);
    if (*cli.top_command) {
      cli.top.unit = joule::cli::parse_energy_unit(cli.top_unit);
      if (cli.top_once) cli.top.iterations = 1;
      return joule::cli::run_top(cli.common, cli.top);
    }
    if (*cli.simulate_command) {
      return cli.simulate.learned_on.empty() ? joule::cli::run_simulate(cli.simulate)
                                             : joule::cli::run_simulate_translate(cli.simulate);
    }
    if (*cli.train_sim_command) return joule::cli::run_train_sim(cli.common, cli.train_sim);
    if (*cli.cluster_trace_command) return joule::cli::run_cluster_trace(cli.cluster_trace);
    if (*cli.sweep_command) return joule::cli::run_sweep_command(cli.common, cli.sweep);
    if (*cli.analyze_command) return joule::cli::run_analyze(cli.analyze);
    if (*cli.report_command) return joule::cli::run_report(cli.report);
    if (*cli.serve_command) return joule::cli::run_serve(cli.serve);
    if (*cli.exporter_command) return joule::cli::run_exporter(cli.common, cli.exporter);
    if (*cli.tokens_command) return joule::cli::run_tokens(cli.tokens);
    if (*cli.jobs_command) return joule::cli::run_jobs(cli.jobs);
    if (*cli.ledger_command) return joule::cli::run_ledger(cli.ledger);
    if (*cli.slurm_epilog_command) return joule::cli::run_slurm_epilog(cli.slurm_epilog);
  } catch (const joule::UsageError& e) {
    std::cerr << fmt::format("joule: {}\n", joule::printable(e.what()));
    return 2;
  } catch (const joule::SpawnError& e) {
    std::cerr << fmt::format("joule: {}\n", joule::printable(e.what()));
    return e.exit_status();
  } catch (const std::exception& e) {
    std::cerr << fmt::format("joule: error: {}\n", joule::printable(e.what()));
    return 1;
  }
  return 0;
}
