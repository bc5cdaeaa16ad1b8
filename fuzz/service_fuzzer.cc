// libFuzzer target for the batch-size service's requests: the first byte
// picks a request (register, ask, report, progress, power profile), the rest is its
// body, handled as `joule serve` does (JSON parse, then the service on a
// real SQLite store). Any input must end in an answer or a RequestError (a
// 4xx): any other exception would be a 500, a crash or hang a failed server.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>

#include "joule/service/batch_size_service.h"

namespace {

using joule::service::BatchSizeService;

BatchSizeService& service() {
  static const std::string path = "/tmp/joule_service_fuzzer_" + std::to_string(getpid()) + ".db";
  static const std::unique_ptr<BatchSizeService> instance = [] {
    auto s = std::make_unique<BatchSizeService>(joule::service::open_job_store(path));
    s->register_job(joule::service::JobSpec::from_json(
        {{"name", "job"}, {"batch_sizes", {16, 32, 64}}, {"default_batch_size", 32}, {"max_power_w", 300}}));
    return s;
  }();
  return *instance;
}

void handle(uint8_t route, const std::string& body) {
  BatchSizeService& s = service();
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;  // the server answers 400 before the service sees it
  // The seeds in fuzz/corpus_service_fuzzer start with these numbers.
  switch (route % 5) {
    case 0: s.register_job(joule::service::JobSpec::from_json(j)); break;
    case 1: {
      const auto a = s.ask("job", j.is_string() ? j.get<std::string>() : "");
      s.report(a.recurrence_id, {1.0, 1.0, true, false});  // keep few recurrences in flight
      break;
    }
    case 2: {
      const auto a = s.ask("job", "fuzz");
      s.report(a.recurrence_id, joule::service::RecurrenceResult::from_json(j));
      break;
    }
    case 3: {
      const auto a = s.ask("job", "fuzz");
      s.progress(a.recurrence_id, joule::service::RecurrenceProgress::from_json(j));
      s.report(a.recurrence_id, {1.0, 1.0, true, false});
      break;
    }
    default: s.put_power_profile("job", "gpu", 32, j); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    handle(data[0], std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const joule::service::RequestError&) {
    // a 4xx: fine
  }
  return 0;
}
