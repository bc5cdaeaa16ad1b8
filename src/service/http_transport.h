// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 transport of `joule serve` (internal): one event-driven I/O
// thread (Boost.Beast on Asio) that accepts connections, reads whole
// requests against deadlines and writes answers, so that no client, slow or
// idle, holds a thread. What a request means is the Handler's business; it
// may answer from any thread (the server runs store work on a worker pool).
//
// Per connection, every phase is bounded in total, not per read:
//   idle (keep-alive, or before the first byte)   idle_timeout, then closed
//   headers, from their first byte                header_timeout: 400 when the
//                                                 request line was complete, else closed
//   body, from the end of the headers             body_timeout: 408, closed
//   answer being written                          write_timeout, then closed
// A declared Content-Length over max_body_bytes is answered 413 right after
// the headers, without reading the body.
//
// Capacity: at most max_connections sockets (also kept under the open-file
// limit); connections from other machines that have not yet been admitted
// with a token ("anonymous remote") at most max_anonymous_remote. A new
// connection past either cap closes the oldest anonymous one not being
// answered (past the total cap, else the idle keep-alive connection silent
// longest), so old or slow connections give way to new ones and
// authenticated clients' connections are closed only when idle.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace joule::service::http {

struct Request {
  std::string method;
  std::string target;  // as sent: the path, then '?' and the query; any bytes
  std::string path;    // the target's path, percent-decoded
  std::string query;   // the target's query, percent-decoded ("": none)
  // The offset in target of its first malformed percent-escape (a '%'
  // without two hex digits after it, kept as sent in path or query).
  std::optional<std::size_t> malformed_escape_at;
  std::string remote_address;
  bool remote = false;  // another machine's (not loopback, or listed in Limits::remote_addresses)
  std::string authorization;
  std::string body;
};

struct Response {
  int status = 200;
  std::string content_type;  // empty: no body type
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // close the connection once written
};

// Answers the request it was given, once, from any thread.
using Responder = std::function<void(Response)>;

// What the handler decides once a request's headers are in.
struct Admission {
  std::optional<Response> refusal;  // answer this now; the body is not read
  bool authenticated = false;       // the client showed a token or is trusted: no longer anonymous
  std::shared_ptr<void> context;    // handed back to Handler::handle
};

class Handler {
 public:
  virtual ~Handler() = default;
  // On the I/O thread, before the body is read: must not block.
  virtual Admission admit(const Request& head) = 0;
  // On the I/O thread with the whole body: must not block (queue work elsewhere).
  virtual void handle(Request request, std::shared_ptr<void> context, Responder respond) = 0;
  // The transport refused a request itself (400, 408, 413), for the log.
  virtual void refused(const Request& head, int status) = 0;
};

struct Limits {
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds header_timeout{5000};
  std::chrono::milliseconds body_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  std::size_t max_connections = 10000;
  std::size_t max_anonymous_remote = 1000;
  std::vector<std::string> remote_addresses;  // counted as other machines' (tests)
};

// What /metrics shows of the connections.
struct TransportCounts {
  std::size_t open = 0;
  std::size_t anonymous = 0;         // not yet admitted with a token or as trusted
  std::size_t anonymous_remote = 0;  // of those, from other machines
  uint64_t evicted = 0;              // closed to make room (caps above)
  uint64_t header_deadlines = 0;     // closed or answered 400: headers not in within header_timeout
  uint64_t body_deadlines = 0;       // answered 408
};

class Transport {
 public:
  // Binds and listens at once; throws Error naming host:port when it cannot.
  Transport(const std::string& host, int port, Limits limits, Handler& handler);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int port() const;
  std::size_t max_connections() const;  // after the open-file limit
  // Serves on the calling thread until stop() and every answer in progress is written.
  void run();
  // From any thread: stops accepting, closes idle and incomplete connections,
  // lets requests being answered finish.
  void stop();
  TransportCounts counts() const;

  struct Impl;  // public for the connections of http_transport.cc only

 private:
  std::unique_ptr<Impl> impl_;
};

// "127.x", "::1", "::ffff:127.x".
bool is_loopback_address(const std::string& address);
// A request's method and target as the transport reads them: the target
// split into path and query, each percent-decoded ('+' kept). Nothing is
// checked here: the bytes may be anything (the handler decides).
Request request_of(std::string_view method, std::string_view target);

}  // namespace joule::service::http
