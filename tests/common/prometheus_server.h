// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A throwaway Prometheus for tests: Debian's `prometheus` binary with a
// generated config that scrapes the given targets, its TSDB in a temporary
// directory, listening on a free loopback port; stopped with SIGTERM when
// destroyed. When it cannot run (no binary), running() is false and
// skip_reason() says why: the tests GTEST_SKIP() with it.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace joule::testing {

// One element of an instant query's result vector.
struct PromSample {
  std::map<std::string, std::string> labels;
  double value = 0.0;
};

class PrometheusServer {
 public:
  // targets: "127.0.0.1:PORT" each, scraped every scrape_interval_s (whole seconds).
  PrometheusServer(const std::vector<std::string>& targets, int scrape_interval_s = 1);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  bool running() const { return skip_reason_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  // Runs an instant query through the HTTP API (/api/v1/query); throws
  // std::runtime_error with Prometheus's own error for a bad one.
  std::vector<PromSample> query(const std::string& promql) const;
  // Scrapes of every target that succeeded, as Prometheus counts them
  // (sum of `up` over its samples so far).
  double successful_scrapes() const;
  // Prometheus's log (stderr), for failure messages.
  std::string log() const;

 private:
  std::string start(const std::vector<std::string>& targets, int scrape_interval_s);

  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string skip_reason_;
};

}  // namespace joule::testing
