// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// An HTTP server for Prometheus to scrape: GET /metrics and GET /healthz,
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
  void run();   // serves until stop()
  void stop();  // from any thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace joule
