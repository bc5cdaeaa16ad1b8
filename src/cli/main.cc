// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule`: measure and lower the energy of deep-learning training on GPUs.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "joule/common/child_process.h"
#include "cli/commands.h"
#include "joule/version.h"
#include "joule/error.h"

namespace {

void add_common_options(CLI::App& command, joule::cli::CommonOptions& common) {
  command.add_option("--backend", common.backend, "GPU backend: auto (NVML and ROCm SMI; where neither gives a GPU, simulated GPUs, "
                     "said so, for info, measure and top; none for exporter and jouled), nvml, rocm, sim")
      ->check(CLI::IsMember({"auto", "nvml", "rocm", "sim"}));
  command.add_option("--sim", common.sim_spec,
                     "simulated GPUs, e.g. count=4,load=0.6 (also $JOULE_SIM); implies nothing unless they are used");
  command.add_option("--gpus", common.gpus, "comma-separated GPU indices to use, e.g. 0,2 (default: all)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"joule: measure and lower the energy of deep-learning training on GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("joule ") + joule::version());

  joule::cli::CommonOptions common;

  joule::cli::InfoOptions info;
  CLI::App* info_command = app.add_subcommand("info", "list devices, backends and what each can read or control");
  add_common_options(*info_command, common);
  info_command->add_flag("--json", info.json, "print one JSON object");

  joule::cli::MeasureOptions measure;
  CLI::App* measure_command =
      app.add_subcommand("measure", "run a command and report its time and energy per device");
  add_common_options(*measure_command, common);
  measure_command->add_option("--interval-ms", measure.interval_ms, "power sampling interval (default 100)");
  measure_command->add_option("--counter-interval-ms", measure.counter_interval_ms,
                              "time between GPU energy-counter reads, shared round robin by the GPUs (default 5000; 0: never)");
  measure_command->add_option("--timeline", measure.timeline_path,
                              "write every sample to this CSV file (with --mpi: one per node, PATH with the node's "
                              "name before the extension)");
  measure_command->add_option("--sample", measure.sample_fields,
                              "extra fields per sample: util, clock, temp, mem (comma-separated)")
      ->delimiter(',');
  measure_command->add_flag("--json", measure.json, "print the report as one JSON object on stdout");
  measure_command->add_flag("--mpi", measure.mpi,
                            "under mpirun or srun: each rank runs the command, each node is measured once, rank 0 "
                            "reports per node and in total");
  measure_command
      ->add_option("--mpi-timeout", measure.mpi_timeout_s,
                   "with --mpi: seconds a window edge waits for the other ranks before reporting the nodes that "
                   "did not arrive as missing and ending the job (default 60)")
      ->check(CLI::Range(0.1, 86400.0));
  measure_command->add_option("-o,--output", measure.output_path, "write the report to this file");
  joule::cli::add_carbon_options(*measure_command, measure.carbon, "the run");
  measure_command
      ->add_option("--emissions-csv", measure.emissions_csv,
                   "append the run to this CSV in CodeCarbon's emissions.csv columns (header written when new; a "
                   "file with other columns is refused)")
      ->group("Carbon and cost");
  measure_command
      ->add_option("--kill-grace-s", measure.kill_grace_s,
                   "on SIGTERM, SIGINT or SIGHUP the command's whole process group gets the signal, then SIGKILL "
                   "after this many seconds if any of it is left (default 10)")
      ->check(CLI::Range(0.0, 3600.0));
  measure_command->add_option("command", measure.command, "the command to run, after --");
  measure_command->positionals_at_end();

  joule::cli::TopOptions top;
  std::string top_unit = "J";
  bool top_once = false;
  CLI::App* top_command = app.add_subcommand(
      "top", "live view of each GPU's power, energy, limit and lease holder, and of RAPL zones (q quits)");
  add_common_options(*top_command, common);
  top_command->add_option("--interval-ms", top.interval_ms, "time between refreshes (default 1000)");
  top_command->add_option("--iterations", top.iterations, "exit after N refreshes (default: run until q)");
  top_command->add_flag("--once", top_once, "one refresh, then exit (--iterations 1)");
  top_command->add_option("--unit", top_unit, "energy unit to start with: J (default), kJ or Wh ('u' switches)");
  top_command->add_flag("--ascii", top.ascii, "ASCII sparklines even in a UTF-8 locale");

  const std::string first = argc > 1 ? argv[1] : "";
  if (!first.empty() && first[0] != '-' && first != "info" && first != "measure" && first != "simulate" &&
      first != "train-sim" && first != "cluster-trace" && first != "sweep" && first != "analyze" && first != "report" &&
      first != "top" && first != "serve" && first != "jobs" && first != "tokens" && first != "exporter") {
    std::cerr << fmt::format("joule: unknown command '{}' (expected info, measure, top, sweep, analyze, report, simulate, cluster-trace, train-sim, serve, jobs, tokens or exporter; see 'joule --help')\n", first);
    return 2;
  }
  joule::cli::SimulateOptions simulate;
  CLI::App* simulate_command = app.add_subcommand(
      "simulate", "replay a recurring job on Zeus-format traces and compare batch-size/power-limit policies");
  simulate_command->add_option("--gpu", simulate.gpu,
                               "GPU model whose bundled Zeus power trace runs: v100 (default) or a40");
  simulate_command->add_option("--service", simulate.service_url,
                               "the zeus policy asks this running `joule serve` (http://HOST:PORT) instead of its own optimizer");
  simulate_command->add_option("--train-trace", simulate.train_trace, "train trace CSV (default: the bundled one)");
  simulate_command->add_option("--power-trace", simulate.power_trace, "power trace CSV of one GPU model (instead of --gpu)");
  simulate_command->add_flag("--synthetic", simulate.synthetic, "run two built-in synthetic workloads instead of traces");
  simulate_command->add_option("--workload", simulate.workloads,
                               "librispeech, squad, sentiment140, imagenet, cifar100, movielens or all (default all)")
      ->delimiter(',');
  simulate_command->add_option("--dataset", simulate.dataset, "a workload not in the list: dataset name");
  simulate_command->add_option("--network", simulate.network, "  ... its network");
  simulate_command->add_option("--optimizer", simulate.optimizer, "  ... its optimizer");
  simulate_command->add_option("--target", simulate.target, "  ... its target metric level, as in the trace");
  simulate_command->add_option("--default-batch-size", simulate.default_batch_size, "  ... its default batch size");
  simulate_command->add_option("--eta", simulate.eta, "energy (1) vs time (0) trade-off, default 0.5");
  simulate_command->add_option("--beta", simulate.beta, "early-stopping factor, default 2");
  simulate_command->add_option("--seed", simulate.seed, "random seed (default 1)");
  simulate_command->add_option("--seeds", simulate.seeds, "several seeds: 1..10 or 1,4,9");
  simulate_command->add_option("--policy", simulate.policy, "zeus, grid, default or all (default all)");
  simulate_command->add_option("--window", simulate.window, "only the last N observations per batch size count");
  simulate_command->add_option("--recurrences", simulate.recurrences, "default 2 x batch sizes x power limits");
  simulate_command->add_flag("--strict", simulate.strict,
                             "what real traces lack is an error: a batch size in one trace only, missing power limits, "
                             "an absent default batch size");
  simulate_command->add_flag("--verbose", simulate.verbose,
                             "list every note on what the traces lack, with file and line (default: one line of counts)");
  simulate_command->add_option("--out", simulate.out_path, "write one CSV row per recurrence");
  simulate_command->add_option("--html", simulate.html_path,
                               "write an HTML page: ratios to Default, regret curves, search paths");
  simulate_command->add_option("--drift-after", simulate.drift_after,
                               "data drift after N recurrences: epochs to target change (see --drift-scale); zeus "
                               "runs with and without --window (default 10) side by side");
  simulate_command->add_option("--drift-scale", simulate.drift_scale,
                               "F: the optimal batch size needs F x the epochs after the drift (default 2); or "
                               "B=F,B=F per batch size");
  simulate_command->add_option("--learned-on", simulate.learned_on,
                               "across GPU models: learn on this GPU (v100, a40 or a power-trace CSV), then compare "
                               "translated vs from-scratch recurrences on --gpu");
  simulate_command->add_option("--learn-recurrences", simulate.learn_recurrences, "  ... on the first GPU (default 20)");
  simulate_command->add_option("--deploy-recurrences", simulate.deploy_recurrences, "  ... on --gpu (default 20)");
  simulate_command->add_option("--translate-with", simulate.translate_with,
                               "  ... what is known of --gpu: trace (its power trace), profiled:N (N batch sizes near the best) "
                               "or sizes:B1,B2 (those batch sizes)");
  simulate_command->add_option("--prior-observations", simulate.prior_observations,
                               "  ... translated evidence per batch size weighs as at most this many runs (default 2)");
  simulate_command->add_option("--cluster", simulate.cluster_trace,
                               "replay a job-group trace (zeus group format, '-' for stdin; or raw "
                               "job_id,group,submit_s,duration_s, a file) over the six workloads");
  simulate_command->add_option("--max-retries", simulate.max_retries,
                               "with --cluster: a job missing its target is resubmitted at most this often (default 20)");

  joule::cli::ClusterTraceOptions cluster_trace;
  CLI::App* cluster_trace_command = app.add_subcommand(
      "cluster-trace", "write a synthetic job-group trace (raw format) for `joule simulate --cluster`");
  cluster_trace_command->add_option("--jobs", cluster_trace.shape.jobs, "jobs in all (default 20000)");
  cluster_trace_command->add_option("--groups", cluster_trace.shape.groups, "recurring job groups (default 500)");
  cluster_trace_command->add_option("--days", cluster_trace.shape.days, "time span (default 60)");
  cluster_trace_command->add_option("--seed", cluster_trace.shape.seed, "random seed (default 1)");
  cluster_trace_command->add_option("--group-size-alpha", cluster_trace.shape.group_size_alpha,
                                    "Pareto tail of group sizes, smaller is heavier (default 1.5)");
  cluster_trace_command->add_option("--max-group-weight", cluster_trace.shape.max_group_weight,
                                    "largest group weight, the smallest being 1: truncates the tail (default 200)");
  cluster_trace_command->add_option("--bursty-fraction", cluster_trace.shape.bursty_fraction,
                                    "share of groups submitting in bursts (default 0.3)");
  cluster_trace_command->add_option("--median-runtime-s", cluster_trace.shape.median_runtime_s,
                                    "median over groups of a group's median job runtime (default 1800)");
  cluster_trace_command->add_option("--runtime-spread", cluster_trace.shape.runtime_spread,
                                    "log-normal sigma of group median runtimes (default 1.5)");
  cluster_trace_command->add_option("--job-runtime-spread", cluster_trace.shape.job_runtime_spread,
                                    "log-normal sigma of job runtimes within a group (default 0.3)");
  cluster_trace_command->add_option("--out", cluster_trace.out_path, "CSV file to write (default '-': stdout)");

  joule::cli::TrainSimOptions train_sim;
  CLI::App* train_sim_command = app.add_subcommand(
      "train-sim", "a synthetic training loop on simulated GPUs with the just-in-time power-limit optimizer");
  train_sim_command->add_option("--sim", common.sim_spec, "simulated GPUs, e.g. count=4 (also $JOULE_SIM)");
  train_sim_command->add_option("--objective", train_sim.objective, "time, energy, cost or slowdown (default cost)");
  train_sim_command->add_option("--eta", train_sim.eta, "for cost: energy (1) vs time (0), default 0.5");
  train_sim_command->add_option("--max-slowdown", train_sim.max_slowdown, "for slowdown: allowed factor, default 1.1");
  train_sim_command->add_option("--epochs", train_sim.epochs, "default 2");
  train_sim_command->add_option("--steps-per-epoch", train_sim.steps_per_epoch, "default 1000");
  train_sim_command->add_option("--step-ms", train_sim.step_ms, "step time at full speed, default 100");
  train_sim_command->add_option("--step-w", train_sim.step_w, "spacing of the limits tried, default 25");
  train_sim_command->add_option("--knob", train_sim.knob, "what to tune: power_limit (default), sm_clock or memory_clock")
      ->check(CLI::IsMember({"power_limit", "sm_clock", "memory_clock"}));
  train_sim_command->add_option("--step-mhz", train_sim.step_mhz, "spacing of the SM clock caps tried, default 90");
  train_sim_command->add_option("--warmup-steps", train_sim.warmup_steps, "per limit, default 5");
  train_sim_command->add_option("--measure-steps", train_sim.measure_steps, "per limit, default 20");
  train_sim_command->add_flag("--observer", train_sim.observer, "profile and report, never change a limit");
  train_sim_command->add_option("--stall-ms", train_sim.stall_ms,
                                "mean stall before each step's GPU work, drifting and jittering as a real input "
                                "pipeline's does (default 0: every step alike)");
  train_sim_command->add_option("--seed", train_sim.seed, "the stalls' random stream (default 1)");
  train_sim_command->add_option("--profile", train_sim.profile_path, "JSON file of saved profiles");
  train_sim_command->add_flag("--reprofile", train_sim.reprofile, "ignore a saved profile");
  train_sim_command->add_option("--job", train_sim.job, "job name (profile key), default train-sim");
  train_sim_command->add_option("--batch-size", train_sim.batch_size, "batch size (profile key)");

  joule::cli::SweepCommandOptions sweep;
  CLI::App* sweep_command =
      app.add_subcommand("sweep", "run a command over a grid of settings with repeats, measuring every run");
  add_common_options(*sweep_command, common);
  sweep_command->add_option("config", sweep.config_path, "the sweep's TOML file")->required();
  sweep_command->add_flag("--no-control", sweep.no_control, "never change GPU settings (refuses power_limit grids)");
  sweep_command->add_option("--store", sweep.store_path, "SQLite results store (default: from the config)");
  sweep_command->add_option("--export", sweep.export_path, "write every run to this CSV file");
  sweep_command->add_flag("--export-only", sweep.export_only, "only export what the store holds");
  sweep_command->add_flag("--dry-run", sweep.dry_run,
                          "list the runs still to do (configuration, repeat, command) and how long they may take");
  sweep_command->add_flag("--retry-failed", sweep.retry_failed,
                          "run the failed runs of the store again (each failed attempt is kept)");
  sweep_command->add_flag("-y,--yes", sweep.yes, "start a sweep of more than 1000 runs to run");
  sweep_command
      ->add_option("--kill-grace-s", sweep.kill_grace_s,
                   "on SIGTERM, SIGINT or SIGHUP the run's whole process group gets the signal, then SIGKILL after "
                   "this many seconds if any of it is left (default: the config's kill_grace_s, else 10)")
      ->check(CLI::Range(0.0, 3600.0));

  joule::cli::AnalyzeOptions analyze;
  CLI::App* analyze_command = app.add_subcommand("analyze", "statistics, trade-offs, fits and Pareto front of a sweep");
  analyze_command->add_option("store", analyze.store_path, "the sweep's SQLite results store")->required();
  analyze_command->add_flag("--json", analyze.json, "print one JSON object");
  analyze_command->add_option("--max-power-w", analyze.max_power_w, "the time price in eta picks (default: largest limit x GPUs)");

  joule::cli::ReportOptions report;
  CLI::App* report_command = app.add_subcommand("report", "write a self-contained HTML report with SVG plots of a sweep");
  report_command->add_option("store", report.store_path, "the sweep's SQLite results store")->required();
  report_command->add_option("-o,--output", report.output_path, "HTML file to write (default report.html)");
  report_command->add_option("--title", report.title, "the report's title");
  joule::cli::add_carbon_options(*report_command, report.carbon, "each configuration's mean run");

  joule::cli::ExporterCliOptions exporter;
  CLI::App* exporter_command = app.add_subcommand(
      "exporter", "serve Prometheus metrics: every GPU under dcgm-exporter's names (AMD GPUs also under AMD's exporter's), energy per GPU, CPU zone and job");
  add_common_options(*exporter_command, common);
  exporter_command->add_option("--listen", exporter.listen, "address to listen on, HOST:PORT (default 127.0.0.1:9400; port 0: any)");
  exporter_command->add_option("--interval-s", exporter.interval_s,
                               "how often energy is accounted and processes listed (default 1)");
  exporter_command->add_option("--port-file", exporter.port_file, "write the port listened on to this file");
  exporter_command->add_option("--jouled-socket", exporter.jouled_socket,
                               "jouled's socket, asked who holds each GPU's limit (default $JOULE_DAEMON_SOCKET or "
                               "/run/joule/jouled.sock; empty: do not ask)");
  joule::cli::add_carbon_options(*exporter_command, exporter.carbon, "each job's GPU energy (joule_job_gpu_co2e_grams_total)",
                                 /*with_price=*/false);

  joule::cli::ServeCliOptions serve;
  CLI::App* serve_command = app.add_subcommand(
      "serve", "run the batch-size service: one bandit per recurring job, shared by every node (HTTP/JSON)");
  serve_command->add_option("--store", serve.store,
                            "where jobs are kept: sqlite:PATH or postgresql://... (default sqlite:joule-jobs.db)");
  serve_command->add_option("--listen", serve.listen, "address to listen on, HOST:PORT (default 127.0.0.1:8321; port 0: any)");
  serve_command->add_option("--max-body-kb", serve.max_body_kb, "largest request body accepted (default 64)");
  serve_command
      ->add_option("--read-timeout-s", serve.read_timeout_s,
                   "drop a connection silent this long, idle or mid-request; a body cut short gets 408 (default 5)")
      ->check(CLI::Range(1, 3600));
  serve_command
      ->add_option("--header-timeout-s", serve.header_timeout_s,
                   "a request's headers must be in this long after its first byte, else 400 or closed "
                   "(default: --read-timeout-s)")
      ->check(CLI::Range(0.1, 3600.0));
  serve_command
      ->add_option("--body-timeout-s", serve.body_timeout_s,
                   "a request's body must be in this long after its headers, else 408 (default: --read-timeout-s)")
      ->check(CLI::Range(0.1, 3600.0));
  serve_command
      ->add_option("--max-connections", serve.max_connections,
                   "connections held at once; past it the oldest without a token (else the longest idle) is closed "
                   "(default 10000, kept under the open-file limit)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
  serve_command
      ->add_option("--max-anonymous-connections", serve.max_anonymous_connections,
                   "of those, other machines' connections that have not shown a token (default 1000)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
  serve_command->add_option("--port-file", serve.port_file, "write the port listened on to this file");
  serve_command->add_flag("--quiet", serve.quiet, "no request log on stderr");
  serve_command->add_option("--tokens", serve.tokens_file,
                            "clients on other machines need a token from this file (joule tokens create); "
                            "without it only this machine is answered");
  serve_command->add_flag("--require-token", serve.require_token,
                          "clients on this machine need a token too (e.g. behind a local reverse proxy)");

  joule::cli::TokensCliOptions tokens;
  CLI::App* tokens_command = app.add_subcommand("tokens", "create, list or revoke the tokens of `joule serve --tokens FILE`");
  tokens_command->add_option("action", tokens.action, "create, list, or revoke USER|sha256:PREFIX")
      ->required()
      ->check(CLI::IsMember({"create", "list", "revoke"}));
  tokens_command->add_option("user", tokens.user, "revoke: the user whose tokens go, or a digest prefix (sha256:...)");
  tokens_command->add_option("--file", tokens.file, "the tokens file (created by the first create; it holds digests only)")->required();
  tokens_command->add_option("--user", tokens.user, "create: whom the token names");
  tokens_command->add_option("--jobs", tokens.jobs,
                             "create: the jobs it may use: names, prefixes ending in '*', or '*' (comma-separated)")
      ->delimiter(',');

  joule::cli::JobsCliOptions jobs;
  CLI::App* jobs_command =
      app.add_subcommand("jobs", "list, show or export the jobs of a running `joule serve`; reset a damaged one");
  jobs_command->add_option("action", jobs.action, "list, show NAME, export NAME or reset NAME --store URL")
      ->required()
      ->check(CLI::IsMember({"list", "show", "export", "reset"}));
  jobs_command->add_option("name", jobs.name, "the job (show, export, reset)");
  jobs_command->add_option("--store", jobs.store,
                           "reset: the service's store (sqlite:PATH or postgresql://...); a running service may go on");
  jobs_command->add_flag("--fresh", jobs.fresh,
                         "reset: start the job's optimizer afresh instead of rebuilding it from its finished recurrences");
  jobs_command->add_option("--service", jobs.service_url,
                           "the service's URL (default $JOULE_SERVICE_URL, else http://127.0.0.1:8321)");
  jobs_command->add_flag("--json", jobs.json, "list: print JSON");

  // Every subcommand's help ends with an example that runs as written.
  info_command->footer("Example:\n  joule info --json");
  top_command->footer("Examples:\n  joule top\n  joule top --backend sim --sim count=4,load=0.6 --once");
  measure_command->footer("Examples:\n  joule measure -- python3 train.py\n"
                          "  joule measure --json --interval-ms 10 --timeline power.csv -- ./train\n"
                          "  joule measure --carbon-region FR --pue 1.2 --price 0.25 --currency EUR -- ./train\n"
                          "  mpirun -n 8 joule measure --mpi -- python3 train.py");
  simulate_command->footer("Examples:\n  joule simulate --seeds 1..10 --html simulation.html\n"
                           "  joule simulate --gpu a40 --learned-on v100 --seeds 1..10\n"
                           "  joule simulate --cluster data/cluster/example_groups.csv");
  cluster_trace_command->footer("Example:\n  joule cluster-trace --jobs 1200000 --groups 2000 --days 60 --out trace.csv");
  train_sim_command->footer(
      "Examples:\n  joule train-sim --sim count=2 --epochs 3\n  joule train-sim --sim count=2 --epochs 6 --knob sm_clock "
      "--objective energy");
  sweep_command->footer("Examples:\n  joule sweep sweep.toml --dry-run\n  joule sweep sweep.toml --export runs.csv");
  analyze_command->footer("Example:\n  joule analyze sweep.sqlite --json");
  report_command->footer("Example:\n  joule report sweep.sqlite -o report.html");
  serve_command->footer("Examples:\n  joule serve --store sqlite:/var/lib/joule-serve/jobs.db --listen 127.0.0.1:8321\n"
                        "  joule serve --store sqlite:jobs.db --listen 0.0.0.0:8321 --tokens tokens");
  jobs_command->footer("Examples:\n  joule jobs list\n  joule jobs export resnet50 --service http://127.0.0.1:8321\n"
                       "  joule jobs reset resnet50 --store sqlite:/var/lib/joule-serve/jobs.db\n"
                       "A token for a remote service comes from $JOULE_SERVICE_TOKEN.");
  tokens_command->footer("Examples:\n  joule tokens create --file tokens --user alice --jobs 'resnet50,bert-*'\n"
                         "  joule tokens list --file tokens\n  joule tokens revoke alice --file tokens");
  exporter_command->footer("Examples:\n  joule exporter                                # http://127.0.0.1:9400/metrics\n"
                           "  joule exporter --listen 0.0.0.0:9400 --interval-s 1");
  app.footer(
      "Run 'joule SUBCOMMAND --help' for its options and an example.\n"
      "Exit status: 0 success; 1 an error (device, file, data; the message says which); 2 a usage error (an\n"
      "unknown or bad option or value); joule measure: the measured command's own status (126/127 when it\n"
      "could not be started).");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    // Name the first unknown option alone; CLI11's own text also lists the
    // "--" separator and everything after it.
    std::string unknown;
    for (const auto& arg : app.remaining(true)) {
      if (arg.size() > 1 && arg[0] == '-' && arg != "--") {
        unknown = arg;
        break;
      }
    }
    std::cerr << fmt::format("joule: unknown option '{}' (see 'joule --help')\n", unknown);
    return 2;
  } catch (const CLI::ParseError& e) {
    std::cerr << fmt::format("joule: {} (see 'joule --help')\n", e.what());
    return 2;
  }

  try {
    if (*info_command) return joule::cli::run_info(common, info);
    if (*measure_command) return joule::cli::run_measure(common, measure);
    if (*top_command) {
      top.unit = joule::cli::parse_energy_unit(top_unit);
      if (top_once) top.iterations = 1;
      return joule::cli::run_top(common, top);
    }
    if (*simulate_command) {
      return simulate.learned_on.empty() ? joule::cli::run_simulate(simulate)
                                         : joule::cli::run_simulate_translate(simulate);
    }
    if (*train_sim_command) return joule::cli::run_train_sim(common, train_sim);
    if (*cluster_trace_command) return joule::cli::run_cluster_trace(cluster_trace);
    if (*sweep_command) return joule::cli::run_sweep_command(common, sweep);
    if (*analyze_command) return joule::cli::run_analyze(analyze);
    if (*report_command) return joule::cli::run_report(report);
    if (*serve_command) return joule::cli::run_serve(serve);
    if (*exporter_command) return joule::cli::run_exporter(common, exporter);
    if (*tokens_command) return joule::cli::run_tokens(tokens);
    if (*jobs_command) return joule::cli::run_jobs(jobs);
  } catch (const joule::UsageError& e) {
    std::cerr << fmt::format("joule: {}\n", e.what());
    return 2;
  } catch (const joule::SpawnError& e) {
    std::cerr << fmt::format("joule: {}\n", e.what());
    return e.exit_status();
  } catch (const std::exception& e) {
    std::cerr << fmt::format("joule: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
