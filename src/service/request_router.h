// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What `joule serve` does with a request once the transport has read it
// (internal): the client's bytes checked, the route found, the client's
// access decided, the route run, every failure turned into its status, the
// request counted and logged. No sockets and no threads: HttpServer calls it
// from its I/O thread and workers, fuzz/service_fuzzer.cc calls it directly,
// so the fuzzer drives the very code the server runs.
//
// Neither admit() nor answer() throws. An exception that a route lets out,
// of any type, is that request's 500: logged once with the request line,
// counted in /metrics (joule_service_internal_errors_total); the service
// goes on.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "joule/service/batch_size_service.h"
#include "joule/service/http_server.h"
#include "joule/service/tokens.h"
#include "service/http_transport.h"

namespace joule::service {

// Where a route's requests run. /healthz is answered on the I/O thread (it
// reads the health monitor only); /metrics on a lane of its own, so that
// neither waits behind requests blocked on the store, and anonymous clients
// (who may reach only these) never occupy the store's workers.
enum class Lane { io, metrics, store };

struct RouterOptions {
  std::shared_ptr<BatchSizeService> service;
  std::string store_description;  // for /healthz
  std::shared_ptr<TokenFile> tokens;
  bool require_token = false;
  // One line per request (method, path, status, milliseconds); null: none.
  std::function<void(const std::string&)> log;
  // Internal errors (500s), one line each; null: the request log.
  std::function<void(const std::string&)> error_log;
  // The store's last health check (must not block) and the transport's
  // connection counts, for /healthz and /metrics; null: up, and none.
  std::function<StoreHealth()> store_health;
  std::function<http::TransportCounts()> connections;
};

// A JSON answer that never throws: a string that is not UTF-8 (which no
// answer should hold) is written with U+FFFD rather than ending the server.
http::Response json_response(int status, const nlohmann::json& body);

class RequestRouter {
 public:
  explicit RequestRouter(RouterOptions options);
  ~RequestRouter();
  RequestRouter(const RequestRouter&) = delete;
  RequestRouter& operator=(const RequestRouter&) = delete;

  // After the headers: a refusal (bytes that are not UTF-8 in the path,
  // query or Authorization header; no such path; no access), or the
  // admitted request's route, handed back to answer() with the body.
  http::Admission admit(const http::Request& head);
  // The lane an admitted request runs on.
  static Lane lane_of(const std::shared_ptr<void>& admitted);
  // Runs the admitted request's route on its whole request and answers.
  http::Response answer(const std::shared_ptr<void>& admitted, const http::Request& request);
  // The answer to an admitted request whose lane has no room: 503, counted.
  http::Response lane_full(const std::shared_ptr<void>& admitted, const http::Request& request, const std::string& why);
  // The transport refused a request itself (400, 408, 413): one log line.
  void refused(const http::Request& head, int status);

  uint64_t internal_errors() const { return internal_errors_; }
  std::string render_metrics();

 private:
  struct Route;
  struct Call;
  using RouteFn = std::function<void(const Call&, http::Response&)>;

  void add_routes();
  void add(std::string method, std::string pattern, std::string name, bool open, Lane lane, RouteFn fn);
  http::Response run(const Call& call);
  http::Response internal_error(const http::Request& request, const std::string& what);
  void finish(const std::string& route, const http::Request& request, int status, double seconds);
  void log_line(const std::function<void(const std::string&)>& log, const std::string& line) noexcept;

  RouterOptions options_;
  class Metrics;
  std::unique_ptr<Metrics> metrics_;
  std::atomic<uint64_t> store_unavailable_answers_{0};
  std::atomic<uint64_t> internal_errors_{0};
  std::vector<Route> routes_;
};

}  // namespace joule::service
