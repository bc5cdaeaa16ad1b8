#include "joule/service/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <type_traits>
#include <mutex>

#include <sys/socket.h>

#include "joule/version.h"

namespace joule::service {
namespace {

using Clock = std::chrono::steady_clock;

void reply_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& what) {
  reply_json(res, status, {{"error", what}});
}

nlohmann::json parse_body(const httplib::Request& req) {
  if (req.body.empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(req.body);
  } catch (const nlohmann::json::parse_error& e) {
    throw RequestError(400, fmt::format("the request body is not valid JSON ({})", e.what()));
  }
}

nlohmann::json to_json(const Assignment& a) {
  return {{"recurrence_id", a.recurrence_id},
          {"batch_size", a.batch_size},
          {"power_limit_w", a.power_limit_w ? nlohmann::json(*a.power_limit_w) : nlohmann::json()},
          // JSON has no infinity: no threshold yet is null.
          {"early_stop_threshold_cost", std::isfinite(a.early_stop_threshold_cost)
                                            ? nlohmann::json(a.early_stop_threshold_cost)
                                            : nlohmann::json()}};
}

nlohmann::json to_json(const JobSummary& s) {
  return {{"spec", s.spec.to_json()},       {"phase", s.phase},
          {"best_batch_size", s.best_batch_size}, {"revision", s.revision},
          {"recurrences", s.recurrences},   {"in_flight", s.in_flight}};
}

// True when a request's body ended before its Content-Length: the library
// answers 400 when a body read times out or the client hangs up mid-body, and
// keeps what arrived in req.body (compressed or multipart bodies aside).
bool body_cut_short(const httplib::Request& req) {
  if (!req.has_header("Content-Length") || req.has_header("Content-Encoding") || req.is_multipart_form_data()) {
    return false;
  }
  try {
    return req.body.size() < std::stoull(req.get_header_value("Content-Length"));
  } catch (const std::exception&) {
    return false;
  }
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

bool is_loopback_address(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0;
}

}  // namespace

bool RequestAccess::allows(const std::string& job) const { return !grant || grant->allows(job); }

RequestAccess access_of(const std::string& remote_address, const std::string& authorization, TokenFile* tokens,
                        bool require_token) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    if (is_loopback_address(remote_address) && !require_token) return {};
    throw RequestError(401, tokens ? "this service needs a token (Authorization: Bearer TOKEN)"
                                   : "this service answers requests from its own machine only");
  }
  if (authorization.rfind(kBearer, 0) != 0) throw RequestError(401, "the Authorization header must be 'Bearer TOKEN'");
  if (!tokens) throw RequestError(401, "this service takes no tokens (it was started without --tokens)");
  std::optional<TokenGrant> grant = tokens->grant(authorization.substr(kBearer.size()));
  if (!grant) throw RequestError(401, "unknown or revoked token");
  return {std::move(grant)};
}

struct HttpServer::Impl {
  std::shared_ptr<BatchSizeService> service;
  std::string store_description;
  ServeOptions options;
  httplib::Server server;
  RequestMetrics metrics;
  int port = 0;

  // Runs a handler: maps the service's refusals to their status, anything
  // else to 500 (logged; the server goes on), and counts the request.
  // Open routes (health, metrics) take (req, res); the others also get what
  // the request may touch, checked first.
  template <typename Handler>
  httplib::Server::Handler route(const std::string& name, Handler handler) {
    return [this, name, handler](const httplib::Request& req, httplib::Response& res) {
      const auto start = Clock::now();
      try {
        if constexpr (std::is_invocable_v<Handler, const httplib::Request&, httplib::Response&>) {
          handler(req, res);
        } else {
          handler(req, res, access_of(req.remote_addr, req.get_header_value("Authorization"), options.tokens.get(),
                                      options.require_token));
        }
      } catch (const RequestError& e) {
        if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"joule\"");
        reply_error(res, e.status(), e.what());
      } catch (const StoreBusyError& e) {
        res.set_header("Retry-After", "1");
        reply_error(res, 503, e.what());
      } catch (const std::exception& e) {
        reply_error(res, 500, fmt::format("internal error: {}", e.what()));
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      metrics.add(name, res.status, seconds);
      if (options.log) {
        options.log(fmt::format("{} {} {} {:.2f} ms", req.method, req.path, res.status, 1e3 * seconds));
      }
    };
  }

  void add_routes();

  static void check(const RequestAccess& access, const std::string& job) {
    if (!access.allows(job)) {
      throw RequestError(403, fmt::format("the token of user '{}' does not cover job '{}'", access.grant->user, job));
    }
  }
  void refuse_unrouted(const httplib::Request& req, httplib::Response& res);
};

void HttpServer::Impl::add_routes() {
  server.Get("/healthz", route("healthz", [this](const httplib::Request&, httplib::Response& res) {
    reply_json(res, 200, {{"status", "ok"}, {"store", store_description}, {"joule_version", version()}});
  }));
  server.Get("/metrics", route("metrics", [this](const httplib::Request&, httplib::Response& res) {
    int64_t jobs = 0, in_flight = 0;
    for (const JobSummary& s : service->jobs()) {
      ++jobs;
      in_flight += s.in_flight;
    }
    std::string text = metrics.render();
    const BatchSizeService::WriteCounts writes = service->write_counts();
    text += fmt::format(
        "# HELP joule_service_jobs Jobs registered.\n# TYPE joule_service_jobs gauge\njoule_service_jobs {}\n"
        "# HELP joule_service_recurrences_in_flight Recurrences asked for and not yet reported.\n"
        "# TYPE joule_service_recurrences_in_flight gauge\njoule_service_recurrences_in_flight {}\n"
        "# HELP joule_service_writes_total Asks and reports carried by store transactions (refused ones too).\n"
        "# TYPE joule_service_writes_total counter\njoule_service_writes_total {}\n"
        "# HELP joule_service_write_transactions_total Store transactions that carried them (group commit).\n"
        "# TYPE joule_service_write_transactions_total counter\njoule_service_write_transactions_total {}\n",
        jobs, in_flight, writes.writes, writes.transactions);
    res.status = 200;
    res.set_content(text, "text/plain; version=0.0.4");
  }));
  server.Get("/v1/jobs", route("jobs", [this](const httplib::Request&, httplib::Response& res, const RequestAccess& access) {
    nlohmann::json list = nlohmann::json::array();
    for (const JobSummary& s : service->jobs()) {
      if (access.allows(s.spec.name)) list.push_back(to_json(s));
    }
    reply_json(res, 200, {{"jobs", list}});
  }));
  server.Post("/v1/jobs", route("register", [this](const httplib::Request& req, httplib::Response& res,
                                                   const RequestAccess& access) {
    const JobSpec spec = JobSpec::from_json(parse_body(req));
    check(access, spec.name);
    const bool created = service->register_job(spec);
    reply_json(res, created ? 201 : 200, to_json(service->job(spec.name)));
  }));
  server.Get(R"(/v1/jobs/([A-Za-z0-9._-]+))",
             route("job", [this](const httplib::Request& req, httplib::Response& res, const RequestAccess& access) {
               check(access, req.matches[1]);
               reply_json(res, 200, to_json(service->job(req.matches[1])));
             }));
  server.Get(R"(/v1/jobs/([A-Za-z0-9._-]+)/export)",
             route("export", [this](const httplib::Request& req, httplib::Response& res, const RequestAccess& access) {
               check(access, req.matches[1]);
               reply_json(res, 200, service->export_job(req.matches[1]));
             }));
  server.Post(R"(/v1/jobs/([A-Za-z0-9._-]+)/recurrences)",
              route("ask", [this](const httplib::Request& req, httplib::Response& res, const RequestAccess& access) {
                check(access, req.matches[1]);
                const nlohmann::json body = parse_body(req);
                const std::string node = optional_text(body, "node").value_or(req.remote_addr);
                const std::string gpu_model = optional_text(body, "gpu_model").value_or("");
                reply_json(res, 201, to_json(service->ask(req.matches[1], node, gpu_model)));
              }));
  server.Post(R"(/v1/recurrences/([0-9]+)/result)",
              route("report", [this](const httplib::Request& req, httplib::Response& res, const RequestAccess& access) {
                const RecurrenceResult result = RecurrenceResult::from_json(parse_body(req));
                const double cost = service->report(parse_id(req.matches[1]), result, [&](const std::string& job) {
                  check(access, job);
                });
                reply_json(res, 200, {{"cost", cost}});
              }));
  server.Post(R"(/v1/recurrences/([0-9]+)/progress)",
              route("progress", [this](const httplib::Request& req, httplib::Response& res, const RequestAccess& access) {
                const RecurrenceProgress progress = RecurrenceProgress::from_json(parse_body(req));
                const ProgressAdvice advice = service->progress(parse_id(req.matches[1]), progress,
                                                                [&](const std::string& job) { check(access, job); });
                reply_json(res, 200, {{"cost", advice.cost},
                                      {"threshold_cost", std::isfinite(advice.threshold_cost)
                                                             ? nlohmann::json(advice.threshold_cost)
                                                             : nlohmann::json()},
                                      {"stop", advice.stop}});
              }));
  server.Put(R"(/v1/jobs/([A-Za-z0-9._-]+)/profiles/([^/]+)/([0-9]+))",
             route("profile", [this](const httplib::Request& req, httplib::Response& res, const RequestAccess& access) {
               check(access, req.matches[1]);
               const nlohmann::json body = parse_body(req);
               if (!body.contains("entries")) throw RequestError(400, "power profile: 'entries' is missing");
               service->put_power_profile(req.matches[1], req.matches[2], parse_batch_size(req.matches[3]), body.at("entries"));
               res.status = 204;
             }));
  server.set_error_handler(
      [this](const httplib::Request& req, httplib::Response& res) { refuse_unrouted(req, res); });
}

// Unknown paths and methods, bodies too large or too slow, requests the
// library cannot parse: a JSON error like every other refusal, logged.
void HttpServer::Impl::refuse_unrouted(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;  // a handler's own refusal
  if (res.status == 400 && body_cut_short(req)) {
    // The client stalled (or hung up) mid-body; what follows on this
    // connection would be the rest of that body, so it must close.
    res.set_header("Connection", "close");
    reply_error(res, 408,
                fmt::format("the request body stopped after {} of {} bytes (nothing for {} s); nothing was changed",
                            req.body.size(), req.get_header_value("Content-Length"), options.read_timeout_s));
  } else {
    reply_error(res, res.status,
                res.status == 404   ? fmt::format("no such path: {} {}", req.method, req.path)
                : res.status == 413 ? fmt::format("the request body is larger than the service takes")
                                    : fmt::format("{} {}: refused (a malformed or incomplete request)", req.method,
                                                  req.path));
  }
  if (options.log) options.log(fmt::format("{} {} {} (refused before routing)", req.method, req.path, res.status));
}

HttpServer::HttpServer(std::shared_ptr<BatchSizeService> service, std::string store_description, ServeOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->service = std::move(service);
  impl_->store_description = std::move(store_description);
  impl_->options = std::move(options);
  auto& server = impl_->server;
  const std::size_t threads = impl_->options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(impl_->options.max_body_bytes);
  server.set_tcp_nodelay(true);  // replies are one small write: no Nagle delay
  // A training run's client keeps its connection for every request; closing
  // it every few requests (the library's default is 5) races with the next
  // request already on its way. A connection silent for the read timeout is
  // closed, idle between requests or in the middle of one; that also bounds
  // how long stop() waits for an idle one. The timeout is per read, not per
  // request: docs/service.md ("Slow clients") says what that leaves open.
  server.set_keep_alive_max_count(100000);
  server.set_keep_alive_timeout(impl_->options.read_timeout_s);
  server.set_read_timeout(impl_->options.read_timeout_s, 0);
  server.set_write_timeout(impl_->options.read_timeout_s, 0);
  impl_->add_routes();
  int listening_fd = -1;
  server.set_socket_options([&listening_fd](int fd) {
    httplib::default_socket_options(fd);
    listening_fd = fd;
  });
  const std::string& host = impl_->options.host;
  const int port = impl_->options.port;
  impl_->port = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (impl_->port < 0) throw Error(fmt::format("joule serve: cannot listen on {}:{} (in use, or not an address here)", host, port));
  // The library listens with a backlog of 5: a burst of recurrences
  // connecting at once (a cluster's jobs starting together) overflowed it,
  // and on Linux a connection the accept queue has no room for looks
  // established to its client, whose request then goes unanswered for a
  // second or is reset. Listening again only enlarges the queue.
  if (listening_fd >= 0) ::listen(listening_fd, SOMAXCONN);
  server.set_socket_options(httplib::default_socket_options);  // forget listening_fd
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() { impl_->server.listen_after_bind(); }

void HttpServer::stop() { impl_->server.stop(); }

}  // namespace joule::service
