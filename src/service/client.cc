// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/service/client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

namespace joule::service {
namespace {

// A path segment: GPU model names have spaces ("NVIDIA H100 80GB HBM3").
std::string percent_encoded(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

// A kept-alive connection idle this long is closed before the next request
// rather than reused: a server closes idle connections (joule serve after
// its read timeout, 4 s by default), and one that closes while a request is
// on its way leaves the request unanswered, with no way to tell whether it
// was carried out.
constexpr double kMaxIdleReuseS = 1.0;

// Only requests that may be repeated are sent again when the connection
// broke under them (GET reads; PUT replaces): a POST that got no answer
// might have been carried out, so its error is the caller's.
bool repeatable(const std::string& method, httplib::Error error) {
  return (method == "GET" || method == "PUT") && (error == httplib::Error::Read || error == httplib::Error::Write);
}

struct BatchSizeClient::Impl {
  std::string url;
  httplib::Client http;
  std::optional<std::chrono::steady_clock::time_point> last_answer;  // on the kept-alive connection

  Impl(const std::string& u, double timeout_s, std::optional<std::string> token) : url(u), http(u) {
    if (!http.is_valid()) throw ServiceError(0, fmt::format("'{}' is not a service URL (http://HOST:PORT)", u));
    if (!token) {
      const char* env = std::getenv("JOULE_SERVICE_TOKEN");
      if (env && *env) token = env;
    }
    if (token && !token->empty()) http.set_bearer_token_auth(*token);
    const auto timeout = std::chrono::duration<double>(timeout_s);
    http.set_connection_timeout(timeout);
    http.set_read_timeout(timeout);
    http.set_write_timeout(timeout);
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);  // a request is one small write: no Nagle delay
  }

  // Sends one request; returns the JSON body of a 2xx answer.
  nlohmann::json call(const std::string& method, const std::string& path, const nlohmann::json* body,
                      int* status = nullptr) {
    const std::string text = body ? body->dump() : std::string();
    const auto idle = std::chrono::duration<double>(kMaxIdleReuseS);
    if (last_answer && std::chrono::steady_clock::now() - *last_answer > idle) http.stop();  // a new connection
    const auto send = [&] {
      return method == "GET"   ? http.Get(path)
             : method == "PUT" ? http.Put(path, text, "application/json")
                               : http.Post(path, text, "application/json");
    };
    httplib::Result result = send();
    if (!result && repeatable(method, result.error())) result = send();  // on a new connection
    last_answer.reset();
    if (result) last_answer = std::chrono::steady_clock::now();
    if (!result) {
      throw ServiceError(0, fmt::format("{} {}{}: no answer ({})", method, url, path, httplib::to_string(result.error())));
    }
    nlohmann::json reply;
    if (!result->body.empty()) {
      reply = nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
      if (reply.is_discarded()) {
        throw ServiceError(result->status, fmt::format("{} {}{}: the answer is not JSON", method, url, path));
      }
    }
    if (result->status >= 300) {
      const std::string why = reply.is_object() && reply.contains("error") ? reply["error"].get<std::string>() : result->body;
      throw ServiceError(result->status, fmt::format("{} {}{}: {} ({})", method, url, path, why, result->status));
    }
    if (status) *status = result->status;
    return reply;
  }
};

BatchSizeClient::BatchSizeClient(const std::string& url, double timeout_s, std::optional<std::string> token)
    : impl_(std::make_unique<Impl>(url, timeout_s, std::move(token))) {}

BatchSizeClient::~BatchSizeClient() = default;

bool BatchSizeClient::register_job(const JobSpec& spec) {
  const nlohmann::json body = spec.to_json();
  int status = 0;
  impl_->call("POST", "/v1/jobs", &body, &status);
  return status == 201;
}

Assignment BatchSizeClient::ask(const std::string& job, const std::string& node, const std::string& gpu_model) {
  nlohmann::json body = nlohmann::json::object();
  if (!node.empty()) body["node"] = node;
  if (!gpu_model.empty()) body["gpu_model"] = gpu_model;
  const nlohmann::json reply = impl_->call("POST", fmt::format("/v1/jobs/{}/recurrences", job), &body);
  Assignment a;
  a.recurrence_id = reply.at("recurrence_id").get<int64_t>();
  a.batch_size = reply.at("batch_size").get<int>();
  if (!reply.at("power_limit_w").is_null()) a.power_limit_w = reply.at("power_limit_w").get<double>();
  a.early_stop_threshold_cost = reply.at("early_stop_threshold_cost").is_null()
                                    ? std::numeric_limits<double>::infinity()
                                    : reply.at("early_stop_threshold_cost").get<double>();
  return a;
}

double BatchSizeClient::report(int64_t recurrence_id, const RecurrenceResult& r) {
  const nlohmann::json body = {{"energy_j", r.energy_j},
                               {"time_s", r.time_s},
                               {"reached_target", r.reached_target},
                               {"stopped_early", r.stopped_early}};
  return impl_->call("POST", fmt::format("/v1/recurrences/{}/result", recurrence_id), &body).at("cost").get<double>();
}

ProgressAdvice BatchSizeClient::progress(int64_t recurrence_id, const RecurrenceProgress& p) {
  const nlohmann::json body = {{"epochs", p.epochs}, {"energy_j", p.energy_j}, {"time_s", p.time_s}};
  const nlohmann::json reply =
      impl_->call("POST", fmt::format("/v1/recurrences/{}/progress", recurrence_id), &body);
  ProgressAdvice advice;
  advice.cost = reply.at("cost").get<double>();
  advice.threshold_cost = reply.at("threshold_cost").is_null() ? std::numeric_limits<double>::infinity()
                                                              : reply.at("threshold_cost").get<double>();
  advice.stop = reply.at("stop").get<bool>();
  return advice;
}

void BatchSizeClient::put_power_profile(const std::string& job, const std::string& gpu_model, int batch_size,
                                        const nlohmann::json& entries) {
  const nlohmann::json body = {{"entries", entries}};
  impl_->call("PUT", fmt::format("/v1/jobs/{}/profiles/{}/{}", job, percent_encoded(gpu_model), batch_size),
              &body);
}

nlohmann::json BatchSizeClient::jobs() { return impl_->call("GET", "/v1/jobs", nullptr).at("jobs"); }

nlohmann::json BatchSizeClient::job(const std::string& name) {
  return impl_->call("GET", fmt::format("/v1/jobs/{}", name), nullptr);
}

nlohmann::json BatchSizeClient::export_job(const std::string& name) {
  return impl_->call("GET", fmt::format("/v1/jobs/{}/export", name), nullptr);
}

nlohmann::json BatchSizeClient::health() { return impl_->call("GET", "/healthz", nullptr); }

}  // namespace joule::service
