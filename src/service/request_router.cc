// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "service/request_router.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "joule/common/utf8.h"
#include "joule/version.h"

namespace joule::service {
namespace {

using Clock = std::chrono::steady_clock;

void reply_json(http::Response& res, int status, const nlohmann::json& body) { res = json_response(status, body); }

void reply_error(http::Response& res, int status, const std::string& what) {
  reply_json(res, status, {{"error", what}});
}

// Through the service's parser: bytes that are not UTF-8, or a number no
// double holds, are a 400 naming where.
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
  throw RequestError(400, fmt::format("'{}' is not a {}", printable(text), what));
}

int64_t parse_id(const std::string& text) {
  return parse_positive(text, std::numeric_limits<int64_t>::max(), "recurrence id");
}

int parse_batch_size(const std::string& text) {
  return static_cast<int>(parse_positive(text, std::numeric_limits<int>::max(), "batch size"));
}

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

void check_access(const RequestAccess& access, const std::string& job) {
  if (!access.allows(job)) {
    throw RequestError(403, fmt::format("the token of user '{}' does not cover job '{}'", access.grant->user, job));
  }
}

// The parts of a request line and headers the service reads, checked before
// anything reads them: a malformed percent-escape, or bytes that are not
// UTF-8 once decoded, is the client's error, named with where ("" : none).
std::string untrusted_bytes_problem(const http::Request& head) {
  if (head.malformed_escape_at) {
    return fmt::format("the request target has a malformed percent-escape at byte {} (a '%' needs two hex digits)",
                       *head.malformed_escape_at);
  }
  const std::pair<const char*, const std::string*> parts[] = {
      {"the request path (percent-decoded)", &head.path},
      {"the request query (percent-decoded)", &head.query},
      {"the Authorization header", &head.authorization}};
  for (const auto& [where, text] : parts) {
    if (const auto at = first_invalid_utf8(*text)) return fmt::format("{} holds invalid UTF-8 at byte {}", where, *at);
  }
  return "";
}

}  // namespace

http::Response json_response(int status, const nlohmann::json& body) {
  http::Response res;
  res.status = status;
  res.content_type = "application/json";
  res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return res;
}

bool RequestAccess::allows(const std::string& job) const { return !grant || grant->allows(job); }

RequestAccess access_of(const std::string& remote_address, const std::string& authorization, TokenFile* tokens,
                        bool require_token) {
  return access_for(http::is_loopback_address(remote_address), authorization, tokens, require_token);
}

// Request counts and latencies per route, for /metrics.
class RequestRouter::Metrics {
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

struct RequestRouter::Route {
  std::string method, pattern, name;
  bool open;  // no token needed (health, metrics)
  Lane lane;
  RouteFn fn;
};

// An admitted request: its route, the path's captures, what it may touch;
// the whole request once its body is in.
struct RequestRouter::Call {
  const Route* route = nullptr;
  std::vector<std::string> matches;
  RequestAccess access;
  const http::Request* request = nullptr;  // during answer()
};

RequestRouter::RequestRouter(RouterOptions options) : options_(std::move(options)), metrics_(std::make_unique<Metrics>()) {
  if (!options_.error_log) options_.error_log = options_.log;
  add_routes();
}

RequestRouter::~RequestRouter() = default;

void RequestRouter::add(std::string method, std::string pattern, std::string name, bool open, Lane lane, RouteFn fn) {
  routes_.push_back({std::move(method), std::move(pattern), std::move(name), open, lane, std::move(fn)});
}

// After the headers, on the I/O thread: the client's bytes, the route, and
// whether the client may use it. Unknown paths and missing tokens are
// answered here, before any body is read.
http::Admission RequestRouter::admit(const http::Request& head) {
  try {
    if (const std::string problem = untrusted_bytes_problem(head); !problem.empty()) {
      refused(head, 400);
      return {json_response(400, {{"error", problem + "; nothing was changed"}}), false, nullptr};
    }
    for (const Route& route : routes_) {
      if (route.method != head.method) continue;
      std::optional<std::vector<std::string>> matches = match_path(route.pattern, head.path);
      if (!matches) continue;
      auto call = std::make_shared<Call>();
      call->route = &route;
      call->matches = std::move(*matches);
      if (route.open) return {std::nullopt, false, std::move(call)};
      try {
        call->access = access_for(!head.remote, head.authorization, options_.tokens.get(), options_.require_token);
      } catch (const RequestError& e) {
        http::Response res = json_response(e.status(), {{"error", e.what()}});
        res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"joule\"");
        finish(route.name, head, res.status, 0.0);
        return {std::move(res), false, nullptr};
      }
      return {std::nullopt, true, std::move(call)};
    }
    refused(head, 404);
    return {json_response(404, {{"error", fmt::format("no such path: {} {}", head.method, printable(head.path))}}),
            false, nullptr};
  } catch (const std::exception& e) {
    return {internal_error(head, e.what()), false, nullptr};
  } catch (...) {
    return {internal_error(head, "an exception that is not a std::exception"), false, nullptr};
  }
}

Lane RequestRouter::lane_of(const std::shared_ptr<void>& admitted) {
  return static_cast<const Call*>(admitted.get())->route->lane;
}

http::Response RequestRouter::answer(const std::shared_ptr<void>& admitted, const http::Request& request) {
  const auto start = Clock::now();
  Call call = *static_cast<const Call*>(admitted.get());
  call.request = &request;
  http::Response res = run(call);
  finish(call.route->name, request, res.status, std::chrono::duration<double>(Clock::now() - start).count());
  return res;
}

// Runs a route: maps the service's refusals to their status, anything else
// to 500 (logged; the server goes on).
http::Response RequestRouter::run(const Call& call) {
  http::Response res;
  try {
    call.route->fn(call, res);
  } catch (const RequestError& e) {
    reply_error(res, e.status(), e.what());
  } catch (const StoreBusyError& e) {  // unavailable, or busy past its deadline: try again later
    ++store_unavailable_answers_;
    reply_error(res, 503, e.what());
    res.headers.emplace_back("Retry-After", "1");
  } catch (const std::exception& e) {
    res = internal_error(*call.request, e.what());
  } catch (...) {
    res = internal_error(*call.request, "an exception that is not a std::exception");
  }
  return res;
}

http::Response RequestRouter::lane_full(const std::shared_ptr<void>& admitted, const http::Request& request,
                                        const std::string& why) {
  http::Response busy = json_response(503, {{"error", why}});
  busy.headers.emplace_back("Retry-After", "1");
  finish(static_cast<const Call*>(admitted.get())->route->name, request, 503, 0.0);
  return busy;
}

// A 500 whose text names no more than the exception said (which may hold a
// client's bytes: printable); logged once, with the request line.
http::Response RequestRouter::internal_error(const http::Request& request, const std::string& what) {
  ++internal_errors_;
  log_line(options_.error_log, fmt::format("internal error answering {} {}: {}", printable(request.method),
                                           printable(request.target), printable(what)));
  return json_response(500, {{"error", fmt::format("internal error: {}", printable(what))}});
}

void RequestRouter::refused(const http::Request& head, int status) {
  log_line(options_.log, fmt::format("{} {} {} (refused before routing)", printable(head.method),
                                     printable(head.target.empty() ? head.path : head.target), status));
}

void RequestRouter::finish(const std::string& route, const http::Request& request, int status, double seconds) {
  try {
    metrics_->add(route, status, seconds);
  } catch (...) {  // out of memory for a counter: the answer matters more
  }
  log_line(options_.log,
           fmt::format("{} {} {} {:.2f} ms", printable(request.method), printable(request.path), status, 1e3 * seconds));
}

void RequestRouter::log_line(const std::function<void(const std::string&)>& log, const std::string& line) noexcept {
  if (!log) return;
  try {
    log(line);
  } catch (...) {  // a log that fails must not turn an answer into a crash
  }
}

std::string RequestRouter::render_metrics() {
  std::string text = metrics_->render();
  try {
    int64_t jobs = 0, in_flight = 0;
    for (const JobSummary& s : options_.service->jobs()) {
      ++jobs;
      in_flight += s.in_flight;
    }
    const std::size_t damaged = options_.service->damaged_jobs();
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
  const BatchSizeService::WriteCounts writes = options_.service->write_counts();
  const http::TransportCounts connections = options_.connections ? options_.connections() : http::TransportCounts{};
  const StoreHealth health = options_.store_health ? options_.store_health() : StoreHealth{true, ""};
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
      health.available ? 1 : 0, store_unavailable_answers_.load());
  text += fmt::format(
      "# HELP joule_service_internal_errors_total Requests answered 500: an error of the service's own, each logged "
      "with its request line.\n"
      "# TYPE joule_service_internal_errors_total counter\njoule_service_internal_errors_total {}\n",
      internal_errors_.load());
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

void RequestRouter::add_routes() {
  add("GET", "/healthz", "healthz", true, Lane::io, [this](const Call&, http::Response& res) {
    const StoreHealth store = options_.store_health ? options_.store_health() : StoreHealth{true, ""};
    nlohmann::json body = {{"status", store.available ? "ok" : "unavailable"},
                           {"store", options_.store_description},
                           {"joule_version", version()},
                           {"store_available", store.available}};
    if (!store.available) {
      ++store_unavailable_answers_;
      body["store_problem"] = store.problem;
    }
    reply_json(res, store.available ? 200 : 503, body);
    if (!store.available) res.headers.emplace_back("Retry-After", "1");
  });
  add("GET", "/metrics", "metrics", true, Lane::metrics, [this](const Call&, http::Response& res) {
    res.status = 200;
    res.content_type = "text/plain; version=0.0.4";
    res.body = render_metrics();
  });
  BatchSizeService& service = *options_.service;
  add("GET", "/v1/jobs", "jobs", false, Lane::store, [&service](const Call& call, http::Response& res) {
    nlohmann::json list = nlohmann::json::array();
    for (const JobSummary& s : service.jobs()) {
      if (call.access.allows(s.spec.name)) list.push_back(s.to_json());
    }
    reply_json(res, 200, {{"jobs", list}});
  });
  add("POST", "/v1/jobs", "register", false, Lane::store, [&service](const Call& call, http::Response& res) {
    const JobSpec spec = JobSpec::from_json(parse_body(*call.request));
    check_access(call.access, spec.name);
    const bool created = service.register_job(spec);
    reply_json(res, created ? 201 : 200, service.job(spec.name).to_json());
  });
  add("GET", "/v1/jobs/{name}", "job", false, Lane::store, [&service](const Call& call, http::Response& res) {
    check_access(call.access, call.matches[1]);
    reply_json(res, 200, service.job(call.matches[1]).to_json());
  });
  add("GET", "/v1/jobs/{name}/export", "export", false, Lane::store, [&service](const Call& call, http::Response& res) {
    check_access(call.access, call.matches[1]);
    reply_json(res, 200, service.export_job(call.matches[1]));
  });
  add("POST", "/v1/jobs/{name}/recurrences", "ask", false, Lane::store, [&service](const Call& call, http::Response& res) {
    check_access(call.access, call.matches[1]);
    const nlohmann::json body = parse_body(*call.request);
    const std::string node = optional_text(body, "node").value_or(call.request->remote_address);
    const std::string gpu_model = optional_text(body, "gpu_model").value_or("");
    reply_json(res, 201, to_json(service.ask(call.matches[1], node, gpu_model)));
  });
  add("POST", "/v1/recurrences/{id}/result", "report", false, Lane::store,
      [&service](const Call& call, http::Response& res) {
        const RecurrenceResult result = RecurrenceResult::from_json(parse_body(*call.request));
        const double cost = service.report(parse_id(call.matches[1]), result,
                                           [&](const std::string& job) { check_access(call.access, job); });
        reply_json(res, 200, {{"cost", cost}});
      });
  add("POST", "/v1/recurrences/{id}/progress", "progress", false, Lane::store,
      [&service](const Call& call, http::Response& res) {
        const RecurrenceProgress progress = RecurrenceProgress::from_json(parse_body(*call.request));
        const ProgressAdvice advice = service.progress(parse_id(call.matches[1]), progress,
                                                       [&](const std::string& job) { check_access(call.access, job); });
        reply_json(res, 200,
                   {{"cost", advice.cost},
                    {"threshold_cost", std::isfinite(advice.threshold_cost) ? nlohmann::json(advice.threshold_cost)
                                                                            : nlohmann::json()},
                    {"stop", advice.stop}});
      });
  add("PUT", "/v1/jobs/{name}/profiles/{any}/{id}", "profile", false, Lane::store,
      [&service](const Call& call, http::Response& res) {
        check_access(call.access, call.matches[1]);
        const nlohmann::json body = parse_body(*call.request);
        if (!body.is_object() || !body.contains("entries")) {
          throw RequestError(400, "power profile: 'entries' is missing");
        }
        service.put_power_profile(call.matches[1], call.matches[2], parse_batch_size(call.matches[3]),
                                  body.at("entries"));
        res.status = 204;
      });
}

}  // namespace joule::service
