// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/service/http_server.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <functional>
#include <optional>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "joule/version.h"
#include "service/http_transport.h"

namespace joule::service {
namespace {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

void reply_json(http::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.content_type = "application/json";
  res.body = body.dump();
}

void reply_error(http::Response& res, int status, const std::string& what) {
  reply_json(res, status, {{"error", what}});
}

// Through the service's parser: a number no double holds is a 400 naming its field.
nlohmann::json parse_body(const http::Request& req) { return parse_request_body(req.body); }

nlohmann::json to_json(const Assignment& a) {
  return {{"recurrence_id", a.recurrence_id},
          {"batch_size", a.batch_size},
          {"power_limit_w", a.power_limit_w ? nlohmann::json(*a.power_limit_w) : nlohmann::json()},
          // JSON has no infinity: no threshold yet is null.
          {"early_stop_threshold_cost", std::isfinite(a.early_stop_threshold_cost)
                                            ? nlohmann::json(a.early_stop_threshold_cost)
                                            : nlohmann::json()}};
}

// A string field of a request body, if there; another type is a 400.
std::optional<std::string> optional_text(const nlohmann::json& body, const char* name) {
  if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object");
  if (!body.contains(name) || body.at(name).is_null()) return std::nullopt;
  if (!body.at(name).is_string()) {
    throw RequestError(400, fmt::format("'{}' must be a string, not {}", name, body.at(name).type_name()));
  }
  return body.at(name).get<std::string>();
}

// A positive number in a path, at most `max`: digits past it (or past
// int64) are the client's mistake, a 400 naming `what`, not the server's.
int64_t parse_positive(const std::string& text, int64_t max, const char* what) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value > 0 && value <= max) return value;
  } catch (const std::exception&) {
  }
  throw RequestError(400, fmt::format("'{}' is not a {}", text, what));
}

int64_t parse_id(const std::string& text) {
  return parse_positive(text, std::numeric_limits<int64_t>::max(), "recurrence id");
}

int parse_batch_size(const std::string& text) {
  return static_cast<int>(parse_positive(text, std::numeric_limits<int>::max(), "batch size"));
}

// Request counts and latencies per route, for /metrics.
class RequestMetrics {
 public:
  static constexpr std::array<double, 9> kBucketsS = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5};

  void add(const std::string& route, int status, double seconds) {
    std::lock_guard lock(mutex_);
    ++counts_[{route, status}];
    Histogram& h = latency_[route];
    for (std::size_t i = 0; i < kBucketsS.size(); ++i) h.buckets[i] += seconds <= kBucketsS[i] ? 1 : 0;
    ++h.count;
    h.sum_s += seconds;
  }

  std::string render() const {
    std::lock_guard lock(mutex_);
    std::string out =
        "# HELP joule_service_requests_total Requests answered, by route and status.\n"
        "# TYPE joule_service_requests_total counter\n";
    for (const auto& [key, n] : counts_) {
      out += fmt::format("joule_service_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
    }
    out +=
        "# HELP joule_service_request_duration_seconds Time to answer a request, by route.\n"
        "# TYPE joule_service_request_duration_seconds histogram\n";
    for (const auto& [route, h] : latency_) {
      for (std::size_t i = 0; i < kBucketsS.size(); ++i) {
        out += fmt::format("joule_service_request_duration_seconds_bucket{{route=\"{}\",le=\"{}\"}} {}\n", route,
                           kBucketsS[i], h.buckets[i]);
      }
      out += fmt::format("joule_service_request_duration_seconds_bucket{{route=\"{}\",le=\"+Inf\"}} {}\n", route,
                         h.count);
      out += fmt::format("joule_service_request_duration_seconds_sum{{route=\"{}\"}} {}\n", route, h.sum_s);
      out += fmt::format("joule_service_request_duration_seconds_count{{route=\"{}\"}} {}\n", route, h.count);
    }
    return out;
  }

 private:
  struct Histogram {
    std::array<uint64_t, kBucketsS.size()> buckets{};
    uint64_t count = 0;
    double sum_s = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
  std::map<std::string, Histogram> latency_;
};

// Threads that run queued tasks in order of arrival; with max_queued, a
// task past that many waiting is refused (post returns false). The threads
// run `nicer` steps below the process's CPU priority (lowering one's own
// priority needs no privilege; where it fails they run at the process's).
class WorkerPool {
 public:
  WorkerPool(std::size_t threads, std::size_t max_queued, int nicer) : max_queued_(max_queued) {
    errno = 0;
    const int process_nice = ::getpriority(PRIO_PROCESS, 0);
    const bool known = errno == 0;
    const int nice = std::min(process_nice + nicer, 19);
    for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i) {
      threads_.emplace_back([this, known, nice, process_nice] {
        if (known && nice > process_nice) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
        work();
      });
    }
  }
  // Runs what is queued, then joins.
  ~WorkerPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  bool post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (max_queued_ > 0 && queue_.size() >= max_queued_) return false;
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return true;
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// The store's health, checked on a thread of its own every `period`, so
// that /healthz and /metrics read it without waiting for the store or
// queueing behind requests blocked on it. A check still running after
// `patience` counts as the store being down.
class StoreHealthMonitor {
 public:
  StoreHealthMonitor(std::function<StoreHealth()> check, Milliseconds period, Milliseconds patience)
      : check_(std::move(check)), period_(period), patience_(patience), started_at_(Clock::now()),
        thread_([this] { loop(); }) {}
  ~StoreHealthMonitor() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  StoreHealthMonitor(const StoreHealthMonitor&) = delete;
  StoreHealthMonitor& operator=(const StoreHealthMonitor&) = delete;

  // The last check's answer, at most period + patience old; never blocks.
  StoreHealth now() const {
    std::lock_guard lock(mutex_);
    const auto running = Clock::now() - started_at_;
    if (checking_ && running > patience_) {
      return {false, fmt::format("the store's health check has not answered for {:.1f} s",
                                 std::chrono::duration<double>(running).count())};
    }
    return last_;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      checking_ = true;
      started_at_ = Clock::now();
      lock.unlock();
      StoreHealth health;
      try {
        health = check_();
      } catch (const std::exception& e) {  // health() never throws; a store that does is down
        health = {false, e.what()};
      }
      lock.lock();
      last_ = std::move(health);
      checking_ = false;
      wake_.wait_for(lock, period_, [this] { return stopping_; });
    }
  }

  std::function<StoreHealth()> check_;
  Milliseconds period_, patience_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  StoreHealth last_;
  bool checking_ = true;
  Clock::time_point started_at_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is ready
};

// A route's path: literal segments and, in braces, {name} (a job name:
// letters, digits, '.', '_', '-'), {id} (digits) or {any} (a non-empty
// segment). The captures come back in order after the whole path (as a
// regex's would).
std::optional<std::vector<std::string>> match_path(std::string_view pattern, std::string_view path) {
  std::vector<std::string> captures = {std::string(path)};
  const auto fits = [](std::string_view kind, std::string_view segment) {
    if (segment.empty()) return false;
    for (const char c : segment) {
      const bool digit = c >= '0' && c <= '9';
      const bool name_char = digit || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '.' || c == '_' || c == '-';
      if (kind == "{id}" ? !digit : kind == "{name}" ? !name_char : c == '/') return false;
    }
    return true;
  };
  while (!pattern.empty() && !path.empty()) {
    const std::string_view p = pattern.substr(0, pattern.find('/', 1)), q = path.substr(0, path.find('/', 1));
    if (p.size() > 1 && p[1] == '{') {
      if (q.empty() || q[0] != '/' || !fits(p.substr(1), q.substr(1))) return std::nullopt;
      captures.emplace_back(q.substr(1));
    } else if (p != q) {
      return std::nullopt;
    }
    pattern.remove_prefix(p.size());
    path.remove_prefix(q.size());
  }
  if (!pattern.empty() || !path.empty()) return std::nullopt;
  return captures;
}

}  // namespace

bool RequestAccess::allows(const std::string& job) const { return !grant || grant->allows(job); }

namespace {

RequestAccess access_for(bool loopback, const std::string& authorization, TokenFile* tokens, bool require_token) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    if (loopback && !require_token) return {};
    throw RequestError(401, tokens ? "this service needs a token (Authorization: Bearer TOKEN)"
                                   : "this service answers requests from its own machine only");
  }
  if (authorization.rfind(kBearer, 0) != 0) throw RequestError(401, "the Authorization header must be 'Bearer TOKEN'");
  if (!tokens) throw RequestError(401, "this service takes no tokens (it was started without --tokens)");
  std::optional<TokenGrant> grant = tokens->grant(authorization.substr(kBearer.size()));
  if (!grant) throw RequestError(401, "unknown or revoked token");
  return {std::move(grant)};
}

// Where a route's requests run. /healthz is answered on the I/O thread
// (it reads the health monitor only); /metrics on a lane of its own, so that
// neither waits behind requests blocked on the store, and anonymous clients
// (who may reach only these) never occupy the store's workers.
enum class Lane { io, metrics, store };

// A request being answered: its route, the path's captures, what it may touch.
struct Call;
using RouteFn = std::function<void(const Call&, http::Response&)>;

struct Route {
  std::string method, pattern, name;
  bool open;  // no token needed (health, metrics)
  Lane lane;
  RouteFn fn;
};

struct Call {
  const Route* route = nullptr;
  std::vector<std::string> matches;
  RequestAccess access;
  http::Request request;
};

// The workers' CPU priority below the I/O thread's: on a busy machine (the
// store's work is CPU too, SQLite's all of it) the thread that accepts,
// reads and writes every connection and answers /healthz runs first.
constexpr int kWorkerNice = 5;
// Requests a metrics lane keeps waiting at most; more are answered 503.
constexpr std::size_t kMetricsQueue = 16;
// The store's health is checked every second; a check may take up to the
// store's own bound (3 s: JobStore::health()), and one running longer than
// kHealthPatience counts as the store being down.
constexpr Milliseconds kHealthPeriod{1000}, kHealthPatience{4000};

Milliseconds milliseconds_of(double seconds) { return Milliseconds(static_cast<int64_t>(seconds * 1000.0)); }

}  // namespace

RequestAccess access_of(const std::string& remote_address, const std::string& authorization, TokenFile* tokens,
                        bool require_token) {
  return access_for(http::is_loopback_address(remote_address), authorization, tokens, require_token);
}

struct HttpServer::Impl final : http::Handler {
  Impl(std::shared_ptr<BatchSizeService> s, std::string description, ServeOptions o)
      : service(std::move(s)), store_description(std::move(description)), options(std::move(o)),
        health([svc = service] { return svc->store_health(); }, kHealthPeriod, kHealthPatience) {
    add_routes();
    transport = std::make_unique<http::Transport>(options.host, options.port, limits(), *this);
    store_workers = std::make_unique<WorkerPool>(options.threads, 0, kWorkerNice);
    metrics_lane = std::make_unique<WorkerPool>(1, kMetricsQueue, kWorkerNice);
  }

  std::shared_ptr<BatchSizeService> service;
  std::string store_description;
  ServeOptions options;
  RequestMetrics metrics;
  std::atomic<uint64_t> store_unavailable_answers{0};
  StoreHealthMonitor health;
  std::vector<Route> routes;
  std::unique_ptr<http::Transport> transport;
  // Last: they finish their queued requests, whose answers go out through
  // the transport, before it goes.
  std::unique_ptr<WorkerPool> store_workers, metrics_lane;

  http::Limits limits() const;
  void add_routes();
  void add(std::string method, std::string pattern, std::string name, bool open, Lane lane, RouteFn fn) {
    routes.push_back({std::move(method), std::move(pattern), std::move(name), open, lane, std::move(fn)});
  }

  http::Admission admit(const http::Request& head) override;
  void handle(http::Request request, std::shared_ptr<void> context, http::Responder respond) override;
  void refused(const http::Request& head, int status) override {
    if (options.log) options.log(fmt::format("{} {} {} (refused before routing)", head.method, head.path, status));
  }
  void run(Call& call, const http::Responder& respond);
  void finish(const std::string& route, const http::Request& req, int status, double seconds) {
    metrics.add(route, status, seconds);
    if (options.log) options.log(fmt::format("{} {} {} {:.2f} ms", req.method, req.path, status, 1e3 * seconds));
  }
  std::string render_metrics();

  static void check(const RequestAccess& access, const std::string& job) {
    if (!access.allows(job)) {
      throw RequestError(403, fmt::format("the token of user '{}' does not cover job '{}'", access.grant->user, job));
    }
  }
};

http::Limits HttpServer::Impl::limits() const {
  const double read_s = options.read_timeout_s;
  http::Limits l;
  l.max_body_bytes = options.max_body_bytes;
  l.idle_timeout = l.write_timeout = milliseconds_of(read_s);
  l.header_timeout = milliseconds_of(options.header_timeout_s > 0 ? options.header_timeout_s : read_s);
  l.body_timeout = milliseconds_of(options.body_timeout_s > 0 ? options.body_timeout_s : read_s);
  l.max_connections = options.max_connections;
  l.max_anonymous_remote = options.max_anonymous_remote_connections;
  l.remote_addresses = options.treat_as_remote;
  return l;
}

// After the headers: the route, and whether the client may use it. Unknown
// paths and missing tokens are answered here, before any body is read.
http::Admission HttpServer::Impl::admit(const http::Request& head) {
  for (const Route& route : routes) {
    if (route.method != head.method) continue;
    std::optional<std::vector<std::string>> matches = match_path(route.pattern, head.path);
    if (!matches) continue;
    auto call = std::make_shared<Call>();
    call->route = &route;
    call->matches = std::move(*matches);
    if (route.open) return {std::nullopt, false, std::move(call)};
    try {
      call->access = access_for(!head.remote, head.authorization, options.tokens.get(), options.require_token);
    } catch (const RequestError& e) {
      http::Response res;
      res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"joule\"");
      reply_error(res, e.status(), e.what());
      finish(route.name, head, res.status, 0.0);
      return {std::move(res), false, nullptr};
    }
    return {std::nullopt, true, std::move(call)};
  }
  refused(head, 404);
  http::Response res;
  reply_error(res, 404, fmt::format("no such path: {} {}", head.method, head.path));
  return {std::move(res), false, nullptr};
}

void HttpServer::Impl::handle(http::Request request, std::shared_ptr<void> context, http::Responder respond) {
  auto call = std::static_pointer_cast<Call>(std::move(context));
  call->request = std::move(request);
  switch (call->route->lane) {
    case Lane::io: return run(*call, respond);
    case Lane::metrics:
      if (metrics_lane->post([this, call, respond] { run(*call, respond); })) return;
      {
        http::Response busy;
        busy.headers.emplace_back("Retry-After", "1");
        reply_error(busy, 503, fmt::format("{} requests of /metrics are waiting already", kMetricsQueue));
        finish(call->route->name, call->request, 503, 0.0);
        return respond(std::move(busy));
      }
    case Lane::store: store_workers->post([this, call, respond] { run(*call, respond); }); return;
  }
}

// Runs a route: maps the service's refusals to their status, anything else
// to 500 (logged; the server goes on), counts the request.
void HttpServer::Impl::run(Call& call, const http::Responder& respond) {
  const auto start = Clock::now();
  http::Response res;
  try {
    call.route->fn(call, res);
  } catch (const RequestError& e) {
    reply_error(res, e.status(), e.what());
  } catch (const StoreBusyError& e) {  // unavailable, or busy past its deadline: try again later
    ++store_unavailable_answers;
    res.headers.emplace_back("Retry-After", "1");
    reply_error(res, 503, e.what());
  } catch (const std::exception& e) {
    reply_error(res, 500, fmt::format("internal error: {}", e.what()));
  }
  finish(call.route->name, call.request, res.status, std::chrono::duration<double>(Clock::now() - start).count());
  respond(std::move(res));
}

std::string HttpServer::Impl::render_metrics() {
  std::string text = metrics.render();
  try {
    int64_t jobs = 0, in_flight = 0;
    for (const JobSummary& s : service->jobs()) {
      ++jobs;
      in_flight += s.in_flight;
    }
    const std::size_t damaged = service->damaged_jobs();
    text += fmt::format(
        "# HELP joule_service_jobs Jobs registered.\n# TYPE joule_service_jobs gauge\njoule_service_jobs {}\n"
        "# HELP joule_service_recurrences_in_flight Recurrences asked for and not yet reported.\n"
        "# TYPE joule_service_recurrences_in_flight gauge\njoule_service_recurrences_in_flight {}\n"
        "# HELP joule_service_damaged_jobs Jobs whose stored spec or state is damaged (joule jobs reset repairs them).\n"
        "# TYPE joule_service_damaged_jobs gauge\njoule_service_damaged_jobs {}\n",
        jobs, in_flight, damaged);
  } catch (const StoreBusyError&) {
    // The store is down or busy: the gauges that need it are left out, the rest still tells why.
  }
  const BatchSizeService::WriteCounts writes = service->write_counts();
  const http::TransportCounts connections = transport->counts();
  text += fmt::format(
      "# HELP joule_service_writes_total Asks and reports carried by store transactions (refused ones too).\n"
      "# TYPE joule_service_writes_total counter\njoule_service_writes_total {}\n"
      "# HELP joule_service_write_transactions_total Store transactions that carried them (group commit).\n"
      "# TYPE joule_service_write_transactions_total counter\njoule_service_write_transactions_total {}\n",
      writes.writes, writes.transactions);
  text += fmt::format(
      "# HELP joule_service_store_up Whether the store answered its last health check (checked every second).\n"
      "# TYPE joule_service_store_up gauge\njoule_service_store_up {}\n"
      "# HELP joule_service_store_unavailable_total Answers 503 because of the store: requests it could not do "
      "(unavailable, or busy past its deadline) and /healthz while it was down.\n"
      "# TYPE joule_service_store_unavailable_total counter\njoule_service_store_unavailable_total {}\n",
      health.now().available ? 1 : 0, store_unavailable_answers.load());
  text += fmt::format(
      "# HELP joule_service_connections Open connections, by whether the client has shown a token (or is trusted).\n"
      "# TYPE joule_service_connections gauge\n"
      "joule_service_connections{{client=\"anonymous\"}} {}\njoule_service_connections{{client=\"admitted\"}} {}\n"
      "# HELP joule_service_connections_evicted_total Connections closed to make room for new ones.\n"
      "# TYPE joule_service_connections_evicted_total counter\njoule_service_connections_evicted_total {}\n"
      "# HELP joule_service_request_deadlines_total Requests whose headers or body missed their deadline.\n"
      "# TYPE joule_service_request_deadlines_total counter\n"
      "joule_service_request_deadlines_total{{part=\"headers\"}} {}\n"
      "joule_service_request_deadlines_total{{part=\"body\"}} {}\n",
      connections.anonymous, connections.open - std::min(connections.open, connections.anonymous), connections.evicted,
      connections.header_deadlines, connections.body_deadlines);
  return text;
}

void HttpServer::Impl::add_routes() {
  add("GET", "/healthz", "healthz", true, Lane::io, [this](const Call&, http::Response& res) {
    const StoreHealth store = health.now();
    nlohmann::json body = {{"status", store.available ? "ok" : "unavailable"},
                           {"store", store_description},
                           {"joule_version", version()},
                           {"store_available", store.available}};
    if (!store.available) {
      ++store_unavailable_answers;
      body["store_problem"] = store.problem;
      res.headers.emplace_back("Retry-After", "1");
    }
    reply_json(res, store.available ? 200 : 503, body);
  });
  add("GET", "/metrics", "metrics", true, Lane::metrics, [this](const Call&, http::Response& res) {
    res.status = 200;
    res.content_type = "text/plain; version=0.0.4";
    res.body = render_metrics();
  });
  add("GET", "/v1/jobs", "jobs", false, Lane::store, [this](const Call& call, http::Response& res) {
    nlohmann::json list = nlohmann::json::array();
    for (const JobSummary& s : service->jobs()) {
      if (call.access.allows(s.spec.name)) list.push_back(s.to_json());
    }
    reply_json(res, 200, {{"jobs", list}});
  });
  add("POST", "/v1/jobs", "register", false, Lane::store, [this](const Call& call, http::Response& res) {
    const JobSpec spec = JobSpec::from_json(parse_body(call.request));
    check(call.access, spec.name);
    const bool created = service->register_job(spec);
    reply_json(res, created ? 201 : 200, service->job(spec.name).to_json());
  });
  add("GET", "/v1/jobs/{name}", "job", false, Lane::store, [this](const Call& call, http::Response& res) {
    check(call.access, call.matches[1]);
    reply_json(res, 200, service->job(call.matches[1]).to_json());
  });
  add("GET", "/v1/jobs/{name}/export", "export", false, Lane::store, [this](const Call& call, http::Response& res) {
    check(call.access, call.matches[1]);
    reply_json(res, 200, service->export_job(call.matches[1]));
  });
  add("POST", "/v1/jobs/{name}/recurrences", "ask", false, Lane::store, [this](const Call& call, http::Response& res) {
    check(call.access, call.matches[1]);
    const nlohmann::json body = parse_body(call.request);
    const std::string node = optional_text(body, "node").value_or(call.request.remote_address);
    const std::string gpu_model = optional_text(body, "gpu_model").value_or("");
    reply_json(res, 201, to_json(service->ask(call.matches[1], node, gpu_model)));
  });
  add("POST", "/v1/recurrences/{id}/result", "report", false, Lane::store, [this](const Call& call, http::Response& res) {
    const RecurrenceResult result = RecurrenceResult::from_json(parse_body(call.request));
    const double cost =
        service->report(parse_id(call.matches[1]), result, [&](const std::string& job) { check(call.access, job); });
    reply_json(res, 200, {{"cost", cost}});
  });
  add("POST", "/v1/recurrences/{id}/progress", "progress", false, Lane::store, [this](const Call& call, http::Response& res) {
    const RecurrenceProgress progress = RecurrenceProgress::from_json(parse_body(call.request));
    const ProgressAdvice advice = service->progress(parse_id(call.matches[1]), progress,
                                                    [&](const std::string& job) { check(call.access, job); });
    reply_json(res, 200,
               {{"cost", advice.cost},
                {"threshold_cost", std::isfinite(advice.threshold_cost) ? nlohmann::json(advice.threshold_cost)
                                                                        : nlohmann::json()},
                {"stop", advice.stop}});
  });
  add("PUT", "/v1/jobs/{name}/profiles/{any}/{id}", "profile", false, Lane::store,
      [this](const Call& call, http::Response& res) {
        check(call.access, call.matches[1]);
        const nlohmann::json body = parse_body(call.request);
        if (!body.contains("entries")) throw RequestError(400, "power profile: 'entries' is missing");
        service->put_power_profile(call.matches[1], call.matches[2], parse_batch_size(call.matches[3]),
                                   body.at("entries"));
        res.status = 204;
      });
}

HttpServer::HttpServer(std::shared_ptr<BatchSizeService> service, std::string store_description, ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(service), std::move(store_description), std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->transport->port(); }

void HttpServer::run() { impl_->transport->run(); }

void HttpServer::stop() { impl_->transport->stop(); }

}  // namespace joule::service
