// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// An HTTP server for Prometheus to scrape: GET /metrics and GET /healthz,
// and GET /jobs where served (the ledger's entries, for joule slurm-epilog);
// nothing that changes anything. Other paths get 404, other methods 405.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace joule {

class MetricsServer {
 public:
  // Binds host:port (port 0: any free one). Throws Error naming the address.
  MetricsServer(std::function<std::string()> metrics_text, const std::string& host, int port);
  ~MetricsServer();
  int port() const;
  // GET /jobs[?job=LABEL]: jobs_json(LABEL, or "" for every job), as JSON. Before run().
  void serve_jobs(std::function<std::string(const std::string& job)> jobs_json);
  void run();   // serves until stop()
  void stop();  // from any thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace joule
