// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A client of `joule serve` (HTTP/JSON, keep-alive): what a training run, the
// simulator (`joule simulate --service`) and `joule jobs` use. Not thread-safe:
// one per thread.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joule/service/batch_size_service.h"

namespace joule::service {

// A request the service refused (status >= 400, its message), or no answer
// (status 0: connection refused, timed out).
class ServiceError : public Error {
 public:
  ServiceError(int status, const std::string& what) : Error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

class BatchSizeClient {
 public:
  // url: http://HOST:PORT (a path prefix is not supported). timeout_s bounds
  // every request. token: sent as "Authorization: Bearer TOKEN" (a service
  // on another machine needs one; see joule tokens); nullopt: the value of
  // $JOULE_SERVICE_TOKEN when set, else none; "": none. One connection is
  // kept alive between requests, but not reused after a second idle (a
  // server closing it as a request goes out leaves the request unanswered);
  // a GET or PUT whose connection broke under it is sent once more, a POST
  // (which may have been carried out) is not. Not for several threads at once.
  explicit BatchSizeClient(const std::string& url, double timeout_s = 10.0,
                           std::optional<std::string> token = std::nullopt);
  ~BatchSizeClient();
  BatchSizeClient(const BatchSizeClient&) = delete;
  BatchSizeClient& operator=(const BatchSizeClient&) = delete;

  // true: registered now; false: the same spec was there.
  bool register_job(const JobSpec& spec);
  // gpu_model: this node's GPU model, whose profile gives the advised limit
  // ("": the job spec's).
  Assignment ask(const std::string& job, const std::string& node = "", const std::string& gpu_model = "");
  double report(int64_t recurrence_id, const RecurrenceResult& result);
  // Once an epoch, say: the service keeps it and says whether to stop.
  ProgressAdvice progress(int64_t recurrence_id, const RecurrenceProgress& progress);
  void put_power_profile(const std::string& job, const std::string& gpu_model, int batch_size,
                         const nlohmann::json& entries);
  nlohmann::json jobs();
  nlohmann::json job(const std::string& name);
  nlohmann::json export_job(const std::string& name);
  nlohmann::json health();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace joule::service
