// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule serve` (the batch-size service) and `joule jobs` (its jobs, through
// the service's HTTP interface).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "joule/error.h"
#include "joule/service/batch_size_service.h"
#include "joule/service/client.h"
#include "joule/service/http_server.h"
#include "joule/service/tokens.h"

namespace joule::cli {

std::pair<std::string, int> parse_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) throw UsageError(fmt::format("--listen '{}': expected HOST:PORT", listen));
  std::string host = listen.substr(0, colon);
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  int port = -1;
  try {
    std::size_t used = 0;
    port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535) throw UsageError(fmt::format("--listen '{}': the port must be 0-65535", listen));
  return {host, port};
}

namespace {

bool is_loopback(const std::string& host) {
  in_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

std::string service_url(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("JOULE_SERVICE_URL");
  return env && *env ? env : "http://127.0.0.1:8321";
}

// One simulated job's optimizer, served: registered under a name unique to
// this run, its power profiles published so the service picks the limits.
class ServiceZeusOptimizer final : public RemoteZeusOptimizer {
 public:
  ServiceZeusOptimizer(const std::string& url, const WorkloadTrace& trace, const SimulationOptions& o)
      : client_(url) {
    static const std::string run_id = fmt::format("{}-{}", getpid(), std::time(nullptr));
    std::string workload = trace.spec.name;
    for (char& c : workload) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
    }
    service::JobSpec spec;
    spec.name = fmt::format("simulate-{}-w{}-s{}-{}", workload, o.window.value_or(0), o.seed, run_id);
    spec.batch_sizes = trace.batch_sizes;
    spec.default_batch_size = trace.default_batch_size;
    spec.eta = o.eta;
    spec.beta = o.beta;
    spec.window = o.window;
    spec.target_metric = trace.spec.target_text;
    spec.max_epochs = trace.max_epochs;
    spec.gpu_model = "simulated";
    spec.max_power_w = trace.max_power_w;
    spec.seed = o.seed;
    client_.register_job(spec);
    for (const auto& [batch_size, entries] : trace.power) {
      client_.put_power_profile(spec.name, spec.gpu_model, batch_size, service::power_profile_json(entries));
    }
    job_ = spec.name;
  }

  Decision ask() override {
    const service::Assignment a = client_.ask(job_, "joule simulate");
    recurrence_id_ = a.recurrence_id;
    return {a.batch_size, a.power_limit_w, a.early_stop_threshold_cost};
  }

  void report(const Recurrence& r) override {
    client_.report(recurrence_id_, {r.energy_j, r.time_s, r.converged, r.stopped_early});
  }

 private:
  service::BatchSizeClient client_;
  std::string job_;
  int64_t recurrence_id_ = 0;
};

}  // namespace

RemoteZeusFactory service_zeus_factory(const std::string& url) {
  return [url](const WorkloadTrace& trace, const SimulationOptions& options) {
    return std::make_unique<ServiceZeusOptimizer>(url, trace, options);
  };
}

int run_serve(const ServeCliOptions& o) {
  auto [host, port] = parse_listen(o.listen);
  if (!is_loopback(host) && o.tokens_file.empty()) {
    throw UsageError(fmt::format("--listen {}: answering other machines needs --tokens FILE (joule tokens create "
                                 "makes one); without tokens joule serve listens on loopback addresses only",
                                 o.listen));
  }
  if (o.require_token && o.tokens_file.empty()) throw UsageError("--require-token needs --tokens FILE");
  // SIGINT/SIGTERM are taken by a thread of their own (sigwait), so every
  // server thread started below inherits them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto store = std::shared_ptr<service::JobStore>(service::open_job_store(o.store));
  service::ServeOptions options;
  options.host = host;
  options.port = port;
  options.max_body_bytes = o.max_body_kb * 1024;
  options.read_timeout_s = o.read_timeout_s;
  options.header_timeout_s = o.header_timeout_s;
  options.body_timeout_s = o.body_timeout_s;
  options.max_connections = o.max_connections;
  options.max_anonymous_remote_connections = o.max_anonymous_connections;
  if (!o.quiet) options.log = [](const std::string& line) { std::cerr << "joule serve: " + line + "\n"; };
  // Internal errors (500s) go to the log even with --quiet: each is a bug to report.
  options.error_log = [](const std::string& line) { std::cerr << "joule serve: " + line + "\n"; };
  if (!o.tokens_file.empty()) {
    // Token file news (re-read, or refused and kept) go to the log even with --quiet.
    options.tokens = std::make_shared<service::TokenFile>(
        o.tokens_file, [](const std::string& line) { std::cerr << "joule serve: " + line + "\n"; });
  }
  options.require_token = o.require_token;
  auto jobs = std::make_shared<service::BatchSizeService>(store);
  // Damaged jobs and resets go to the log even with --quiet.
  jobs->set_log([](const std::string& line) { std::cerr << "joule serve: " + line + "\n"; });
  service::HttpServer server(jobs, store->describe(), options);
  std::cerr << fmt::format("joule serve: listening on http://{}:{} ({}; {})\n", host, server.port(), store->describe(),
                           o.tokens_file.empty() ? "this machine's clients only"
                           : o.require_token     ? "every client needs a token from " + o.tokens_file
                                                 : "other machines need a token from " + o.tokens_file);
  if (!o.port_file.empty()) {
    std::ofstream(o.port_file) << server.port() << '\n';
  }
  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    std::cerr << fmt::format("joule serve: {} received, stopping\n", strsignal(signal_number));
    server.stop();
  });
  server.run();
  // run() also returns when the listening socket fails: wake the stopper.
  kill(getpid(), SIGTERM);
  stopper.join();
  return 0;
}

int run_tokens(const TokensCliOptions& o) {
  if (o.action == "create") {
    if (o.user.empty()) throw UsageError("joule tokens create: --user NAME is needed");
    if (o.jobs.empty()) throw UsageError("joule tokens create: --jobs is needed ('*' for every job)");
    std::cout << service::create_token(o.file, o.user, o.jobs) << '\n';
    std::cerr << fmt::format("joule tokens: added to {} (only its SHA-256); the token is shown this once\n", o.file);
    return 0;
  }
  if (o.action == "revoke") {
    if (o.user.empty()) throw UsageError("joule tokens revoke: name the user (or sha256:PREFIX)");
    const int removed = service::revoke_tokens(o.file, o.user);
    std::cerr << fmt::format("joule tokens: {} token{} revoked in {}\n", removed, removed == 1 ? "" : "s", o.file);
    return removed > 0 ? 0 : 1;
  }
  std::cout << fmt::format("{:<20} {:<24} {}\n", "digest", "user", "jobs");
  for (const service::TokenLine& t : service::read_token_file(o.file)) {
    std::cout << fmt::format("{:<20} {:<24} {}\n", t.sha256_hex.substr(0, 19), t.grant.user,
                             fmt::join(t.grant.job_patterns, ","));
  }
  return 0;
}

namespace {

// `joule jobs reset NAME --store URL`: on the store itself, not through a
// service, so a job can be repaired whatever state the service is in; a
// running service reloads the job (the reset bumps its revision).
int reset_job(const JobsCliOptions& o) {
  if (o.store.empty()) {
    throw UsageError("joule jobs reset: --store URL is needed (the store `joule serve --store` uses)");
  }
  service::BatchSizeService jobs(std::shared_ptr<service::JobStore>(service::open_job_store(o.store)));
  const service::ResetOutcome done = jobs.reset_job(o.name, o.fresh);
  if (!done.was_damaged.empty()) std::cout << fmt::format("job '{}' was damaged: {}\n", o.name, done.was_damaged);
  std::cout << fmt::format("job '{}' reset to revision {}: {}\n", o.name, done.revision,
                           o.fresh ? "a fresh optimizer (its recurrences are kept)"
                                   : fmt::format("its optimizer rebuilt from {} finished recurrences", done.replayed));
  if (!done.skipped.empty()) {
    std::cout << fmt::format("skipped {} recurrences whose stored results are out of range: {}\n", done.skipped.size(),
                             fmt::join(done.skipped, ", "));
  }
  return 0;
}

}  // namespace

int run_jobs(const JobsCliOptions& o) {
  if (o.action == "reset") {
    if (o.name.empty()) throw UsageError("joule jobs reset: name the job");
    return reset_job(o);
  }
  service::BatchSizeClient client(service_url(o.service_url));
  if (o.action == "list") {
    const nlohmann::json jobs = client.jobs();
    if (o.json) {
      std::cout << jobs.dump(2) << '\n';
      return 0;
    }
    std::cout << fmt::format("{:<24} {:<9} {:>5} {:>11} {:>9}  {}\n", "job", "phase", "best", "recurrences", "in flight",
                             "gpu");
    for (const auto& j : jobs) {
      std::cout << fmt::format("{:<24} {:<9} {:>5} {:>11} {:>9}  {}\n", j["spec"]["name"].get<std::string>(),
                               j["phase"].get<std::string>(), j["best_batch_size"].get<int>(),
                               j["recurrences"].get<int64_t>(), j["in_flight"].get<int64_t>(),
                               j["spec"]["gpu_model"].get<std::string>());
    }
    // A damaged job is listed like the others; why, and the repair, below.
    for (const auto& j : jobs) {
      if (j["phase"] != "damaged") continue;
      const std::string name = j["spec"]["name"].get<std::string>();
      std::cout << fmt::format("\n{}: {}\n  repair: joule jobs reset {} --store STORE\n", name,
                               j.contains("damaged") ? j["damaged"].get<std::string>() : "its stored state is damaged",
                               name);
    }
    return 0;
  }
  if (o.name.empty()) throw UsageError(fmt::format("joule jobs {}: name the job", o.action));
  const nlohmann::json reply = o.action == "show" ? client.job(o.name) : client.export_job(o.name);
  std::cout << reply.dump(2) << '\n';
  return 0;
}

}  // namespace joule::cli
