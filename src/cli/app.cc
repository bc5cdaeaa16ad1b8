// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "cli/app.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <string_view>

#include "cli/number_options.h"
#include "joule/common/utf8.h"
#include "joule/device/sim.h"
#include "joule/measure/sampler.h"
#include "joule/version.h"

namespace joule::cli {

namespace {

void add_common_options(CLI::App& command, CommonOptions& common) {
  command.add_option("--backend", common.backend, "GPU backend: auto (NVML and ROCm SMI; where neither gives a GPU, simulated GPUs, "
                     "said so, for info, measure and top; none for exporter and jouled), nvml, rocm, sim")
      ->check(CLI::IsMember({"auto", "nvml", "rocm", "sim"}));
  add_checked_text_option(command, "--sim", common.sim_spec, [](const std::string& text) { parse_sim_spec(text); },
                          "simulated GPUs, e.g. count=4,load=0.6 (also $JOULE_SIM); implies nothing unless they are used");
  add_checked_text_option(command, "--gpus", common.gpus, [](const std::string& text) { parse_gpu_indices(text); },
                          "comma-separated GPU indices to use, e.g. 0,2 (default: all)");
}

// A stop signal reaches the whole process group of what joule runs; what is
// left of it after this long is killed.
constexpr NumberRange<double> kKillGraceRange{0.0, 3600.0};

void add_info(CommandLine& cli) {
  cli.info_command = cli.app.add_subcommand("info", "list devices, backends and what each can read or control");
  add_common_options(*cli.info_command, cli.common);
  cli.info_command->add_flag("--json", cli.info.json, "print one JSON object");
}

void add_measure(CommandLine& cli) {
  MeasureOptions& measure = cli.measure;
  CLI::App* command = cli.measure_command =
      cli.app.add_subcommand("measure", "run a command and report its time and energy per device");
  add_common_options(*command, cli.common);
  // The sampler's own bounds: 0.5 ms to an hour.
  add_number_option(*command, "--interval-ms", measure.interval_ms, {kMinSamplingIntervalMs, kMaxSamplingIntervalMs},
                    "power sampling interval (default 100)");
  add_number_option(*command, "--counter-interval-ms", measure.counter_interval_ms, {0.0, 86'400'000.0},
                    "time between GPU energy-counter reads, shared round robin by the GPUs (default 5000; 0: never)");
  command->add_option("--timeline", measure.timeline_path,
                      "write every sample to this CSV file (with --mpi: one per node, PATH with the node's "
                      "name before the extension)");
  command->add_option("--sample", measure.sample_fields, "extra fields per sample: util, clock, temp, mem, cap (comma-separated)")
      ->delimiter(',');
  command->add_flag("--json", measure.json, "print the report as one JSON object on stdout");
  command->add_flag("--mpi", measure.mpi,
                    "under mpirun or srun: each rank runs the command, each node is measured once, rank 0 "
                    "reports per node and in total");
  add_number_option(*command, "--mpi-timeout", measure.mpi_timeout_s, {0.1, 86400.0},
                    "with --mpi: seconds a window edge waits for the other ranks before reporting the nodes that "
                    "did not arrive as missing and ending the job (default 60)");
  command->add_option("-o,--output", measure.output_path, "write the report to this file");
  add_carbon_options(*command, measure.carbon, "the run");
  command
      ->add_option("--emissions-csv", measure.emissions_csv,
                   "append the run to this CSV in CodeCarbon's emissions.csv columns (header written when new; a "
                   "file with other columns is refused)")
      ->group("Carbon and cost");
  add_number_option(*command, "--kill-grace-s", measure.kill_grace_s, kKillGraceRange,
                    "on SIGTERM, SIGINT or SIGHUP the command's whole process group gets the signal, then SIGKILL "
                    "after this many seconds if any of it is left (default 10)");
  command->add_option("command", measure.command, "the command to run, after --");
  command->positionals_at_end();
}

void add_top(CommandLine& cli) {
  CLI::App* command = cli.top_command = cli.app.add_subcommand(
      "top", "live view of each GPU's power, energy, limit and lease holder, and of RAPL zones (q quits)");
  add_common_options(*command, cli.common);
  // Each refresh is read from ten sampler ticks, and a tick is at least 0.5 ms.
  add_number_option(*command, "--interval-ms", cli.top.interval_ms, {10.0, 3'600'000.0},
                    "time between refreshes (default 1000)");
  add_number_option(*command, "--iterations", cli.top.iterations, {0, 1'000'000'000},
                    "exit after N refreshes (default 0: run until q)");
  command->add_flag("--once", cli.top_once, "one refresh, then exit (--iterations 1)");
  command->add_option("--unit", cli.top_unit, "energy unit to start with: J (default), kJ or Wh ('u' switches)");
  command->add_flag("--ascii", cli.top.ascii, "ASCII sparklines even in a UTF-8 locale");
}

// One simulated job: its workload and the optimizer's settings.
void add_simulate_job_options(CLI::App& command, SimulateOptions& simulate) {
  command.add_option("--gpu", simulate.gpu, "GPU model whose bundled Zeus power trace runs: v100 (default) or a40");
  command.add_option("--service", simulate.service_url,
                     "the zeus policy asks this running `joule serve` (http://HOST:PORT) instead of its own optimizer");
  command.add_option("--train-trace", simulate.train_trace, "train trace CSV (default: the bundled one)");
  command.add_option("--power-trace", simulate.power_trace, "power trace CSV of one GPU model (instead of --gpu)");
  command.add_flag("--synthetic", simulate.synthetic, "run two built-in synthetic workloads instead of traces");
  command.add_option("--workload", simulate.workloads,
                     "librispeech, squad, sentiment140, imagenet, cifar100, movielens or all (default all)")
      ->delimiter(',');
  command.add_option("--dataset", simulate.dataset, "a workload not in the list: dataset name");
  command.add_option("--network", simulate.network, "  ... its network");
  command.add_option("--optimizer", simulate.optimizer, "  ... its optimizer");
  add_number_option(command, "--target", simulate.target, NumberRange<double>{},
                    "  ... its target metric level, as in the trace");
  add_number_option(command, "--default-batch-size", simulate.default_batch_size, kBatchSizeRange,
                    "  ... its default batch size");
  add_number_option(command, "--eta", simulate.eta, kEtaRange, "energy (1) vs time (0) trade-off, default 0.5");
  add_number_option(command, "--beta", simulate.beta, {1.0, 100.0, true}, "early-stopping factor, default 2");
  add_number_option(command, "--seed", simulate.seed, kSeedRange, "random seed (default 1)");
  add_checked_text_option(command, "--seeds", simulate.seeds, [](const std::string& text) { parse_seeds(text); },
                          "several seeds: 1..10 or 1,4,9");
  command.add_option("--policy", simulate.policy, "zeus, grid, default or all (default all)");
  add_number_option(command, "--window", simulate.window, NumberRange<std::size_t>{1, 1'000'000},
                    "only the last N observations per batch size count");
  add_number_option(command, "--recurrences", simulate.recurrences, {0, 1'000'000},
                    "default (0) 2 x batch sizes x power limits");
}

void add_simulate(CommandLine& cli) {
  SimulateOptions& simulate = cli.simulate;
  CLI::App* command = cli.simulate_command = cli.app.add_subcommand(
      "simulate", "replay a recurring job on Zeus-format traces and compare batch-size/power-limit policies");
  add_simulate_job_options(*command, simulate);
  command->add_flag("--strict", simulate.strict,
                    "what real traces lack is an error: a batch size in one trace only, missing power limits, "
                    "an absent default batch size");
  command->add_flag("--verbose", simulate.verbose,
                    "list every note on what the traces lack, with file and line (default: one line of counts)");
  command->add_option("--out", simulate.out_path, "write one CSV row per recurrence");
  command->add_option("--html", simulate.html_path, "write an HTML page: ratios to Default, regret curves, search paths");
  add_number_option(*command, "--drift-after", simulate.drift_after, {1, 1'000'000},
                    "data drift after N recurrences: epochs to target change (see --drift-scale); zeus "
                    "runs with and without --window (default 10) side by side");
  add_checked_text_option(*command, "--drift-scale", simulate.drift_scale,
                          [](const std::string& text) { parse_drift_scale(text); },
                          "F: the optimal batch size needs F x the epochs after the drift (default 2; F in (0, 1000]); "
                          "or B=F,B=F per batch size");
  command->add_option("--learned-on", simulate.learned_on,
                      "across GPU models: learn on this GPU (v100, a40 or a power-trace CSV), then compare "
                      "translated vs from-scratch recurrences on --gpu");
  add_number_option(*command, "--learn-recurrences", simulate.learn_recurrences, {0, 100'000},
                    "  ... on the first GPU (default 20)");
  add_number_option(*command, "--deploy-recurrences", simulate.deploy_recurrences, {1, 100'000},
                    "  ... on --gpu (default 20)");
  add_checked_text_option(*command, "--translate-with", simulate.translate_with,
                          [](const std::string& text) { parse_translate_with(text); },
                          "  ... what is known of --gpu: trace (its power trace), profiled:N (N batch sizes near the "
                          "best, 1-1000) or sizes:B1,B2 (those batch sizes)");
  add_number_option(*command, "--prior-observations", simulate.prior_observations, positive_up_to(1e6),
                    "  ... translated evidence per batch size weighs as at most this many runs (default 2)");
  command->add_option("--cluster", simulate.cluster_trace,
                      "replay a job-group trace (zeus group format, '-' for stdin; or raw "
                      "job_id,group,submit_s,duration_s, a file) over the six workloads");
  add_number_option(*command, "--max-retries", simulate.max_retries, {0, 1000},
                    "with --cluster: a job missing its target is resubmitted at most this often (default 20)");
}

void add_cluster_trace(CommandLine& cli) {
  ClusterTraceShape& shape = cli.cluster_trace.shape;
  const ClusterTraceLimits& limits = kClusterTraceLimits;
  CLI::App* command = cli.cluster_trace_command = cli.app.add_subcommand(
      "cluster-trace", "write a synthetic job-group trace (raw format) for `joule simulate --cluster`");
  add_number_option(*command, "--jobs", shape.jobs, {std::size_t{1}, limits.max_jobs}, "jobs in all (default 20000)");
  add_number_option(*command, "--groups", shape.groups, {std::size_t{1}, limits.max_groups},
                    "recurring job groups (default 500)");
  add_number_option(*command, "--days", shape.days, positive_up_to(limits.max_days), "time span (default 60)");
  add_number_option(*command, "--seed", shape.seed, kSeedRange, "random seed (default 1)");
  add_number_option(*command, "--group-size-alpha", shape.group_size_alpha, positive_up_to(limits.max_group_size_alpha),
                    "Pareto tail of group sizes, smaller is heavier (default 1.5)");
  add_number_option(*command, "--max-group-weight", shape.max_group_weight, {1.0, limits.max_group_weight},
                    "largest group weight, the smallest being 1: truncates the tail (default 200)");
  add_number_option(*command, "--bursty-fraction", shape.bursty_fraction, {0.0, 1.0},
                    "share of groups submitting in bursts (default 0.3)");
  add_number_option(*command, "--median-runtime-s", shape.median_runtime_s,
                    positive_up_to(limits.max_median_runtime_s),
                    "median over groups of a group's median job runtime (default 1800)");
  add_number_option(*command, "--runtime-spread", shape.runtime_spread, {0.0, limits.max_runtime_spread},
                    "log-normal sigma of group median runtimes (default 1.5)");
  add_number_option(*command, "--job-runtime-spread", shape.job_runtime_spread, {0.0, limits.max_runtime_spread},
                    "log-normal sigma of job runtimes within a group (default 0.3)");
  command->add_option("--out", cli.cluster_trace.out_path, "CSV file to write (default '-': stdout)");
}

void add_train_sim(CommandLine& cli) {
  TrainSimOptions& train_sim = cli.train_sim;
  CLI::App* command = cli.train_sim_command = cli.app.add_subcommand(
      "train-sim", "a synthetic training loop on simulated GPUs with the just-in-time power-limit optimizer");
  add_checked_text_option(*command, "--sim", cli.common.sim_spec, [](const std::string& text) { parse_sim_spec(text); },
                          "simulated GPUs, e.g. count=4 (also $JOULE_SIM)");
  command->add_option("--objective", train_sim.objective, "time, energy, cost or slowdown (default cost)");
  add_number_option(*command, "--eta", train_sim.eta, kEtaRange, "for cost: energy (1) vs time (0), default 0.5");
  add_number_option(*command, "--max-slowdown", train_sim.max_slowdown, {1.0, 100.0},
                    "for slowdown: allowed factor, default 1.1");
  add_number_option(*command, "--epochs", train_sim.epochs, {1, 100'000}, "default 2");
  add_number_option(*command, "--steps-per-epoch", train_sim.steps_per_epoch, {1, 10'000'000}, "default 1000");
  add_number_option(*command, "--step-ms", train_sim.step_ms, positive_up_to(3'600'000.0),
                    "step time at full speed, default 100");
  add_number_option(*command, "--step-w", train_sim.step_w, positive_up_to(1000.0), "spacing of the limits tried, default 25");
  command->add_option("--knob", train_sim.knob, "what to tune: power_limit (default), sm_clock or memory_clock")
      ->check(CLI::IsMember({"power_limit", "sm_clock", "memory_clock"}));
  add_number_option(*command, "--step-mhz", train_sim.step_mhz, positive_up_to(10'000.0),
                    "spacing of the SM clock caps tried, default 90");
  add_number_option(*command, "--warmup-steps", train_sim.warmup_steps, {0, 1'000'000}, "per limit, default 5");
  add_number_option(*command, "--measure-steps", train_sim.measure_steps, {1, 1'000'000}, "per limit, default 20");
  command->add_flag("--observer", train_sim.observer, "profile and report, never change a limit");
  add_number_option(*command, "--stall-ms", train_sim.stall_ms, {0.0, 3'600'000.0},
                    "mean stall before each step's GPU work, drifting and jittering as a real input "
                    "pipeline's does (default 0: every step alike)");
  add_number_option(*command, "--seed", train_sim.seed, kSeedRange, "the stalls' random stream (default 1)");
  command->add_option("--profile", train_sim.profile_path, "JSON file of saved profiles");
  command->add_flag("--reprofile", train_sim.reprofile, "ignore a saved profile");
  command->add_option("--job", train_sim.job, "job name (profile key), default train-sim");
  add_number_option(*command, "--batch-size", train_sim.batch_size, {0, kBatchSizeRange.max},
                    "batch size (profile key; default 0: none)");
}

void add_sweep(CommandLine& cli) {
  SweepCommandOptions& sweep = cli.sweep;
  CLI::App* command = cli.sweep_command =
      cli.app.add_subcommand("sweep", "run a command over a grid of settings with repeats, measuring every run");
  add_common_options(*command, cli.common);
  command->add_option("config", sweep.config_path, "the sweep's TOML file")->required();
  command->add_flag("--no-control", sweep.no_control, "never change GPU settings (refuses power_limit grids)");
  command->add_option("--store", sweep.store_path, "SQLite results store (default: from the config)");
  command->add_option("--export", sweep.export_path, "write every run to this CSV file");
  command->add_flag("--export-only", sweep.export_only, "only export what the store holds");
  command->add_flag("--dry-run", sweep.dry_run,
                    "list the runs still to do (configuration, repeat, command) and how long they may take");
  command->add_flag("--retry-failed", sweep.retry_failed,
                    "run the failed runs of the store again (each failed attempt is kept)");
  command->add_flag("-y,--yes", sweep.yes, "start a sweep of more than 1000 runs to run");
  add_number_option(*command, "--kill-grace-s", sweep.kill_grace_s, kKillGraceRange,
                    "on SIGTERM, SIGINT or SIGHUP the run's whole process group gets the signal, then SIGKILL after "
                    "this many seconds if any of it is left (default: the config's kill_grace_s, else 10)");
}

void add_analyze_and_report(CommandLine& cli) {
  CLI::App* analyze = cli.analyze_command =
      cli.app.add_subcommand("analyze", "statistics, trade-offs, fits and Pareto front of a sweep");
  analyze->add_option("store", cli.analyze.store_path, "the sweep's SQLite results store")->required();
  analyze->add_flag("--json", cli.analyze.json, "print one JSON object");
  add_number_option(*analyze, "--max-power-w", cli.analyze.max_power_w, positive_up_to(1e6),
                    "the time price in eta picks (default: largest limit x GPUs)");

  CLI::App* report = cli.report_command =
      cli.app.add_subcommand("report", "write a self-contained HTML report with SVG plots of a sweep");
  report->add_option("store", cli.report.store_path, "the sweep's SQLite results store")->required();
  report->add_option("-o,--output", cli.report.output_path, "HTML file to write (default report.html)");
  report->add_option("--title", cli.report.title, "the report's title");
  add_carbon_options(*report, cli.report.carbon, "each configuration's mean run");
}

void add_exporter(CommandLine& cli) {
  ExporterCliOptions& exporter = cli.exporter;
  CLI::App* command = cli.exporter_command = cli.app.add_subcommand(
      "exporter", "serve Prometheus metrics: every GPU under dcgm-exporter's names (AMD GPUs also under AMD's exporter's), energy per GPU, CPU zone and job");
  add_common_options(*command, cli.common);
  command->add_option("--listen", exporter.listen, "address to listen on, HOST:PORT (default 127.0.0.1:9400; port 0: any)");
  add_number_option(*command, "--interval-s", exporter.interval_s, {0.01, 3600.0},
                    "how often energy is accounted and processes listed (default 1)");
  command->add_option("--port-file", exporter.port_file, "write the port listened on to this file");
  command->add_option("--jouled-socket", exporter.jouled_socket,
                      "jouled's socket, asked who holds each GPU's limit (default $JOULE_DAEMON_SOCKET or "
                      "/run/joule/jouled.sock; empty: do not ask)");
  command->add_option("--ledger", exporter.ledger,
                      "keep the job ledger in this file: every total goes on across restarts, and what the GPUs drew "
                      "while no exporter ran is charged from their energy counters (default: none, totals from zero)");
  add_number_option(*command, "--keep-jobs-days", exporter.keep_jobs_days, {0.0, 3650.0},
                    "forget a job (its series and ledger entries) once it was charged nothing this long, so a node "
                    "keeps and serves its recent jobs, not all it ever ran; 0: never (default 7)");
  command->add_option("--kubelet-socket", exporter.kubelet_socket,
                      "the kubelet's pod-resources socket (e.g. /var/lib/kubelet/pod-resources/kubelet.sock): label "
                      "GPUs and jobs with the Kubernetes namespace, pod and container holding them, and count each "
                      "container's GPU energy (default: none)");
  add_carbon_options(*command, exporter.carbon, "each job's GPU energy (joule_job_gpu_co2e_grams_total)",
                     /*with_price=*/false);
}

void add_ledger(CommandLine& cli) {
  LedgerCliOptions& ledger = cli.ledger;
  CLI::App* command = cli.ledger_command = cli.app.add_subcommand(
      "ledger", "what each job on this node cost: its GPU energy from the exporter's job ledger (--ledger)");
  command->add_option("job", ledger.job, "one job: slurm/4711, 4711, kubernetes/POD_UID, user/alice (default: every job)");
  command->add_option("--file", ledger.file, "the ledger (default /var/lib/joule-exporter/ledger.json, the packaged exporter's)");
  command->add_flag("--json", ledger.json, "print JSON");
  add_carbon_options(*command, ledger.carbon, "each job's GPU energy");
}

void add_slurm_epilog(CommandLine& cli) {
  SlurmEpilogCliOptions& epilog = cli.slurm_epilog;
  CLI::App* command = cli.slurm_epilog_command = cli.app.add_subcommand(
      "slurm-epilog", "slurmctld's EpilogSlurmctld: a finished job's GPU energy, from its nodes' exporters, into its "
                      "AdminComment, where sacct shows it");
  command->add_option("--job", epilog.job, "the Slurm job id (default $SLURM_JOB_ID)");
  command->add_option("--nodes", epilog.nodes, "its node list, as Slurm writes one (default $SLURM_JOB_NODELIST)");
  add_number_option(*command, "--exporter-port", epilog.exporter_port, {1, 65535},
                    "the port each node's joule exporter listens on (default 9400)");
  add_number_option(*command, "--timeout-s", epilog.timeout_s, {0.1, 600.0},
                    "how long each node's exporter has to answer (default 5)");
  add_number_option(*command, "--wait-s", epilog.wait_s, {0.0, 3600.0},
                    "how long to wait for the job to reach slurmdbd (default 30)");
  command->add_flag("--dry-run", epilog.dry_run, "print the comment, store nothing");
}

void add_serve(CommandLine& cli) {
  ServeCliOptions& serve = cli.serve;
  constexpr NumberRange<double> kRequestTimeout{0.1, 3600.0};
  constexpr NumberRange<std::size_t> kConnections{1, 1'000'000};
  CLI::App* command = cli.serve_command = cli.app.add_subcommand(
      "serve", "run the batch-size service: one bandit per recurring job, shared by every node (HTTP/JSON)");
  command->add_option("--store", serve.store,
                      "where jobs are kept: sqlite:PATH or postgresql://... (default sqlite:joule-jobs.db)");
  command->add_option("--listen", serve.listen, "address to listen on, HOST:PORT (default 127.0.0.1:8321; port 0: any)");
  add_number_option(*command, "--max-body-kb", serve.max_body_kb, NumberRange<std::size_t>{1, 1024 * 1024},
                    "largest request body accepted (default 64)");
  add_number_option(*command, "--read-timeout-s", serve.read_timeout_s, {1, 3600},
                    "drop a connection silent this long, idle or mid-request; a body cut short gets 408 (default 5)");
  add_number_option(*command, "--header-timeout-s", serve.header_timeout_s, kRequestTimeout,
                    "a request's headers must be in this long after its first byte, else 400 or closed "
                    "(default: --read-timeout-s)");
  add_number_option(*command, "--body-timeout-s", serve.body_timeout_s, kRequestTimeout,
                    "a request's body must be in this long after its headers, else 408 (default: --read-timeout-s)");
  add_number_option(*command, "--max-connections", serve.max_connections, kConnections,
                    "connections held at once; past it the oldest without a token (else the longest idle) is closed "
                    "(default 10000, kept under the open-file limit)");
  add_number_option(*command, "--max-anonymous-connections", serve.max_anonymous_connections, kConnections,
                    "of those, other machines' connections that have not shown a token (default 1000)");
  command->add_option("--port-file", serve.port_file, "write the port listened on to this file");
  command->add_flag("--quiet", serve.quiet, "no request log on stderr");
  command->add_option("--tokens", serve.tokens_file,
                      "clients on other machines need a token from this file (joule tokens create); "
                      "without it only this machine is answered");
  command->add_flag("--require-token", serve.require_token,
                    "clients on this machine need a token too (e.g. behind a local reverse proxy)");
}

void add_tokens_and_jobs(CommandLine& cli) {
  TokensCliOptions& tokens = cli.tokens;
  CLI::App* tokens_command = cli.tokens_command =
      cli.app.add_subcommand("tokens", "create, list or revoke the tokens of `joule serve --tokens FILE`");
  tokens_command->add_option("action", tokens.action, "create, list, or revoke USER|sha256:PREFIX")
      ->required()
      ->check(CLI::IsMember({"create", "list", "revoke"}));
  tokens_command->add_option("user", tokens.user, "revoke: the user whose tokens go, or a digest prefix (sha256:...)");
  tokens_command->add_option("--file", tokens.file, "the tokens file (created by the first create; it holds digests only)")->required();
  tokens_command->add_option("--user", tokens.user, "create: whom the token names");
  tokens_command
      ->add_option("--jobs", tokens.jobs,
                   "create: the jobs it may use: names, prefixes ending in '*', or '*' (comma-separated)")
      ->delimiter(',');

  JobsCliOptions& jobs = cli.jobs;
  CLI::App* jobs_command = cli.jobs_command =
      cli.app.add_subcommand("jobs", "list, show or export the jobs of a running `joule serve`; reset a damaged one");
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
}

// Every subcommand's help ends with an example that runs as written.
void add_footers(CommandLine& cli) {
  cli.info_command->footer("Example:\n  joule info --json");
  cli.top_command->footer("Examples:\n  joule top\n  joule top --backend sim --sim count=4,load=0.6 --once");
  cli.measure_command->footer("Examples:\n  joule measure -- python3 train.py\n"
                              "  joule measure --json --interval-ms 10 --timeline power.csv -- ./train\n"
                              "  joule measure --carbon-region FR --pue 1.2 --price 0.25 --currency EUR -- ./train\n"
                              "  mpirun -n 8 joule measure --mpi -- python3 train.py");
  cli.simulate_command->footer("Examples:\n  joule simulate --seeds 1..10 --html simulation.html\n"
                               "  joule simulate --gpu a40 --learned-on v100 --seeds 1..10\n"
                               "  joule simulate --cluster data/cluster/example_groups.csv");
  cli.cluster_trace_command->footer(
      "Example:\n  joule cluster-trace --jobs 1200000 --groups 2000 --days 60 --out trace.csv");
  cli.train_sim_command->footer(
      "Examples:\n  joule train-sim --sim count=2 --epochs 3\n  joule train-sim --sim count=2 --epochs 6 --knob sm_clock "
      "--objective energy");
  cli.sweep_command->footer("Examples:\n  joule sweep sweep.toml --dry-run\n  joule sweep sweep.toml --export runs.csv");
  cli.analyze_command->footer("Example:\n  joule analyze sweep.sqlite --json");
  cli.report_command->footer("Example:\n  joule report sweep.sqlite -o report.html");
  cli.serve_command->footer("Examples:\n  joule serve --store sqlite:/var/lib/joule-serve/jobs.db --listen 127.0.0.1:8321\n"
                            "  joule serve --store sqlite:jobs.db --listen 0.0.0.0:8321 --tokens tokens");
  cli.jobs_command->footer("Examples:\n  joule jobs list\n  joule jobs export resnet50 --service http://127.0.0.1:8321\n"
                           "  joule jobs reset resnet50 --store sqlite:/var/lib/joule-serve/jobs.db\n"
                           "A token for a remote service comes from $JOULE_SERVICE_TOKEN.");
  cli.tokens_command->footer("Examples:\n  joule tokens create --file tokens --user alice --jobs 'resnet50,bert-*'\n"
                             "  joule tokens list --file tokens\n  joule tokens revoke alice --file tokens");
  cli.exporter_command->footer("Examples:\n  joule exporter                                # http://127.0.0.1:9400/metrics\n"
                               "  joule exporter --listen 0.0.0.0:9400 --ledger /var/lib/joule-exporter/ledger.json\n"
                               "  joule exporter --listen 0.0.0.0:9400 --kubelet-socket /var/lib/kubelet/pod-resources/kubelet.sock");
  cli.ledger_command->footer("Examples:\n  joule ledger                                  # every job on this node\n"
                             "  joule ledger 4711 --carbon-region FR --price 0.25 --currency EUR\n"
                             "  joule ledger --file ledger.json --json");
  cli.slurm_epilog_command->footer("Examples (slurm.conf: EpilogSlurmctld=/usr/libexec/joule/slurm-epilog, docs/cluster.md):\n"
                                   "  joule slurm-epilog --job 4711 --nodes 'gpu[01-02]' --dry-run\n"
                                   "  sacct -j 4711 -X -o JobID,State,AdminComment%80");
  cli.app.footer(
      "Run 'joule SUBCOMMAND --help' for its options and an example.\n"
      "Exit status: 0 success; 1 an error (device, file, data; the message says which); 2 a usage error (an\n"
      "unknown or bad option or value); joule measure: the measured command's own status (126/127 when it\n"
      "could not be started).");
}

constexpr std::array<std::string_view, 15> kCommands = {
    "info",  "measure", "top",    "sweep",         "analyze",   "report",   "simulate",    "serve",
    "jobs",  "tokens",  "cluster-trace", "train-sim", "exporter", "ledger", "slurm-epilog"};

}  // namespace

CommandLine::CommandLine() : app("joule: measure and lower the energy of deep-learning training on GPUs") {
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("joule ") + version());
  add_info(*this);
  add_measure(*this);
  add_top(*this);
  add_simulate(*this);
  add_cluster_trace(*this);
  add_train_sim(*this);
  add_sweep(*this);
  add_analyze_and_report(*this);
  add_exporter(*this);
  add_ledger(*this);
  add_slurm_epilog(*this);
  add_serve(*this);
  add_tokens_and_jobs(*this);
  add_footers(*this);
}

namespace {

// Where a mistake's reader finds the options: the command's own help.
std::string help_hint(const CLI::App& app) {
  const auto chosen = app.get_subcommands();
  return chosen.empty() ? "see 'joule --help'" : fmt::format("see 'joule {} --help'", chosen.front()->get_name());
}

}  // namespace

std::optional<int> parse_command_line(CommandLine& cli, int argc, const char* const* argv, std::ostream& out,
                                      std::ostream& err) {
  const std::string_view first = argc > 1 ? argv[1] : "";
  if (!first.empty() && first[0] != '-' && std::find(kCommands.begin(), kCommands.end(), first) == kCommands.end()) {
    err << fmt::format("joule: unknown command '{}' (expected info, measure, top, sweep, analyze, report, simulate, "
                       "cluster-trace, train-sim, serve, jobs, tokens, exporter, ledger or slurm-epilog; see 'joule --help')\n",
                       printable(first));
    return 2;
  }
  try {
    cli.app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return cli.app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return cli.app.exit(e, out, err);
  } catch (const CLI::ExtrasError&) {
    // Name the first unknown option alone; CLI11's own text also lists the
    // "--" separator and everything after it.
    std::string unknown;
    for (const auto& arg : cli.app.remaining(true)) {
      if (arg.size() > 1 && arg[0] == '-' && arg != "--") {
        unknown = arg;
        break;
      }
    }
    err << fmt::format("joule: unknown option '{}' ({})\n", printable(unknown), help_hint(cli.app));
    return 2;
  } catch (const CLI::ParseError& e) {
    err << fmt::format("joule: {} ({})\n", printable(e.what()), help_hint(cli.app));
    return 2;
  }
  return std::nullopt;
}

}  // namespace joule::cli
