// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The `joule` subcommands. Each parses nothing itself: main.cc owns the
// command line and hands over typed options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/carbon_options.h"
#include "cli/top_view.h"
#include "joule/device/discovery.h"
#include "joule/simulate/cluster.h"
#include "joule/simulate/simulator.h"

namespace joule::cli {

// Options every subcommand accepts.
struct CommonOptions {
  std::string backend = "auto";  // auto | nvml | sim
  std::string sim_spec;          // see parse_sim_spec()
  std::string gpus;              // "0,2": comma-separated indices; empty: all

  DiscoveryOptions discovery() const;
  // Discovers devices and applies the --gpus selection. Throws UsageError.
  Devices open_devices() const;
};

struct InfoOptions {
  bool json = false;
};
int run_info(const CommonOptions& common, const InfoOptions& options);

struct MeasureOptions {
  double interval_ms = 100.0;
  double counter_interval_ms = 5000.0;
  std::string timeline_path;
  std::string output_path;  // report goes here instead of stdout/stderr
  bool json = false;
  std::vector<std::string> sample_fields;  // util, clock, temp, mem, cap
  // Under mpirun/srun: every rank runs the command, each node is measured
  // once (by its lowest rank), rank 0 reports per node and in total.
  bool mpi = false;
  double mpi_timeout_s = 60.0;  // longest wait for the other ranks at a window edge
  CarbonFlags carbon;           // --carbon-region/--carbon-intensity, --pue, --price, --currency
  std::string emissions_csv;    // append a row in CodeCarbon's emissions.csv columns
  // On a stop signal the command's whole process group gets it, then SIGKILL
  // after this long if any of it is left.
  double kill_grace_s = 10.0;
  std::vector<std::string> command;
};
int run_measure(const CommonOptions& common, const MeasureOptions& options);

struct TopOptions {
  double interval_ms = 1000.0;  // between refreshes
  int iterations = 0;           // refreshes before exiting; 0: until q (--once: 1)
  bool ascii = false;           // ASCII sparklines even where the locale is UTF-8
  EnergyUnit unit = EnergyUnit::kJoule;
};
int run_top(const CommonOptions& common, const TopOptions& options);

struct SimulateOptions {
  // Without trace flags the bundled Zeus traces of `gpu` run (default v100);
  // --train-trace/--power-trace override either file.
  std::string train_trace, power_trace;
  std::string gpu;         // bundled power trace: v100, a40
  bool synthetic = false;  // the built-in synthetic workloads instead of traces
  std::vector<std::string> workloads;  // names, or "all"
  std::string dataset, network, optimizer;
  std::optional<double> target;
  std::optional<int> default_batch_size;
  double eta = 0.5;
  double beta = 2.0;
  uint64_t seed = 1;
  std::string seeds;   // "1..10" or "1,4,9"; overrides seed
  std::string policy = "all";
  std::optional<std::size_t> window;
  int recurrences = 0;
  bool strict = false;
  bool verbose = false;  // every note on the traces, not their one-line summary
  std::string out_path;
  std::string html_path;
  std::optional<int> drift_after;
  std::string drift_scale = "2";  // "F" (the optimal batch size) or "B=F,B=F"
  // Across GPU models (simulate_translate.cc): learn on `learned_on` (a
  // bundled GPU or a power-trace CSV), then deploy on the GPU above.
  std::string learned_on;
  int learn_recurrences = 20;
  int deploy_recurrences = 20;
  std::string translate_with = "trace";  // trace | profiled:N
  double prior_observations = 2.0;
  std::string cluster_trace;  // replay this job-group trace ("-": stdin)
  // The zeus policy asks a running `joule serve` at this URL instead of its
  // own optimizer (one job registered per workload, window and seed).
  std::string service_url;
  int max_retries = 20;
};
int run_simulate(const SimulateOptions& options);
int run_simulate_translate(const SimulateOptions& options);

// The train and power trace files the options name, the bundled ones filling
// in what is not given. Throws UsageError for conflicting flags, Error when the
// bundled traces are needed and cannot be found.
struct TracePaths {
  std::string train, power;
  std::string origin;  // for the report header: "" when both were given
};
TracePaths resolve_trace_paths(const SimulateOptions& options);
// The notes on what the traces lack (batch sizes left out, ...): one line of
// counts per reason on stderr, or with `verbose` each note with file and line.
void print_trace_notes(const std::vector<WorkloadTrace>& traces, bool verbose);
// `joule simulate --cluster TRACE` (cluster_command.cc).
int run_simulate_cluster(const SimulateOptions& options);

struct ClusterTraceOptions {
  ClusterTraceShape shape;  // the flags set its fields; its defaults are the command's
  std::string out_path = "-";
};
int run_cluster_trace(const ClusterTraceOptions& options);

struct TrainSimOptions {
  std::string objective = "cost";  // time, energy, cost, slowdown
  double eta = 0.5;
  double max_slowdown = 1.1;
  int epochs = 2;
  int steps_per_epoch = 1000;
  double step_ms = 100.0;
  double step_w = 25.0;
  int warmup_steps = 5;
  int measure_steps = 20;
  bool observer = false;
  double stall_ms = 0.0;  // mean stall before each step's GPU work (TrainingNoise); 0: none
  uint64_t seed = 1;      // the stalls' random stream
  std::string profile_path;
  bool reprofile = false;
  std::string job = "train-sim";
  std::string knob = "power_limit";
  double step_mhz = 90.0;
  int batch_size = 0;
};
int run_train_sim(const CommonOptions& common, const TrainSimOptions& options);

struct SweepCommandOptions {
  std::string config_path;
  bool no_control = false;
  std::string store_path;   // overrides the config's store
  std::string export_path;  // CSV of every run
  bool export_only = false;
  bool dry_run = false;  // list the runs, run nothing
  bool retry_failed = false;  // run failed runs again
  bool yes = false;           // start more than kConfirmRunsAbove runs
  // On a stop signal the run's whole process group gets it, then SIGKILL
  // after this long if any of it is left (overrides the config's kill_grace_s).
  std::optional<double> kill_grace_s;
};
int run_sweep_command(const CommonOptions& common, const SweepCommandOptions& options);

struct AnalyzeOptions {
  std::string store_path;
  bool json = false;
  std::optional<double> max_power_w;
};
int run_analyze(const AnalyzeOptions& options);

struct ReportOptions {
  std::string store_path;
  std::string output_path = "report.html";
  std::string title;
  CarbonFlags carbon;  // CO2e and cost per configuration
};
int run_report(const ReportOptions& options);

// "HOST:PORT" or ":PORT" (loopback); IPv4 literals and localhost. Throws
// UsageError naming the flag's value.
std::pair<std::string, int> parse_listen(const std::string& listen);

struct ExporterCliOptions {
  std::string listen = "127.0.0.1:9400";  // dcgm-exporter's port
  double interval_s = 1.0;                // accounting
  std::string port_file;
  std::optional<std::string> jouled_socket;  // none: $JOULE_DAEMON_SOCKET or jouled's default
  CarbonFlags carbon;  // a CO2e counter per job (no price)
  std::string ledger;  // the job ledger's file; empty: totals from zero at each start
  std::string kubelet_socket;  // the kubelet's pod-resources socket; empty: pods not asked
  double keep_jobs_days = 7.0;  // a job charged nothing this long is forgotten; 0: never
};
int run_exporter(const CommonOptions& common, const ExporterCliOptions& options);

struct ServeCliOptions {
  std::string store = "sqlite:joule-jobs.db";  // sqlite:PATH
  std::string listen = "127.0.0.1:8321";
  std::size_t max_body_kb = 64;
  int read_timeout_s = 5;  // a connection silent this long is dropped (408 mid-body)
  double header_timeout_s = 0;  // whole-request deadlines from the first byte; 0: read_timeout_s
  double body_timeout_s = 0;
  std::size_t max_connections = 10000;
  std::size_t max_anonymous_connections = 1000;  // other machines' connections without a token yet
  std::string port_file;  // the port listened on is written here (for --listen :0)
  bool quiet = false;     // no request log
  std::string tokens_file;  // remote clients' tokens (joule tokens); needed to listen beyond loopback
  bool require_token = false;  // loopback clients too
};
int run_serve(const ServeCliOptions& options);

struct TokensCliOptions {
  std::string action;  // create | list | revoke
  std::string file;
  std::string user;                // create; revoke: the user or a sha256: prefix
  std::vector<std::string> jobs;   // create
};
int run_tokens(const TokensCliOptions& options);
// For `joule simulate --service URL`: each simulated job's zeus optimizer is
// a job registered on that service (service_command.cc).
RemoteZeusFactory service_zeus_factory(const std::string& url);

struct JobsCliOptions {
  std::string action;  // list | show | export | reset
  std::string name;
  std::string service_url;  // default $JOULE_SERVICE_URL, else http://127.0.0.1:8321
  bool json = false;
  std::string store;   // reset: the service's store (sqlite:PATH or postgresql://...)
  bool fresh = false;  // reset: forget the finished recurrences' results too
};
int run_jobs(const JobsCliOptions& options);

struct LedgerCliOptions {
  std::string file = "/var/lib/joule-exporter/ledger.json";  // the packaged exporter's
  std::string job;  // "slurm/4711", "4711", "user/alice"; empty: every job
  bool json = false;
  CarbonFlags carbon;  // CO2e and price per job
};
int run_ledger(const LedgerCliOptions& options);

// joule slurm-epilog: every field defaults to what slurmctld gives its
// EpilogSlurmctld (SLURM_JOB_ID, SLURM_ARRAY_*, SLURM_JOB_NODELIST).
struct SlurmEpilogCliOptions {
  std::string job;       // Slurm's job id; default $SLURM_JOB_ID
  std::string nodes;     // the job's node list; default $SLURM_JOB_NODELIST
  int exporter_port = 9400;
  double timeout_s = 5.0;   // per node's exporter
  double wait_s = 30.0;     // for the job to reach slurmdbd
  bool dry_run = false;     // print the comment, store nothing
};
int run_slurm_epilog(const SlurmEpilogCliOptions& options);

}  // namespace joule::cli
