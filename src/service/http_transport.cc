// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "service/http_transport.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <list>

#include "joule/common/utf8.h"
#include "joule/error.h"

namespace joule::service::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Milliseconds = std::chrono::milliseconds;

// After an answer that closes the connection with request bytes still
// unread, read and drop what the client is still sending for this long (or
// this much) before closing: closing with unread bytes resets the
// connection, and the client may then lose the answer itself.
constexpr Milliseconds kLingerTime{1000};
constexpr std::size_t kLingerBytes = 1 << 20;
// accept() failing for want of file descriptors is retried after this.
constexpr Milliseconds kAcceptRetry{100};
// File descriptors kept for the store, the log and the tokens file.
constexpr rlim_t kReservedDescriptors = 128;

// what may hold the client's bytes (its request line): written with U+FFFD
// for any that are not UTF-8, never thrown over.
Response error_response(int status, const std::string& what) {
  return {status, "application/json",
          nlohmann::json{{"error", what}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          {},
          /*close=*/true};
}

double seconds(Milliseconds d) { return std::chrono::duration<double>(d).count(); }

// A parse error (the client's bytes are not HTTP) as opposed to the socket
// failing or the client hanging up.
bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

// Raises the soft open-file limit to the hard one and returns what is left
// for connections.
std::size_t connections_the_fd_limit_allows() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024 - kReservedDescriptors;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur > 2 * kReservedDescriptors ? static_cast<std::size_t>(limit.rlim_cur - kReservedDescriptors)
                                                   : static_cast<std::size_t>(limit.rlim_cur / 2);
}

}  // namespace

class Connection;

struct Transport::Impl {
  using List = std::list<std::shared_ptr<Connection>>;

  Impl(Limits l, Handler& h) : limits(std::move(l)), handler(h) {}
  ~Impl();

  Limits limits;
  Handler& handler;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{asio::make_work_guard(io)};
  int port = 0;
  bool stopping = false;  // the I/O thread's, as are the lists
  // Oldest first: connections not yet admitted with a token or as trusted,
  // and the admitted ones by when they last finished a request.
  List anonymous, admitted;
  std::atomic<std::size_t> open{0}, anonymous_count{0}, anonymous_remote{0};
  std::atomic<uint64_t> evicted{0}, header_deadlines{0}, body_deadlines{0};

  void accept();
  void on_accept(const beast::error_code& ec, tcp::socket socket);
  bool make_room(bool remote);
  bool evict_oldest(List& list, bool remote_only, bool idle_only);
  void begin_stop();
  void maybe_finish() {
    if (stopping && open == 0) work.reset();
  }
};

// One client connection, driven by its own completion handlers on the I/O
// thread: every phase is armed with its deadline on one timer, which
// cancels the socket's pending operation when it fires.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Phase { idle, header, body, answering, writing, lingering, closed };

  Connection(Transport::Impl& server, tcp::socket socket, std::string address, bool remote)
      : server_(server), socket_(std::move(socket)), timer_(server.io), address_(std::move(address)),
        remote_(remote) {}

  Transport::Impl::List::iterator where;  // in server_.anonymous or server_.admitted
  bool anonymous = true;

  bool remote() const { return remote_; }
  Phase phase() const { return phase_; }
  // Waiting for, or reading, a request (or closing): nothing of the client's is being answered.
  bool evictable() const {
    return phase_ == Phase::idle || phase_ == Phase::header || phase_ == Phase::body || phase_ == Phase::lingering;
  }

  void start() { await_request(); }
  void close();

 private:
  void arm(Milliseconds deadline);
  void disarm();
  void await_request();
  void read_header();
  void on_header(const beast::error_code& ec);
  void admit();
  void send_continue();
  void read_body();
  void on_body(const beast::error_code& ec);
  void dispatch();
  void refuse(int status, const std::string& what);
  void write(Response response);
  void on_written(const beast::error_code& ec);
  void linger_close();
  void drain();
  Request head() const;
  std::optional<std::string> request_line() const;

  Transport::Impl& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  std::string address_;
  bool remote_;
  Phase phase_ = Phase::idle;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;
  Request request_;
  std::shared_ptr<void> context_;
  std::unique_ptr<char[]> scratch_;  // lingering only
  std::size_t drained_bytes_ = 0;
};

void Connection::arm(Milliseconds deadline) {
  timed_out_ = false;
  timer_.expires_after(deadline);
  timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](const beast::error_code& ec) {
    if (ec || generation != self->timer_generation_ || self->phase_ == Phase::closed) return;
    self->timed_out_ = true;
    beast::error_code ignored;
    self->socket_.cancel(ignored);
  });
}

void Connection::disarm() {
  ++timer_generation_;
  timer_.cancel();
}

void Connection::close() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  disarm();
  beast::error_code ignored;
  socket_.close(ignored);
  const auto keep = shared_from_this();  // the list held the last owner but one
  --server_.open;
  if (anonymous) {
    --server_.anonymous_count;
    if (remote_) --server_.anonymous_remote;
    server_.anonymous.erase(where);
  } else {
    server_.admitted.erase(where);
  }
  server_.maybe_finish();
}

// Idle until the first byte of a request (or the idle deadline).
void Connection::await_request() {
  if (server_.stopping) return close();
  phase_ = Phase::idle;
  if (buffer_.size() > 0) return read_header();  // pipelined
  arm(server_.limits.idle_timeout);
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const beast::error_code& ec) {
    if (self->phase_ == Phase::closed) return;
    // The idle deadline, or an error. A request that came in by the
    // deadline is read even so: on a busy thread the deadline's handler may
    // run before the socket's, and the client would lose the request.
    beast::error_code unused;
    if (ec && !(self->timed_out_ && self->socket_.available(unused) > 0)) return self->close();
    self->read_header();
  });
}

void Connection::read_header() {
  phase_ = Phase::header;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(server_.limits.max_header_bytes));
  parser_->body_limit(server_.limits.max_body_bytes);  // a larger Content-Length fails the header read
  arm(server_.limits.header_timeout);
  bhttp::async_read_header(socket_, buffer_, *parser_,
                           [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                             self->on_header(ec);
                           });
}

void Connection::on_header(const beast::error_code& ec) {
  if (phase_ == Phase::closed) return;
  if (timed_out_) {
    ++server_.header_deadlines;
    // A request line to name gets a 400 (as a header that never ends always
    // has); less than that is closed unanswered.
    const std::optional<std::string> line = request_line();
    if (!line) return close();
    return refuse(400, fmt::format("{}: refused (a malformed or incomplete request)", printable(*line)));
  }
  if (ec == bhttp::error::body_limit) {
    return refuse(413, "the request body is larger than the service takes");
  }
  if (ec == bhttp::error::header_limit) {
    return refuse(400, fmt::format("the request's headers are larger than {} bytes", server_.limits.max_header_bytes));
  }
  if (is_parse_error(ec)) {
    return refuse(400, fmt::format("{}: refused (a malformed or incomplete request)",
                                   printable(request_line().value_or("the request"))));
  }
  if (ec) return close();  // hung up, or the socket failed
  admit();
}

// "METHOD PATH" of a request whose headers did not all arrive: from the
// parser once it has taken the request line (it does so before the rest of
// the headers are in), else from the bytes still in the buffer.
std::optional<std::string> Connection::request_line() const {
  if (parser_ && !parser_->get().method_string().empty()) {
    const Request r = head();
    return fmt::format("{} {}", r.method, r.path);
  }
  const auto data = buffer_.cdata();
  const std::string_view text(static_cast<const char*>(data.data()), data.size());
  const auto end = text.find("\r\n");
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view line = text.substr(0, end);
  const auto space = line.find(' ');
  const auto second = line.find(' ', space == std::string_view::npos ? end : space + 1);
  if (space == std::string_view::npos || second == std::string_view::npos) return std::string(line);
  const std::string_view target = line.substr(space + 1, second - space - 1);
  return fmt::format("{} {}", line.substr(0, space), target.substr(0, target.find('?')));
}

Request Connection::head() const {
  const auto& m = parser_->get();
  Request r = request_of(std::string_view(m.method_string().data(), m.method_string().size()),
                         std::string_view(m.target().data(), m.target().size()));
  r.remote_address = address_;
  r.remote = remote_;
  r.authorization = std::string(m[bhttp::field::authorization]);
  return r;
}

void Connection::admit() {
  request_ = head();
  keep_alive_ = parser_->get().keep_alive();
  Admission admission;
  try {
    admission = server_.handler.admit(request_);
  } catch (...) {  // the handler's to prevent; an exception here would end the I/O thread
    return refuse(500, "internal error: the request could not be routed; nothing was changed");
  }
  if (admission.authenticated && anonymous) {
    anonymous = false;
    --server_.anonymous_count;
    if (remote_) --server_.anonymous_remote;
    server_.admitted.splice(server_.admitted.end(), server_.anonymous, where);
  }
  if (admission.refusal) {
    // Refused before its body: the body's bytes would be taken for the next request.
    if (!parser_->is_done()) admission.refusal->close = true;
    return write(std::move(*admission.refusal));
  }
  context_ = std::move(admission.context);
  if (parser_->is_done()) return dispatch();
  if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) return send_continue();
  read_body();
}

void Connection::send_continue() {
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  phase_ = Phase::writing;
  arm(server_.limits.write_timeout);
  asio::async_write(socket_, asio::buffer(kContinue), [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
    if (self->phase_ == Phase::closed) return;
    if (ec || self->timed_out_) return self->close();
    self->read_body();
  });
}

void Connection::read_body() {
  phase_ = Phase::body;
  arm(server_.limits.body_timeout);
  bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
    self->on_body(ec);
  });
}

void Connection::on_body(const beast::error_code& ec) {
  if (phase_ == Phase::closed) return;
  if (timed_out_) {
    ++server_.body_deadlines;
    const auto& m = parser_->get();
    const auto declared = m[bhttp::field::content_length];
    const std::string of = declared.empty() ? "" : fmt::format(" of {}", std::string_view(declared.data(), declared.size()));
    return refuse(408, fmt::format("the request body stopped after {}{} bytes (not complete within {:g} s); nothing "
                                   "was changed",
                                   m.body().size(), of, seconds(server_.limits.body_timeout)));
  }
  if (ec == bhttp::error::body_limit) return refuse(413, "the request body is larger than the service takes");
  if (is_parse_error(ec)) {
    return refuse(400, fmt::format("{} {}: refused (a malformed or incomplete request)", request_.method,
                                   printable(request_.path)));
  }
  if (ec) return close();
  dispatch();
}

void Connection::dispatch() {
  phase_ = Phase::answering;
  disarm();
  request_.body = std::move(parser_->get().body());
  parser_.reset();
  try {
    server_.handler.handle(std::move(request_), std::move(context_), [self = shared_from_this()](Response response) {
      asio::post(self->server_.io, [self, response = std::move(response)]() mutable { self->write(std::move(response)); });
    });
  } catch (...) {  // as in admit(): never past the I/O thread
    refuse(500, "internal error: the request could not be queued");
  }
}

// An answer of the transport's own, logged by the handler; the connection closes after it.
void Connection::refuse(int status, const std::string& what) {
  Request logged = parser_ && !parser_->get().method_string().empty() ? head() : Request{};
  if (logged.method.empty()) {
    const std::string line = request_line().value_or("");
    logged.method = line.substr(0, line.find(' '));
    logged.path = line.find(' ') == std::string::npos ? "" : line.substr(line.find(' ') + 1);
  }
  logged.remote_address = address_;
  try {
    server_.handler.refused(logged, status);
  } catch (...) {  // a log line is not worth the I/O thread
  }
  write(error_response(status, what));
}

void Connection::write(Response response) {
  if (phase_ == Phase::closed) return;
  auto message = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(response.status), 11);
  if (!response.content_type.empty()) message->set(bhttp::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) message->set(name, value);
  message->body() = std::move(response.body);
  keep_alive_ = keep_alive_ && !response.close && !server_.stopping;
  message->keep_alive(keep_alive_);
  message->prepare_payload();
  phase_ = Phase::writing;
  arm(server_.limits.write_timeout);
  bhttp::async_write(socket_, *message, [self = shared_from_this(), message](const beast::error_code& ec, std::size_t) {
    self->on_written(ec);
  });
}

void Connection::on_written(const beast::error_code& ec) {
  if (phase_ == Phase::closed) return;
  if (ec || timed_out_) return close();
  if (!keep_alive_) return linger_close();
  if (!anonymous) server_.admitted.splice(server_.admitted.end(), server_.admitted, where);  // silent least long
  await_request();
}

void Connection::linger_close() {
  phase_ = Phase::lingering;
  beast::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  scratch_ = std::make_unique<char[]>(4096);
  arm(kLingerTime);
  drain();
}

void Connection::drain() {
  socket_.async_read_some(asio::buffer(scratch_.get(), 4096),
                          [self = shared_from_this()](const beast::error_code& ec, std::size_t n) {
                            if (self->phase_ == Phase::closed) return;
                            self->drained_bytes_ += n;
                            if (ec || self->timed_out_ || self->drained_bytes_ > kLingerBytes) return self->close();
                            self->drain();
                          });
}

Transport::Impl::~Impl() {
  // Connections close here, their aborted operations run and let them go,
  // before the io_context (and the sockets' service) goes.
  stopping = true;
  for (List* list : {&anonymous, &admitted}) {
    while (!list->empty()) list->front()->close();
  }
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  work.reset();
  io.restart();
  io.poll();
}

void Transport::Impl::accept() {
  acceptor.async_accept([this](const beast::error_code& ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void Transport::Impl::on_accept(const beast::error_code& ec, tcp::socket socket) {
  if (stopping || !acceptor.is_open()) return;
  if (ec) {
    if (ec.value() == EMFILE || ec.value() == ENFILE || ec.value() == ENOBUFS || ec.value() == ENOMEM) {
      accept_retry.expires_after(kAcceptRetry);
      accept_retry.async_wait([this](const beast::error_code& e) {
        if (!e && !stopping) accept();
      });
      return;
    }
    return accept();
  }
  beast::error_code peer_error;
  const auto peer = socket.remote_endpoint(peer_error);
  if (!peer_error) {
    const std::string address = peer.address().to_string();
    const bool remote = !is_loopback_address(address) ||
                        std::find(limits.remote_addresses.begin(), limits.remote_addresses.end(), address) !=
                            limits.remote_addresses.end();
    if (make_room(remote)) {
      socket.set_option(tcp::no_delay(true), peer_error);  // answers are one small write: no Nagle delay
      auto connection = std::make_shared<Connection>(*this, std::move(socket), address, remote);
      anonymous.push_back(connection);
      connection->where = std::prev(anonymous.end());
      ++open;
      ++anonymous_count;
      if (remote) ++anonymous_remote;
      connection->start();
    }
  }
  accept();  // a socket not kept closes as it goes out of scope
}

// Makes room for a new connection under the caps; false when nothing can give way.
bool Transport::Impl::make_room(bool remote) {
  if (remote && anonymous_remote >= limits.max_anonymous_remote &&
      !evict_oldest(anonymous, /*remote_only=*/true, /*idle_only=*/false)) {
    return false;
  }
  if (open < limits.max_connections) return true;
  return evict_oldest(anonymous, false, false) || evict_oldest(admitted, false, /*idle_only=*/true);
}

bool Transport::Impl::evict_oldest(List& list, bool remote_only, bool idle_only) {
  for (const std::shared_ptr<Connection>& c : list) {
    if (remote_only && !c->remote()) continue;
    if (idle_only ? c->phase() != Connection::Phase::idle : !c->evictable()) continue;
    const auto keep = c;
    keep->close();
    ++evicted;
    return true;
  }
  return false;
}

void Transport::Impl::begin_stop() {
  if (stopping) return;
  stopping = true;
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  // Close what is not being answered; the rest closes once its answer is written.
  std::vector<std::shared_ptr<Connection>> waiting;
  for (List* list : {&anonymous, &admitted}) {
    for (const auto& c : *list) {
      if (c->evictable()) waiting.push_back(c);
    }
  }
  for (const auto& c : waiting) c->close();
  maybe_finish();
}

Transport::Transport(const std::string& host, int port, Limits limits, Handler& handler)
    : impl_(std::make_unique<Impl>(std::move(limits), handler)) {
  Impl& s = *impl_;
  s.limits.max_connections = std::max<std::size_t>(1, std::min(s.limits.max_connections, connections_the_fd_limit_allows()));
  const auto cannot_listen = [&] {
    return Error(fmt::format("joule serve: cannot listen on {}:{} (in use, or not an address here)", host, port));
  };
  beast::error_code ec;
  tcp::resolver resolver(s.io);
  const auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) throw cannot_listen();
  for (const auto& entry : endpoints) {
    ec = {};
    s.acceptor.open(entry.endpoint().protocol(), ec);
    if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) s.acceptor.bind(entry.endpoint(), ec);
    // The largest accept queue the system allows: a burst of recurrences
    // connecting at once (a cluster's jobs starting together) must not
    // overflow it (a connection the queue has no room for looks
    // established to its client, which then waits or is reset).
    if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) break;
    beast::error_code ignored;
    s.acceptor.close(ignored);
  }
  if (ec || !s.acceptor.is_open()) throw cannot_listen();
  s.port = s.acceptor.local_endpoint().port();
  s.accept();
}

Transport::~Transport() = default;

int Transport::port() const { return impl_->port; }

std::size_t Transport::max_connections() const { return impl_->limits.max_connections; }

void Transport::run() { impl_->io.run(); }

void Transport::stop() {
  asio::post(impl_->io, [s = impl_.get()] { s->begin_stop(); });
}

TransportCounts Transport::counts() const {
  const Impl& s = *impl_;
  return {s.open.load(),          s.anonymous_count.load(), s.anonymous_remote.load(),
          s.evicted.load(),       s.header_deadlines.load(), s.body_deadlines.load()};
}

}  // namespace joule::service::http
