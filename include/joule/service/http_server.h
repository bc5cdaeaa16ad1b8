// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// `joule serve`: the batch-size service over HTTP/JSON (Boost.Beast: one
// event-driven I/O thread, store work on a pool; docs/service.md, "Server design").
//
//   GET  /healthz                                  liveness and the store (503 while it is down)
//   GET  /metrics                                  Prometheus text format
//   GET  /v1/jobs                                  every job, summarised
//   POST /v1/jobs                  JobSpec         201 registered, 200 same spec there, 409 other spec
//   GET  /v1/jobs/NAME                             the job's summary
//   GET  /v1/jobs/NAME/export                      spec, state and every recurrence
//   POST /v1/jobs/NAME/recurrences {"node": ...}   201 an Assignment
//   POST /v1/recurrences/ID/result RecurrenceResult 200 {"cost": ...}
//   PUT  /v1/jobs/NAME/profiles/GPU_MODEL/BATCH_SIZE {"entries": [...]}  204
//
// Errors are {"error": "..."} with a 4xx status; nothing is changed by a
// refused request. Listens on 127.0.0.1 by default.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/service/batch_size_service.h"
#include "joule/service/tokens.h"

namespace joule::service {

struct ServeOptions {
  // Loopback clients may do anything without a token (unless
  // require_token); other clients need a token from this file. Without one,
  // only loopback clients are answered.
  std::shared_ptr<TokenFile> tokens;
  bool require_token = false;
  std::string host = "127.0.0.1";
  int port = 8321;  // 0: any free port (see HttpServer::port)
  std::size_t max_body_bytes = 64 * 1024;  // a larger declared Content-Length: 413 right after the headers
  // A connection silent this long between requests (keep-alive, or before
  // its first request) is closed; also how long an answer may take to write.
  int read_timeout_s = 5;
  // Whole-request deadlines, not per read (0: read_timeout_s): a request's
  // headers must be in within header_timeout_s of its first byte (else 400
  // when its request line came, or closed), its body within body_timeout_s
  // of the end of its headers (else 408). A client trickling bytes gains
  // nothing.
  double header_timeout_s = 0;
  double body_timeout_s = 0;
  // Threads running the requests that reach the store (they block on it);
  // connections wait on none of them: one I/O thread reads and writes them all.
  std::size_t threads = 64;
  // Connections held at once (each costs a socket; kept under the open-file
  // limit). Past it a new connection closes the oldest one that has not
  // shown a token (or is not trusted loopback), else the longest-idle one.
  std::size_t max_connections = 10000;
  // Of those, connections from other machines that have not (yet) shown a
  // token: past this, a new one closes the oldest of them. Token holders'
  // connections are never among them once their first request is admitted.
  std::size_t max_anonymous_remote_connections = 1000;
  // Addresses treated as other machines' although they are loopback (for
  // tests, which listen on loopback only): no token-free access, and the
  // anonymous-remote cap. Empty in production.
  std::vector<std::string> treat_as_remote;
  // One line per request (method, path, status, milliseconds); null: none.
  std::function<void(const std::string&)> log;
  // A request answered 500 (an error of the service's own): one line with
  // the request line and what went wrong; null: to `log`.
  std::function<void(const std::string&)> error_log;
};

// What a request may touch: every job (no grant: a loopback client without
// a token), or the jobs of its token's grant.
struct RequestAccess {
  std::optional<TokenGrant> grant;
  bool allows(const std::string& job) const;
};

// Decides from the client's address and its Authorization header; throws
// RequestError(401) for a missing, malformed, unknown or revoked token where
// one is needed. (Apart from the server so that tests can give it any
// address: the tests themselves listen on loopback only.)
RequestAccess access_of(const std::string& remote_address, const std::string& authorization, TokenFile* tokens,
                        bool require_token);

class HttpServer {
 public:
  // Binds at once (throws Error naming host:port when it cannot).
  HttpServer(std::shared_ptr<BatchSizeService> service, std::string store_description, ServeOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Serves until stop() (from any thread or a signal-handling thread).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace joule::service
