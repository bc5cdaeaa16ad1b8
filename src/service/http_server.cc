// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/service/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "service/http_transport.h"
#include "service/request_router.h"

namespace joule::service {
namespace {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

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
      try {
        task();
      } catch (...) {  // tasks answer their requests themselves; a worker never dies of one
      }
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

struct HttpServer::Impl final : http::Handler {
  Impl(std::shared_ptr<BatchSizeService> service, std::string store_description, ServeOptions o)
      : options(std::move(o)),
        health([service] { return service->store_health(); }, kHealthPeriod, kHealthPatience),
        router(RouterOptions{std::move(service), std::move(store_description), options.tokens, options.require_token,
                             options.log, options.error_log, [this] { return health.now(); },
                             [this] { return transport->counts(); }}) {
    transport = std::make_unique<http::Transport>(options.host, options.port, limits(), *this);
    store_workers = std::make_unique<WorkerPool>(options.threads, 0, kWorkerNice);
    metrics_lane = std::make_unique<WorkerPool>(1, kMetricsQueue, kWorkerNice);
  }

  ServeOptions options;
  StoreHealthMonitor health;
  RequestRouter router;
  std::unique_ptr<http::Transport> transport;
  // Last: they finish their queued requests, whose answers go out through
  // the transport, before it goes.
  std::unique_ptr<WorkerPool> store_workers, metrics_lane;

  http::Limits limits() const;

  http::Admission admit(const http::Request& head) override { return router.admit(head); }
  void handle(http::Request request, std::shared_ptr<void> context, http::Responder respond) override;
  void refused(const http::Request& head, int status) override { router.refused(head, status); }
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

// The router answers; this decides on which thread.
void HttpServer::Impl::handle(http::Request request, std::shared_ptr<void> context, http::Responder respond) {
  auto whole = std::make_shared<const http::Request>(std::move(request));
  const auto answer = [this, context, whole, respond] { respond(router.answer(context, *whole)); };
  switch (RequestRouter::lane_of(context)) {
    case Lane::io: return answer();
    case Lane::metrics:
      if (metrics_lane->post(answer)) return;
      return respond(router.lane_full(context, *whole,
                                      fmt::format("{} requests of /metrics are waiting already", kMetricsQueue)));
    case Lane::store: store_workers->post(answer); return;
  }
}

HttpServer::HttpServer(std::shared_ptr<BatchSizeService> service, std::string store_description, ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(service), std::move(store_description), std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->transport->port(); }

void HttpServer::run() { impl_->transport->run(); }

void HttpServer::stop() { impl_->transport->stop(); }

}  // namespace joule::service
