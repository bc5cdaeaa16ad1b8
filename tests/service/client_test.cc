// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// BatchSizeClient against a server that closes a connection under a
// request: what a server closing an idle kept-alive connection does when the
// client's next request is already on its way. A GET (or PUT) is sent once
// more on a new connection; a POST, which may have been carried out, is not.
// And a connection left idle is not reused, so the race does not arise.
#include "joule/service/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace joule::service {
namespace {

// A loopback HTTP server of one thread whose i-th connection either answers
// every request on it with 200 and a small JSON body (kept alive), or reads
// one request and closes without an answer. Counts connections and requests.
class ScriptedServer {
 public:
  enum class Connection { kAnswer, kCloseUnanswered };

  explicit ScriptedServer(std::vector<Connection> script) : script_(std::move(script)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listener_, 8) != 0 || getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  std::vector<std::string> request_lines() const {
    std::lock_guard lock(mutex_);
    return request_lines_;
  }

 private:
  void serve() {
    for (std::size_t i = 0; !stop_; ++i) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      const Connection what = i < script_.size() ? script_[i] : Connection::kAnswer;
      // Requests on this connection until the client closes it or the
      // script closes it; the next connection waits (one client at a time).
      while (read_request(fd)) {
        if (what == Connection::kCloseUnanswered) break;
        const std::string body = R"({"status":"ok","jobs":[]})";
        const std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n\r\n" + body;
        if (write(fd, answer.data(), answer.size()) != static_cast<ssize_t>(answer.size())) break;
      }
      close(fd);
    }
  }
  // One request's head and body (Content-Length); false at the end.
  bool read_request(int fd) {
    std::string data;
    char buffer[4096];
    std::size_t head_end = std::string::npos;
    while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) return false;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    std::size_t length = 0;
    if (const auto at = data.find("Content-Length: "); at != std::string::npos && at < head_end) {
      length = std::stoul(data.substr(at + 16));
    }
    while (data.size() < head_end + 4 + length) {
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) return false;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    std::lock_guard lock(mutex_);
    request_lines_.push_back(data.substr(0, data.find("\r\n")));
    return true;
  }

  std::vector<Connection> script_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> request_lines_;
};

using Connection = ScriptedServer::Connection;

TEST(BatchSizeClientTest, AGetWhoseConnectionClosesUnderItIsSentOnceMoreOnANewOne) {
  ScriptedServer server({Connection::kCloseUnanswered, Connection::kAnswer});
  BatchSizeClient client(server.url(), 5.0);
  EXPECT_EQ(client.health()["status"], "ok");
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.request_lines(), (std::vector<std::string>{"GET /healthz HTTP/1.1", "GET /healthz HTTP/1.1"}));
}

TEST(BatchSizeClientTest, APostWhoseConnectionClosesUnderItIsNotRepeated) {
  // It may have been carried out (a recurrence handed out): the caller
  // hears that no answer came, and decides.
  ScriptedServer server({Connection::kCloseUnanswered, Connection::kAnswer});
  BatchSizeClient client(server.url(), 5.0);
  try {
    client.ask("job");
    FAIL() << "a POST without an answer returned";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_NE(std::string(e.what()).find("POST " + server.url() + "/v1/jobs/job/recurrences: no answer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(server.request_lines(), (std::vector<std::string>{"POST /v1/jobs/job/recurrences HTTP/1.1"}));
}

TEST(BatchSizeClientTest, AConnectionLeftIdleIsNotReused) {
  ScriptedServer server({Connection::kAnswer, Connection::kAnswer, Connection::kAnswer});
  BatchSizeClient client(server.url(), 5.0);
  client.health();
  client.jobs();  // at once: the same connection
  EXPECT_EQ(server.connections(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past the client's 1 s of idle reuse
  client.health();
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.request_lines().size(), 3u);
}

}  // namespace
}  // namespace joule::service
