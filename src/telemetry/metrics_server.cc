// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/telemetry/metrics_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include "joule/error.h"

namespace joule {

struct MetricsServer::Impl {
  httplib::Server server;
  int port = 0;
};

MetricsServer::MetricsServer(std::function<std::string()> metrics_text, const std::string& host, int port)
    : impl_(std::make_unique<Impl>()) {
  auto& server = impl_->server;
  server.Get("/metrics", [metrics_text](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  // The two paths answer GET only; everything else is unknown.
  const auto not_allowed = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET");
    res.set_content("only GET is served here\n", "text/plain");
  };
  for (const char* path : {"/metrics", "/healthz", "/jobs"}) {
    server.Post(path, not_allowed);
    server.Put(path, not_allowed);
    server.Patch(path, not_allowed);
    server.Delete(path, not_allowed);
  }
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) {
      res.set_content("not found: this exporter serves GET /metrics, GET /healthz and GET /jobs\n", "text/plain");
    }
  });
  impl_->port = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (impl_->port < 0) throw Error(fmt::format("exporter: cannot listen on {}:{} (in use, or not an address here)", host, port));
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const { return impl_->port; }

void MetricsServer::serve_jobs(std::function<std::string(const std::string& job)> jobs_json) {
  impl_->server.Get("/jobs", [jobs_json](const httplib::Request& req, httplib::Response& res) {
    res.set_content(jobs_json(req.get_param_value("job")), "application/json");
  });
}

void MetricsServer::run() { impl_->server.listen_after_bind(); }

void MetricsServer::stop() { impl_->server.stop(); }

}  // namespace joule
