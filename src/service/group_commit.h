// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Group commit: write requests from many threads share store transactions.
//
// A request joins a queue. When no batch is running it leads: it takes the
// requests queued so far (itself first, at most max_batch) and hands them to
// the runner, which applies them in one transaction and records each one's
// outcome; then it wakes each of them and passes the lead to the oldest
// request that queued meanwhile. One commit thus serves as many requests as
// arrived during the previous one, which is what lets one writer keep up with
// many clients, and every request still returns only once its change is
// committed. Each request sleeps on its own flag (a futex), so a finished
// batch wakes exactly its requests and the next leader, never the whole queue.
// (Not std::atomic::wait: libstdc++ spins and calls sched_yield a dozen times
// before it sleeps, which on a 2-core machine takes the cores the leader and
// the server's other threads need; it cost ~4% of the CPU in the benchmark.)
// Internal to the service module; Linux.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace joule::service {

template <typename Batch>
class GroupCommit {
 public:
  struct Request {
    // Before any request of the batch is applied: says what it will need
    // (e.g. rows to read), so the runner can fetch them for all at once.
    std::function<void(Batch&)> prepare;
    std::function<void(Batch&)> apply;
    std::exception_ptr error;  // set by the runner when apply failed
    std::atomic<int> state{kQueued};
  };
  // Applies every request of a batch and records failures in their error;
  // must not throw.
  using Runner = std::function<void(const std::vector<Request*>&)>;

  GroupCommit(Runner runner, std::size_t max_batch) : runner_(std::move(runner)), max_batch_(max_batch) {}

  // Blocks until apply has run in a committed batch; rethrows its failure.
  void submit(std::function<void(Batch&)> apply, std::function<void(Batch&)> prepare = nullptr) {
    Request request;
    request.prepare = std::move(prepare);
    request.apply = std::move(apply);
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(&request);
      if (!leading_) {
        leading_ = true;
        request.state.store(kLead);
      }
    }
    while (request.state.load() == kQueued) sleep_while(request.state, kQueued);
    if (request.state.load() == kLead) lead(request);
    if (request.error) std::rethrow_exception(request.error);
  }

 private:
  static constexpr int kQueued = 0, kLead = 1, kDone = 2;

  // Returns when woken or when word no longer holds value (spurious returns
  // are allowed: the callers loop).
  static void sleep_while(std::atomic<int>& word, int value) {
    syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAIT_PRIVATE, value, nullptr, nullptr, 0);
  }
  // Sets the word and wakes its sleeper. The sleeper may return and free the
  // word before the wake: waking a stale address is harmless (at worst a
  // spurious return elsewhere, which every sleeper tolerates).
  static void set_and_wake(std::atomic<int>& word, int value) {
    word.store(value);
    syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

  void lead(Request& self) {
    std::vector<Request*> batch;
    {
      std::lock_guard lock(mutex_);
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    runner_(batch);
    Request* next = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) {
        leading_ = false;
      } else {
        next = queue_.front();
      }
    }
    // A request may return (and its storage go) as soon as it sees kDone:
    // nothing of it is touched after its wake.
    for (Request* r : batch) {
      if (r != &self) set_and_wake(r->state, kDone);
    }
    self.state.store(kDone);
    if (next) set_and_wake(next->state, kLead);
  }

  Runner runner_;
  const std::size_t max_batch_;
  std::mutex mutex_;
  std::deque<Request*> queue_;
  bool leading_ = false;
};

}  // namespace joule::service
