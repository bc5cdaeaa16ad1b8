// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What both job stores use to answer JobStore::health(): a probe that runs on
// a thread of its own and is waited for at most a deadline, and the memory
// of the last request that found the store unavailable. Internal to the
// service module.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "joule/service/job_store.h"

namespace joule::service {

// Runs a probe (a round trip to the database) on a thread of its own and
// waits for it at most `deadline`: a database server that stops answering
// without closing the connection (frozen, or a network that drops packets)
// cannot hold /healthz, which a load balancer calls with a timeout of its
// own. Callers that come while a probe is running share its answer instead
// of starting another. The probe owns everything it touches (its own
// connection): a probe still stuck when the store goes away ends on its own.
class BoundedProbe {
 public:
  BoundedProbe(std::function<StoreHealth()> probe, std::chrono::milliseconds deadline)
      : state_(std::make_shared<State>()), deadline_(deadline) {
    state_->probe = std::move(probe);
  }
  // Waits (at most the deadline) for a probe still running, so that the
  // store it reads goes away after it.
  ~BoundedProbe() {
    std::unique_lock lock(state_->mutex);
    state_->finished.wait_for(lock, deadline_, [&] { return !state_->running; });
  }
  BoundedProbe(const BoundedProbe&) = delete;
  BoundedProbe& operator=(const BoundedProbe&) = delete;

  StoreHealth check() {
    const std::shared_ptr<State> state = state_;
    std::unique_lock lock(state->mutex);
    const uint64_t wanted = state->completed + 1;  // the probe running now, or the one started here
    if (!state->running) {
      state->running = true;
      state->started = std::chrono::steady_clock::now();
      std::thread([state] { run(*state); }).detach();
    }
    if (state->finished.wait_for(lock, deadline_, [&] { return state->completed >= wanted; })) return state->result;
    const auto waiting = std::chrono::duration<double>(std::chrono::steady_clock::now() - state->started).count();
    return {false, fmt::format("the store has not answered a health check for {:.1f} s (deadline {} ms)", waiting,
                               deadline_.count())};
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable finished;
    bool running = false;
    uint64_t completed = 0;
    std::chrono::steady_clock::time_point started;
    StoreHealth result;
    std::function<StoreHealth()> probe;  // run by one thread at a time
  };

  static void run(State& state) {
    StoreHealth health;
    try {
      health = state.probe();
    } catch (const std::exception& e) {
      health = {false, e.what()};
    }
    std::lock_guard lock(state.mutex);
    state.result = std::move(health);
    state.running = false;
    ++state.completed;
    state.finished.notify_all();
  }

  std::shared_ptr<State> state_;
  std::chrono::milliseconds deadline_;
};

// The last request that found the store unavailable, until a write commits.
// A probe reads; a full disk (PostgreSQL's or SQLite's) or a read-only
// database fails only writes, so health() also reports a write that failed
// lately with nothing committed since. Only for a while (`within`): a
// replica that the load balancer took out of service gets no writes that
// could show it recovered, and comes back on its probe alone.
class OutageMemory {
 public:
  void failed(const std::string& why) {
    std::lock_guard lock(mutex_);
    why_ = why;
    at_ = std::chrono::steady_clock::now();
    failing_.store(true, std::memory_order_relaxed);
  }
  // On every commit: one relaxed load unless a failure is remembered.
  void succeeded() {
    if (!failing_.load(std::memory_order_relaxed)) return;
    std::lock_guard lock(mutex_);
    failing_.store(false, std::memory_order_relaxed);
  }
  // Why the store is unavailable, if a request found it so within the last
  // `within` and no write committed since.
  std::optional<std::string> recent(std::chrono::seconds within) const {
    if (!failing_.load(std::memory_order_relaxed)) return std::nullopt;
    std::lock_guard lock(mutex_);
    const auto ago = std::chrono::duration<double>(std::chrono::steady_clock::now() - at_);
    if (!failing_.load(std::memory_order_relaxed) || ago > within) return std::nullopt;
    return fmt::format("a request {:.1f} s ago found the store unavailable and no write has committed since: {}",
                       ago.count(), why_);
  }

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> failing_{false};
  std::string why_;
  std::chrono::steady_clock::time_point at_;
};

// How long health() reports a request that found the store unavailable.
inline constexpr std::chrono::seconds kOutageMemory{10};

}  // namespace joule::service
