// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Throughput and latency of the batch-size service over HTTP: an in-process
// `joule serve` (HttpServer on a loopback port, the store given by --store)
// and N connections, each doing ask + report round trips on one shared job
// without think time, as recurrences of a job would. Prints round trips per
// second and request latency percentiles.
//   build/bin/joule_bench_service --clients 32 --seconds 10 [--store URL] [--driver raw|client]
//                                 [--prior N] [--rate R] [--require-token]
//                                 [--slow-clients N] [--idle-clients M] [--health-rate R]
// --prior N: the job first gets N recurrences (in process, before timing), to
// show that a request's cost does not grow with the job's age.
// --rate R (raw driver): an open loop at R round trips per second in all,
// each connection starting its round trips on a fixed schedule (as wrk2
// does) instead of right after the last one ended. A request's latency is
// counted from when it was due, so a server that falls behind is charged
// for the wait too. Without it the loop is closed: each connection asks
// again at once, and the latency is what the throughput allows (Little's
// law: latency = connections / requests per second).
// --require-token: the service takes a token from every client (a tokens
// file made for the run): the ask+report connections send one, the hostile
// ones below do not.
// Hostile load (issue 31), while the round trips run: --slow-clients N
// connections each send a request's headers one byte a second, never
// finishing them, and --idle-clients M connections each ask /healthz once
// and then stay open, idle (keep-alive); one the server closes is opened
// again at once, so the counts hold. A prober asks /healthz --health-rate
// times a second (default 10), each on a new connection as a load
// balancer's check does, and reports its latency (10 s at most).
// Drivers (the load generator shares the machine with the server):
//   raw (default): two threads multiplex every connection with poll(2) and
//     write prebuilt HTTP/1.1 requests, so the load costs little CPU (as wrk
//     does) and the figures are mostly the server's;
//   client: a thread per connection through joule::service::BatchSizeClient,
//     the end-to-end cost of our C++ client and the server on one machine.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "joule/service/client.h"
#include "joule/service/http_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// The raw driver: `threads` threads each multiplex their share of the
// connections with poll(2), writing prebuilt HTTP/1.1 requests and reading
// the answers by Content-Length. Each connection alternates ask and report.
class RawDriver {
 public:
  // rate: round trips per second over all connections; 0 for a closed loop.
  RawDriver(int port, std::string job, int connections, int threads, double rate, std::string token)
      : port_(port), job_(std::move(job)), connections_(connections), threads_(threads), rate_(rate),
        authorization_(token.empty() ? "" : fmt::format("Authorization: Bearer {}\r\n", token)) {}

  // Runs until stop; returns the latencies (ms) per thread.
  void run(const std::atomic<bool>& stop, std::atomic<int64_t>& round_trips, std::atomic<int64_t>& errors,
           std::vector<std::vector<double>>& latencies_ms) {
    std::vector<std::thread> threads;
    latencies_ms.resize(static_cast<std::size_t>(threads_));
    for (int t = 0; t < threads_; ++t) {
      threads.emplace_back([&, t] {
        std::vector<Connection> mine;
        for (int c = t; c < connections_; c += threads_) mine.emplace_back(port_, job_, c, authorization_);
        drive(mine, stop, round_trips, errors, latencies_ms[static_cast<std::size_t>(t)]);
      });
    }
    for (auto& t : threads) t.join();
  }

 private:
  struct Connection {
    int fd = -1;
    int index;  // among all connections
    std::string job, node, authorization;
    std::string in;
    bool asking = true;
    int64_t recurrence_id = 0;
    int batch_size = 0;
    int round = 0;
    Clock::time_point due;    // when the request in flight was due (latency counts from there)
    bool in_flight = false;

    Connection(int port, std::string j, int i, std::string auth)
        : index(i), job(std::move(j)), node(fmt::format("raw-{}", i)), authorization(std::move(auth)) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        throw std::runtime_error(fmt::format("connect: {}", std::strerror(errno)));
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    Connection(Connection&& o) noexcept
        : fd(std::exchange(o.fd, -1)), index(o.index), job(std::move(o.job)), node(std::move(o.node)),
          authorization(std::move(o.authorization)), asking(o.asking) {}
    ~Connection() {
      if (fd >= 0) ::close(fd);
    }

    void send_next(Clock::time_point due_at) {
      std::string body, path;
      if (asking) {
        path = fmt::format("/v1/jobs/{}/recurrences", job);
        body = fmt::format(R"({{"node":"{}"}})", node);
      } else {
        path = fmt::format("/v1/recurrences/{}/result", recurrence_id);
        body = fmt::format(R"({{"energy_j":{},"time_s":{},"reached_target":true,"stopped_early":false}})",
                           100.0 * batch_size, 1000.0 / batch_size + round % 7);
      }
      const std::string request = fmt::format(
          "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
          path, authorization, body.size(), body);
      due = due_at;
      in_flight = true;
      if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
        throw std::runtime_error("send failed");
      }
    }

    // True once a whole answer is in (and taken).
    bool receive(int& status, std::string& body) {
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) throw std::runtime_error("the server closed the connection");
      in.append(buf, static_cast<std::size_t>(n));
      const auto head_end = in.find("\r\n\r\n");
      if (head_end == std::string::npos) return false;
      const auto cl = in.find("Content-Length: ");
      if (cl == std::string::npos || cl > head_end) throw std::runtime_error("an answer without Content-Length");
      const auto length = std::stoul(in.substr(cl + 16));
      if (in.size() < head_end + 4 + length) return false;
      status = std::stoi(in.substr(9, 3));
      body = in.substr(head_end + 4, length);
      in.erase(0, head_end + 4 + length);
      return true;
    }
  };

  void drive(std::vector<Connection>& conns, const std::atomic<bool>& stop, std::atomic<int64_t>& round_trips,
             std::atomic<int64_t>& errors, std::vector<double>& latencies_ms) const {
    // Open loop: connection k of n starts round trips every n / rate
    // seconds, the connections' schedules spread evenly over that period.
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(rate_ > 0 ? connections_ / rate_ : 0.0));
    const auto start = Clock::now();
    std::vector<Clock::time_point> next_round(conns.size());
    std::vector<pollfd> fds;
    for (std::size_t i = 0; i < conns.size(); ++i) {
      next_round[i] = start + period * conns[i].index / connections_;
      fds.push_back({conns[i].fd, POLLIN, 0});
    }
    while (!stop.load(std::memory_order_relaxed)) {
      auto now = Clock::now();
      auto wake = now + std::chrono::milliseconds(100);
      for (std::size_t i = 0; i < conns.size(); ++i) {
        if (conns[i].in_flight) continue;
        if (next_round[i] <= now) {
          conns[i].send_next(next_round[i]);
        } else {
          wake = std::min(wake, next_round[i]);
        }
      }
      const auto wait_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wake - now).count();
      const timespec timeout{static_cast<time_t>(wait_ns / 1000000000), static_cast<long>(wait_ns % 1000000000)};
      if (::ppoll(fds.data(), fds.size(), &timeout, nullptr) <= 0) continue;
      now = Clock::now();
      for (std::size_t i = 0; i < conns.size(); ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        Connection& c = conns[i];
        int status = 0;
        std::string body;
        if (!c.receive(status, body)) continue;
        c.in_flight = false;
        latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - c.due).count());
        if (status >= 300) {
          if (errors.fetch_add(1) == 0) fmt::print(stderr, "first error: {} {}\n", status, body);
          c.asking = true;
        } else if (c.asking) {
          const auto reply = nlohmann::json::parse(body);
          c.recurrence_id = reply.at("recurrence_id").get<int64_t>();
          c.batch_size = reply.at("batch_size").get<int>();
          c.asking = false;
          c.send_next(now);  // a report goes as soon as its ask is answered
          continue;
        } else {
          round_trips.fetch_add(1, std::memory_order_relaxed);
          ++c.round;
          c.asking = true;
        }
        // The next round trip: at once in a closed loop, else when due (it
        // may be overdue already: the lateness counts in its latency).
        next_round[i] = period.count() > 0 ? next_round[i] + period : now;
      }
    }
  }

  int port_;
  std::string job_;
  int connections_, threads_;
  double rate_;
  std::string authorization_;
};

// The client driver: a thread per connection, through BatchSizeClient.
void run_clients(const std::string& url, const std::string& job, int clients, const std::atomic<bool>& stop,
                 std::atomic<int64_t>& round_trips, std::atomic<int64_t>& errors,
                 std::vector<std::vector<double>>& latencies_ms) {
  using namespace joule::service;
  latencies_ms.resize(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      BatchSizeClient client(url);
      auto& mine = latencies_ms[static_cast<std::size_t>(c)];
      for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        try {
          auto t0 = Clock::now();
          const Assignment a = client.ask(job, fmt::format("client-{}", c));
          auto t1 = Clock::now();
          client.report(a.recurrence_id, {100.0 * a.batch_size, 1000.0 / a.batch_size + i % 7, true, false});
          auto t2 = Clock::now();
          mine.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          mine.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
          round_trips.fetch_add(1, std::memory_order_relaxed);
        } catch (const std::exception& e) {
          if (errors.fetch_add(1) == 0) fmt::print(stderr, "first error: {}\n", e.what());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// A connected TCP socket to a loopback port, non-blocking; -1 on failure.
int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The hostile clients: `slow` connections trickling a never-ending header
// (a byte a second each, spread over the second) and `idle` keep-alive
// connections that asked /healthz once. One thread polls them all every
// 50 ms; a connection the server closed is opened again at once.
class HostileLoad {
 public:
  HostileLoad(int port, int slow, int idle) : port_(port) {
    // Each kind's connections open spread over the first second, as
    // independent clients would (opened all at once, the idle ones would
    // also time out and come back all at once, every read timeout).
    const auto start = Clock::now();
    for (int i = 0; i < slow + idle; ++i) {
      const int k = i < slow ? i : i - slow, n = i < slow ? slow : idle;
      clients_.push_back({-1, i < slow, 0, start + std::chrono::microseconds(1000000LL * k / n)});
    }
    thread_ = std::thread([this] { loop(); });
  }
  ~HostileLoad() {
    stop_ = true;
    thread_.join();
    for (const Client& c : clients_) ::close(c.fd);
  }
  int64_t reopened() const { return reopened_; }

 private:
  struct Client {
    int fd;
    bool slow;
    std::size_t sent;            // header bytes so far
    Clock::time_point next;      // the first open; then, for slow ones, the next byte
  };
  static constexpr std::string_view kSlowHeader = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  static constexpr std::string_view kIdleRequest = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

  void open(Client& c) {
    if (c.fd >= 0) ::close(c.fd);
    c.fd = connect_loopback(port_);
    c.sent = 0;
    if (!c.slow && c.fd >= 0) {
      pollfd p{c.fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);  // connected
      [[maybe_unused]] const ssize_t n = ::send(c.fd, kIdleRequest.data(), kIdleRequest.size(), MSG_NOSIGNAL);
    }
  }

  void loop() {
    std::vector<pollfd> fds(clients_.size());
    char scratch[4096];
    while (!stop_) {
      const auto now = Clock::now();
      for (std::size_t i = 0; i < clients_.size(); ++i) {
        Client& c = clients_[i];
        if (c.fd < 0 && c.next <= now) open(c);
        if (c.slow && c.fd >= 0 && c.next <= now) {
          const char byte = c.sent < kSlowHeader.size() ? kSlowHeader[c.sent] : 'a';
          if (::send(c.fd, &byte, 1, MSG_NOSIGNAL) == 1) ++c.sent;
          c.next += std::chrono::seconds(1);
        }
        fds[i] = {c.fd, POLLIN, 0};
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      for (std::size_t i = 0; i < clients_.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::recv(clients_[i].fd, scratch, sizeof scratch, 0);
        if (n > 0 && !clients_[i].slow) continue;  // the idle one's answer: it stays open
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        open(clients_[i]);  // answered (a slow one: refused) or closed: a fresh one takes its place
        clients_[i].next = Clock::now();
        ++reopened_;
      }
    }
  }

  int port_;
  std::vector<Client> clients_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> reopened_{0};
  std::thread thread_;
};

// /healthz asked `rate` times a second, each on a new connection, one at a
// time; latencies in ms (a probe unanswered after kProbeTimeout counts as
// that long and as timed out).
class HealthProber {
 public:
  static constexpr double kProbeTimeoutMs = 10000;

  HealthProber(int port, double rate) : port_(port), period_(std::chrono::duration<double>(1.0 / rate)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~HealthProber() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<double> latencies_ms;  // read after stop()
  int timed_out = 0;

 private:
  void loop() {
    auto due = Clock::now();
    while (!stop_) {
      std::this_thread::sleep_until(due);
      due += std::chrono::duration_cast<Clock::duration>(period_);
      const auto start = Clock::now();
      const bool answered = probe();
      if (stop_) break;  // cut short by stop(): not a probe
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      latencies_ms.push_back(answered ? ms : kProbeTimeoutMs);
      timed_out += answered ? 0 : 1;
      due = std::max(due, Clock::now());
    }
  }
  // True once a whole 200 answer came.
  bool probe() {
    const int fd = connect_loopback(port_);
    if (fd < 0) return false;
    const auto deadline = Clock::now() + std::chrono::duration<double, std::milli>(kProbeTimeoutMs);
    constexpr std::string_view kRequest = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    bool sent = false;
    std::string in;
    while (!stop_ && Clock::now() < deadline) {
      pollfd p{fd, static_cast<short>(sent ? POLLIN : POLLOUT), 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      if (!sent) {
        sent = ::send(fd, kRequest.data(), kRequest.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(kRequest.size());
        if (!sent) break;
        continue;
      }
      char buffer[4096];
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      in.append(buffer, static_cast<std::size_t>(n));
      if (in.find("\r\n\r\n") != std::string::npos && in.find('}') != std::string::npos) break;
    }
    ::close(fd);
    return in.rfind("HTTP/1.1 200", 0) == 0 && in.find('}') != std::string::npos;
  }

  int port_;
  std::chrono::duration<double> period_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Room for the server's and the clients' sockets in one process.
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

void print_usage(std::FILE* to) {
  fmt::print(to,
             "usage: joule_bench_service [--clients N] [--seconds S] [--store URL] [--driver raw|client]\n"
             "                           [--prior N] [--rate R] [--require-token] [--slow-clients N]\n"
             "                           [--idle-clients M] [--health-rate R]\n"
             "Throughput and latency of the batch-size service (an in-process `joule serve`) over HTTP:\n"
             "N connections do ask + report round trips on one job; prints round trips per second and\n"
             "latency percentiles.\n"
             "  --clients N        connections doing round trips (default 32)\n"
             "  --seconds S        how long to run (default 10)\n"
             "  --store URL        the service's store (default: in memory)\n"
             "  --driver D         raw (default: poll(2) over prebuilt requests) or client (a thread per\n"
             "                     connection through joule::service::BatchSizeClient)\n"
             "  --prior N          give the job N recurrences before timing\n"
             "  --rate R           open loop at R round trips per second in all (raw driver only)\n"
             "  --require-token    the service takes a token from every client\n"
             "  --slow-clients N   N connections sending headers one byte a second\n"
             "  --idle-clients M   M idle keep-alive connections\n"
             "  --health-rate R    /healthz probes per second (default 10)\n"
             "  -h, --help         print this and exit\n");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return 0;
    }
  }
  int clients = 32, slow_clients = 0, idle_clients = 0;
  double seconds = 10, health_rate = 10;
  std::string store_url, driver = "raw";
  int64_t prior = 0;
  double rate = 0;
  bool require_token = false;
  for (int i = 1; i < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--require-token") {
      require_token = true;
      --i;  // a flag: no value
      continue;
    }
    if (i + 1 >= argc) arg.clear();
    if (arg == "--clients") clients = std::stoi(argv[i + 1]);
    else if (arg == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (arg == "--store") store_url = argv[i + 1];
    else if (arg == "--driver") driver = argv[i + 1];
    else if (arg == "--prior") prior = std::stoll(argv[i + 1]);
    else if (arg == "--rate") rate = std::stod(argv[i + 1]);
    else if (arg == "--slow-clients") slow_clients = std::stoi(argv[i + 1]);
    else if (arg == "--idle-clients") idle_clients = std::stoi(argv[i + 1]);
    else if (arg == "--health-rate") health_rate = std::stod(argv[i + 1]);
    else {
      print_usage(stderr);
      return 2;
    }
  }
  if (driver != "raw" && driver != "client") {
    fmt::print(stderr, "joule_bench_service: --driver is raw or client, not '{}'\n", driver);
    return 2;
  }
  if (rate < 0 || (rate > 0 && driver != "raw")) {
    fmt::print(stderr, "joule_bench_service: --rate takes round trips per second > 0, with --driver raw\n");
    return 2;
  }
  if (health_rate <= 0 || slow_clients < 0 || idle_clients < 0 || (require_token && driver != "raw")) {
    fmt::print(stderr, "joule_bench_service: --health-rate > 0, client counts >= 0, --require-token with --driver raw\n");
    return 2;
  }
  raise_open_file_limit();
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("joule_bench_service_{}.db", getpid())).string();
  const std::string tokens_path = path + ".tokens";
  if (store_url.empty()) store_url = "sqlite:" + path;
  using namespace joule::service;
  auto store = std::shared_ptr<JobStore>(open_job_store(store_url));
  ServeOptions options;
  options.port = 0;
  std::string token;
  if (require_token) {
    token = create_token(tokens_path, "bench", {"*"});
    options.tokens = std::make_shared<TokenFile>(tokens_path);
    options.require_token = true;
  }
  auto service = std::make_shared<BatchSizeService>(store);
  HttpServer server(service, store->describe(), options);
  std::thread serving([&] { server.run(); });
  const std::string url = fmt::format("http://127.0.0.1:{}", server.port());
  const std::string job = fmt::format("bench-{}", getpid());
  BatchSizeClient(url, 10.0, token).register_job(JobSpec::from_json(
      {{"name", job}, {"batch_sizes", {16, 32, 64, 128, 256, 512}}, {"default_batch_size", 64}, {"max_power_w", 300}}));

  for (int64_t i = 0; i < prior; ++i) {
    const Assignment a = service->ask(job, "prior");
    service->report(a.recurrence_id, {100.0 * a.batch_size, 1000.0 / a.batch_size + i % 7, true, false});
  }

  // The hostile clients get two seconds to connect and start before the timed part.
  std::optional<HostileLoad> hostile;
  if (slow_clients + idle_clients > 0) {
    hostile.emplace(server.port(), slow_clients, idle_clients);
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  HealthProber prober(server.port(), health_rate);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> round_trips{0}, errors{0};
  std::vector<std::vector<double>> latencies_ms;
  const auto start = Clock::now();
  std::thread load([&] {
    if (driver == "raw") {
      RawDriver(server.port(), job, clients, std::min(clients, 2), rate, token).run(stop, round_trips, errors, latencies_ms);
    } else {
      run_clients(url, job, clients, stop, round_trips, errors, latencies_ms);
    }
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  load.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  prober.stop();
  const int64_t reopened = hostile ? hostile->reopened() : 0;
  hostile.reset();  // their sockets close before the server stops (the old server waited for them)
  server.stop();
  serving.join();
  std::filesystem::remove(tokens_path);
  std::vector<double> all;
  for (auto& v : latencies_ms) all.insert(all.end(), v.begin(), v.end());
  fmt::print("store: {}\ndriver: {}, clients: {}, {}, prior recurrences: {}, {:.1f} s: {} ask+report round trips ({:.0f}/s), {} errors\n",
             store->describe(), driver, clients, rate > 0 ? fmt::format("open loop at {:.0f}/s", rate) : "closed loop",
             prior, elapsed_s, round_trips.load(), round_trips.load() / elapsed_s, errors.load());
  fmt::print("request latency ms: p50 {:.2f}, p90 {:.2f}, p99 {:.2f}, max {:.2f}\n", percentile(all, 0.5),
             percentile(all, 0.9), percentile(all, 0.99), percentile(all, 1.0));
  fmt::print("/healthz (a new connection each, {:.0f}/s): {} probes, p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms, {} "
             "unanswered within {:.0f} s\n",
             health_rate, prober.latencies_ms.size(), percentile(prober.latencies_ms, 0.5),
             percentile(prober.latencies_ms, 0.99), percentile(prober.latencies_ms, 1.0), prober.timed_out,
             HealthProber::kProbeTimeoutMs / 1000);
  if (slow_clients + idle_clients > 0) {
    fmt::print("hostile: {} slow clients (a header byte a second each), {} idle keep-alive connections; {} reopened "
               "after the server closed them\n",
               slow_clients, idle_clients, reopened);
  }
  const BatchSizeService::WriteCounts counts = service->write_counts();
  fmt::print("store transactions: {} for {} asks and reports ({:.1f} a transaction)\n", counts.transactions,
             counts.writes, static_cast<double>(counts.writes) / static_cast<double>(std::max<uint64_t>(counts.transactions, 1)));
  if (store_url == "sqlite:" + path) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
  return errors.load() == 0 ? 0 : 1;
}
