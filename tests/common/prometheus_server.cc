// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "common/prometheus_server.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "common/test_support.h"

namespace joule::testing {
namespace {

constexpr const char* kBinary = "/usr/bin/prometheus";
constexpr int kStartTimeoutS = 30;

}  // namespace

PrometheusServer::PrometheusServer(const std::vector<std::string>& targets, int scrape_interval_s) {
  try {
    skip_reason_ = start(targets, scrape_interval_s);
  } catch (const std::exception& e) {
    skip_reason_ = e.what();
  }
  if (!skip_reason_.empty()) skip_reason_ = "no Prometheus for the tests: " + skip_reason_;
}

PrometheusServer::~PrometheusServer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    try {
      wait_process(pid_, 20.0);  // kills it when it takes longer
    } catch (const std::exception&) {
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string PrometheusServer::start(const std::vector<std::string>& targets, int scrape_interval_s) {
  if (access(kBinary, X_OK) != 0) return fmt::format("{} is not installed (Debian package prometheus)", kBinary);
  std::string pattern = "/tmp/joule-prom-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed";
  dir_ = pattern;
  std::string target_list;
  for (const std::string& t : targets) target_list += fmt::format("{}'{}'", target_list.empty() ? "" : ", ", t);
  write_file(dir_ + "/prometheus.yml", fmt::format(R"(global:
  scrape_interval: {0}s
  scrape_timeout: {0}s
scrape_configs:
  - job_name: joule
    static_configs:
      - targets: [{1}]
)",
                                                   scrape_interval_s, target_list));
  // The port may be taken between the pick and the bind: a few tries.
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = free_loopback_port();
    pid_ = start_process({kBinary, "--config.file=" + dir_ + "/prometheus.yml", "--storage.tsdb.path=" + dir_ + "/data",
                          fmt::format("--web.listen-address=127.0.0.1:{}", port_), "--log.level=warn"},
                         {}, dir_ + "/out", dir_ + "/err");
    for (int i = 0; i < kStartTimeoutS * 10; ++i) {
      const auto ready = run_process(
          {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", fmt::format("http://127.0.0.1:{}/-/ready", port_)}, {},
          5.0);
      if (ready.out == "200") return "";
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // it exited (port taken, bad config)
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  return "it did not become ready: " + log();
}

std::vector<PromSample> PrometheusServer::query(const std::string& promql) const {
  const auto r = run_process({"curl", "-s", "-G", fmt::format("http://127.0.0.1:{}/api/v1/query", port_),
                              "--data-urlencode", "query=" + promql},
                             {}, 10.0);
  const nlohmann::json reply = nlohmann::json::parse(r.out, nullptr, false);
  if (reply.is_discarded() || reply.value("status", "") != "success") {
    throw std::runtime_error(fmt::format("query '{}' failed: {}{}", promql, r.out, r.err));
  }
  std::vector<PromSample> samples;
  for (const auto& element : reply["data"]["result"]) {
    PromSample s;
    for (const auto& [name, value] : element["metric"].items()) s.labels[name] = value.get<std::string>();
    s.value = std::stod(element["value"][1].get<std::string>());
    samples.push_back(std::move(s));
  }
  return samples;
}

double PrometheusServer::successful_scrapes() const {
  const auto samples = query("sum(sum_over_time(up[1h]))");
  return samples.empty() ? 0.0 : samples.front().value;
}

std::string PrometheusServer::log() const { return dir_.empty() ? "" : read_file(dir_ + "/err"); }

}  // namespace joule::testing
